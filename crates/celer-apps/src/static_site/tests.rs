//! The static site called directly, over a fixture directory.

use std::os::unix::fs::{PermissionsExt, symlink};

use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use tower_service::Service;

use super::StaticSite;

/// The largest piece a file body yields at once.
const FILE_CHUNK: usize = 64 * 1024;

/// A site over a fresh directory: `index.html`, `a.txt`, `docs/index.html`,
/// `empty/`, `.secret`, and a link `out` to a file outside the root.
struct Fixture {
    _outer: tempfile::TempDir,
    root: std::path::PathBuf,
    site: StaticSite,
}

fn fixture() -> Fixture {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("root");
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::create_dir_all(root.join("empty")).unwrap();
    std::fs::write(root.join("index.html"), "<h1>home</h1>").unwrap();
    std::fs::write(root.join("a.txt"), "alpha").unwrap();
    std::fs::write(root.join("docs/index.html"), "docs").unwrap();
    std::fs::write(root.join(".secret"), "hidden").unwrap();
    std::fs::write(outer.path().join("outside.txt"), "outside").unwrap();
    symlink(outer.path().join("outside.txt"), root.join("out")).unwrap();
    symlink(outer.path(), root.join("updir")).unwrap();
    symlink(root.join("a.txt"), root.join("alias.txt")).unwrap();
    let site = StaticSite::new(&root).unwrap();
    Fixture {
        _outer: outer,
        root,
        site,
    }
}

struct Got {
    status: StatusCode,
    headers: http::HeaderMap,
    body: Bytes,
}

async fn request(site: &StaticSite, method: Method, path: &str) -> Got {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .body(())
        .unwrap();
    let res = site.clone().call(req).await.unwrap();
    let (parts, body) = res.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    Got {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

async fn get(site: &StaticSite, path: &str) -> Got {
    request(site, Method::GET, path).await
}

#[tokio::test]
async fn serves_files_with_type_and_length() {
    let f = fixture();
    let got = get(&f.site, "/a.txt").await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.body, "alpha");
    assert_eq!(
        got.headers[header::CONTENT_TYPE],
        "text/plain; charset=utf-8"
    );
    assert_eq!(got.headers[header::CONTENT_LENGTH], "5");
    assert!(got.headers.contains_key(header::LAST_MODIFIED));
}

#[tokio::test]
async fn directories_serve_their_index() {
    let f = fixture();
    let got = get(&f.site, "/").await;
    assert_eq!(
        (got.status, &got.body[..]),
        (StatusCode::OK, &b"<h1>home</h1>"[..])
    );
    assert_eq!(
        got.headers[header::CONTENT_TYPE],
        "text/html; charset=utf-8"
    );
    let got = get(&f.site, "/docs/").await;
    assert_eq!((got.status, &got.body[..]), (StatusCode::OK, &b"docs"[..]));
    let got = get(&f.site, "/docs").await;
    assert_eq!(got.status, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(got.headers[header::LOCATION], "/docs/");
    let got = get(&f.site, "/docs?lang=en&x=%2F").await;
    assert_eq!(got.headers[header::LOCATION], "/docs/?lang=en&x=%2F");
    assert_eq!(get(&f.site, "/empty/").await.status, StatusCode::NOT_FOUND);
    assert_eq!(get(&f.site, "/a.txt/").await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn head_has_the_headers_and_no_body() {
    let f = fixture();
    let got = request(&f.site, Method::HEAD, "/a.txt").await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.headers[header::CONTENT_LENGTH], "5");
    assert!(got.body.is_empty());
}

#[tokio::test]
async fn other_methods_are_405_with_allow() {
    let f = fixture();
    for method in [Method::POST, Method::PUT, Method::DELETE, Method::OPTIONS] {
        let got = request(&f.site, method, "/a.txt").await;
        assert_eq!(got.status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(got.headers[header::ALLOW], "GET, HEAD");
    }
}

/// RFC 9110 §9.3.7: `OPTIONS *` asks about the server as a whole.
#[tokio::test]
async fn options_asterisk_is_answered() {
    let f = fixture();
    let got = request(&f.site, Method::OPTIONS, "*").await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.headers[header::ALLOW], "GET, HEAD");
    assert_eq!(got.headers[header::CONTENT_LENGTH], "0");
    assert!(got.body.is_empty());
    // `*` with another method is still refused.
    let got = request(&f.site, Method::GET, "*").await;
    assert_eq!(got.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn nothing_outside_the_root_is_served() {
    let f = fixture();
    let table = [
        ("/../outside.txt", StatusCode::BAD_REQUEST),
        ("/%2e%2e/outside.txt", StatusCode::BAD_REQUEST),
        ("/..%2foutside.txt", StatusCode::BAD_REQUEST),
        ("/a%5c..%5c", StatusCode::BAD_REQUEST),
        ("/a.txt%00.html", StatusCode::BAD_REQUEST),
        ("/out", StatusCode::FORBIDDEN),
        ("/updir/outside.txt", StatusCode::FORBIDDEN),
        ("/updir/", StatusCode::FORBIDDEN),
        ("/.secret", StatusCode::FORBIDDEN),
        ("/missing", StatusCode::NOT_FOUND),
    ];
    for (path, want) in table {
        let got = get(&f.site, path).await;
        assert_eq!(got.status, want, "{path}");
        assert!(!got.body.starts_with(b"outside"), "{path} leaked the file");
    }
    // A link that stays inside the root is fine.
    assert_eq!(get(&f.site, "/alias.txt").await.body, "alpha");
}

#[tokio::test]
async fn unreadable_files_are_403() {
    let f = fixture();
    let path = f.root.join("locked.txt");
    std::fs::write(&path, "locked").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
    // Root reads anything, so only check what an ordinary user would see.
    if std::fs::read(&path).is_err() {
        assert_eq!(
            get(&f.site, "/locked.txt").await.status,
            StatusCode::FORBIDDEN
        );
    }
}

#[tokio::test]
async fn large_files_stream_in_chunks() {
    let f = fixture();
    let data: Vec<u8> = (0..FILE_CHUNK * 3 + 123).map(|i| (i % 251) as u8).collect();
    std::fs::write(f.root.join("big.bin"), &data).unwrap();
    let req = Request::get("/big.bin").body(()).unwrap();
    let res = f.site.clone().call(req).await.unwrap();
    assert_eq!(
        res.headers()[header::CONTENT_TYPE],
        "application/octet-stream"
    );
    let mut body = res.into_body();
    let mut got = Vec::new();
    let mut frames = 0;
    while let Some(frame) = body.frame().await {
        let chunk = frame.unwrap().into_data().unwrap();
        assert!(chunk.len() <= FILE_CHUNK);
        got.extend_from_slice(&chunk);
        frames += 1;
    }
    assert!(frames >= 4);
    assert!(got == data);
}

#[test]
fn root_must_be_a_directory() {
    let f = fixture();
    let err = StaticSite::new(f.root.join("a.txt")).unwrap_err();
    assert!(err.to_string().contains("not a directory"), "{err}");
    let err = StaticSite::new(f.root.join("nope")).unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
}
