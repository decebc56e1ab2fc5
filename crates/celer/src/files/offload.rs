//! [`Offload`]: an app answers with a header naming a file or an upstream
//! URL, and the response sent is that file or that URL's answer.
//!
//! - `X-Sendfile: /srv/private/report.pdf` (an absolute file path) and
//!   `X-Accel-Redirect: /private/report.pdf` (a URI path, percent-encoded,
//!   relative to the root) are served by a [`Files`] service over the
//!   configured root, with the client's conditional and Range headers: the
//!   ETag, 304, 412, 206 and 416 behaviour of a static file. A path outside
//!   the root, or malformed, is a server bug: 500, logged, never served.
//! - `X-Reproxy-URL: http://10.0.0.5:8080/blob/1 [more URLs]` (with the
//!   `reproxy` feature, which brings hyper's client; without it the header
//!   is a logged 500) is fetched, trying each URL in order while
//!   connections fail.
//!   Each URL must start with one of the allowed upstream prefixes (500,
//!   logged, otherwise). The upstream's status, headers (hop-by-hop ones
//!   removed) and body are streamed to the client, never buffered. No
//!   answer head within the timeout is 504; a connection or protocol
//!   failure is 502; both with a one-line reason. A body that stalls for
//!   the timeout once the head has been sent is cut off (the client sees
//!   a truncated response and the connection closes).
//!
//! The offload headers are never sent to the client. `Set-Cookie`,
//! `Content-Disposition`, `Cache-Control` and `Expires` set by the app are
//! kept on the offloaded response.
//!
//! ```
//! # #[cfg(feature = "reproxy")] {
//! use std::time::Duration;
//! use celer::files::{Files, OffloadLayer};
//! use tower_layer::Layer;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let app = celer::App::new();
//! let service = OffloadLayer::new()
//!     .files(Files::new(dir.path()).unwrap())
//!     .allow_upstream("http://127.0.0.1:9000/")
//!     .timeout(Duration::from_secs(5))
//!     .layer(app);
//! # let _ = service;
//! # }
//! ```

use std::fmt;
use std::future::Future;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
#[cfg(feature = "reproxy")]
use http::{StatusCode, Uri};
#[cfg(feature = "reproxy")]
use http_body_util::Empty;
#[cfg(feature = "reproxy")]
use hyper_util::client::legacy::{Client, connect::HttpConnector};
#[cfg(feature = "reproxy")]
use hyper_util::rt::TokioExecutor;
use percent_encoding::percent_decode_str;
use tower_layer::Layer;
use tower_service::Service;

use super::Files;
use super::respond::Answer;
#[cfg(feature = "reproxy")]
use super::respond::status;
use crate::{Body, BoxError, Response};

/// Default time allowed for an upstream to answer with its response head.
pub const REPROXY_TIMEOUT: Duration = Duration::from_secs(30);

/// Most URLs tried from one `X-Reproxy-URL` header.
pub const MAX_REPROXY_URLS: usize = 8;

/// The header naming a file by absolute path (lighttpd, Apache).
pub const X_SENDFILE: HeaderName = HeaderName::from_static("x-sendfile");
/// The header naming a file by URI path under the root (nginx).
pub const X_ACCEL_REDIRECT: HeaderName = HeaderName::from_static("x-accel-redirect");
/// The header naming upstream URLs to fetch (Perlbal, mod_reproxy).
pub const X_REPROXY_URL: HeaderName = HeaderName::from_static("x-reproxy-url");

/// Request fields passed on: to the file service, and to upstreams.
const PASSED: [HeaderName; 7] = [
    header::RANGE,
    header::IF_RANGE,
    header::IF_MATCH,
    header::IF_NONE_MATCH,
    header::IF_MODIFIED_SINCE,
    header::IF_UNMODIFIED_SINCE,
    header::ACCEPT_ENCODING,
];

/// Fields of the app's response kept on the offloaded one.
const KEPT: [HeaderName; 4] = [
    header::SET_COOKIE,
    header::CONTENT_DISPOSITION,
    header::CACHE_CONTROL,
    header::EXPIRES,
];

/// Hop-by-hop fields never copied from an upstream's answer (RFC 9110
/// §7.6.1).
#[cfg(feature = "reproxy")]
const HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    header::TRANSFER_ENCODING,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
];

