//! How connections end: on graceful shutdown in-flight requests finish
//! and idle connections close; over TLS every normal close sends
//! `close_notify`.

use std::process::Stdio;

use celer_server::listen::BindOptions;
use celer_server::{Listen, Server, Shutdown, TlsConfig};
use celer_test_support::{Raw, bounded};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::{route, short_timeouts, start_default, start_deferred};

#[tokio::test]
async fn in_flight_requests_finish_and_idle_connections_close() {
    let srv = start_default().await;
    let mut idle = Raw::connect(srv.addr).await;
    idle.send(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(idle.response().await.status, 200);

    let mut busy = Raw::connect(srv.addr).await;
    busy.send(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n").await;
    // Let the slow request reach the service before shutdown starts.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    srv.shutdown.trigger();

    let r = busy.response().await;
    assert_eq!(r.text(), "slow done");
    assert_eq!(r.header("connection"), Some("close"));
    assert!(busy.is_closed().await);
    assert!(idle.is_closed().await);
    let addr = srv.addr;
    served_until_shutdown(srv).await;
    // Nothing listens any more.
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

/// With TCP_DEFER_ACCEPT the first request is read as the connection
/// starts, around the runtime's readiness; the connection must still serve
/// more requests, wait idle and close when shutdown starts.
#[tokio::test]
async fn a_connection_whose_first_request_came_with_the_accept_closes_on_shutdown() {
    let srv = start_deferred().await;
    let mut conn = Raw::connect(srv.addr).await;
    assert_hello(&mut conn).await;
    assert_hello(&mut conn).await;
    // Idle now; shutdown must reach it at once, not at the keep-alive timeout.
    srv.shutdown.trigger();
    assert!(conn.is_closed().await);
    served_until_shutdown(srv).await;
}

/// The same after a single request: the stale readiness the first read
/// left behind must not keep the idle connection from seeing shutdown.
#[tokio::test]
async fn an_idle_connection_after_its_first_request_closes_on_shutdown() {
    let srv = start_deferred().await;
    let mut conn = Raw::connect(srv.addr).await;
    assert_hello(&mut conn).await;
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    srv.shutdown.trigger();
    assert!(conn.is_closed().await);
    served_until_shutdown(srv).await;
}

/// Sends `GET /hello` and expects a 200.
async fn assert_hello(conn: &mut Raw) {
    conn.send(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(conn.response().await.status, 200);
}

/// Waits for the server's task, which ends once shutdown has finished.
async fn served_until_shutdown(srv: crate::support::TestServer) {
    celer_test_support::bounded(srv.task)
        .await
        .unwrap()
        .unwrap();
}

// ===== TLS close_notify =====

/// The client script: one request over TLS, then read to the end.
const TLS_CLOSE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/tls_close.py");

/// A TLS server with a self-signed certificate and a short keep-alive
/// timeout, and the directory holding its PEM files.
pub(crate) async fn start_tls() -> (crate::support::TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = celer_test_support::localhost_cert(dir.path());
    let tls = TlsConfig::builder()
        .cert_files(&cert, &key)
        .build()
        .expect("tls config");
    let bound = Server::builder()
        .listen_tls(Listen::parse("tcp://127.0.0.1:0").unwrap())
        .tls(tls)
        .limits(short_timeouts())
        .bind_options(BindOptions {
            defer_accept: None,
            ..BindOptions::default()
        })
        .bind()
        .expect("bind");
    let addr = bound.tcp_addr().unwrap();
    let shutdown = Shutdown::new();
    let task = tokio::spawn(bound.serve(tower::service_fn(route), shutdown.clone()));
    let srv = crate::support::TestServer {
        addr,
        shutdown,
        task,
    };
    (srv, dir)
}

/// Runs the client in `mode`; once it has its answer, `then` runs; returns
/// its report: status and how the stream ended.
async fn tls_close(srv: &crate::support::TestServer, mode: &str, then: impl FnOnce()) -> Value {
    let mut child = tokio::process::Command::new("python3")
        .arg(TLS_CLOSE)
        .arg(srv.addr.ip().to_string())
        .arg(srv.addr.port().to_string())
        .arg(mode)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python3");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = bounded(lines.next_line())
        .await
        .unwrap()
        .unwrap_or_default();
    assert_eq!(first, "answered 200", "{mode}");
    then();
    let report = bounded(lines.next_line())
        .await
        .unwrap()
        .unwrap_or_default();
    bounded(child.wait()).await.unwrap();
    serde_json::from_str(&report).unwrap_or_else(|e| panic!("{e}: {report}"))
}

/// RFC 8446 §6.1: the server sends `close_notify` before it closes, so the
/// client can tell the end of the stream from a truncation; the client
/// here never shuts down first. After `Connection: close`, after an
/// HTTP/1.0 response, after the keep-alive timeout and on graceful
/// shutdown.
#[tokio::test]
async fn tls_connections_end_with_close_notify() {
    let (srv, _dir) = start_tls().await;
    for mode in ["close", "http10", "idle"] {
        let report = tls_close(&srv, mode, || {}).await;
        assert_eq!(report["body"], "Hello, World!", "{mode}: {report}");
        assert_eq!(report["ended"], "close_notify", "{mode}: {report}");
    }
    let report = tls_close(&srv, "idle", || srv.shutdown.trigger()).await;
    assert_eq!(report["ended"], "close_notify", "shutdown: {report}");
}
