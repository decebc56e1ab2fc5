//! Live feeds over real sockets: the document's validators, 304s and
//! compressed variants checked with curl (HTTP/1.1 and HTTP/2, clear and
//! TLS), refused updates, a failing source, and the SSE and WebSocket
//! pushes, with a thousand SSE subscribers receiving every version in
//! order.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use celer::App;
use celer::feed::{Feed, Feeds, Updated, from_stream, poll_fn};
use celer::serve::{Listen, Server, Shutdown};
use celer_server::TlsConfig;
use celer_test_support::bounded;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::wire::{Served, curl};

/// A JSON document of about `n` rows, compressible.
fn doc(version: u32, rows: usize) -> String {
    let rows: Vec<String> = (0..rows)
        .map(|i| {
            format!(
                "{{\"candidate\": \"name {i}\", \"votes\": {}}}",
                i as u32 * version
            )
        })
        .collect();
    format!(
        "{{\"version\": {version}, \"rows\": [\n{}\n]}}",
        rows.join(",\n")
    )
}

fn feed_app(feed: &Feed) -> App {
    let mut feeds = Feeds::new();
    feeds.insert(feed.clone()).unwrap();
    let mut app = App::new();
    feeds.mount(&mut app, "/feeds");
    app
}

/// Waits (bounded) until `cond` holds.
async fn eventually(mut cond: impl FnMut() -> bool) {
    bounded(async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

/// The value of header `name` in curl's `-i` output (lowercased names).
fn header<'a>(out: &'a str, name: &str) -> Option<&'a str> {
    out.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_document_has_validators_and_variants_chosen_by_accept_encoding() {
    validators_and_variants(Feed::new("votes")).await;
}

/// The same answers from a feed whose variants the background thread
/// makes (`celer serve`'s feeds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variants_made_in_the_background_are_the_same_answers() {
    let feed = Feed::builder("votes").compress_in_background(true).build();
    validators_and_variants(feed).await;
}

