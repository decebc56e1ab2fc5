//! Test services and a server on 127.0.0.1:0.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use celer_server::listen::BindOptions;
use celer_server::{Builder, Incoming, Limits, Listen, Server, Shutdown};
use http::{HeaderValue, Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, Full, combinators::BoxBody};

pub(crate) type Body = BoxBody<Bytes, std::io::Error>;

pub(crate) struct TestServer {
    pub(crate) addr: SocketAddr,
    pub(crate) shutdown: Shutdown,
    pub(crate) task: tokio::task::JoinHandle<std::io::Result<()>>,
}

pub(crate) async fn start(limits: Limits) -> TestServer {
    start_on("tcp://127.0.0.1:0", limits).await
}

pub(crate) async fn start_on(listen: &str, limits: Limits) -> TestServer {
    start_built(listen, limits, |b| b).await
}

/// A server on 127.0.0.1:0 that does not serve HTTP/2 by prior knowledge
/// (`Builder::http2(false)`).
pub(crate) async fn start_http1_only(limits: Limits) -> TestServer {
    start_built("tcp://127.0.0.1:0", limits, |b| b.http2(false)).await
}

async fn start_built(
    listen: &str,
    limits: Limits,
    configure: impl FnOnce(Builder) -> Builder,
) -> TestServer {
    // Without TCP_DEFER_ACCEPT, so silent connections reach the engine.
    let bound = configure(Server::builder())
        .listen(Listen::parse(listen).unwrap())
        .limits(limits)
        .bind_options(BindOptions {
            defer_accept: None,
            ..BindOptions::default()
        })
        .bind()
        .expect("bind");
    serve(bound)
}

/// Serves the test routes on `bound` until its shutdown.
fn serve(bound: celer_server::Bound) -> TestServer {
    let addr = bound
        .tcp_addr()
        .unwrap_or_else(|| "127.0.0.1:9".parse().unwrap());
    let shutdown = Shutdown::new();
    let task = tokio::spawn(bound.serve(tower::service_fn(route), shutdown.clone()));
    TestServer {
        addr,
        shutdown,
        task,
    }
}

/// A server on 127.0.0.1:0 with the default bind options, so with
/// TCP_DEFER_ACCEPT: a connection is accepted once its first bytes are in.
pub(crate) async fn start_deferred() -> TestServer {
    let bound = Server::builder()
        .listen(Listen::parse("tcp://127.0.0.1:0").unwrap())
        .bind()
        .expect("bind");
    serve(bound)
}

pub(crate) async fn start_default() -> TestServer {
    start(Limits::default()).await
}

pub(crate) fn full(data: impl Into<Bytes>) -> Body {
    Full::new(data.into())
        .map_err(|never| match never {})
        .boxed()
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut res = Response::new(full(body));
    *res.status_mut() = status;
    res
}

