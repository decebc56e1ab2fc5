//! The request loop: the connection's size, idle waits, streaming bodies.

use super::*;
use crate::common::hello::Hello;
use std::task::Poll;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Every idle connection holds its whole task state; keep it small so
/// 10,000 idle connections cost little (buffers are pooled, not held).
#[tokio::test]
async fn connection_state_stays_small() {
    let (io, _peer) = tokio::io::duplex(64);
    let service = Hello;
    let fut = serve_connection(
        io,
        service,
        Arc::new(ConnConfig::default()),
        &Shutdown::new(),
    );
    let size = std::mem::size_of_val(&fut);
    // With a TCP stream (32 bytes more than this duplex stream) and the
    // connection-limit permit beside it, the spawned future must stay
    // under ~408 bytes for tokio's task cell to fit the 512-byte size
    // class (docs/decisions/004): at most 376 here.
    assert!(size <= 376, "connection future is {size} bytes");
}

/// A transport that keeps the trait's default readiness (answered at
/// once) must not make an idle keep-alive connection spin: found by the
/// `connection` fuzz target, where the spinning task starved the client
/// on the same thread. Client and server share one current-thread
/// runtime here, so a spin hangs the runtime and the watchdog reports it.
#[test]
fn an_idle_connection_on_an_always_ready_transport_waits() {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let answers = runtime.block_on(async {
            let (mut client, server) = tokio::io::duplex(1024);
            let shutdown = Shutdown::new();
            let config = Arc::new(ConnConfig::default());
            tokio::spawn(serve_connection(server, Hello, config, &shutdown));
            let mut answers = Vec::new();
            for _ in 0..3 {
                client
                    .write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
                    .await
                    .unwrap();
                let mut buf = vec![0; 1024];
                let n = client.read(&mut buf).await.unwrap();
                answers.push(String::from_utf8_lossy(&buf[..n]).into_owned());
                // The server is idle now; let it run before the next request.
                for _ in 0..10 {
                    tokio::task::yield_now().await;
                }
            }
            answers
        });
        let _ = done.send(answers);
    });
    let answers = finished
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the connection spun instead of waiting for the client");
    assert_eq!(answers.len(), 3);
    for answer in answers {
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert!(answer.ends_with("\r\n\r\nhi"), "{answer}");
    }
}

/// A response body fed by a channel: the frames a test sends, then its
/// end when the sender is dropped; empty without a channel. `pad` makes
/// the body as large as a test needs it to be.
struct Chan<const PAD: usize> {
    rx: Option<tokio::sync::mpsc::Receiver<Bytes>>,
    pad: [u8; PAD],
}

impl<const PAD: usize> Body for Chan<PAD> {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        std::hint::black_box(&self.pad);
        let Some(rx) = self.rx.as_mut() else {
            return Poll::Ready(None);
        };
        match rx.poll_recv(cx) {
            Poll::Ready(Some(data)) => Poll::Ready(Some(Ok(http_body::Frame::data(data)))),
            Poll::Ready(None) => {
                self.rx = None;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.rx.is_none()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self.rx {
            Some(_) => http_body::SizeHint::default(),
            None => http_body::SizeHint::with_exact(0),
        }
    }
}

/// Answers its first request with the stream of `rx`, later ones with an
/// empty body.
struct Streams {
    rx: Option<tokio::sync::mpsc::Receiver<Bytes>>,
}

impl Service<Request<Incoming>> for Streams {
    type Response = Response<Chan<0>>;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<Incoming>) -> Self::Future {
        let body = Chan {
            rx: self.rx.take(),
            pad: [],
        };
        std::future::ready(Ok(Response::new(body)))
    }
}

