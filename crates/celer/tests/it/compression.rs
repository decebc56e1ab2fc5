//! Compression over the wire: curl `--compressed`, Python's reference
//! decoders (gzip, brotli, zstandard), an event stream, and the responses
//! that must pass untouched.

use std::sync::Arc;

use celer::middleware::compression::{Coding, Compression};
use celer::{App, Body, Request, Response};
use http::StatusCode;
use http::header::{self, HeaderValue};
use tokio::sync::Notify;
use tower::ServiceExt;

use crate::wire::{Served, curl, python};

/// About 50 KiB of HTML that compresses well but not trivially.
fn page() -> String {
    let mut html = String::from("<!DOCTYPE html><html><body><ul>\n");
    let mut n: u64 = 1;
    while html.len() < 50 * 1024 {
        n = n
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        html.push_str(&format!(
            "<li class=\"item\">row {} value {}</li>\n",
            html.len(),
            n >> 40
        ));
    }
    html.push_str("</ul></body></html>\n");
    html
}

fn with(mut res: Response, name: header::HeaderName, value: &'static str) -> Response {
    res.headers_mut()
        .insert(name, HeaderValue::from_static(value));
    res
}

fn app(release: Arc<Notify>) -> App {
    let mut app = App::new();
    app.middleware(Compression::new());
    app.get("/big", |_req: Request| async {
        with(celer::response::html(page()), header::ETAG, "\"v1\"")
    });
    app.get("/small", |_req: Request| async { "tiny" });
    app.get("/png", |_req: Request| async {
        with(
            celer::response::html(page()),
            header::CONTENT_TYPE,
            "image/png",
        )
    });
    app.get("/range", |_req: Request| async {
        let mut res = with(
            celer::response::html(page()),
            header::CONTENT_RANGE,
            "bytes 0-51199/99999",
        );
        *res.status_mut() = StatusCode::PARTIAL_CONTENT;
        res
    });
    app.get("/no-transform", |_req: Request| async {
        with(
            celer::response::html(page()),
            header::CACHE_CONTROL,
            "public, No-Transform",
        )
    });
    app.get("/encoded", |_req: Request| async {
        with(
            celer::response::html(page()),
            header::CONTENT_ENCODING,
            "identity-ish",
        )
    });
    app.get("/vary", |_req: Request| async {
        with(
            celer::response::html(page()),
            header::VARY,
            "accept-encoding",
        )
    });
    let waiting = release.clone();
    app.get("/events", move |_req: Request| {
        let waiting = waiting.clone();
        async move {
            let events = futures_util::stream::unfold(0, move |n| {
                let waiting = waiting.clone();
                async move {
                    match n {
                        0 => Some((Ok::<_, std::io::Error>("data: first\n\n"), 1)),
                        1 => {
                            // The second event waits for the client to have
                            // seen the first.
                            waiting.notified().await;
                            Some((Ok("data: second\n\n"), 2))
                        }
                        _ => None,
                    }
                }
            });
            with(
                Response::new(Body::from_stream(events)),
                header::CONTENT_TYPE,
                // A slow stream of another type: `text/event-stream` itself
                // is left uncompressed (tests/it/sse.rs).
                "application/x-ndjson",
            )
        }
    });
    app.get("/release", move |_req: Request| {
        let release = release.clone();
        async move {
            release.notify_one();
            "released"
        }
    });
    app
}

const DECODE: &str = r#"
import sys, http.client, gzip, brotli, zstandard
conn = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=5)
def get(path, ae):
    conn.request("GET", path, headers={"Accept-Encoding": ae})
    r = conn.getresponse()
    return r, r.read()
r, plain = get("/big", "identity")
print("identity", r.getheader("content-encoding"), r.getheader("content-length") == str(len(plain)))
decoders = {
    "gzip": gzip.decompress,
    "br": brotli.decompress,
    "zstd": lambda b: zstandard.ZstdDecompressor().decompressobj().decompress(b),
}
for ae in sys.argv[3:]:
    r, body = get("/big", ae)
    ce = r.getheader("content-encoding")
    same = decoders[ce](body) == plain
    print(ae, ce, same, len(body) < len(plain) // 3, r.getheader("vary"), r.getheader("etag"),
          r.getheader("content-length"))
"#;