/// The routes every wire test uses.
pub(crate) async fn route(mut req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().to_owned();
    let res = match path.as_str() {
        "/hello" => text(StatusCode::OK, "Hello, World!"),
        // The path and query back, to check ordering of pipelined answers.
        p if p.starts_with("/echo-path") => text(StatusCode::OK, req.uri().to_string()),
        // Method, version and headers, one per line.
        "/describe" => {
            let mut s = format!("{} {:?}\n", req.method(), req.version());
            for (k, v) in req.headers() {
                s.push_str(&format!("{k}: {}\n", v.to_str().unwrap_or("?")));
            }
            text(StatusCode::OK, s)
        }
        // Collects the body and answers its length and trailers.
        "/collect" => match req.into_body().collect().await {
            Ok(c) => {
                let trailers = c.trailers().cloned();
                let bytes = c.to_bytes();
                let mut s = format!("len={}", bytes.len());
                if let Some(t) = trailers {
                    for (k, v) in &t {
                        s.push_str(&format!(" {k}={}", v.to_str().unwrap_or("?")));
                    }
                }
                text(StatusCode::OK, s)
            }
            Err(e) if e.is_body_too_large() => text(StatusCode::PAYLOAD_TOO_LARGE, "too large"),
            Err(e) => text(StatusCode::BAD_REQUEST, e.to_string()),
        },
        // Streams the request body straight back as the response body.
        "/echo" => {
            let body = req.into_body().map_err(std::io::Error::from).boxed();
            Response::new(body)
        }
        // Answers without reading the body.
        "/ignore" => text(StatusCode::OK, "ignored"),
        // A chunked response of three frames plus trailers.
        "/stream" => {
            let mut t = http::HeaderMap::new();
            t.insert("x-checksum", HeaderValue::from_static("abc"));
            Response::new(frames(vec![
                Frame::data(Bytes::from_static(b"one,")),
                Frame::data(Bytes::from_static(b"two,")),
                Frame::data(Bytes::from_static(b"three")),
                Frame::trailers(t),
            ]))
        }
        // A region of the shared test file, as a file body marked for
        // sendfile: `/file?OFFSET,LEN` (a region past the file's end makes
        // the body end early).
        p if p.starts_with("/file") => {
            let (offset, len) = req
                .uri()
                .query()
                .and_then(|q| q.split_once(','))
                .map(|(o, l)| (o.parse().unwrap(), l.parse().unwrap()))
                .unwrap_or((0, TEST_FILE_LEN));
            let body = celer_server::FileBody::new(test_file(), offset, len);
            let mark = body.send_file();
            let mut res = Response::new(body.boxed());
            res.extensions_mut().insert(mark);
            res
        }
        // `/counted?KEY,LEN`: LEN bytes of a body of exact size in 64 KiB
        // pieces, counting the bytes the server pulls from it under KEY
        // (`pulled`), to see how far ahead of the client it reads.
        p if p.starts_with("/counted") => {
            let (key, len) = req
                .uri()
                .query()
                .and_then(|q| q.split_once(','))
                .map(|(k, l)| (k.to_owned(), l.parse().unwrap()))
                .unwrap();
            Response::new(Counted { key, left: len }.boxed())
        }
        // A large body, to exercise vectored writes.
        "/big" => text(StatusCode::OK, Bytes::from(vec![b'z'; 1 << 20])),
        // Sleeps, then answers: a request in flight during shutdown.
        "/slow" => {
            tokio::time::sleep(Duration::from_millis(300)).await;
            text(StatusCode::OK, "slow done")
        }
        // Declares more than it sends: the engine must not keep the
        // connection alive with broken framing.
        "/short" => {
            let mut res = Response::new(frames(vec![Frame::data(Bytes::from_static(b"abc"))]));
            res.headers_mut()
                .insert("content-length", HeaderValue::from_static("10"));
            res
        }
        // A body that fails after its first part.
        "/fails" => Response::new(
            http_body_util::StreamBody::new(futures_util::stream::iter([
                Ok(Frame::data(Bytes::from_static(b"first part"))),
                Err(std::io::Error::other("the disk went away")),
            ]))
            .boxed(),
        ),
        "/close" => {
            let mut res = text(StatusCode::OK, "bye");
            res.headers_mut()
                .insert("connection", HeaderValue::from_static("close"));
            res
        }
        // Switches protocols and echoes bytes upper-cased on the raw stream.
        "/upgrade" => {
            let on = celer_server::upgrade::on(&mut req);
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                if let Ok(mut io) = on.await {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = io.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        buf[..n].make_ascii_uppercase();
                        if io.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                }
            });
            let mut res = Response::new(full(Bytes::new()));
            *res.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
            res.headers_mut()
                .insert("connection", HeaderValue::from_static("upgrade"));
            res.headers_mut()
                .insert("upgrade", HeaderValue::from_static("shout"));
            res
        }
        // Counts itself started, then waits until the test opens the gate
        // named by the query: a handler in flight for as long as a test
        // needs (`gate`). `/hold-big` answers 1 MiB once released.
        p if p.starts_with("/hold") => {
            let key = req.uri().query().unwrap_or_default().to_owned();
            let gate = gate(&key);
            let _running = Running(gate.clone());
            gate.started.send_modify(|n| *n += 1);
            let mut open = gate.open.subscribe();
            let _ = open.wait_for(|open| *open).await;
            if p == "/hold-big" {
                text(StatusCode::OK, Bytes::from(vec![b'h'; 1 << 20]))
            } else {
                text(StatusCode::OK, format!("released {key}"))
            }
        }
        _ => text(StatusCode::NOT_FOUND, "not found"),
    };
    Ok(res)
}

/// A body of ready frames and no known length.
fn frames(items: Vec<Frame<Bytes>>) -> Body {
    Frames(items.into_iter()).boxed()
}

struct Frames(std::vec::IntoIter<Frame<Bytes>>);

impl http_body::Body for Frames {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        std::task::Poll::Ready(self.0.next().map(Ok))
    }
}

