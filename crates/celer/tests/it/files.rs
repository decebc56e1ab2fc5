//! `celer::files::Files` through `oneshot`: every behaviour once, on a
//! fixture directory and on an embedded bundle.

use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::time::Duration;

use celer::files::{Bundle, CacheControl, Files, Hidden, MAX_RANGES, Symlinks};
use celer::{App, Body};
use http::{HeaderMap, StatusCode};
use tower::ServiceExt;

use crate::support::block_on;

/// A site: `hello.txt` (13 bytes), `app.3f2a9c1b.js` with `.br` and `.gz`
/// siblings, `docs/index.html`, `list/` without index, `.env`, and links
/// in and out of the root.
pub(crate) struct Site {
    _dir: tempfile::TempDir,
    pub(crate) root: PathBuf,
}

pub(crate) const HELLO: &[u8] = b"Hello, World!";

pub(crate) fn site() -> Site {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("www");
    let files: &[(&str, &[u8])] = &[
        ("hello.txt", HELLO),
        ("app.3f2a9c1b.js", b"console.log('plain')"),
        ("app.3f2a9c1b.js.br", b"BROTLI"),
        ("app.3f2a9c1b.js.gz", b"GZIP!"),
        ("docs/index.html", b"<h1>docs</h1>"),
        ("list/b.txt", b"b"),
        ("list/a <&>.txt", b"a"),
        ("list/.hidden", b"h"),
        (".env", b"SECRET"),
        ("digits.bin", &DIGITS),
    ];
    for (name, content) in files {
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    std::fs::write(dir.path().join("outside.txt"), "OUTSIDE").unwrap();
    symlink(dir.path().join("outside.txt"), root.join("escape.txt")).unwrap();
    symlink(dir.path(), root.join("up")).unwrap();
    symlink(root.join("hello.txt"), root.join("alias.txt")).unwrap();
    symlink(root.join("docs"), root.join("docs-link")).unwrap();
    Site { _dir: dir, root }
}

/// 100 bytes: `0123456789` ten times.
pub(crate) const DIGITS: [u8; 100] = {
    let mut d = [0u8; 100];
    let mut i = 0;
    while i < 100 {
        d[i] = b'0' + (i % 10) as u8;
        i += 1;
    }
    d
};

struct Got {
    status: StatusCode,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Got {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }
}

async fn ask(files: &Files, method: &str, uri: &str, headers: &[(&str, &str)]) -> Got {
    let mut req = http::Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let res = files
        .clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let body = res.into_body().collect_bytes().await.unwrap().to_vec();
    Got {
        status,
        headers,
        body,
    }
}

fn get(files: &Files, uri: &str, headers: &[(&str, &str)]) -> Got {
    block_on(ask(files, "GET", uri, headers))
}

#[test]
fn get_and_head_send_validators_and_the_same_head() {
    let site = site();
    let files = Files::new(&site.root).unwrap();
    let got = get(&files, "/hello.txt", &[]);
    assert_eq!(got.status, 200);
    assert_eq!(got.body, HELLO);
    assert_eq!(
        got.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(got.header("content-length"), Some("13"));
    assert_eq!(got.header("accept-ranges"), Some("bytes"));
    let etag = got.header("etag").unwrap();
    assert!(etag.starts_with("\"d-") && etag.ends_with('"'), "{etag}");
    assert!(got.header("last-modified").is_some());
    let head = block_on(ask(&files, "HEAD", "/hello.txt", &[]));
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(head.headers, got.headers);
    // The ETag is a function of the file, so a new service (a restart)
    // gives the same one.
    let again = get(&Files::new(&site.root).unwrap(), "/hello.txt", &[]);
    assert_eq!(again.header("etag"), Some(etag));
}

#[test]
fn conditionals_follow_rfc_9110_precedence() {
    let site = site();
    let files = Files::new(&site.root).unwrap();
    let first = get(&files, "/hello.txt", &[]);
    let etag = first.header("etag").unwrap().to_owned();
    let lm = first.header("last-modified").unwrap().to_owned();
    let weak = format!("W/{etag}");
    let old = "Mon, 01 Jan 2001 00:00:00 GMT";
    let cases: &[(&[(&str, &str)], u16)] = &[
        (&[("if-none-match", &etag)], 304),
        (&[("if-none-match", &weak)], 304),
        (&[("if-none-match", "\"nope\"")], 200),
        (&[("if-modified-since", &lm)], 304),
        (&[("if-modified-since", old)], 200),
        (
            &[("if-none-match", "\"nope\""), ("if-modified-since", &lm)],
            200,
        ),
        (&[("if-match", &etag)], 200),
        (&[("if-match", &weak)], 412),
        (&[("if-match", "\"nope\"")], 412),
        (&[("if-unmodified-since", old)], 412),
        (&[("if-unmodified-since", &lm)], 200),
        (&[("if-match", &etag), ("if-unmodified-since", old)], 200),
        (&[("if-match", "\"nope\""), ("if-none-match", &etag)], 412),
    ];
    for (headers, want) in cases {
        let got = get(&files, "/hello.txt", headers);
        assert_eq!(got.status.as_u16(), *want, "{headers:?}");
        if *want == 304 {
            assert!(got.body.is_empty());
            assert_eq!(got.header("etag"), Some(etag.as_str()));
            assert_eq!(got.header("last-modified"), Some(lm.as_str()));
            assert_eq!(got.header("content-length"), None);
        }
    }
}

#[test]
fn ranges_single_suffix_open_multiple_and_unsatisfiable() {
    let site = site();
    let files = Files::new(&site.root).unwrap();
    let got = get(&files, "/digits.bin", &[("range", "bytes=10-14")]);
    assert_eq!(got.status, 206);
    assert_eq!(got.header("content-range"), Some("bytes 10-14/100"));
    assert_eq!(got.body, b"01234");
    let got = get(&files, "/digits.bin", &[("range", "bytes=-3")]);
    assert_eq!(
        (got.header("content-range"), &got.body[..]),
        (Some("bytes 97-99/100"), &b"789"[..])
    );
    let got = get(&files, "/digits.bin", &[("range", "bytes=98-")]);
    assert_eq!(
        (got.header("content-range"), &got.body[..]),
        (Some("bytes 98-99/100"), &b"89"[..])
    );
    let got = get(&files, "/digits.bin", &[("range", "bytes=100-")]);
    assert_eq!(got.status, 416);
    assert_eq!(got.header("content-range"), Some("bytes */100"));
    let got = get(&files, "/digits.bin", &[("range", "bytes=5-1")]);
    assert_eq!((got.status, got.body.len()), (StatusCode::OK, 100));

    let got = get(&files, "/digits.bin", &[("range", "bytes=0-1,50-52")]);
    assert_eq!(got.status, 206);
    let ctype = got.header("content-type").unwrap();
    let boundary = ctype
        .strip_prefix("multipart/byteranges; boundary=")
        .unwrap();
    let parts = multipart(&got.body, boundary);
    assert_eq!(
        parts,
        vec![
            ("bytes 0-1/100".to_owned(), b"01".to_vec()),
            ("bytes 50-52/100".to_owned(), b"012".to_vec()),
        ]
    );
    assert_eq!(
        got.header("content-length").unwrap(),
        got.body.len().to_string()
    );
    let head = block_on(ask(
        &files,
        "HEAD",
        "/digits.bin",
        &[("range", "bytes=0-1,50-52")],
    ));
    assert_eq!(
        head.status, 200,
        "Range is ignored on HEAD (RFC 9110 §14.2)"
    );

    // Overlapping ranges coalesce into one.
    let got = get(&files, "/digits.bin", &[("range", "bytes=0-5,3-8")]);
    assert_eq!(
        (got.header("content-range"), &got.body[..]),
        (Some("bytes 0-8/100"), &b"012345678"[..])
    );
    // More ranges than the bound: the whole file.
    let many: Vec<String> = (0..=MAX_RANGES)
        .map(|i| format!("{0}-{0}", i * 3))
        .collect();
    let got = get(
        &files,
        "/digits.bin",
        &[("range", &format!("bytes={}", many.join(",")))],
    );
    assert_eq!((got.status, got.body.len()), (StatusCode::OK, 100));
}

#[test]
fn if_range_with_current_and_stale_validators() {
    let site = site();
    let files = Files::new(&site.root).unwrap();
    let first = get(&files, "/digits.bin", &[]);
    let etag = first.header("etag").unwrap().to_owned();
    let lm = first.header("last-modified").unwrap().to_owned();
    for (validator, want) in [
        (etag.as_str(), 206),
        (lm.as_str(), 206),
        ("\"stale\"", 200),
        ("Mon, 01 Jan 2001 00:00:00 GMT", 200),
    ] {
        let got = get(
            &files,
            "/digits.bin",
            &[("range", "bytes=0-0"), ("if-range", validator)],
        );
        assert_eq!(got.status.as_u16(), want, "{validator}");
    }
}

/// The parts of a multipart/byteranges body: (Content-Range, bytes).
pub(crate) fn multipart(body: &[u8], boundary: &str) -> Vec<(String, Vec<u8>)> {
    let delim = format!("--{boundary}");
    let mut parts = Vec::new();
    let mut rest = body;
    loop {
        let at = find(rest, delim.as_bytes()).expect("a delimiter");
        rest = &rest[at + delim.len()..];
        if rest.starts_with(b"--") {
            return parts;
        }
        let head_end = find(rest, b"\r\n\r\n").expect("part head");
        let head = String::from_utf8_lossy(&rest[..head_end]).to_ascii_lowercase();
        let range = head
            .lines()
            .find_map(|l| l.strip_prefix("content-range: "))
            .expect("content-range")
            .to_owned();
        let total: Vec<u64> = range["bytes ".len()..]
            .split(['-', '/'])
            .map(|n| n.parse().unwrap())
            .collect();
        let len = (total[1] - total[0] + 1) as usize;
        let data = &rest[head_end + 4..head_end + 4 + len];
        parts.push((range, data.to_vec()));
        rest = &rest[head_end + 4 + len..];
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[test]
fn precompressed_siblings_follow_accept_encoding() {
    let site = site();
    let files = Files::new(&site.root).unwrap();
    let plain = get(&files, "/app.3f2a9c1b.js", &[]);
    assert_eq!(plain.body, b"console.log('plain')");
    assert_eq!(plain.header("vary"), Some("accept-encoding"));
    assert_eq!(plain.header("content-encoding"), None);
    let br = get(
        &files,
        "/app.3f2a9c1b.js",
        &[("accept-encoding", "gzip, br")],
    );
    assert_eq!(
        (br.header("content-encoding"), &br.body[..]),
        (Some("br"), &b"BROTLI"[..])
    );
    assert_eq!(
        br.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert_ne!(br.header("etag"), plain.header("etag"));
    let gz = get(
        &files,
        "/app.3f2a9c1b.js",
        &[("accept-encoding", "br;q=0.5, gzip")],
    );
    assert_eq!(
        (gz.header("content-encoding"), &gz.body[..]),
        (Some("gzip"), &b"GZIP!"[..])
    );
    let zstd_only = get(&files, "/app.3f2a9c1b.js", &[("accept-encoding", "zstd")]);
    assert_eq!(zstd_only.body, b"console.log('plain')");
    // A 304 for the chosen representation keeps Vary.
    let etag = br.header("etag").unwrap();
    let nm = get(
        &files,
        "/app.3f2a9c1b.js",
        &[("accept-encoding", "br"), ("if-none-match", etag)],
    );
    assert_eq!(
        (nm.status, nm.header("vary")),
        (StatusCode::NOT_MODIFIED, Some("accept-encoding"))
    );
    // Ranges apply to the chosen representation.
    let r = get(
        &files,
        "/app.3f2a9c1b.js",
        &[("accept-encoding", "br"), ("range", "bytes=0-1")],
    );
    assert_eq!(
        (r.header("content-range"), &r.body[..]),
        (Some("bytes 0-1/6"), &b"BR"[..])
    );
    let off = Files::new(&site.root).unwrap().precompressed(false);
    let got = get(&off, "/app.3f2a9c1b.js", &[("accept-encoding", "br")]);
    assert_eq!(
        (got.header("vary"), &got.body[..]),
        (None, &b"console.log('plain')"[..])
    );
}

#[test]
fn cache_control_rules() {
    let site = site();
    let files = Files::new(&site.root).unwrap().cache_control(
        CacheControl::new()
            .max_age(Duration::from_secs(300))
            .public(true)
            .immutable_fingerprinted(true),
    );
    let got = get(&files, "/hello.txt", &[]);
    assert_eq!(got.header("cache-control"), Some("public, max-age=300"));
    let got = get(&files, "/app.3f2a9c1b.js", &[]);
    assert_eq!(
        got.header("cache-control"),
        Some("public, max-age=31536000, immutable")
    );
    let etag = got.header("etag").unwrap().to_owned();
    let nm = get(&files, "/app.3f2a9c1b.js", &[("if-none-match", &etag)]);
    assert_eq!(
        nm.header("cache-control"),
        Some("public, max-age=31536000, immutable")
    );
}

#[test]
fn directories_index_redirect_and_listing() {
    let site = site();
    let files = Files::new(&site.root).unwrap();
    let got = get(&files, "/docs?x=1", &[]);
    assert_eq!(
        (got.status, got.header("location")),
        (StatusCode::MOVED_PERMANENTLY, Some("/docs/?x=1"))
    );
    assert_eq!(get(&files, "/docs/", &[]).body, b"<h1>docs</h1>");
    assert_eq!(get(&files, "/list/", &[]).status, 404);
    let listing = files.clone().listing(true);
    let got = get(&listing, "/list/", &[]);
    assert_eq!(got.header("content-type"), Some("text/html; charset=utf-8"));
    let html = String::from_utf8(got.body).unwrap();
    assert!(
        html.contains("<a href=\"./a%20%3C&amp;%3E.txt\">a &lt;&amp;&gt;.txt</a>"),
        "{html}"
    );
    assert!(html.find("a%20").unwrap() < html.find("b.txt").unwrap());
    assert!(!html.contains(".hidden"));
    let custom = files.index(["default.htm", "index.html"]);
    assert_eq!(get(&custom, "/docs/", &[]).status, 200);
    let none = Files::new(&site.root).unwrap().index(Vec::<String>::new());
    assert_eq!(get(&none, "/docs/", &[]).status, 404);
}

#[test]
fn hidden_and_symlink_policies() {
    let site = site();
    let deny = Files::new(&site.root).unwrap();
    assert_eq!(get(&deny, "/.env", &[]).status, 403);
    assert_eq!(
        get(&deny.clone().hidden(Hidden::Ignore), "/.env", &[]).status,
        404
    );
    assert_eq!(
        get(&deny.clone().hidden(Hidden::Allow), "/.env", &[]).body,
        b"SECRET"
    );

    // Within the root (default): links inside work, links out are 403.
    assert_eq!(get(&deny, "/alias.txt", &[]).body, HELLO);
    assert_eq!(get(&deny, "/docs-link/index.html", &[]).status, 200);
    assert_eq!(get(&deny, "/escape.txt", &[]).status, 403);
    assert_eq!(get(&deny, "/up/outside.txt", &[]).status, 403);
    assert_eq!(get(&deny, "/up/www/hello.txt", &[]).status, 200);
    let never = Files::new(&site.root).unwrap().symlinks(Symlinks::Deny);
    assert_eq!(get(&never, "/alias.txt", &[]).status, 403);
    assert_eq!(get(&never, "/docs-link/index.html", &[]).status, 403);
    assert_eq!(get(&never, "/hello.txt", &[]).status, 200);
    let follow = Files::new(&site.root).unwrap().symlinks(Symlinks::Follow);
    assert_eq!(get(&follow, "/escape.txt", &[]).body, b"OUTSIDE");
}

#[test]
fn traversal_never_escapes_the_root() {
    let site = site();
    let files = Files::new(&site.root).unwrap().symlinks(Symlinks::Deny);
    for path in [
        "/../outside.txt",
        "/%2e%2e/outside.txt",
        "/%2E%2E%2Foutside.txt",
        "/docs/..%2f..%2foutside.txt",
        "/..%5coutside.txt",
        "/docs%5c..%5c..%5coutside.txt",
        "/outside.txt%00.html",
        "/%252e%252e/outside.txt",
        "/.%2e/outside.txt",
    ] {
        let got = get(&files, path, &[]);
        assert!(
            matches!(got.status.as_u16(), 400 | 403 | 404),
            "{path}: {}",
            got.status
        );
        assert!(!got.body.windows(7).any(|w| w == b"OUTSIDE"), "{path}");
    }
}

#[test]
fn empty_files_have_no_satisfiable_range() {
    let site = site();
    std::fs::write(site.root.join("empty.txt"), "").unwrap();
    let files = Files::new(&site.root).unwrap();
    let got = get(&files, "/empty.txt", &[]);
    assert_eq!(
        (got.status, got.header("content-length"), got.body.len()),
        (StatusCode::OK, Some("0"), 0)
    );
    let got = get(&files, "/empty.txt", &[("range", "bytes=0-")]);
    assert_eq!(
        (got.status, got.header("content-range")),
        (StatusCode::RANGE_NOT_SATISFIABLE, Some("bytes */0"))
    );
}

#[test]
fn methods_other_than_get_and_head_get_405() {
    let site = site();
    let files = Files::new(&site.root).unwrap();
    let got = block_on(ask(&files, "POST", "/hello.txt", &[]));
    assert_eq!(
        (got.status, got.header("allow")),
        (StatusCode::METHOD_NOT_ALLOWED, Some("GET, HEAD"))
    );
}

static BUNDLE: &[(&str, &[u8])] = &[
    ("index.html", b"<h1>embedded</h1>"),
    ("css/site.css", b"h1 { color: teal }"),
    ("css/site.css.gz", b"GZ"),
];

#[test]
fn embedded_bundles_have_the_same_semantics() {
    let files = Files::embedded(Bundle::new(BUNDLE));
    let got = get(&files, "/", &[]);
    assert_eq!(
        (got.status, &got.body[..]),
        (StatusCode::OK, &b"<h1>embedded</h1>"[..])
    );
    assert_eq!(got.header("last-modified"), None);
    let etag = got.header("etag").unwrap().to_owned();
    assert_eq!(
        get(&Files::embedded(Bundle::new(BUNDLE)), "/", &[]).header("etag"),
        Some(etag.as_str())
    );
    assert_eq!(get(&files, "/", &[("if-none-match", &etag)]).status, 304);
    let r = get(&files, "/css/site.css", &[("range", "bytes=0-1")]);
    assert_eq!(
        (r.status, &r.body[..]),
        (StatusCode::PARTIAL_CONTENT, &b"h1"[..])
    );
    let gz = get(&files, "/css/site.css", &[("accept-encoding", "gzip")]);
    assert_eq!(
        (gz.header("content-encoding"), &gz.body[..]),
        (Some("gzip"), &b"GZ"[..])
    );
    assert_eq!(get(&files, "/css", &[]).header("location"), Some("/css/"));
    assert_eq!(get(&files, "/css/", &[]).status, 404);
    assert_eq!(get(&files, "/nope", &[]).status, 404);
    let head = block_on(ask(&files, "HEAD", "/css/site.css", &[]));
    assert_eq!(
        (head.header("content-length"), head.body.len()),
        (Some("18"), 0)
    );
}

#[test]
fn mounted_in_an_app_under_a_path_parameter() {
    let site = site();
    let files = Files::new(&site.root).unwrap();
    let mut app = App::new();
    app.get("/static/<path:file>", files.handler("file"));
    let send = |uri: &str, headers: &[(&str, &str)]| {
        let mut req = http::Request::get(uri);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        block_on(async {
            let res = app
                .clone()
                .oneshot(req.body(Body::empty()).unwrap())
                .await
                .unwrap();
            let status = res.status();
            let location = res
                .headers()
                .get("location")
                .map(|v| v.to_str().unwrap().to_owned());
            let range = res
                .headers()
                .get("content-range")
                .map(|v| v.to_str().unwrap().to_owned());
            (
                status,
                location,
                range,
                res.into_body().collect_bytes().await.unwrap(),
            )
        })
    };
    assert_eq!(&send("/static/hello.txt", &[]).3[..], HELLO);
    let (status, _, range, body) = send("/static/digits.bin", &[("range", "bytes=1-2")]);
    assert_eq!(
        (status, range.as_deref(), &body[..]),
        (
            StatusCode::PARTIAL_CONTENT,
            Some("bytes 1-2/100"),
            &b"12"[..]
        )
    );
    let (status, location, ..) = send("/static/docs", &[]);
    assert_eq!(
        (status, location.as_deref()),
        (StatusCode::MOVED_PERMANENTLY, Some("/static/docs/"))
    );
    assert_eq!(send("/static/docs/", &[]).0, 200);
    assert_eq!(send("/static/%2e%2e/outside.txt", &[]).0, 400);
    assert_eq!(send("/static/%252e%252e/outside.txt", &[]).0, 404);

    let mut wrong = App::new();
    wrong.get("/w/<path:file>", files.handler("nope"));
    let req = http::Request::get("/w/hello.txt")
        .body(Body::empty())
        .unwrap();
    let res = block_on(wrong.oneshot(req)).unwrap();
    assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
}
