//! Server-sent events over real sockets: HTTP/1.1 (raw bytes, chunk by
//! chunk) and HTTP/2 by prior knowledge (the `h2` crate's client), through
//! the compression middleware, at the hub's limits, and across a graceful
//! shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use celer::middleware::compression::Compression;
use celer::sse::{Event, EventStream, Hub};
use celer::{App, Request};
use celer_test_support::bounded;
use futures_util::stream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::wire::Served;

/// An app with a hub at `/events` and `hub` returned for publishing.
fn hub_app(hub: &Hub) -> App {
    let mut app = App::new();
    app.state(hub.clone());
    app.get("/events", |req: Request| async move {
        req.state::<Hub>().unwrap().subscribe(&req)
    });
    app
}

// ---- an HTTP/1.1 event-stream reader ----

/// One HTTP/1.1 response read chunk by chunk.
pub(crate) struct H1Stream {
    conn: TcpStream,
    buf: Vec<u8>,
    /// Status line and header lines, lowercased names.
    status: u16,
    headers: Vec<(String, String)>,
    /// Decoded body bytes not yet returned as events.
    text: String,
}

impl H1Stream {
    pub(crate) async fn open(addr: SocketAddr, path: &str, extra: &str) -> H1Stream {
        let mut conn = bounded(TcpStream::connect(addr)).await.unwrap();
        let req =
            format!("GET {path} HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n{extra}\r\n");
        conn.write_all(req.as_bytes()).await.unwrap();
        let mut stream = H1Stream {
            conn,
            buf: Vec::new(),
            status: 0,
            headers: Vec::new(),
            text: String::new(),
        };
        let end = loop {
            if let Some(at) = stream.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break at;
            }
            assert!(stream.read().await > 0, "closed before the head");
        };
        let head = String::from_utf8(stream.buf.drain(..end + 4).collect()).unwrap();
        let mut lines = head.split("\r\n");
        stream.status = lines.next().unwrap()[9..12].parse().unwrap();
        stream.headers = lines
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (k, v) = l.split_once(':').unwrap();
                (k.to_ascii_lowercase(), v.trim().to_owned())
            })
            .collect();
        stream
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    async fn read(&mut self) -> usize {
        let mut chunk = [0u8; 64 * 1024];
        let n = bounded(self.conn.read(&mut chunk)).await.unwrap_or(0);
        self.buf.extend_from_slice(&chunk[..n]);
        n
    }

    /// The next chunk's data; `None` at the last chunk (the body's clean
    /// end).
    pub(crate) async fn chunk(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(line_end) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let size = std::str::from_utf8(&self.buf[..line_end]).unwrap();
                let size = usize::from_str_radix(size, 16).expect("chunk size");
                if self.buf.len() >= line_end + 2 + size + 2 {
                    let data = self.buf[line_end + 2..line_end + 2 + size].to_vec();
                    assert_eq!(&self.buf[line_end + 2 + size..line_end + 4 + size], b"\r\n");
                    self.buf.drain(..line_end + 4 + size);
                    return (size > 0).then_some(data);
                }
            }
            assert!(
                self.read().await > 0,
                "closed inside a chunk: {:?}",
                String::from_utf8_lossy(&self.buf)
            );
        }
    }

    /// The next event (or comment) as sent, up to its blank line; `None`
    /// when the body ended, which must be at an event boundary.
    async fn event(&mut self) -> Option<String> {
        loop {
            if let Some(at) = self.text.find("\n\n") {
                return Some(self.text.drain(..at + 2).collect());
            }
            match self.chunk().await {
                Some(data) => self.text.push_str(std::str::from_utf8(&data).unwrap()),
                None => {
                    assert_eq!(self.text, "", "the body ended inside an event");
                    return None;
                }
            }
        }
    }

    /// The next event that is not a heartbeat.
    async fn data_event(&mut self) -> Option<String> {
        loop {
            let event = self.event().await?;
            if event != ":\n\n" {
                return Some(event);
            }
        }
    }

    async fn is_closed(&mut self) -> bool {
        self.buf.is_empty() && self.read().await == 0
    }
}

