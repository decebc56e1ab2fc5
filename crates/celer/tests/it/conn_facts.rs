//! Connection facts (`Request::conn`, the `ConnInfo` extension) over real
//! sockets, under a tower layer: plain HTTP/1.1, HTTP/2 by prior
//! knowledge, and TLS with ALPN `h2` and `http/1.1` (curl), with HSTS
//! from the security headers middleware only on the TLS ones.

use celer::security::SecurityHeaders;
use celer::serve::{ConnInfo, Listen, Server, Shutdown};
use celer::{App, Request};
use celer_server::TlsConfig;
use tower::ServiceExt as _;

use crate::wire::curl;

/// One line of facts, as a handler sees them.
async fn facts(req: Request) -> String {
    let conn = req.conn();
    format!(
        "tls={} alpn={} version={} sni={} proto={:?} peer={} local={}",
        req.is_tls(),
        conn.alpn()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .unwrap_or_else(|| "-".into()),
        conn.tls_version().map_or("-", |v| v.as_str()),
        conn.server_name().unwrap_or("-"),
        req.version(),
        conn.remote_addr()
            .map(|a| a.ip().to_string())
            .unwrap_or_default(),
        conn.local_addr().is_some_and(|a| a.port() != 0),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_facts_should_reach_handlers_and_layers_on_every_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = celer_test_support::localhost_cert(dir.path());
    let tls = TlsConfig::builder()
        .cert_files(&cert, &key)
        .build()
        .unwrap();

    let mut app = App::new();
    app.middleware(SecurityHeaders::new().into_middleware());
    app.get("/facts", facts);
    // A tower layer outside the app reads the same facts from the
    // request's extensions.
    let layer = tower::layer::layer_fn(|inner: celer::serve::AppService| {
        tower::service_fn(move |req: http::Request<celer::serve::Incoming>| {
            let info = req.extensions().get::<ConnInfo>().cloned();
            let inner = inner.clone();
            async move {
                let mut res = inner.oneshot(req).await?;
                let saw = match info {
                    Some(info) if info.is_tls() => format!(
                        "tls {}",
                        String::from_utf8_lossy(info.alpn().unwrap_or(b"-"))
                    ),
                    Some(_) => "clear".to_owned(),
                    None => "nothing".to_owned(),
                };
                res.headers_mut()
                    .insert("x-layer-saw", http::HeaderValue::from_str(&saw).unwrap());
                Ok::<_, std::convert::Infallible>(res)
            }
        })
    });
    let bound = Server::builder()
        .listen(Listen::parse("tcp://127.0.0.1:0").unwrap())
        .listen_tls(Listen::parse("tcp://127.0.0.1:0").unwrap())
        .tls(tls)
        .workers(1)
        .bind()
        .unwrap();
    let specs = bound.local_specs();
    let port = |i: usize| specs[i].rsplit(':').next().unwrap().to_owned();
    let (plain, secure) = (port(0), port(1));
    let shutdown = Shutdown::new();
    let server = tokio::spawn(app.serve_layered(bound, layer, shutdown.clone()));

    let fetch = |args: Vec<String>| async move {
        let mut all = vec!["-i".to_owned()];
        all.extend(args);
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        curl(&all).await.to_ascii_lowercase()
    };
    let clear = format!("http://127.0.0.1:{plain}/facts");
    let resolve = format!("localhost:{secure}:127.0.0.1");
    let url = format!("https://localhost:{secure}/facts");
    let ca = cert.to_str().unwrap().to_owned();
    let cases = [
        (
            vec!["--http1.1".to_owned(), clear.clone()],
            "tls=false alpn=- version=- sni=- proto=http/1.1 peer=127.0.0.1 local=true",
            "clear",
        ),
        (
            vec!["--http2-prior-knowledge".to_owned(), clear],
            "tls=false alpn=- version=- sni=- proto=http/2.0 peer=127.0.0.1 local=true",
            "clear",
        ),
        (
            vec![
                "--http2".to_owned(),
                "--cacert".to_owned(),
                ca.clone(),
                "--resolve".to_owned(),
                resolve.clone(),
                url.clone(),
            ],
            "tls=true alpn=h2 version=tlsv1.3 sni=localhost proto=http/2.0 peer=127.0.0.1 local=true",
            "tls h2",
        ),
        (
            vec![
                "--http1.1".to_owned(),
                "--tlsv1.2".to_owned(),
                "--tls-max".to_owned(),
                "1.2".to_owned(),
                "--cacert".to_owned(),
                ca,
                "--resolve".to_owned(),
                resolve,
                url,
            ],
            "tls=true alpn=http/1.1 version=tlsv1.2 sni=localhost proto=http/1.1 peer=127.0.0.1 local=true",
            "tls http/1.1",
        ),
    ];
    for (args, body, layer_saw) in cases {
        let out = fetch(args.clone()).await;
        assert!(out.ends_with(body), "{args:?}: {out}");
        assert!(
            out.contains(&format!("x-layer-saw: {layer_saw}\r\n")),
            "{args:?}: {out}"
        );
        // RFC 6797 §7.2: HSTS only over TLS, as the engine saw it.
        assert_eq!(
            out.contains("strict-transport-security: max-age=31536000"),
            layer_saw.starts_with("tls"),
            "{args:?}: {out}"
        );
    }
    shutdown.trigger();
    celer_test_support::bounded(server).await.unwrap().unwrap();
}

#[tokio::test]
async fn an_unserved_request_should_take_its_facts_from_the_extensions() {
    use celer::serve::{TlsInfo, TlsVersion};

    let mut req = Request::builder().uri("/").body(()).unwrap();
    assert!(!req.conn().is_tls());
    assert_eq!(req.conn().alpn(), None);
    let addr = "192.0.2.7:4000".parse().unwrap();
    req.extensions_mut()
        .insert(ConnInfo::new(Some(addr), None).with_tls(TlsInfo::new(
            TlsVersion::Tls13,
            Some(b"h2"),
            Some("a.example"),
        )));
    assert!(req.is_tls());
    assert_eq!(req.conn().server_name(), Some("a.example"));
    assert_eq!(req.remote_addr(), Some(addr));
}
