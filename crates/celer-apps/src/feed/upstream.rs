//! The `http://URL` and `https://URL` source: the upstream polled every
//! interval with `If-None-Match`, a timeout on each poll, the last good
//! version kept when it fails.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use celer::feed::{Feed, Source, SourceFuture};
use http::header::{self, HeaderValue};
use http::{StatusCode, Uri};
use http_body_util::{BodyExt, Empty, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// Time a poll of the upstream may take (connecting, TLS, the answer and
/// its body), by default.
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(5);

/// Polls an upstream URL into a feed.
///
/// Each poll sends `If-None-Match` with the upstream's last ETag, so an
/// unchanged document costs a `304`; the connection is kept alive between
/// polls. A poll that fails (refused, timed out, a status other than 200
/// or 304, a body over the feed's limit, which is never read whole) is a
/// source failure, and the last good version stays. `https` checks the
/// upstream's certificate against the Mozilla roots (`webpki-roots`),
/// plus any given with [`HttpSource::root_certificates_pem`].
pub struct HttpSource {
    uri: Uri,
    host: String,
    port: u16,
    timeout: Duration,
    /// The TLS client for `https`; `None` for `http`.
    tls: Option<rustls::ClientConfig>,
}

/// What one poll got.
enum Fetched {
    /// `304 Not Modified`.
    NotModified,
    /// `200` with the document and the upstream's ETag.
    Document(Bytes, Option<HeaderValue>),
}

impl HttpSource {
    /// A source polling `url` (`http://` or `https://`).
    ///
    /// # Errors
    ///
    /// A message when the URL is not an absolute http(s) URL with a host.
    pub fn new(url: &str) -> Result<HttpSource, String> {
        let uri: Uri = url
            .parse()
            .map_err(|err| format!("{url:?} is not a URL: {err}"))?;
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => return Err(format!("{url:?}: expected http:// or https://")),
        };
        let host = uri
            .host()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| format!("{url:?} has no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let tls = https.then(|| {
            tls_config(rustls::RootCertStore::from_iter(
                webpki_roots::TLS_SERVER_ROOTS.iter().cloned(),
            ))
        });
        Ok(HttpSource {
            uri,
            host,
            port,
            timeout: DEFAULT_HTTP_TIMEOUT,
            tls,
        })
    }

    /// Sets how long one poll may take.
    ///
    /// Default is [`DEFAULT_HTTP_TIMEOUT`], 5 s.
    pub fn timeout(mut self, timeout: Duration) -> HttpSource {
        self.timeout = timeout;
        self
    }

    /// Trusts the certificates in `pem` too (a private CA of the
    /// upstream), for `https`.
    ///
    /// # Errors
    ///
    /// A message when `pem` holds no certificate or a bad one.
    pub fn root_certificates_pem(mut self, pem: &[u8]) -> Result<HttpSource, String> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let mut roots =
            rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let mut added = 0;
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|err| format!("bad PEM: {err}"))?;
            roots
                .add(cert)
                .map_err(|err| format!("bad certificate: {err}"))?;
            added += 1;
        }
        if added == 0 {
            return Err("no certificate in the PEM".to_owned());
        }
        if self.tls.is_some() {
            self.tls = Some(tls_config(roots));
        }
        Ok(self)
    }

    async fn connect(&self) -> Result<SendRequest<Empty<Bytes>>, String> {
        let tcp = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|err| format!("cannot connect: {err}"))?;
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            None => handshake(tcp).await,
            Some(config) => {
                let name = rustls::pki_types::ServerName::try_from(self.host.clone())
                    .map_err(|_| format!("{:?} is not a TLS server name", self.host))?;
                let tls = tokio_rustls::TlsConnector::from(Arc::new(config.clone()))
                    .connect(name, tcp)
                    .await
                    .map_err(|err| format!("TLS handshake failed: {err}"))?;
                handshake(tls).await
            }
        }
    }

    /// One poll on `sender` (made first if needed).
    async fn fetch(
        &self,
        sender: &mut Option<SendRequest<Empty<Bytes>>>,
        etag: Option<&HeaderValue>,
        max: usize,
    ) -> Result<Fetched, String> {
        if sender.as_ref().is_none_or(SendRequest::is_closed) {
            *sender = Some(self.connect().await?);
        }
        let conn = sender.as_mut().expect("just made");
        conn.ready()
            .await
            .map_err(|err| format!("connection lost: {err}"))?;
        let target = self
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        let mut req = http::Request::get(target)
            .header(
                header::HOST,
                self.uri.authority().map_or("", |a| a.as_str()),
            )
            .header(header::ACCEPT, "application/json")
            .header(header::ACCEPT_ENCODING, "identity")
            .header(header::USER_AGENT, "celer-feed")
            .body(Empty::new())
            .map_err(|err| format!("cannot make the request: {err}"))?;
        if let Some(etag) = etag {
            req.headers_mut()
                .insert(header::IF_NONE_MATCH, etag.clone());
        }
        let res = conn
            .send_request(req)
            .await
            .map_err(|err| format!("request failed: {err}"))?;
        match res.status() {
            StatusCode::NOT_MODIFIED => Ok(Fetched::NotModified),
            StatusCode::OK => {
                let etag = res.headers().get(header::ETAG).cloned();
                let body = Limited::new(res.into_body(), max)
                    .collect()
                    .await
                    .map_err(
                        |err| match err.downcast::<http_body_util::LengthLimitError>() {
                            Ok(_) => format!("the document is over the limit of {max} bytes"),
                            Err(err) => format!("the body broke off: {err}"),
                        },
                    )?
                    .to_bytes();
                Ok(Fetched::Document(body, etag))
            }
            status => Err(format!("the upstream answered {status}")),
        }
    }
}

fn tls_config(roots: rustls::RootCertStore) -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

/// An HTTP/1.1 client connection over `io`, driven by a task of its own.
async fn handshake<T>(io: T) -> Result<SendRequest<Empty<Bytes>>, String>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|err| format!("HTTP handshake failed: {err}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

impl fmt::Debug for HttpSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpSource")
            .field("uri", &self.uri)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Source for HttpSource {
    fn describe(&self) -> String {
        self.uri.to_string()
    }

    fn run(self: Box<Self>, feed: Feed) -> SourceFuture {
        Box::pin(run(*self, feed))
    }
}

async fn run(source: HttpSource, feed: Feed) {
    let mut ticks = tokio::time::interval(feed.interval());
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let max = feed.max_document_bytes();
    let mut sender = None;
    let mut etag: Option<HeaderValue> = None;
    loop {
        ticks.tick().await;
        let polled = tokio::time::timeout(
            source.timeout,
            source.fetch(&mut sender, etag.as_ref(), max),
        )
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {:?}", source.timeout)));
        match polled {
            Ok(Fetched::NotModified) => feed.source_alive(),
            Ok(Fetched::Document(doc, new_etag)) => {
                etag = new_etag;
                let _ = feed.update(doc);
            }
            Err(err) => {
                // A connection in an unknown state is not reused.
                sender = None;
                feed.source_failed(format!("{}: {err}", source.uri));
            }
        }
    }
}
