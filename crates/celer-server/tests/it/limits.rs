//! Each limit at its edge: one byte under is served, one over is refused.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use celer_server::listen::BindOptions;
use celer_server::{ConnInfo, Incoming, Limits, Listen, Server, Shutdown, Threading};
use celer_test_support::{Raw, exchange, parse_all};

use crate::support::{short_timeouts, start};

async fn status_of(limits: Limits, request: &[u8]) -> u16 {
    let srv = start(limits).await;
    let mut c = Raw::connect(srv.addr).await;
    c.send(request).await;
    c.response().await.status
}

fn get_with_header(value_len: usize) -> Vec<u8> {
    format!(
        "GET /hello HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\n\r\n",
        "p".repeat(value_len)
    )
    .into_bytes()
}

#[tokio::test]
async fn head_bytes() {
    let limits = Limits {
        max_head_bytes: 1024,
        ..Limits::default()
    };
    let fits = get_with_header(1024 - get_with_header(0).len());
    assert_eq!(fits.len(), 1024);
    assert_eq!(status_of(limits.clone(), &fits).await, 200);
    let over = get_with_header(1025 - get_with_header(0).len());
    assert_eq!(status_of(limits, &over).await, 431);
}

#[tokio::test]
async fn header_count() {
    let limits = Limits {
        max_headers: 10,
        ..Limits::default()
    };
    let with = |n: usize| {
        let mut s = "GET /hello HTTP/1.1\r\nHost: x\r\n".to_owned();
        for i in 1..n {
            s.push_str(&format!("X-{i}: v\r\n"));
        }
        s.push_str("\r\n");
        s.into_bytes()
    };
    assert_eq!(status_of(limits.clone(), &with(10)).await, 200);
    assert_eq!(status_of(limits, &with(11)).await, 431);
}

#[tokio::test]
async fn uri_length() {
    let limits = Limits {
        max_uri_bytes: 100,
        ..Limits::default()
    };
    let with = |n: usize| {
        format!(
            "GET /echo-path{} HTTP/1.1\r\nHost: x\r\n\r\n",
            "a".repeat(n - 10)
        )
        .into_bytes()
    };
    assert_eq!(status_of(limits.clone(), &with(100)).await, 200);
    assert_eq!(status_of(limits, &with(101)).await, 414);
}

#[tokio::test]
async fn body_size_by_content_length() {
    let limits = Limits {
        max_body_bytes: Some(1000),
        ..Limits::default()
    };
    let with = |n: usize| {
        let mut r = format!("POST /collect HTTP/1.1\r\nHost: x\r\nContent-Length: {n}\r\n\r\n")
            .into_bytes();
        r.extend(std::iter::repeat_n(b'b', n));
        r
    };
    assert_eq!(status_of(limits.clone(), &with(1000)).await, 200);
    // Refused from the head alone, before any body byte is read.
    let srv = start(limits).await;
    let out = exchange(
        srv.addr,
        b"POST /collect HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n",
    )
    .await;
    assert_eq!(parse_all(&out)[0].status, 413);
}

#[tokio::test]
async fn body_size_by_chunks() {
    let limits = Limits {
        max_body_bytes: Some(1000),
        ..Limits::default()
    };
    let with = |n: usize| {
        let mut r =
            b"POST /collect HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        r.extend_from_slice(format!("{:x}\r\n", n - 1).as_bytes());
        r.extend(std::iter::repeat_n(b'c', n - 1));
        r.extend_from_slice(b"\r\n1\r\nc\r\n0\r\n\r\n");
        r
    };
    assert_eq!(status_of(limits.clone(), &with(1000)).await, 200);
    assert_eq!(status_of(limits, &with(1001)).await, 413);
}

#[tokio::test]
async fn chunk_extension_bytes() {
    let limits = Limits {
        max_chunk_ext_bytes: 64,
        ..Limits::default()
    };
    let with = |n: usize| {
        format!(
            "POST /collect HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1;{}\r\na\r\n0\r\n\r\n",
            "e".repeat(n - 1)
        )
        .into_bytes()
    };
    assert_eq!(status_of(limits.clone(), &with(64)).await, 200);
    assert_eq!(status_of(limits, &with(65)).await, 400);
}