/// A body of zeros that counts what is pulled from it (see `/counted`).
struct Counted {
    key: String,
    left: u64,
}

impl http_body::Body for Counted {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let n = self.left.min(64 * 1024);
        if n == 0 {
            return std::task::Poll::Ready(None);
        }
        self.left -= n;
        counter(&self.key).fetch_add(n, std::sync::atomic::Ordering::SeqCst);
        std::task::Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![0; n as usize])))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.left)
    }
}

/// The counter of bytes pulled from `/counted?KEY,..` bodies.
fn counter(key: &str) -> std::sync::Arc<std::sync::atomic::AtomicU64> {
    use std::collections::HashMap;
    use std::sync::atomic::AtomicU64;
    use std::sync::{Arc, Mutex, OnceLock};
    static COUNTERS: OnceLock<Mutex<HashMap<String, Arc<AtomicU64>>>> = OnceLock::new();
    let mut all = COUNTERS.get_or_init(Default::default).lock().unwrap();
    all.entry(key.to_owned()).or_default().clone()
}

/// Bytes the server has pulled from `/counted?KEY,..` bodies so far.
pub(crate) fn pulled(key: &str) -> u64 {
    counter(key).load(std::sync::atomic::Ordering::SeqCst)
}

/// Short timeouts for tests that wait for one to fire.
pub(crate) fn short_timeouts() -> Limits {
    Limits {
        head_timeout: Duration::from_millis(300),
        body_timeout: Duration::from_millis(300),
        keep_alive_timeout: Duration::from_millis(300),
        write_timeout: Duration::from_millis(300),
        shutdown_timeout: Duration::from_secs(5),
        ..Limits::default()
    }
}

/// Length of [`test_file`].
pub(crate) const TEST_FILE_LEN: u64 = (32 << 20) + 7;

/// The bytes of [`test_file`]: a pattern that shows misplaced offsets.
pub(crate) fn test_file_bytes() -> Vec<u8> {
    (0..TEST_FILE_LEN).map(|i| (i % 251) as u8).collect()
}

/// A file of [`TEST_FILE_LEN`] bytes shared by every test of the process.
pub(crate) fn test_file() -> std::sync::Arc<std::fs::File> {
    use std::io::Write;
    static FILE: std::sync::OnceLock<std::sync::Arc<std::fs::File>> = std::sync::OnceLock::new();
    FILE.get_or_init(|| {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&test_file_bytes()).unwrap();
        std::sync::Arc::new(file)
    })
    .clone()
}

/// The handlers of `/hold?KEY` for one key: how many started, how many
/// ended (answered or dropped), and whether they may answer.
pub(crate) struct Gate {
    started: tokio::sync::watch::Sender<u64>,
    ended: tokio::sync::watch::Sender<u64>,
    open: tokio::sync::watch::Sender<bool>,
}

impl Gate {
    /// Waits until `n` handlers of this key have started.
    pub(crate) async fn started(&self, n: u64) {
        let mut rx = self.started.subscribe();
        let _ = celer_test_support::bounded(rx.wait_for(|s| *s >= n)).await;
    }

    /// How many handlers of this key have started.
    pub(crate) fn started_so_far(&self) -> u64 {
        *self.started.borrow()
    }

    /// Waits until `n` handlers of this key have ended.
    pub(crate) async fn ended(&self, n: u64) {
        let mut rx = self.ended.subscribe();
        let _ = celer_test_support::bounded(rx.wait_for(|s| *s >= n)).await;
    }

    /// Lets every handler of this key answer, now and later.
    pub(crate) fn open(&self) {
        self.open.send_replace(true);
    }
}

/// The gate of `/hold?KEY`; each test uses its own key.
pub(crate) fn gate(key: &str) -> std::sync::Arc<Gate> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    static GATES: OnceLock<Mutex<HashMap<String, Arc<Gate>>>> = OnceLock::new();
    let mut gates = GATES.get_or_init(Default::default).lock().unwrap();
    gates
        .entry(key.to_owned())
        .or_insert_with(|| {
            Arc::new(Gate {
                started: tokio::sync::watch::Sender::new(0),
                ended: tokio::sync::watch::Sender::new(0),
                open: tokio::sync::watch::Sender::new(false),
            })
        })
        .clone()
}

/// Counts a `/hold` handler ended when it is dropped, answered or not.
struct Running(std::sync::Arc<Gate>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.ended.send_modify(|n| *n += 1);
    }
}