fn event(id: &str, data: &str) -> Event {
    Event::new().id(id).data(data)
}

// ---- HTTP/1.1 ----

#[tokio::test]
async fn events_arrive_one_by_one_over_http1() {
    let hub = Hub::new();
    let served = Served::start(hub_app(&hub)).await;
    let mut stream = H1Stream::open(served.addr, "/events", "").await;
    assert_eq!(stream.status, 200);
    assert_eq!(stream.header("content-type"), Some("text/event-stream"));
    assert_eq!(stream.header("cache-control"), Some("no-cache"));
    assert_eq!(stream.header("transfer-encoding"), Some("chunked"));
    assert_eq!(stream.header("content-length"), None);
    wait_for_subscribers(&hub, 1).await;
    // Each event is read before the next is published: nothing waits for
    // more output to fill a buffer.
    for n in 1..=3 {
        hub.publish(event(&n.to_string(), &format!("line {n}\nsecond")))
            .unwrap();
        let got = stream.data_event().await.unwrap();
        assert_eq!(got, format!("id: {n}\ndata: line {n}\ndata: second\n\n"));
    }
    drop(stream);
    served.stop().await;
}

#[tokio::test]
async fn last_event_id_resumes_from_the_history() {
    let hub = Hub::builder().history(2).build();
    let served = Served::start(hub_app(&hub)).await;
    for n in 1..=3 {
        hub.publish(event(&n.to_string(), "x")).unwrap();
    }
    let mut stream = H1Stream::open(served.addr, "/events", "Last-Event-ID: 2\r\n").await;
    assert_eq!(stream.data_event().await.unwrap(), "id: 3\ndata: x\n\n");
    // Too old: everything the history holds.
    let mut stream = H1Stream::open(served.addr, "/events", "Last-Event-ID: 1\r\n").await;
    assert_eq!(stream.data_event().await.unwrap(), "id: 2\ndata: x\n\n");
    assert_eq!(stream.data_event().await.unwrap(), "id: 3\ndata: x\n\n");
    served.stop().await;
}

#[tokio::test]
async fn event_streams_pass_the_compression_middleware_untouched() {
    let hub = Hub::new();
    let mut app = hub_app(&hub);
    app.middleware(Compression::new());
    app.get("/page", |_req: Request| async {
        "compressible ".repeat(200)
    });
    let served = Served::start(app).await;
    let encodings = "Accept-Encoding: gzip, br, zstd\r\n";
    let mut stream = H1Stream::open(served.addr, "/events", encodings).await;
    assert_eq!(stream.header("content-encoding"), None);
    assert_eq!(stream.header("vary"), None);
    wait_for_subscribers(&hub, 1).await;
    for n in 1..=2 {
        let data = "compressible ".repeat(200);
        hub.publish(event(&n.to_string(), &data)).unwrap();
        let got = stream.data_event().await.unwrap();
        assert_eq!(got, format!("id: {n}\ndata: {data}\n\n"));
    }
    // The middleware is on: other responses are compressed.
    let page = served
        .one(
            "GET /page HTTP/1.1\nHost: t\nConnection: close\nAccept-Encoding: gzip, br, zstd\n\n",
            b"",
        )
        .await;
    assert_eq!(page.header("content-encoding"), Some("zstd"));
    drop(stream);
    served.stop().await;
}

#[tokio::test]
async fn subscribers_over_the_limit_get_503_with_retry_after() {
    let hub = Hub::builder().max_subscribers(1).build();
    let mut app = App::new();
    app.state(hub.clone());
    // A client that left is noticed at the next write: a short heartbeat
    // makes that soon.
    app.get("/events", |req: Request| async move {
        let hub = req.state::<Hub>().unwrap();
        hub.subscribe(&req)
            .map(|stream| stream.heartbeat(Duration::from_millis(20)))
    });
    let served = Served::start(app).await;
    let first = H1Stream::open(served.addr, "/events", "").await;
    assert_eq!(first.status, 200);
    let refused = served
        .one("GET /events HTTP/1.1\nHost: t\nConnection: close\n\n", b"")
        .await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("retry-after"), Some("5"));
    assert_eq!(hub.stats().refused, 1);
    // The client leaves: its place is free again.
    drop(first);
    wait_for_subscribers(&hub, 0).await;
    let again = H1Stream::open(served.addr, "/events", "").await;
    assert_eq!(again.status, 200);
    drop(again);
    served.stop().await;
}