async fn validators_and_variants(feed: Feed) {
    let text = doc(1, 200);
    feed.update(text.clone()).unwrap();
    let served = Served::start(feed_app(&feed)).await;
    let url = served.url("/feeds/votes");
    let version = feed.current().unwrap();

    let plain = curl(&["-i", &url]).await;
    assert!(plain.starts_with("HTTP/1.1 200"), "{plain}");
    assert_eq!(header(&plain, "content-type"), Some("application/json"));
    assert_eq!(header(&plain, "etag"), Some(version.etag()));
    assert_eq!(header(&plain, "cache-control"), Some("max-age=1"));
    assert_eq!(header(&plain, "vary"), Some("accept-encoding"));
    assert_eq!(header(&plain, "content-encoding"), None);
    let modified = header(&plain, "last-modified").unwrap();
    assert!(modified.ends_with(" GMT"), "{modified}");
    assert_eq!(
        header(&plain, "content-length"),
        Some(text.len().to_string().as_str())
    );
    assert!(plain.ends_with(&text));

    for (accept, coding) in [
        ("gzip", "gzip"),
        ("br", "br"),
        ("zstd", "zstd"),
        ("gzip, deflate, br, zstd", "br"),
        ("gzip;q=1, br;q=0.5", "gzip"),
        ("zstd, gzip;q=0.9", "zstd"),
    ] {
        let head = curl(&["-sI", "-H", &format!("accept-encoding: {accept}"), &url]).await;
        assert_eq!(header(&head, "content-encoding"), Some(coding), "{accept}");
        let etag = header(&head, "etag").unwrap();
        assert_eq!(etag, format!("\"{}.{coding}\"", version.id()), "{accept}");
        // curl decodes what it asked for: the same document.
        let decoded = curl(&[
            "--compressed",
            "-H",
            &format!("accept-encoding: {accept}"),
            &url,
        ])
        .await;
        assert_eq!(decoded, text, "{accept}");
    }
    let identity = curl(&["-sI", "-H", "accept-encoding: identity", &url]).await;
    assert_eq!(header(&identity, "content-encoding"), None);
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn if_none_match_gets_304_and_head_gets_the_head_alone() {
    let feed = Feed::new("votes");
    feed.update(doc(1, 50)).unwrap();
    let served = Served::start(feed_app(&feed)).await;
    let url = served.url("/feeds/votes");
    let etag = feed.current().unwrap().etag().to_owned();

    let out = curl(&["-i", "-H", &format!("if-none-match: {etag}"), &url]).await;
    assert!(out.starts_with("HTTP/1.1 304"), "{out}");
    assert_eq!(header(&out, "etag"), Some(etag.as_str()));
    assert_eq!(header(&out, "cache-control"), Some("max-age=1"));
    assert_eq!(header(&out, "vary"), Some("accept-encoding"));
    // RFC 9110 §15.4.5: with an ETag, no other metadata (decision 168).
    assert_eq!(header(&out, "last-modified"), None);
    assert!(out.ends_with("\r\n\r\n"), "a 304 has no body: {out:?}");

    // The gzip variant's tag matches the gzip answer, not the identity.
    let gz = curl(&["-sI", "-H", "accept-encoding: gzip", &url]).await;
    let gz_tag = header(&gz, "etag").unwrap().to_owned();
    let out = curl(&[
        "-i",
        "-H",
        "accept-encoding: gzip",
        "-H",
        &format!("if-none-match: W/\"x\", {gz_tag}"),
        &url,
    ])
    .await;
    assert!(out.starts_with("HTTP/1.1 304"), "{out}");
    assert_eq!(header(&out, "content-encoding"), None);
    let out = curl(&["-i", "-H", &format!("if-none-match: {gz_tag}"), &url]).await;
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");

    // A new version: the old tag no longer matches.
    feed.update(doc(2, 50)).unwrap();
    let out = curl(&["-i", "-H", &format!("if-none-match: {etag}"), &url]).await;
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert_ne!(header(&out, "etag"), Some(etag.as_str()));

    // If-Match with another tag: 412.
    let out = curl(&["-i", "-H", "if-match: \"other\"", &url]).await;
    assert!(out.starts_with("HTTP/1.1 412"), "{out}");

    let head = curl(&["-sI", &url]).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(
        header(&head, "content-length"),
        Some(doc(2, 50).len().to_string().as_str())
    );
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_serving_the_same_bytes_agree_on_the_etag() {
    let (one, two) = (Feed::new("a"), Feed::new("a"));
    two.update(doc(3, 10)).unwrap();
    one.update(doc(9, 10)).unwrap();
    one.update(doc(3, 10)).unwrap();
    let (one, two) = (one.current().unwrap(), two.current().unwrap());
    assert_eq!((one.number(), two.number()), (2, 1));
    assert_eq!(one.etag(), two.etag());
    assert_eq!(one.id(), celer::feed::content_id(doc(3, 10).as_bytes()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_and_tls_serve_the_same_answers() {
    let dir = tempfile::tempdir().unwrap();
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    let tls = TlsConfig::builder()
        .cert_files(&cert, &key)
        .build()
        .unwrap();
    let feed = Feed::new("votes");
    feed.update(doc(1, 100)).unwrap();
    let etag = feed.current().unwrap().etag().to_owned();
    let bound = Server::builder()
        .listen(Listen::parse("tcp://127.0.0.1:0").unwrap())
        .listen_tls(Listen::parse("tcp://127.0.0.1:0").unwrap())
        .tls(tls)
        .http2(true)
        .workers(1)
        .bind()
        .unwrap();
    let specs = bound.local_specs();
    let port = |i: usize| specs[i].rsplit(':').next().unwrap().to_owned();
    let (plain, secure) = (port(0), port(1));
    let shutdown = Shutdown::new();
    let server = tokio::spawn(feed_app(&feed).serve(bound, shutdown.clone()));
    let ca = cert.to_str().unwrap().to_owned();
    let resolve = format!("localhost:{secure}:127.0.0.1");
    let clear = format!("http://127.0.0.1:{plain}/feeds/votes");
    let secure_url = format!("https://localhost:{secure}/feeds/votes");
    let inm = format!("if-none-match: {etag}");
    let cases: [Vec<&str>; 4] = [
        vec!["--http2-prior-knowledge", &clear],
        vec![
            "--http2",
            "--cacert",
            &ca,
            "--resolve",
            &resolve,
            &secure_url,
        ],
        vec![
            "--http1.1",
            "--cacert",
            &ca,
            "--resolve",
            &resolve,
            &secure_url,
        ],
        vec!["--http1.1", &clear],
    ];
    for args in cases {
        let mut full = vec!["-D", "-", "-o", "/dev/null", "-H", "accept-encoding: zstd"];
        full.extend(&args);
        let out = curl(&full).await;
        assert!(out.starts_with("HTTP/"), "{out}");
        assert!(out.split(' ').nth(1) == Some("200"), "{args:?}: {out}");
        assert_eq!(header(&out, "content-encoding"), Some("zstd"), "{args:?}");
        let mut cond = vec!["-i", "-H", &inm];
        cond.extend(&args);
        let out = curl(&cond).await;
        assert!(out.split(' ').nth(1) == Some("304"), "{args:?}: {out}");
    }
    shutdown.trigger();
    bounded(server).await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_updates_keep_the_last_good_version_and_show_in_the_status() {
    let feed = Feed::builder("votes")
        .max_document_bytes(4096)
        .validator(|doc| match doc.get("version") {
            Some(serde_json::Value::Number(_)) => Ok(()),
            _ => Err("\"version\" must be a number".to_owned()),
        })
        .build();
    let served = Served::start(feed_app(&feed)).await;
    let url = served.url("/feeds/votes");

    // Before the first document: 503 with Retry-After.
    let out = curl(&["-i", &url]).await;
    assert!(out.starts_with("HTTP/1.1 503"), "{out}");
    assert_eq!(header(&out, "retry-after"), Some("1"));

    let good = doc(1, 10);
    assert_eq!(feed.update(good.clone()).unwrap(), Updated::New(1));
    assert!(
        feed.update("{\"version\": 2, ")
            .unwrap_err()
            .is_invalid_json()
    );
    assert!(feed.update(&b"\xff\xfe"[..]).unwrap_err().is_invalid_json());
    assert!(feed.update(doc(2, 200)).unwrap_err().is_too_large());
    assert!(
        feed.update("{\"version\": \"two\"}")
            .unwrap_err()
            .is_rejected()
    );
    assert_eq!(feed.update(good.clone()).unwrap(), Updated::Unchanged);
    // The limit itself is accepted; one byte more is not.
    let at_limit = format!("{{\"version\": 3, \"pad\": \"{}\"}}", "x".repeat(4096 - 25));
    assert_eq!(at_limit.len(), 4096);
    assert_eq!(feed.update(at_limit.clone()).unwrap(), Updated::New(2));
    let over = format!("{{\"version\": 3, \"pad\": \"{}\"}}", "x".repeat(4096 - 24));
    assert!(feed.update(over).unwrap_err().is_too_large());
    assert_eq!(curl(&[&url]).await, at_limit);

    let status: serde_json::Value =
        serde_json::from_str(&curl(&[&format!("{url}/status")]).await).unwrap();
    assert_eq!(status["version"], 2);
    assert_eq!(status["rejected_invalid"], 2);
    assert_eq!(status["rejected_too_large"], 2);
    assert_eq!(status["rejected_validator"], 1);
    // The last refusal says why, in the words of `UpdateError`.
    assert_eq!(
        status["last_refusal"],
        "document of 4097 bytes is over the limit of 4096"
    );
    assert!(status["last_refusal_at_ms"].as_u64().unwrap() > 0);
    assert_eq!(status["unchanged"], 1);
    assert_eq!(status["health"], "ok");
    assert_eq!(status["bytes"], 4096);
    assert_eq!(status["id"], feed.current().unwrap().id());
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_source_keeps_the_last_good_version_and_reports_it() {
    let feed = Feed::builder("votes")
        .interval(Duration::from_millis(20))
        .build();
    let calls = Arc::new(AtomicU64::new(0));
    let counter = calls.clone();
    let task = feed.spawn(poll_fn("a flaky upstream", move || {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        async move {
            match n {
                0 => Ok(doc(1, 5)),
                1 => Ok("not json".to_owned()),
                _ => Err(format!("upstream timed out (call {n})")),
            }
        }
    }));
    eventually(|| calls.load(Ordering::SeqCst) >= 5).await;
    task.abort();
    // One outage, however many failed calls (and reasons) it had.
    assert_eq!(feed.status().source_failures, 1);
    let served = Served::start(feed_app(&feed)).await;
    let url = served.url("/feeds/votes");
    assert_eq!(curl(&[&url]).await, doc(1, 5));
    let status: serde_json::Value =
        serde_json::from_str(&curl(&[&format!("{url}/status")]).await).unwrap();
    assert_eq!(status["health"], "failing");
    assert_eq!(status["source"], "a flaky upstream");
    assert_eq!(status["rejected_invalid"], 1);
    assert!(
        status["last_error"]
            .as_str()
            .unwrap()
            .starts_with("upstream timed out")
    );
    assert!(status["interval_ms"] == 20);
    served.stop().await;

    // A stream source: the end of the stream is a failure too.
    let feed = Feed::new("s");
    let items = futures_util::stream::iter([Ok::<_, String>(doc(1, 1)), Ok(doc(2, 1))]);
    feed.spawn(from_stream("two documents", items))
        .await
        .unwrap();
    let status = feed.status();
    assert_eq!((status.version, status.health), (2, "failing"));
    assert_eq!(status.last_error.as_deref(), Some("the source ended"));
}

// ---- SSE ----

/// An SSE subscriber over HTTP/1.1 that collects event ids.
struct Subscriber {
    conn: TcpStream,
    raw: Vec<u8>,
    scanned: usize,
    ids: Vec<String>,
}

impl Subscriber {
    async fn open(addr: SocketAddr, path: &str, last_id: Option<&str>) -> Subscriber {
        let conn = TcpStream::connect(addr).await.unwrap();
        Subscriber::open_on(conn, path, last_id).await
    }

    async fn open_on(mut conn: TcpStream, path: &str, last_id: Option<&str>) -> Subscriber {
        let extra = last_id.map_or(String::new(), |id| format!("Last-Event-ID: {id}\r\n"));
        let req =
            format!("GET {path} HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n{extra}\r\n");
        conn.write_all(req.as_bytes()).await.unwrap();
        Subscriber {
            conn,
            raw: Vec::new(),
            scanned: 0,
            ids: Vec::new(),
        }
    }

    /// Reads until `n` events have come; each event's data must be one
    /// line holding the document whose hash is its id.
    async fn until(&mut self, n: usize) -> &[String] {
        let mut chunk = vec![0u8; 64 * 1024];
        while self.ids.len() < n {
            let got = self.conn.read(&mut chunk).await.unwrap();
            assert!(got > 0, "the stream ended after {:?}", self.ids);
            self.raw.extend_from_slice(&chunk[..got]);
            self.scan();
        }
        &self.ids
    }

    fn scan(&mut self) {
        while let Some(start) =
            find(&self.raw[self.scanned..], b"\nid: ").map(|at| self.scanned + at + 5)
        {
            let Some(end) = find(&self.raw[start..], b"\n\n").map(|at| start + at) else {
                return;
            };
            let event = std::str::from_utf8(&self.raw[start..end]).unwrap();
            let (id, data) = event
                .split_once("\ndata: ")
                .expect("one id and one data line");
            assert!(!data.contains('\n'), "one data line");
            assert_eq!(
                celer::feed::content_id(data.replace(' ', "").as_bytes()).len(),
                32
            );
            self.ids.push(id.to_owned());
            self.scanned = end;
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_sends_the_current_version_then_each_new_one_with_its_id() {
    let feed = Feed::new("votes");
    feed.update(doc(1, 3)).unwrap();
    let v1 = feed.current().unwrap().id().to_owned();
    let served = Served::start(feed_app(&feed)).await;
    let mut sub = Subscriber::open(served.addr, "/feeds/votes/events", None).await;
    assert_eq!(bounded(sub.until(1)).await, std::slice::from_ref(&v1));
    // The response head (the scan starts at "\nid: ": the head ends in a
    // blank line, so the first event follows a newline).
    let head = String::from_utf8_lossy(&sub.raw).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("content-type: text/event-stream"), "{head}");

    feed.update(doc(2, 3)).unwrap();
    let v2 = feed.current().unwrap().id().to_owned();
    assert_eq!(bounded(sub.until(2)).await, [v1.clone(), v2.clone()]);

    // A reconnect with an older id gets the current version at once.
    let mut old = Subscriber::open(served.addr, "/feeds/votes/events", Some(&v1)).await;
    assert_eq!(bounded(old.until(1)).await, std::slice::from_ref(&v2));
    // One with a made-up id too.
    let mut odd = Subscriber::open(served.addr, "/feeds/votes/events", Some("nonsense")).await;
    assert_eq!(bounded(odd.until(1)).await, std::slice::from_ref(&v2));
    // One with the current id has it: it gets the next version first.
    let mut current = Subscriber::open(served.addr, "/feeds/votes/events", Some(&v2)).await;
    eventually(|| feed.status().sse_subscribers == 4).await;
    feed.update(doc(3, 3)).unwrap();
    let v3 = feed.current().unwrap().id().to_owned();
    assert_eq!(bounded(current.until(1)).await, std::slice::from_ref(&v3));
    assert_eq!(bounded(sub.until(3)).await, [v1, v2, v3]);
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_is_gzip_coded_for_a_client_that_accepts_it() {
    let feed = Feed::new("votes");
    feed.update(doc(1, 300)).unwrap();
    let served = Served::start(feed_app(&feed)).await;
    // What a browser sends.
    let mut stream = crate::sse::H1Stream::open(
        served.addr,
        "/feeds/votes/events",
        "Accept-Encoding: gzip, deflate, br, zstd\r\n",
    )
    .await;
    assert_eq!(stream.header("content-encoding"), Some("gzip"));
    assert_eq!(stream.header("vary"), Some("accept-encoding"));
    let mut reader = crate::sse::Inflating::new();
    for version in 1..=2 {
        if version > 1 {
            feed.update(doc(version, 300)).unwrap();
        }
        let current = feed.current().unwrap();
        let data = doc(version, 300).replace(['\r', '\n'], " ");
        let want = format!("id: {}\ndata: {data}\n\n", current.id());
        let before = reader.coded.len();
        let mut text = String::new();
        while text.len() < want.len() {
            text.push_str(&reader.take(&bounded(stream.chunk()).await.unwrap()));
        }
        assert_eq!(text, want);
        let coded = reader.coded.len() - before;
        assert!(coded < want.len() / 3, "{coded} bytes for {}", want.len());
    }
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_sse_subscribers_receive_every_version_in_order() {
    const SUBSCRIBERS: usize = 1000;
    const VERSIONS: u32 = 10;
    let feed = Feed::builder("votes").subscriber_lag(16).build();
    feed.update(doc(0, 20)).unwrap();
    let served = Served::start(feed_app(&feed)).await;
    let mut expected = vec![feed.current().unwrap().id().to_owned()];
    let mut readers = Vec::new();
    for _ in 0..SUBSCRIBERS {
        let mut sub = Subscriber::open(served.addr, "/feeds/votes/events", None).await;
        readers.push(tokio::spawn(async move {
            sub.until(VERSIONS as usize + 1).await.to_vec()
        }));
    }
    eventually(|| feed.status().sse_subscribers == SUBSCRIBERS).await;
    for version in 1..=VERSIONS {
        feed.update(doc(version, 20)).unwrap();
        expected.push(feed.current().unwrap().id().to_owned());
    }
    for reader in readers {
        assert_eq!(bounded(reader).await.unwrap(), expected);
    }
    let status = feed.status();
    assert_eq!((status.sse_dropped, status.sse_refused), (0, 0));
    served.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_subscriber_that_does_not_read_is_dropped_not_buffered_for() {
    use http_body::Body as _;
    let feed = Feed::builder("votes").subscriber_lag(2).build();
    feed.update(doc(0, 5)).unwrap();
    let app = feed_app(&feed);
    let res = tower::ServiceExt::oneshot(
        app,
        http::Request::get("/feeds/votes/events")
            .body(celer::Body::empty())
            .unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(feed.status().sse_subscribers, 1);
    // The body is never read while versions come.
    for version in 1..=5 {
        feed.update(doc(version, 5)).unwrap();
    }
    let status = feed.status();
    assert_eq!((status.sse_dropped, status.sse_subscribers), (1, 0));
    // Its stream ends cleanly, at an event boundary.
    let mut body = std::pin::pin!(res.into_body());
    let mut frames = 0;
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        frame.unwrap();
        frames += 1;
        assert!(frames < 10, "the dropped stream keeps going");
    }
    let limit = Feed::builder("small").max_subscribers(1).build();
    let first = limit
        .hub()
        .subscribe(&celer::Request::builder().uri("/").body(()).unwrap());
    assert!(first.is_ok());
    let second = limit
        .hub()
        .subscribe(&celer::Request::builder().uri("/").body(()).unwrap());
    assert!(second.unwrap_err().is_full());
    assert_eq!(limit.status().sse_refused, 1);
}

// ---- WebSocket ----

/// Reads one unmasked server frame: (opcode, payload).
async fn ws_frame(conn: &mut TcpStream, buf: &mut Vec<u8>) -> (u8, Vec<u8>) {
    loop {
        if buf.len() >= 2 {
            let len7 = (buf[1] & 0x7F) as usize;
            let (header, len) = match len7 {
                126 if buf.len() >= 4 => (4, u16::from_be_bytes([buf[2], buf[3]]) as usize),
                127 if buf.len() >= 10 => (
                    10,
                    u64::from_be_bytes(buf[2..10].try_into().unwrap()) as usize,
                ),
                126 | 127 => (usize::MAX, 0),
                n => (2, n),
            };
            if header != usize::MAX && buf.len() >= header + len {
                let op = buf[0] & 0x0F;
                let payload = buf[header..header + len].to_vec();
                buf.drain(..header + len);
                return (op, payload);
            }
        }
        let mut chunk = [0u8; 16384];
        let n = conn.read(&mut chunk).await.unwrap();
        assert!(n > 0, "closed");
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_subscribers_get_the_current_version_then_each_new_one() {
    websocket_subscribers(Feed::new("votes")).await;
}

/// With the variants made in the background, each version still reaches
/// the WebSocket subscribers, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_subscribers_of_a_feed_compressed_in_the_background() {
    websocket_subscribers(Feed::builder("votes").compress_in_background(true).build()).await;
}

async fn websocket_subscribers(feed: Feed) {
    feed.update(doc(1, 3)).unwrap();
    let served = Served::start(feed_app(&feed)).await;
    let mut conn = TcpStream::connect(served.addr).await.unwrap();
    conn.write_all(
        b"GET /feeds/votes/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .await
    .unwrap();
    let mut buf = Vec::new();
    let end = bounded(async {
        loop {
            if let Some(at) = find(&buf, b"\r\n\r\n") {
                break at + 4;
            }
            let mut chunk = [0u8; 4096];
            let n = conn.read(&mut chunk).await.unwrap();
            assert!(n > 0);
            buf.extend_from_slice(&chunk[..n]);
        }
    })
    .await;
    assert!(buf.starts_with(b"HTTP/1.1 101"));
    buf.drain(..end);
    let (op, first) = bounded(ws_frame(&mut conn, &mut buf)).await;
    assert_eq!((op, first), (1, doc(1, 3).into_bytes()));
    eventually(|| feed.status().ws_subscribers == 1).await;
    feed.update(doc(2, 3)).unwrap();
    feed.update(doc(3, 3)).unwrap();
    let (_, second) = bounded(ws_frame(&mut conn, &mut buf)).await;
    let (_, third) = bounded(ws_frame(&mut conn, &mut buf)).await;
    assert_eq!(second, doc(2, 3).into_bytes());
    assert_eq!(third, doc(3, 3).into_bytes());
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_lists_the_feeds_and_names_are_checked() {
    let mut feeds = Feeds::new();
    feeds.insert(Feed::new("a")).unwrap();
    feeds.insert(Feed::new("b_2")).unwrap();
    let err = feeds.insert(Feed::new("index.json")).unwrap_err();
    assert!(err.to_string().contains("not a feed name"), "{err}");
    let err = feeds.insert(Feed::new("a")).unwrap_err();
    assert_eq!(err.to_string(), "a feed named \"a\" exists already");
    assert!(feeds.insert(Feed::new("x".repeat(65))).is_err());
    feeds.get("a").unwrap().update("[1]").unwrap();
    let mut app = App::new();
    feeds.mount(&mut app, "/feeds");
    let served = Served::start(app).await;
    let list: serde_json::Value =
        serde_json::from_str(&curl(&[&served.url("/feeds/index.json")]).await).unwrap();
    assert_eq!(list["feeds"][0]["name"], "a");
    assert_eq!(list["feeds"][0]["version"], 1);
    assert_eq!(list["feeds"][0]["events"], "/feeds/a/events");
    assert_eq!(list["feeds"][1]["name"], "b_2");
    assert_eq!(list["feeds"][1]["health"], "waiting");
    served.stop().await;
}