#[tokio::test]
async fn python_decodes_every_coding_with_the_reference_decoders() {
    let served = Served::start(app(Arc::new(Notify::new()))).await;
    let port = served.addr.port().to_string();
    let args = [
        "127.0.0.1",
        &port,
        "gzip",
        "br",
        "zstd",
        "gzip, deflate, br, zstd",
        "gzip;q=0.5, br;q=0.8, zstd;q=0.1",
        "zstd;q=0, *",
        "x-gzip",
    ];
    let out = python(DECODE, &args).await;
    let lines: Vec<&str> = out.lines().collect();
    let tail = "True True Accept-Encoding W/\"v1\" None";
    assert_eq!(
        lines,
        [
            "identity None True",
            &format!("gzip gzip {tail}"),
            &format!("br br {tail}"),
            &format!("zstd zstd {tail}"),
            &format!("gzip, deflate, br, zstd zstd {tail}"),
            &format!("gzip;q=0.5, br;q=0.8, zstd;q=0.1 br {tail}"),
            &format!("zstd;q=0, * br {tail}"),
            &format!("x-gzip gzip {tail}"),
        ]
    );
    served.stop().await;
}

#[tokio::test]
async fn curl_compressed_round_trips() {
    let served = Served::start(app(Arc::new(Notify::new()))).await;
    let url = served.url("/big");
    let out = curl(&["--compressed", "-D", "-", &url]).await;
    let (head, body) = out.split_once("\r\n\r\n").expect("head");
    assert!(head.contains("content-encoding: zstd"), "{head}");
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    assert_eq!(body, page());
    served.stop().await;
}

#[tokio::test]
async fn gzip_preferred_by_the_server_wins_ties() {
    let mut app = App::new();
    app.middleware(
        Compression::new()
            .codings([Coding::Gzip, Coding::Zstd])
            .gzip_level(1),
    );
    app.get("/big", |_req: Request| async {
        celer::response::html(page())
    });
    let served = Served::start(app).await;
    let out = curl(&["--compressed", "-D", "-", &served.url("/big")]).await;
    let (head, body) = out.split_once("\r\n\r\n").expect("head");
    assert!(head.contains("content-encoding: gzip"), "{head}");
    assert_eq!(body, page());
    served.stop().await;
}

#[tokio::test]
async fn a_slow_stream_delivers_its_first_piece_before_it_ends() {
    let served = Served::start(app(Arc::new(Notify::new()))).await;
    let script = r#"
import sys, socket, zlib
host, port = sys.argv[1], int(sys.argv[2])
s = socket.create_connection((host, port), timeout=5)
s.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
buf = b""
while b"\r\n\r\n" not in buf:
    buf += s.recv(65536)
head, rest = buf.split(b"\r\n\r\n", 1)
print(head.split(b"\r\n")[0].decode(), b"content-encoding: gzip" in head.lower())
d = zlib.decompressobj(16 + zlib.MAX_WBITS)
def chunks(rest):
    # Yields decoded chunk payloads as they arrive.
    while True:
        while b"\r\n" not in rest:
            rest += s.recv(65536)
        size_line, rest = rest.split(b"\r\n", 1)
        size = int(size_line, 16)
        while len(rest) < size + 2:
            rest += s.recv(65536)
        yield rest[:size]
        rest = rest[size + 2:]
        if size == 0:
            return
text = b""
it = chunks(rest)
while b"first" not in text:
    text += d.decompress(next(it))
print(text.decode().strip())
# Only now does the server produce the second event.
r = socket.create_connection((host, port), timeout=5)
r.sendall(b"GET /release HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
print(b"released" in r.recv(65536))
for chunk in it:
    text += d.decompress(chunk)
print(text.decode().split("\n\n")[1], d.eof)
"#;
    let port = served.addr.port().to_string();
    let out = python(script, &["127.0.0.1", &port]).await;
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "HTTP/1.1 200 OK True",
            "data: first",
            "True",
            "data: second True"
        ]
    );
    served.stop().await;
}

