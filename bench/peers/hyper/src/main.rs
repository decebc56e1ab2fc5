//! Minimal hyper 1.x peer for `bench/run compare`.
//!
//! Answers `GET /plaintext` with `Hello, World!` (text/plain) and
//! `GET /json` with `{"message":"Hello, World!"}` (application/json), the
//! same pair as Celer's `example-hello`, nginx and h2o in the comparison.
//!
//! hyper's best single-core setup: one current-thread tokio runtime (no
//! work-stealing, no cross-thread wakeups), HTTP/1 only, pipelined responses
//! flushed together (`pipeline_flush`). hyper adds the cached `Date` header
//! itself; `Server` is added here so the head matches the other servers.
//!
//! With `--h2c` it serves HTTP/2 by prior knowledge instead
//! (`hyper::server::conn::http2` on the `h2` crate, for `bench/run h2`):
//! hyper's defaults, each stream spawned as its own task on the same
//! current-thread runtime, as hyper does.
//!
//! Usage: `peer-hyper --listen tcp://127.0.0.1:PORT [--h2c]`

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE, SERVER};
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

static PLAINTEXT: &[u8] = b"Hello, World!";
static JSON: &[u8] = b"{\"message\":\"Hello, World!\"}";

async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let (status, ctype, body): (StatusCode, &'static str, &'static [u8]) = match req.uri().path() {
        "/plaintext" => (StatusCode::OK, "text/plain", PLAINTEXT),
        "/json" => (StatusCode::OK, "application/json", JSON),
        _ => (StatusCode::NOT_FOUND, "text/plain", b"Not Found"),
    };
    let mut resp = Response::new(Full::new(Bytes::from_static(body)));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(SERVER, HeaderValue::from_static("hyper"));
    h.insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
    Ok(resp)
}

fn parse_args() -> (SocketAddr, bool) {
    let mut args = std::env::args().skip(1);
    let mut addr = None;
    let mut h2c = false;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--listen" => addr = args.next(),
            "--h2c" => h2c = true,
            other => {
                eprintln!("peer-hyper: unknown argument {other:?}");
                std::process::exit(2);
            }
        }
    }
    let addr = addr.unwrap_or_else(|| "tcp://127.0.0.1:8080".into());
    let hostport = addr.strip_prefix("tcp://").unwrap_or(&addr);
    let addr = hostport.parse().unwrap_or_else(|e| {
        eprintln!("peer-hyper: bad --listen {addr:?}: {e}");
        std::process::exit(2);
    });
    (addr, h2c)
}

fn main() {
    let (addr, h2c) = parse_args();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .expect("tokio runtime");
    rt.block_on(async move {
        let listener = TcpListener::bind(addr).await.expect("bind");
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(s) => s,
                // EMFILE and friends: keep serving the connections we have.
                Err(_) => {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            if h2c {
                tokio::spawn(async move {
                    let _ = http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service_fn(handle))
                        .await;
                });
                continue;
            }
            tokio::spawn(async move {
                let _ = http1::Builder::new()
                    .keep_alive(true)
                    .pipeline_flush(true)
                    .serve_connection(TokioIo::new(stream), service_fn(handle))
                    .await;
            });
        }
    });
}