#[tokio::test]
async fn a_closed_hub_answers_204_to_a_client_that_has_everything() {
    let hub = Hub::new();
    let served = Served::start(hub_app(&hub)).await;
    let mut stream = H1Stream::open(served.addr, "/events", "").await;
    wait_for_subscribers(&hub, 1).await;
    hub.publish(event("last", "done")).unwrap();
    hub.close();
    assert_eq!(
        stream.data_event().await.unwrap(),
        "id: last\ndata: done\n\n"
    );
    assert_eq!(stream.event().await, None, "the stream ends cleanly");
    let again = served
        .one(
            "GET /events HTTP/1.1\nHost: t\nLast-Event-ID: last\nConnection: close\n\n",
            b"",
        )
        .await;
    assert_eq!(again.status, 204);
    served.stop().await;
}

#[tokio::test]
async fn a_reader_that_stops_reading_is_dropped_and_memory_stays_bounded() {
    let limit = 256 * 1024;
    let hub = Hub::builder()
        .history(4)
        .buffer(8)
        .buffer_bytes(limit)
        .max_event_bytes(64 * 1024)
        .build();
    let served = Served::start(hub_app(&hub)).await;
    let mut slow = H1Stream::open(served.addr, "/events", "").await;
    wait_for_subscribers(&hub, 1).await;
    // The client reads nothing while events of 32 KiB go out: the socket
    // buffers fill, the stream stops being read, and falls behind.
    let data = "x".repeat(32 * 1024);
    let mut published = 0;
    while hub.stats().dropped == 0 {
        hub.publish(Event::new().data(data.clone())).unwrap();
        published += 1;
        assert!(hub.stats().buffered_bytes <= limit);
        assert!(published < 100_000, "never dropped");
        if published % 8 == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    assert_eq!(hub.stats().subscribers, 0);
    // What did arrive is whole events, and then the end of the body.
    let mut received = 0;
    while let Some(event) = slow.event().await {
        assert!(event.ends_with(&format!("data: {data}\n\n")), "{event:.40}");
        received += 1;
    }
    assert!(received < published, "{received} of {published}");
    served.stop().await;
}

#[tokio::test]
async fn heartbeats_keep_an_idle_stream_talking() {
    let mut app = App::new();
    app.get("/quiet", |req: Request| async move {
        EventStream::new(&req, stream::pending()).heartbeat(Duration::from_millis(20))
    });
    let served = Served::start(app).await;
    let mut stream = H1Stream::open(served.addr, "/quiet", "").await;
    for _ in 0..3 {
        assert_eq!(stream.event().await.unwrap(), ":\n\n");
    }
    drop(stream);
    served.stop().await;
}

#[tokio::test]
async fn invalid_events_in_a_stream_are_skipped() {
    let mut app = App::new();
    app.get("/mixed", |req: Request| async move {
        let events = vec![
            Event::new().data("before"),
            Event::new().id("1\ndata: injected").data("bad id"),
            Event::new().event("a\rb").data("bad type"),
            Event::new(),
            Event::new().data("after"),
        ];
        EventStream::new(&req, stream::iter(events)).retry(Duration::from_millis(2500))
    });
    let served = Served::start(app).await;
    let mut stream = H1Stream::open(served.addr, "/mixed", "").await;
    assert_eq!(stream.event().await.unwrap(), "retry: 2500\n\n");
    assert_eq!(stream.event().await.unwrap(), "data: before\n\n");
    assert_eq!(stream.event().await.unwrap(), "data: after\n\n");
    assert_eq!(stream.event().await, None);
    served.stop().await;
}

#[tokio::test]
async fn head_of_an_event_stream_sends_no_body_and_holds_no_subscriber() {
    let hub = Hub::new();
    let served = Served::start(hub_app(&hub)).await;
    let res = served
        .one("HEAD /events HTTP/1.1\nHost: t\nConnection: close\n\n", b"")
        .await;
    assert_eq!(res.status, 200);
    assert_eq!(res.header("content-type"), Some("text/event-stream"));
    wait_for_subscribers(&hub, 0).await;
    served.stop().await;
}

// ---- graceful shutdown ----

#[tokio::test]
async fn shutdown_ends_streams_after_a_whole_event_over_http1() {
    let hub = Hub::new();
    let served = Served::start(hub_app(&hub)).await;
    let mut streams = Vec::new();
    for _ in 0..3 {
        streams.push(H1Stream::open(served.addr, "/events", "").await);
    }
    wait_for_subscribers(&hub, 3).await;
    // Events keep coming while the server shuts down.
    let publishing = Arc::new(AtomicBool::new(true));
    let publisher = tokio::spawn({
        let (hub, publishing) = (hub.clone(), publishing.clone());
        async move {
            let mut n = 0u64;
            while publishing.load(Ordering::Relaxed) {
                n += 1;
                let _ = hub.publish(Event::new().data(format!("{n}\n{}", "y".repeat(3000))));
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    });
    for stream in &mut streams {
        assert!(stream.data_event().await.is_some());
    }
    let stopping = tokio::spawn(served.stop());
    for mut stream in streams {
        // Whole events, then the last chunk, then the connection closes.
        while let Some(event) = stream.event().await {
            assert!(event.ends_with(&format!("{}\n\n", "y".repeat(3000))));
        }
        assert!(stream.is_closed().await);
    }
    bounded(stopping).await.unwrap();
    publishing.store(false, Ordering::Relaxed);
    publisher.await.unwrap();
}

#[tokio::test]
async fn shutdown_ends_streams_over_http2_and_the_server_exits() {
    let hub = Hub::new();
    let served = Served::start(hub_app(&hub)).await;
    let (client, conn) = h2_connect(served.addr).await;
    let mut bodies = Vec::new();
    for _ in 0..2 {
        let (status, headers, body) = h2_get(&client, "/events").await;
        assert_eq!(status, 200);
        assert_eq!(headers["content-type"], "text/event-stream");
        bodies.push(body);
    }
    wait_for_subscribers(&hub, 2).await;
    hub.publish(event("1", "before")).unwrap();
    for body in &mut bodies {
        assert_eq!(h2_event(body).await.unwrap(), "id: 1\ndata: before\n\n");
    }
    let stopping = tokio::spawn(served.stop());
    for body in &mut bodies {
        // The stream ends with END_STREAM, not a reset.
        assert_eq!(h2_event(body).await, None);
    }
    bounded(stopping).await.unwrap();
    drop(client);
    let _ = bounded(conn).await;
}

// ---- HTTP/2 ----

#[tokio::test]
async fn events_arrive_one_by_one_over_http2() {
    let hub = Hub::new();
    let mut app = hub_app(&hub);
    app.middleware(Compression::new());
    let served = Served::start(app).await;
    let (client, conn) = h2_connect(served.addr).await;
    let (status, headers, mut body) = h2_get(&client, "/events").await;
    assert_eq!(status, 200);
    assert_eq!(headers["cache-control"], "no-cache");
    assert!(headers.get("content-length").is_none());
    assert!(headers.get("content-encoding").is_none());
    wait_for_subscribers(&hub, 1).await;
    for n in 1..=3 {
        hub.publish(event(&n.to_string(), "over h2")).unwrap();
        assert_eq!(
            h2_event(&mut body).await.unwrap(),
            format!("id: {n}\ndata: over h2\n\n")
        );
    }
    // A second stream on the same connection resumes.
    let (_, _, mut resumed) = h2_get_with(&client, "/events", Some("2")).await;
    assert_eq!(
        h2_event(&mut resumed).await.unwrap(),
        "id: 3\ndata: over h2\n\n"
    );
    drop((body, resumed, client));
    let _ = bounded(conn).await;
    served.stop().await;
}

type H2Conn = tokio::task::JoinHandle<Result<(), h2::Error>>;

async fn h2_connect(addr: SocketAddr) -> (h2::client::SendRequest<Bytes>, H2Conn) {
    let tcp = bounded(TcpStream::connect(addr)).await.unwrap();
    let (client, conn) = bounded(h2::client::handshake(tcp)).await.unwrap();
    (client, tokio::spawn(conn))
}

async fn h2_get(
    client: &h2::client::SendRequest<Bytes>,
    path: &str,
) -> (u16, http::HeaderMap, H2Body) {
    h2_get_with(client, path, None).await
}

async fn h2_get_with(
    client: &h2::client::SendRequest<Bytes>,
    path: &str,
    last_event_id: Option<&str>,
) -> (u16, http::HeaderMap, H2Body) {
    let mut req = http::Request::get(format!("http://celer.test{path}"));
    if let Some(id) = last_event_id {
        req = req.header("last-event-id", id);
    }
    let mut client = bounded(client.clone().ready()).await.unwrap();
    let (response, _) = client.send_request(req.body(()).unwrap(), true).unwrap();
    let response = bounded(response).await.unwrap();
    let (parts, body) = response.into_parts();
    (
        parts.status.as_u16(),
        parts.headers,
        H2Body {
            body,
            text: String::new(),
        },
    )
}

struct H2Body {
    body: h2::RecvStream,
    text: String,
}

/// The next event (heartbeats skipped); `None` at the stream's clean end.
async fn h2_event(body: &mut H2Body) -> Option<String> {
    loop {
        if let Some(at) = body.text.find("\n\n") {
            let event: String = body.text.drain(..at + 2).collect();
            if event == ":\n\n" {
                continue;
            }
            return Some(event);
        }
        match bounded(body.body.data()).await {
            Some(data) => {
                let data = data.expect("stream data, not a reset");
                let _ = body.body.flow_control().release_capacity(data.len());
                body.text.push_str(std::str::from_utf8(&data).unwrap());
            }
            None => {
                assert_eq!(body.text, "", "the stream ended inside an event");
                return None;
            }
        }
    }
}

/// Waits until the hub has `n` subscribers (a request is subscribed once
/// the server has run its handler, after the client has sent it).
async fn wait_for_subscribers(hub: &Hub, n: usize) {
    bounded(async {
        while hub.stats().subscribers != n {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn the_shutdown_notice_reaches_handlers_and_mounted_apps() {
    let mut sub = App::new();
    let sub_notice = sub.shutdown_notice();
    sub.get("/wait", |req: Request| async move {
        req.shutdown_notice().started().await;
        "bye"
    });
    let mut app = App::new();
    app.mount("/sub", sub);
    let notice = app.shutdown_notice();
    let served = Served::start(app).await;
    let mut conn = celer_test_support::Raw::connect(served.addr).await;
    conn.send(b"GET /sub/wait HTTP/1.1\r\nHost: t\r\n\r\n")
        .await;
    // The handler is waiting; nothing has fired.
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!notice.is_started() && !sub_notice.is_started());
    let stopping = tokio::spawn(served.stop());
    let res = conn.response().await;
    assert_eq!(res.text(), "bye");
    assert!(notice.is_started());
    // The mounted app's own notice, held by its code, fires too.
    bounded(sub_notice.started()).await;
    bounded(stopping).await.unwrap();
}

#[tokio::test]
async fn curl_reads_a_hub_stream_over_http2_and_http1() {
    for (http2, gzip) in [(true, false), (false, false), (true, true), (false, true)] {
        let hub = Hub::builder().gzip(gzip).build();
        let mut app = hub_app(&hub);
        app.middleware(Compression::new());
        let served = Served::start(app).await;
        let url = served.url("/events");
        let version = if http2 {
            "--http2-prior-knowledge"
        } else {
            "--http1.1"
        };
        let reading = tokio::spawn({
            let version = version.to_owned();
            async move {
                crate::wire::curl(&[
                    &version,
                    "-N",
                    "--compressed",
                    "-D",
                    "-",
                    "-w",
                    "version %{http_version}\n",
                    &url,
                ])
                .await
            }
        });
        wait_for_subscribers(&hub, 1).await;
        for n in 1..=3 {
            hub.publish(event(&n.to_string(), "via curl")).unwrap();
        }
        // A closed hub ends the stream once it is read; curl then exits.
        hub.close();
        let out = bounded(reading).await.unwrap();
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        let head = head.to_ascii_lowercase();
        assert!(head.contains("content-type: text/event-stream"), "{head}");
        // curl's --compressed offers gzip: a gzip hub codes the stream
        // (and the compression middleware leaves it alone either way).
        assert_eq!(head.contains("content-encoding: gzip"), gzip, "{head}");
        assert_eq!(head.contains("vary: accept-encoding"), gzip, "{head}");
        let expected_version = if http2 { "2" } else { "1.1" };
        assert_eq!(
            body,
            format!(
                "id: 1\ndata: via curl\n\nid: 2\ndata: via curl\n\nid: 3\ndata: via curl\n\n\
                 version {expected_version}\n"
            )
        );
        served.stop().await;
    }
}

// ---- gzip-coded streams ----

/// A gzip-coded stream read as a browser does: the header, then each event
/// inflated as soon as its bytes arrive.
pub(crate) struct Inflating {
    inflate: flate2::Decompress,
    /// Every coded byte, for the whole-member check at the end.
    pub(crate) coded: Vec<u8>,
}

impl Inflating {
    pub(crate) fn new() -> Inflating {
        Inflating {
            inflate: flate2::Decompress::new(false),
            coded: Vec::new(),
        }
    }

    /// Inflates the chunk's bytes (after the 10-byte header) and returns
    /// the text they make.
    pub(crate) fn take(&mut self, chunk: &[u8]) -> String {
        let skip = 10usize.saturating_sub(self.coded.len()).min(chunk.len());
        self.coded.extend_from_slice(chunk);
        let mut out = Vec::with_capacity(64 * 1024);
        let mut input = &chunk[skip..];
        while !input.is_empty() {
            let before = self.inflate.total_in();
            self.inflate
                .decompress_vec(input, &mut out, flate2::FlushDecompress::Sync)
                .expect("valid deflate");
            let used = (self.inflate.total_in() - before) as usize;
            input = &input[used..];
            if used == 0 {
                // The last block: what follows is the trailer.
                break;
            }
            out.reserve(64 * 1024);
        }
        String::from_utf8(out).unwrap()
    }

    /// Every coded byte decoded as one gzip member; the decoder checks the
    /// trailer's CRC-32 and length.
    fn whole(&self) -> String {
        let mut whole = String::new();
        std::io::Read::read_to_string(
            &mut flate2::read::GzDecoder::new(&self.coded[..]),
            &mut whole,
        )
        .expect("a valid gzip member");
        whole
    }
}

#[tokio::test]
async fn a_gzip_hub_codes_each_event_once_and_a_client_reads_it_on_arrival() {
    let hub = Hub::builder()
        .gzip(true)
        .history(8)
        .gap_event(Event::new().event("gap").data(""))
        .build();
    let served = Served::start(hub_app(&hub)).await;

    let mut coded = H1Stream::open(served.addr, "/events", "Accept-Encoding: gzip, br\r\n").await;
    assert_eq!(coded.status, 200);
    assert_eq!(coded.header("content-encoding"), Some("gzip"));
    assert_eq!(coded.header("vary"), Some("accept-encoding"));
    // A client that does not offer gzip (or refuses it) gets the text, and
    // the answer says it varies.
    let mut plain = H1Stream::open(served.addr, "/events", "").await;
    let mut refused = H1Stream::open(
        served.addr,
        "/events",
        "Accept-Encoding: gzip;q=0, identity\r\n",
    )
    .await;
    for stream in [&plain, &refused] {
        assert_eq!(stream.header("content-encoding"), None);
        assert_eq!(stream.header("vary"), Some("accept-encoding"));
    }
    wait_for_subscribers(&hub, 3).await;

    // Each event decodes as soon as it arrives: the stream stays open.
    let mut reader = Inflating::new();
    let big = "{\"row\":12345,\"name\":\"a long enough value\"} ".repeat(400);
    let mut sent = Vec::new();
    for n in 1..=3 {
        let data = if n == 2 {
            big.clone()
        } else {
            format!("event {n}")
        };
        hub.publish(event(&n.to_string(), &data)).unwrap();
        let wire = format!("id: {n}\ndata: {data}\n\n");
        let mut text = String::new();
        while text.len() < wire.len() {
            text.push_str(&reader.take(&coded.chunk().await.unwrap()));
        }
        assert_eq!(text, wire);
        assert_eq!(plain.data_event().await.unwrap(), wire);
        assert_eq!(refused.data_event().await.unwrap(), wire);
        sent.push(wire);
    }
    // The large event went out compressed.
    assert!(
        reader.coded.len() < big.len() / 4,
        "{} coded bytes",
        reader.coded.len()
    );

    // A reconnect with an unknown id gets the gap event, then the history,
    // coded the same way.
    let mut resumed = H1Stream::open(
        served.addr,
        "/events",
        "Accept-Encoding: gzip\r\nLast-Event-ID: unknown\r\n",
    )
    .await;
    let mut again = Inflating::new();
    let want = format!("event: gap\ndata: \n\n{}", sent.concat());
    let mut text = String::new();
    while text.len() < want.len() {
        text.push_str(&again.take(&resumed.chunk().await.unwrap()));
    }
    assert_eq!(text, want);

    // A closed hub ends the streams with the trailer: each whole body is a
    // valid gzip member (the decoder checks its CRC-32 and length).
    hub.close();
    for (stream, reader, want) in [
        (&mut coded, &mut reader, sent.concat()),
        (&mut resumed, &mut again, want.clone()),
    ] {
        while let Some(chunk) = stream.chunk().await {
            reader.coded.extend_from_slice(&chunk);
        }
        assert_eq!(reader.whole(), want);
    }
    assert!(plain.data_event().await.is_none());
    drop((plain, refused));
    served.stop().await;
}

#[tokio::test]
async fn a_gzip_stream_ended_by_shutdown_has_its_trailer_and_heartbeats_are_coded() {
    let hub = Hub::builder().gzip(true).build();
    let mut app = App::new();
    app.state(hub.clone());
    app.get("/events", |req: Request| async move {
        let stream = req.state::<Hub>().unwrap().subscribe(&req)?;
        Ok::<_, celer::sse::SubscribeError>(
            stream
                .heartbeat(Duration::from_millis(50))
                .retry(Duration::from_secs(2)),
        )
    });
    let served = Served::start(app).await;
    let mut stream = H1Stream::open(served.addr, "/events", "Accept-Encoding: gzip\r\n").await;
    assert_eq!(stream.header("content-encoding"), Some("gzip"));
    let mut reader = Inflating::new();
    let mut text = String::new();
    // The retry field, then heartbeats while nothing is published.
    while !text.contains(":\n\n:\n\n") {
        text.push_str(&reader.take(&stream.chunk().await.unwrap()));
    }
    assert!(text.starts_with("retry: 2000\n\n:\n\n"), "{text:?}");
    hub.publish(event("1", "last")).unwrap();
    while !text.ends_with("id: 1\ndata: last\n\n") {
        text.push_str(&reader.take(&stream.chunk().await.unwrap()));
    }
    // Shutdown ends the stream at an event boundary, with the trailer.
    let stopping = tokio::spawn(served.stop());
    while let Some(chunk) = stream.chunk().await {
        reader.coded.extend_from_slice(&chunk);
    }
    let whole = reader.whole();
    // Everything read on arrival, then at most heartbeats before the end.
    let rest = whole.strip_prefix(text.as_str()).expect("the same text");
    assert!(
        rest.split_terminator(":\n\n").all(str::is_empty),
        "{rest:?}"
    );
    bounded(stopping).await.unwrap();
}
