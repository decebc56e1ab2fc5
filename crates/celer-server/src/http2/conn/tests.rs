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
