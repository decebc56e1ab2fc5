//! The driver's polls: a response queued while the driver runs is written
//! by the same poll, not by a second one the queueing woke.

use super::*;
use std::sync::atomic::AtomicUsize;
use std::task::Poll;

use crate::common::hello::Hello;
use crate::shutdown::Shutdown;

/// Counts the polls of the future it wraps.
struct Counted<F> {
    inner: Pin<Box<F>>,
    polls: Arc<AtomicUsize>,
}

impl<F: Future> Future for Counted<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.polls.fetch_add(1, SeqCst);
        self.inner.as_mut().poll(cx)
    }
}

/// Requests one at a time on one connection, each answered at once: the
/// connection's task is polled about once per request (twice before
/// decision 168: the queued response woke the task again).
#[test]
fn an_answer_at_once_costs_one_poll_of_the_connection() {
    const REQUESTS: usize = 40;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let polls = Arc::new(AtomicUsize::new(0));
    let counted = polls.clone();
    let (before, after) = runtime.block_on(async move {
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        let shutdown = Shutdown::new();
        let server = tokio::spawn(Counted {
            inner: Box::pin(serve_connection(
                server_io,
                Hello,
                Arc::new(ConnConfig::default()),
                shutdown.watch(),
            )),
            polls: counted,
        });
        let (mut client, conn) = h2::client::handshake(client_io).await.unwrap();
        let client_conn = tokio::spawn(conn);
        let one = async |client: &mut h2::client::SendRequest<Bytes>| {
            let req = Request::get("http://celer.test/").body(()).unwrap();
            let (response, _) = client.send_request(req, true).unwrap();
            let mut body = response.await.unwrap().into_body();
            let mut got = Vec::new();
            while let Some(chunk) = body.data().await {
                got.extend_from_slice(&chunk.unwrap());
            }
            assert_eq!(got, b"hi");
        };
        // The first request settles the connection (settings, windows).
        one(&mut client).await;
        let before = polls.load(SeqCst);
        for _ in 0..REQUESTS {
            client = client.ready().await.unwrap();
            one(&mut client).await;
        }
        let after = polls.load(SeqCst);
        drop(client);
        client_conn.abort();
        shutdown.trigger();
        let _ = server.await;
        (before, after)
    });
    let per_request = (after - before) as f64 / REQUESTS as f64;
    assert!(
        per_request < 1.5,
        "{per_request} polls of the connection's task per request"
    );
}

/// A client that grants no flow-control window and leaves its request body
/// open: the answer's HEADERS go out, its DATA waits in the engine, and
/// the request side is declined. Shutdown then sends GOAWAY, and the write
/// timeout ends the connection with those frames unsent. The connection
/// ends (time paused) and its task does not panic (the teardown that
/// failed a debug assertion of the `h2` crate's, decision 173).
#[test]
fn a_connection_dropped_with_frames_held_by_a_shut_window_ends_cleanly() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async move {
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        let shutdown = Shutdown::new();
        let config = Arc::new(ConnConfig::default());
        let write_timeout = config.limits.write_timeout;
        let server = tokio::spawn(serve_connection(server_io, Hello, config, shutdown.watch()));
        let (mut client, conn) = h2::client::Builder::new()
            .initial_window_size(0)
            .handshake::<_, Bytes>(client_io)
            .await
            .unwrap();
        let client_conn = tokio::spawn(conn);
        client = client.ready().await.unwrap();
        let req = Request::post("http://celer.test/").body(()).unwrap();
        let (response, _body_left_open) = client.send_request(req, false).unwrap();
        let response = response.await.unwrap();
        assert_eq!(response.status(), 200);
        shutdown.trigger();
        let ended = tokio::time::timeout(write_timeout * 4, server).await;
        let joined = ended.expect("the connection ended after its write timeout");
        assert!(joined.is_ok(), "the connection's task panicked: {joined:?}");
        client_conn.abort();
    });
}