/// Builds [`Offload`] services; see the [module documentation](self).
#[derive(Clone)]
pub struct OffloadLayer {
    config: Arc<Config>,
}

struct Config {
    /// The file service whose root bounds X-Sendfile and X-Accel-Redirect;
    /// `None` refuses both (500).
    files: Option<Files>,
    /// URL prefixes X-Reproxy-URL may name.
    upstreams: Vec<String>,
    timeout: Duration,
    #[cfg(feature = "reproxy")]
    client: Client<HttpConnector, Empty<Bytes>>,
}

impl OffloadLayer {
    /// A layer that honours no offload header yet: each one is answered
    /// 500 until [`files`](Self::files) or
    /// [`allow_upstream`](Self::allow_upstream) allows it.
    pub fn new() -> OffloadLayer {
        #[cfg(feature = "reproxy")]
        let client = {
            let mut connector = HttpConnector::new();
            connector.set_nodelay(true);
            connector.set_connect_timeout(Some(REPROXY_TIMEOUT));
            Client::builder(TokioExecutor::new()).build(connector)
        };
        OffloadLayer {
            config: Arc::new(Config {
                files: None,
                upstreams: Vec::new(),
                timeout: REPROXY_TIMEOUT,
                #[cfg(feature = "reproxy")]
                client,
            }),
        }
    }

    fn with(mut self, f: impl FnOnce(&mut Config)) -> OffloadLayer {
        match Arc::get_mut(&mut self.config) {
            Some(config) => f(config),
            None => {
                let mut config = Config {
                    files: self.config.files.clone(),
                    upstreams: self.config.upstreams.clone(),
                    timeout: self.config.timeout,
                    #[cfg(feature = "reproxy")]
                    client: self.config.client.clone(),
                };
                f(&mut config);
                self.config = Arc::new(config);
            }
        }
        self
    }

    /// Serves X-Sendfile and X-Accel-Redirect files with `files`, whose
    /// root bounds them and whose policies (hidden names, symlinks,
    /// Cache-Control, precompressed siblings) apply. Default is none.
    pub fn files(self, files: Files) -> OffloadLayer {
        self.with(|c| c.files = Some(files))
    }

    /// Allows X-Reproxy-URL URLs starting with `prefix`, such as
    /// `http://10.0.0.5:8080/`. End the prefix with `/` so that
    /// `http://host:80` cannot match `http://host:8080`. Only `http` is
    /// supported. Default is none. Needs the `reproxy` feature.
    #[cfg(feature = "reproxy")]
    pub fn allow_upstream(self, prefix: &str) -> OffloadLayer {
        let prefix = prefix.to_owned();
        self.with(|c| c.upstreams.push(prefix))
    }

    /// Time an upstream has to connect and send its response head (past
    /// it the client gets 504), and most time between two pieces of its
    /// body (past it the response is cut off). Default is
    /// [`REPROXY_TIMEOUT`]. Needs the `reproxy` feature.
    #[cfg(feature = "reproxy")]
    pub fn timeout(self, timeout: Duration) -> OffloadLayer {
        self.with(|c| c.timeout = timeout)
    }
}

impl Default for OffloadLayer {
    fn default() -> Self {
        OffloadLayer::new()
    }
}

impl fmt::Debug for OffloadLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OffloadLayer")
            .field("files", &self.config.files)
            .field("upstreams", &self.config.upstreams)
            .field("timeout", &self.config.timeout)
            .finish()
    }
}

impl<S> Layer<S> for OffloadLayer {
    type Service = Offload<S>;

    fn layer(&self, inner: S) -> Offload<S> {
        Offload {
            inner,
            config: Arc::clone(&self.config),
        }
    }
}

/// A service that answers offload headers of its inner service's
/// responses; made by [`OffloadLayer`].
#[derive(Clone)]
pub struct Offload<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S: fmt::Debug> fmt::Debug for Offload<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Offload")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, B, ResBody> Service<http::Request<B>> for Offload<S>
where
    S: Service<http::Request<B>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
    ResBody: http_body::Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let method = req.method().clone();
        let mut passed = HeaderMap::new();
        for name in PASSED {
            for value in req.headers().get_all(&name) {
                passed.append(name.clone(), value.clone());
            }
        }
        let config = Arc::clone(&self.config);
        let fut = self.inner.call(req);
        Box::pin(async move {
            let res = fut.await?;
            Ok(config.answer(&method, &passed, res).await)
        })
    }
}