#[tokio::test]
async fn ranges_no_transform_small_and_precompressed_pass_untouched() {
    let served = Served::start(app(Arc::new(Notify::new()))).await;
    let expected = page();
    for (path, vary) in [
        ("/range", None),
        ("/no-transform", None),
        ("/png", None),
        ("/encoded", None),
        ("/small", None),
    ] {
        let head = format!(
            "GET {path} HTTP/1.1\nHost: x\nAccept-Encoding: gzip, br, zstd\nConnection: close\n\n"
        );
        let res = served.one(&head, b"").await;
        assert_ne!(res.header("content-encoding"), Some("gzip"), "{path}");
        assert_eq!(res.header("vary"), vary, "{path}");
        if path == "/small" {
            assert_eq!(res.text(), "tiny");
        } else {
            assert!(res.text() == expected, "{path}: body changed");
            assert_eq!(
                res.header("content-length"),
                Some(&*expected.len().to_string()),
                "{path}"
            );
        }
    }
    // A `Vary` that lists the field already is not extended.
    let head = "GET /vary HTTP/1.1\nHost: x\nAccept-Encoding: gzip\nConnection: close\n\n";
    let res = served.one(head, b"").await;
    assert_eq!(res.header("content-encoding"), Some("gzip"));
    let varies: Vec<&str> = res
        .headers
        .iter()
        .filter(|(n, _)| n == "vary")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(varies, ["accept-encoding"]);
    served.stop().await;
}

#[tokio::test]
async fn head_gets_the_headers_get_would() {
    let served = Served::start(app(Arc::new(Notify::new()))).await;
    let mut heads = Vec::new();
    for method in ["GET", "HEAD"] {
        let head =
            format!("{method} /big HTTP/1.1\nHost: x\nAccept-Encoding: br\nConnection: close\n\n");
        let res = served.one(&head, b"").await;
        let mut names: Vec<(String, String)> = res
            .headers
            .iter()
            // The engine frames a HEAD response without a body, as RFC 9112
            // §6.1 allows; every other field must match.
            .filter(|(name, _)| name != "date" && name != "transfer-encoding")
            .cloned()
            .collect();
        names.sort();
        heads.push((names, res.body.is_empty()));
    }
    assert_eq!(heads[0].0, heads[1].0);
    assert!(!heads[0].1 && heads[1].1);
    assert!(
        heads[1]
            .0
            .contains(&("content-encoding".into(), "br".into()))
    );
    served.stop().await;
}

#[tokio::test]
async fn the_zero_copy_marker_goes_with_the_replaced_body() {
    use std::io::Write;
    let mut file = tempfile::tempfile().expect("temp file");
    file.write_all(page().as_bytes()).expect("write");
    let file = Arc::new(file);
    let mut app = App::new();
    app.middleware(Compression::new());
    app.get("/file", move |_req: Request| {
        let file = file.clone();
        async move {
            let len = page().len() as u64;
            let body = celer_server::FileBody::new(file, 0, len);
            let marker = body.send_file();
            let mut res = Response::new(Body::new(body));
            res.extensions_mut().insert(marker);
            with(res, header::CONTENT_TYPE, "text/html")
        }
    });
    for (accept, marked) in [("gzip", false), ("identity", true)] {
        let req = http::Request::get("/file")
            .header("accept-encoding", accept)
            .body(Body::empty())
            .unwrap();
        let res = app.clone().oneshot(req).await.unwrap();
        let has_marker = res.extensions().get::<celer_server::SendFile>().is_some();
        assert_eq!(has_marker, marked, "{accept}");
    }
}

#[tokio::test]
async fn min_size_is_the_first_size_compressed_and_304_keeps_the_validator() {
    let mut app = App::new();
    app.middleware(Compression::new().min_size(1024));
    app.get("/len/<int:n>", |req: Request| async move {
        let n: usize = req.param("n").unwrap_or(0);
        celer::response::text("a".repeat(n))
    });
    app.get("/stream", |_req: Request| async {
        let chunks = futures_util::stream::iter([Ok::<_, std::io::Error>("tiny")]);
        Response::new(Body::from_stream(chunks))
    });
    app.get("/not-modified", |_req: Request| async {
        let mut res = celer::response::status(StatusCode::NOT_MODIFIED);
        res.headers_mut()
            .insert(header::ETAG, HeaderValue::from_static("\"v1\""));
        res
    });
    for (path, encoding) in [
        ("/len/1023", None),
        ("/len/1024", Some("gzip")),
        // Size unknown: compressed, however small it turns out.
        ("/stream", Some("gzip")),
        ("/not-modified", None),
    ] {
        let req = http::Request::get(path)
            .header("accept-encoding", "gzip")
            .body(Body::empty())
            .unwrap();
        let res = app.clone().oneshot(req).await.unwrap();
        let got = res
            .headers()
            .get("content-encoding")
            .map(|v| v.to_str().unwrap());
        assert_eq!(got, encoding, "{path}");
        if path == "/not-modified" {
            assert_eq!(res.headers()["etag"], "W/\"v1\"");
            assert_eq!(res.headers()["vary"], "Accept-Encoding");
        }
    }
}