#[tokio::test]
async fn requests_per_connection() {
    let limits = Limits {
        max_requests_per_connection: Some(3),
        ..Limits::default()
    };
    let srv = start(limits).await;
    let mut req = Vec::new();
    for _ in 0..5 {
        req.extend_from_slice(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
    }
    let rs = parse_all(&exchange(srv.addr, &req).await);
    assert_eq!(rs.len(), 3);
    assert_eq!(rs[2].header("connection"), Some("close"));
    assert_eq!(rs[1].header("connection"), None);
}

#[tokio::test]
async fn idle_keep_alive_connections_are_closed() {
    let srv = start(short_timeouts()).await;
    let mut c = Raw::connect(srv.addr).await;
    c.send(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(c.response().await.status, 200);
    // No request follows: the server closes quietly, without a 408.
    assert!(c.is_closed().await);
}

/// The idle timer is armed once and left alone between requests while it
/// is early (decision 164): when it fires before the deadline in force it
/// is re-armed, and once the requests stop it still closes the connection.
#[tokio::test]
async fn requests_keep_a_connection_alive_past_its_first_deadline() {
    let srv = start(short_timeouts()).await;
    let mut c = Raw::connect(srv.addr).await;
    // A request every 100 ms for a second: the timer armed at the first
    // wait (300 ms on) fires early three times over, is re-armed each
    // time, and never ends the connection.
    for _ in 0..10 {
        c.send(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n").await;
        let r = c.response().await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("connection"), None);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Then idle: closed quietly.
    assert!(c.is_closed().await);
}

#[tokio::test]
async fn a_silent_new_connection_is_closed() {
    let srv = start(short_timeouts()).await;
    let mut c = Raw::connect(srv.addr).await;
    assert!(c.is_closed().await);
}

#[tokio::test]
async fn a_client_that_never_reads_is_dropped() {
    let srv = start(short_timeouts()).await;
    let mut c = Raw::connect(srv.addr).await;
    // Ask for many large responses and never read them.
    let mut req = Vec::new();
    for _ in 0..64 {
        req.extend_from_slice(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n");
    }
    c.send(&req).await;
    // The server gives up writing; a fresh client is still served.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let mut fresh = Raw::connect(srv.addr).await;
    fresh.send(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(fresh.response().await.status, 200);
    let all = c.read_to_close().await;
    assert!(
        all.len() < 64 << 20,
        "the server stopped before writing everything"
    );
}

#[tokio::test]
async fn a_flood_beyond_the_connection_limit_leaves_the_server_serving() {
    let limits = Limits {
        max_connections: 8,
        ..short_timeouts()
    };
    let srv = start(limits).await;
    // Far more connections than the limit; the kernel queues the excess in
    // the backlog while accepting pauses.
    // Each holds a slot with an unfinished head until the head timeout.
    let mut flood = Vec::new();
    for _ in 0..64 {
        let mut c = Raw::connect(srv.addr).await;
        c.send(b"GET /hello HTTP/1.1\r\n").await;
        flood.push(c);
    }
    // A real client waits its turn: stalled connections time out, slots free
    // up, and it is served.
    let mut c = Raw::connect(srv.addr).await;
    c.send(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(c.response().await.status, 200);
    drop(flood);
    let mut again = Raw::connect(srv.addr).await;
    again.send(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(again.response().await.status, 200);
}

#[tokio::test]
async fn unread_bodies_past_the_drain_limit_close_the_connection() {
    let limits = Limits {
        max_drain_bytes: 1000,
        ..Limits::default()
    };
    let srv = start(limits).await;
    let with = |n: usize| {
        let mut r =
            format!("POST /ignore HTTP/1.1\r\nHost: x\r\nContent-Length: {n}\r\n\r\n").into_bytes();
        r.extend(std::iter::repeat_n(b'd', n));
        r.extend_from_slice(b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        r
    };
    // At the limit the body is discarded and the next request is served.
    let rs = parse_all(&exchange(srv.addr, &with(1000)).await);
    assert_eq!(
        rs.iter().map(|r| r.text()).collect::<Vec<_>>(),
        ["ignored", "Hello, World!"]
    );
    // Past it the connection closes after the answer; nothing more is read.
    let mut c = Raw::connect(srv.addr).await;
    c.send(&with(5000)[..2000]).await;
    assert_eq!(c.response().await.text(), "ignored");
    assert!(c.is_closed().await);
}

/// Issue 20, item 3: with one accept loop per worker, `N` clients at a
/// limit of `N` are all served, whichever worker's listener the kernel
/// hands each to; one more waits and is served as soon as one leaves; and
/// no more than `N` connections are ever open.
#[tokio::test]
async fn issue_20_the_connection_limit_is_exact_with_2_workers() {
    the_connection_limit_is_exact(2).await;
}

/// Issue 20, item 3, with four workers.
#[tokio::test]
async fn issue_20_the_connection_limit_is_exact_with_4_workers() {
    the_connection_limit_is_exact(4).await;
}

async fn the_connection_limit_is_exact(workers: usize) {
    const LIMIT: usize = 6;
    let counts = Arc::new(Counts::default());
    let bound = Server::builder()
        .listen(Listen::parse("tcp://127.0.0.1:0").unwrap())
        .limits(Limits {
            max_connections: LIMIT,
            ..Limits::default()
        })
        .workers(workers)
        .threading(Threading::PerCore)
        .bind_options(BindOptions {
            defer_accept: None,
            ..BindOptions::default()
        })
        .bind()
        .expect("bind");
    let addr = bound.tcp_addr().unwrap();
    let shutdown = Shutdown::new();
    let make = {
        let counts = counts.clone();
        move |_: &ConnInfo| Counted::new(counts.clone())
    };
    let task = tokio::spawn(bound.serve_with(make, shutdown.clone()));

    let hello = b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut open = VecDeque::new();
    for _ in 0..LIMIT {
        let mut c = Raw::connect(addr).await;
        c.send(hello).await;
        assert_eq!(c.response().await.status, 200);
        open.push_back(c);
    }
    // At the limit: each client that leaves makes room for exactly one
    // new one, wherever the kernel queues it.
    for _ in 0..4 * workers {
        drop(open.pop_front());
        let mut c = Raw::connect(addr).await;
        c.send(hello).await;
        assert_eq!(c.response().await.status, 200);
        open.push_back(c);
    }
    // One past the limit waits for a slot; a client leaving gives it one.
    let mut extra = Raw::connect(addr).await;
    extra.send(hello).await;
    drop(open.pop_front());
    assert_eq!(extra.response().await.status, 200);
    for c in &mut open {
        c.send(hello).await;
        assert_eq!(c.response().await.status, 200);
    }
    assert_eq!(counts.peak.load(Ordering::SeqCst), LIMIT);
    shutdown.trigger();
    celer_test_support::bounded(task).await.unwrap().unwrap();
}

/// Connections open (services alive) now and at most.
#[derive(Default)]
struct Counts {
    live: AtomicUsize,
    peak: AtomicUsize,
}

/// The test routes, built once per connection and counted while alive.
struct Counted(Arc<Counts>);

impl Counted {
    fn new(counts: Arc<Counts>) -> Counted {
        let live = counts.live.fetch_add(1, Ordering::SeqCst) + 1;
        counts.peak.fetch_max(live, Ordering::SeqCst);
        Counted(counts)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::SeqCst);
    }
}

impl tower::Service<http::Request<Incoming>> for Counted {
    type Response = http::Response<crate::support::Body>;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Incoming>) -> Self::Future {
        Box::pin(crate::support::route(req))
    }
}