impl Config {
    async fn answer<ResBody>(
        &self,
        method: &Method,
        passed: &HeaderMap,
        res: http::Response<ResBody>,
    ) -> Response
    where
        ResBody: http_body::Body<Data = Bytes> + Send + 'static,
        ResBody::Error: Into<BoxError>,
    {
        let headers = res.headers();
        let mut offloaded = if let Some(path) = headers.get(X_SENDFILE) {
            self.send_file(method, passed, path)
        } else if let Some(uri) = headers.get(X_ACCEL_REDIRECT) {
            self.accel_redirect(method, passed, uri)
        } else if let Some(urls) = headers.get(X_REPROXY_URL) {
            #[cfg(feature = "reproxy")]
            let answer = self.reproxy(method, passed, urls.clone()).await;
            #[cfg(not(feature = "reproxy"))]
            let answer = refused("x-reproxy-url needs celer's `reproxy` feature", urls);
            answer
        } else {
            return res.map(Body::new);
        };
        for name in KEPT {
            let mut values = res.headers().get_all(&name).iter().peekable();
            if values.peek().is_some() {
                offloaded.headers_mut().remove(&name);
            }
            for value in values {
                offloaded.headers_mut().append(name.clone(), value.clone());
            }
        }
        offloaded
    }

    /// X-Sendfile: an absolute path, which must lie under the root.
    fn send_file(&self, method: &Method, passed: &HeaderMap, value: &HeaderValue) -> Response {
        let Some(files) = &self.files else {
            return refused("x-sendfile without an allowed root", value);
        };
        let root = files.root().unwrap_or(Path::new("/"));
        let path = Path::new(std::ffi::OsStr::from_bytes(value.as_bytes()));
        let inside = path.is_absolute()
            && !path
                .components()
                .any(|c| matches!(c, Component::ParentDir | Component::CurDir));
        let rel = match path.strip_prefix(root) {
            Ok(rel) if inside => rel,
            _ => return refused("x-sendfile path outside the allowed root", value),
        };
        self.serve(files, method, passed, rel.as_os_str().as_bytes(), value)
    }

    /// X-Accel-Redirect: a URI path relative to the root.
    fn accel_redirect(&self, method: &Method, passed: &HeaderMap, value: &HeaderValue) -> Response {
        let Some(files) = &self.files else {
            return refused("x-accel-redirect without an allowed root", value);
        };
        let Ok(text) = value.to_str() else {
            return refused("x-accel-redirect is not a URI path", value);
        };
        let path = text.split('?').next().unwrap_or_default();
        if !path.starts_with('/') {
            return refused("x-accel-redirect is not a URI path", value);
        }
        let decoded: Vec<u8> = percent_decode_str(path).collect();
        self.serve(files, method, passed, &decoded, value)
    }

    fn serve(
        &self,
        files: &Files,
        method: &Method,
        passed: &HeaderMap,
        rel: &[u8],
        value: &HeaderValue,
    ) -> Response {
        // The app answered a GET or HEAD with a file; any other method
        // gets the file as for GET (nginx does the same).
        let method = if method == Method::HEAD {
            Method::HEAD
        } else {
            Method::GET
        };
        match files.respond_offloaded(&method, rel, passed) {
            Some(res) => res,
            None => refused("offload path leaves the allowed root", value),
        }
    }