/// Reads from `client` until `buf` ends with `end`.
async fn read_until_end(client: &mut tokio::net::TcpStream, buf: &mut Vec<u8>, end: &[u8]) {
    while !buf.ends_with(end) {
        let mut chunk = [0; 1024];
        let n = client.read(&mut chunk).await.unwrap();
        assert!(
            n > 0,
            "the connection ended: {}",
            String::from_utf8_lossy(buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A response body that waits for its next frame (server-sent events, a
/// long poll) may wait for minutes: once its output is written, the
/// connection gives both its buffers back to the thread's pool and holds
/// none while it waits, as an idle keep-alive connection does not. The
/// connection runs on this thread (a current-thread runtime), so the
/// thread's pool is the one it uses.
#[tokio::test]
async fn a_streaming_response_holds_no_buffer_while_its_body_waits() {
    while bufio::pooled() > 0 {
        drop(bufio::take_buf());
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server, _) = listener.accept().await.unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let shutdown = Shutdown::new();
    let conn = tokio::spawn(serve_connection(
        server,
        Streams { rx: Some(rx) },
        Arc::new(ConnConfig::default()),
        &shutdown,
    ));
    tx.send(Bytes::from_static(b"data: 1\n\n")).await.unwrap();
    client
        .write_all(b"GET /events HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    read_until_end(&mut client, &mut got, b"9\r\ndata: 1\n\n\r\n").await;
    let got = String::from_utf8(got).unwrap();
    assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{got}");
    assert!(got.contains("\r\ntransfer-encoding: chunked\r\n"), "{got}");
    // The bytes were written before the body was polled again and found
    // waiting: by now the buffers are back.
    assert_eq!(bufio::pooled(), 2, "the waiting stream holds a buffer");

    // The next frame takes a buffer and gives it back once written.
    tx.send(Bytes::from_static(b"data: 2\n\n")).await.unwrap();
    let mut got = Vec::new();
    read_until_end(&mut client, &mut got, b"9\r\ndata: 2\n\n\r\n").await;
    assert_eq!(got, b"9\r\ndata: 2\n\n\r\n");
    assert_eq!(bufio::pooled(), 2, "the waiting stream holds a buffer");

    // The end of the stream ends the response; the connection goes on.
    drop(tx);
    let mut got = Vec::new();
    read_until_end(&mut client, &mut got, b"0\r\n\r\n").await;
    assert_eq!(got, b"0\r\n\r\n");
    client
        .write_all(b"GET /again HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    read_until_end(&mut client, &mut got, b"\r\n\r\n").await;
    let got = String::from_utf8(got).unwrap();
    assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{got}");
    assert!(got.contains("\r\ncontent-length: 0\r\n"), "{got}");
    drop(client);
    conn.await.unwrap();
}

/// A service whose future is `PAD` bytes and whose body is `PAD` bytes.
struct Padded<const PAD: usize>;

/// A future of at least `PAD` bytes that answers at once.
struct PaddedFuture<const PAD: usize> {
    pad: [u8; PAD],
}

impl<const PAD: usize> Future for PaddedFuture<PAD> {
    type Output = Result<Response<Chan<PAD>>, std::convert::Infallible>;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        std::hint::black_box(&self.pad);
        Poll::Ready(Ok(Response::new(Chan {
            rx: None,
            pad: [0; PAD],
        })))
    }
}

impl<const PAD: usize> Service<Request<Incoming>> for Padded<PAD> {
    type Response = Response<Chan<PAD>>;
    type Error = std::convert::Infallible;
    type Future = PaddedFuture<PAD>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<Incoming>) -> Self::Future {
        PaddedFuture { pad: [0; PAD] }
    }
}

/// The state of a request in flight (the boxed future of `Conn::next`)
/// is what a streaming response holds for as long as it streams. The
/// service's future and the response body are never alive together there,
/// and the body is held once: with a 4 KiB service future and a 4 KiB
/// body, the state is about 4 KiB, not the 12 to 16 KiB of holding the
/// future while the body streams and the body twice.
#[tokio::test]
async fn a_request_in_flight_holds_the_service_future_or_the_body_not_both() {
    const PAD: usize = 4096;
    let (io, _peer) = tokio::io::duplex(64);
    let mut conn = Conn {
        io,
        rbuf: BytesMut::new(),
        wbuf: WriteBuf::default(),
        config: Arc::new(ConnConfig::default()),
        shutdown: Shutdown::new().watch(),
        timer: crate::common::Deadline::new(Instant::now()),
        write_timer: None,
        served: 0,
        switch: Http1Only,
    };
    let mut service = Padded::<PAD>;
    let size = std::mem::size_of_val(&conn.next(&mut service));
    // The rest of the state (the request, the body feed, the framing,
    // the write loop's locals) is well under 1 KiB.
    assert!(
        size < PAD + 1024,
        "a request in flight is {size} bytes with a {PAD}-byte future and body"
    );
    // And without padding, a streaming body's whole request state: the
    // figure that a connection streaming server-sent events holds.
    let small = std::mem::size_of_val(&conn.next(&mut Streams { rx: None }));
    assert!(small < 1024, "a request in flight is {small} bytes");
}
