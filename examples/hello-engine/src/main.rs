//! `GET /plaintext` and `GET /json` (the TechEmpower pair) served by the bare
//! Celer engine: the service is a hand-written `tower::Service`, no framework.
//! `example-hello` answers the same pair on the framework, for comparison.
//!
//! Run with `cargo run --release -p example-hello-engine -- --listen tcp://127.0.0.1:8080`.
//!
//! ```text
//! example-hello-engine --listen tcp://127.0.0.1:8080 [--workers N] [--threading per-core|work-stealing]
//!     [--tls-cert FILE --tls-key FILE [--no-tls-resumption]]
//! ```
//!
//! With `--tls-cert` and `--tls-key` every listener serves HTTPS
//! (`bench/run tls`).

use std::convert::Infallible;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::future::{Ready, ready};
use std::task::{Context, Poll};

use bytes::Bytes;
use celer_server::{Incoming, Listen, Server, Threading, TlsConfig};
use clap::Parser;
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;

#[derive(Parser, Debug)]
#[command(about = "TechEmpower plaintext/JSON on the bare Celer engine")]
struct Args {
    /// Where to listen (repeatable): tcp://HOST:PORT, unix:PATH, fd:N, systemd.
    #[arg(long, default_value = "tcp://127.0.0.1:8080")]
    listen: Vec<Listen>,
    /// Worker threads (default: one per CPU).
    #[arg(long)]
    workers: Option<usize>,
    /// Threading model: per-core or work-stealing.
    #[arg(long, default_value = "per-core", value_parser = ["per-core", "work-stealing"])]
    threading: String,
    /// PEM certificate chain: serve HTTPS on every listener.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
    /// Turn TLS session resumption off (every connection a full handshake).
    #[arg(long)]
    no_tls_resumption: bool,
}

#[derive(serde::Serialize)]
struct Message {
    message: &'static str,
}

#[derive(Clone, Copy, Debug)]
struct Hello;

impl tower_service::Service<Request<Incoming>> for Hello {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Incoming>) -> Self::Future {
        ready(Ok(respond(&req)))
    }
}

fn respond(req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let get = req.method() == Method::GET || req.method() == Method::HEAD;
    let (ctype, body) = match req.uri().path() {
        "/plaintext" if get => ("text/plain", Bytes::from_static(b"Hello, World!")),
        "/json" if get => {
            let json = serde_json::to_vec(&Message {
                message: "Hello, World!",
            })
            .unwrap_or_default();
            ("application/json", Bytes::from(json))
        }
        "/plaintext" | "/json" => return status(StatusCode::METHOD_NOT_ALLOWED),
        _ => return status(StatusCode::NOT_FOUND),
    };
    let mut res = Response::new(Full::new(body));
    res.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
    res
}

fn status(code: StatusCode) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(Bytes::new()));
    *res.status_mut() = code;
    res
}

fn main() {
    let args = Args::parse();
    let mut builder = Server::builder().threading(match args.threading.as_str() {
        "work-stealing" => Threading::WorkStealing,
        _ => Threading::PerCore,
    });
    if let Some(n) = args.workers {
        builder = builder.workers(n);
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => match TlsConfig::builder()
            .cert_files(cert, key)
            .resumption(!args.no_tls_resumption)
            .build()
        {
            Ok(tls) => Some(tls),
            Err(err) => {
                eprintln!("example-hello-engine: {err}");
                std::process::exit(2);
            }
        },
        _ => None,
    };
    for l in args.listen {
        builder = match tls {
            Some(_) => builder.listen_tls(l),
            None => builder.listen(l),
        };
    }
    if let Some(tls) = tls {
        builder = builder.tls(tls);
    }
    let _ = celer_server::raise_fd_limit();
    let bound = match builder.bind() {
        Ok(b) => b,
        Err(err) => {
            eprintln!("example-hello-engine: {err}");
            std::process::exit(2);
        }
    };
    eprintln!(
        "example-hello-engine listening on {}",
        bound.local_specs().join(", ")
    );
    let signal = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    if let Err(err) = bound.run(Hello, signal) {
        eprintln!("example-hello-engine: {err}");
        std::process::exit(1);
    }
}