    /// X-Reproxy-URL: fetch the first URL that connects.
    #[cfg(feature = "reproxy")]
    async fn reproxy(&self, method: &Method, passed: &HeaderMap, value: HeaderValue) -> Response {
        let Ok(text) = value.to_str() else {
            return refused("x-reproxy-url is not a list of URLs", &value);
        };
        let mut urls = Vec::new();
        for url in text.split_ascii_whitespace().take(MAX_REPROXY_URLS) {
            let allowed = url.starts_with("http://")
                && self.upstreams.iter().any(|p| url.starts_with(p.as_str()));
            match url.parse::<Uri>() {
                Ok(uri) if allowed => urls.push(uri),
                _ => {
                    return refused(
                        "x-reproxy-url names an upstream that is not allowed",
                        &value,
                    );
                }
            }
        }
        if urls.is_empty() {
            return refused("x-reproxy-url is empty", &value);
        }
        let head = method == Method::HEAD;
        let mut last = Failure::Gateway("no upstream answered");
        for uri in urls {
            match self.fetch(head, passed, uri.clone()).await {
                Ok(res) => return res,
                Err(failure) => {
                    tracing::warn!(target: "celer::files", upstream = %uri, reason = failure.reason(), "reproxy failed");
                    last = failure;
                    if matches!(last, Failure::Timeout) {
                        break;
                    }
                }
            }
        }
        last.into_response(head)
    }

    #[cfg(feature = "reproxy")]
    async fn fetch(&self, head: bool, passed: &HeaderMap, uri: Uri) -> Result<Response, Failure> {
        let mut req = http::Request::new(Empty::new());
        *req.method_mut() = if head { Method::HEAD } else { Method::GET };
        *req.uri_mut() = uri;
        for (name, value) in passed {
            req.headers_mut().append(name, value.clone());
        }
        let res = match tokio::time::timeout(self.timeout, self.client.request(req)).await {
            Err(_) => return Err(Failure::Timeout),
            Ok(Err(err)) if err.is_connect() => {
                return Err(Failure::Gateway("cannot connect to the upstream"));
            }
            Ok(Err(_)) => return Err(Failure::Gateway("the upstream's answer is invalid")),
            Ok(Ok(res)) => res,
        };
        let (mut parts, body) = res.into_parts();
        for name in HOP_BY_HOP {
            parts.headers.remove(name);
        }
        parts.headers.remove(HeaderName::from_static("keep-alive"));
        let body = IdleTimeout {
            inner: body,
            timeout: self.timeout,
            sleep: Box::pin(tokio::time::sleep(self.timeout)),
        };
        Ok(http::Response::from_parts(parts, Body::new(body)))
    }
}

#[cfg(feature = "reproxy")]
pin_project_lite::pin_project! {
    /// An upstream body that fails when no frame arrives for `timeout`, so
    /// a stalled upstream cannot hold the client's connection forever.
    struct IdleTimeout<B> {
        #[pin]
        inner: B,
        timeout: Duration,
        sleep: Pin<Box<tokio::time::Sleep>>,
    }
}

#[cfg(feature = "reproxy")]
impl<B> http_body::Body for IdleTimeout<B>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        let this = self.project();
        match this.inner.poll_frame(cx) {
            Poll::Ready(frame) => {
                let deadline = tokio::time::Instant::now() + *this.timeout;
                this.sleep.as_mut().reset(deadline);
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => match this.sleep.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err("the upstream stalled mid-body".into()))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Why an upstream gave no answer.
#[cfg(feature = "reproxy")]
#[derive(Debug, Clone, Copy)]
enum Failure {
    /// 504: no response head within the timeout.
    Timeout,
    /// 502: a connection or protocol failure.
    Gateway(&'static str),
}

#[cfg(feature = "reproxy")]
impl Failure {
    fn reason(self) -> &'static str {
        match self {
            Failure::Timeout => "the upstream did not answer in time",
            Failure::Gateway(reason) => reason,
        }
    }

    fn into_response(self, head: bool) -> Response {
        let code = match self {
            Failure::Timeout => StatusCode::GATEWAY_TIMEOUT,
            Failure::Gateway(_) => StatusCode::BAD_GATEWAY,
        };
        let mut res = status(code, head);
        let text = format!(
            "{} {}: {}\n",
            code.as_str(),
            code.canonical_reason().unwrap_or(""),
            self.reason()
        );
        res.headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(text.len() as u64));
        if !head {
            *res.body_mut() = Body::from(text);
        }
        res
    }
}

/// 500 for an offload header the configuration does not allow; logged,
/// since it is a bug or an attack through the app.
fn refused(why: &'static str, value: &HeaderValue) -> Response {
    tracing::error!(target: "celer::files", value = ?value, "{why}");
    Answer::INTERNAL.into_response(false)
}
