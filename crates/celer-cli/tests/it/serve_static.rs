//! `celer serve --root DIR`: files, types, errors and path confinement.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use crate::support::{Celer, curl, py_request, python};

/// Content outside the root that no request may ever return.
const SECRET: &str = "TOP-SECRET-OUTSIDE-THE-ROOT";

/// A root directory inside a temp dir, with a secret file beside it.
struct Site {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

fn site() -> Site {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("www");
    let files: &[(&str, &str)] = &[
        ("index.html", "<!doctype html><title>home</title>"),
        ("style.css", "body { color: red }"),
        ("app.js", "console.log(1)"),
        ("data.json", "{\"ok\":true}"),
        ("notes.txt", "plain text"),
        ("logo.svg", "<svg/>"),
        ("blob.bin", "\u{1}\u{2}"),
        ("docs/index.html", "docs home"),
        ("docs/guide.md", "# guide"),
        (".env", SECRET),
    ];
    for (name, content) in files {
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    std::fs::write(dir.path().join("secret.txt"), SECRET).unwrap();
    symlink(dir.path().join("secret.txt"), root.join("escape.txt")).unwrap();
    symlink(dir.path(), root.join("parent")).unwrap();
    symlink(root.join("notes.txt"), root.join("inside.txt")).unwrap();
    Site { _dir: dir, root }
}

fn serve(root: &Path, extra: &[&str]) -> Celer {
    let mut args = vec![
        "--root",
        root.to_str().unwrap(),
        "--listen",
        "tcp://127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    Celer::serve(&args)
}

#[test]
fn index_and_content_types() {
    let site = site();
    let celer = serve(&site.root, &[]);
    let base = celer.url();
    let reply = curl(&[&format!("{base}/")]);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), "<!doctype html><title>home</title>");
    let table = [
        ("/index.html", "text/html; charset=utf-8"),
        ("/style.css", "text/css; charset=utf-8"),
        ("/app.js", "text/javascript; charset=utf-8"),
        ("/data.json", "application/json"),
        ("/notes.txt", "text/plain; charset=utf-8"),
        ("/logo.svg", "image/svg+xml"),
        ("/blob.bin", "application/octet-stream"),
        ("/docs/guide.md", "text/markdown; charset=utf-8"),
        ("/docs/", "text/html; charset=utf-8"),
    ];
    for (path, want) in table {
        let reply = curl(&[&format!("{base}{path}")]);
        assert_eq!(reply.status, 200, "{path}");
        assert_eq!(reply.header("content-type"), Some(want), "{path}");
        let len = reply
            .header("content-length")
            .unwrap()
            .parse::<usize>()
            .unwrap();
        assert_eq!(len, reply.body.len(), "{path}");
        assert!(reply.header("last-modified").is_some(), "{path}");
    }
}

#[test]
fn directories_redirect_to_the_slash_form() {
    let site = site();
    let celer = serve(&site.root, &[]);
    let reply = curl(&[&format!("{}/docs?x=1", celer.url())]);
    assert_eq!(reply.status, 301);
    assert_eq!(reply.header("location"), Some("/docs/?x=1"));
    let reply = curl(&["-L", &format!("{}/docs", celer.url())]);
    assert_eq!((reply.status, reply.text().as_str()), (200, "docs home"));
}

#[test]
fn missing_is_404() {
    let site = site();
    let celer = serve(&site.root, &[]);
    for path in ["/nope", "/docs/nope.html", "/notes.txt/", "/notes.txt/x"] {
        let reply = curl(&[&format!("{}{path}", celer.url())]);
        assert_eq!(reply.status, 404, "{path}");
    }
}

#[test]
fn other_methods_are_405_with_allow() {
    let site = site();
    let celer = serve(&site.root, &[]);
    for method in ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"] {
        let reply = curl(&["-X", method, &format!("{}/notes.txt", celer.url())]);
        assert_eq!(reply.status, 405, "{method}");
        assert_eq!(reply.header("allow"), Some("GET, HEAD"), "{method}");
    }
}

#[test]
fn head_sends_the_get_headers_and_no_body() {
    let site = site();
    let celer = serve(&site.root, &[]);
    for path in ["/notes.txt", "/", "/nope"] {
        let (get_status, get_headers, get_len) = py_request(celer.port(), "GET", path);
        let (status, headers, len) = py_request(celer.port(), "HEAD", path);
        assert_eq!(status, get_status, "{path}");
        assert_eq!(len, 0, "{path}");
        let pick = |h: &[(String, String)], name: &str| {
            h.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
        };
        for name in ["content-type", "content-length", "last-modified"] {
            assert_eq!(
                pick(&headers, name),
                pick(&get_headers, name),
                "{path} {name}"
            );
        }
        assert_eq!(
            pick(&headers, "content-length"),
            Some(get_len.to_string()),
            "{path}"
        );
    }
    // curl agrees: the head has the length, nothing follows it.
    let reply = curl(&["-I", &format!("{}/notes.txt", celer.url())]);
    assert_eq!(reply.header("content-length"), Some("10"));
    assert!(reply.body.is_empty());
}

#[test]
fn no_path_escapes_the_root() {
    let site = site();
    let celer = serve(&site.root, &[]);
    let paths = [
        "/../secret.txt",
        "/../../../../etc/passwd",
        "/%2e%2e/secret.txt",
        "/%2E%2E/%2E%2E/etc/passwd",
        "/.%2e/secret.txt",
        "/..%2fsecret.txt",
        "/docs/..%2f..%2fsecret.txt",
        "/a\\..\\secret.txt",
        "/a%5c..%5csecret.txt",
        "/notes.txt%00.html",
        "/%00",
        "/escape.txt",
        "/parent/secret.txt",
        "/.env",
        "/%2eenv",
    ];
    for path in paths {
        let reply = curl(&["--path-as-is", &format!("{}{path}", celer.url())]);
        assert!(
            [400, 403, 404].contains(&reply.status),
            "{path}: status {}",
            reply.status
        );
        assert!(!reply.text().contains(SECRET), "{path} leaked the secret");
        assert!(!reply.text().contains("root:"), "{path} leaked /etc/passwd");
    }
    // Python sends the target byte for byte, with no normalisation at all.
    for path in [
        "/../secret.txt",
        "/a\\..\\secret.txt",
        "/%2e%2e%2fsecret.txt",
    ] {
        let (status, _, _) = py_request(celer.port(), "GET", path);
        assert!([400, 403, 404].contains(&status), "{path}: status {status}");
    }
    // A symlink that stays inside the root is served, and so is a path
    // that leaves through a link and comes back: only where it ends counts.
    let reply = curl(&[&format!("{}/parent/www/notes.txt", celer.url())]);
    assert_eq!(reply.status, 200);
    let reply = curl(&[&format!("{}/inside.txt", celer.url())]);
    assert_eq!((reply.status, reply.text().as_str()), (200, "plain text"));
}

#[test]
fn refusals_have_specific_statuses() {
    let site = site();
    let celer = serve(&site.root, &[]);
    let table = [
        ("/%2e%2e/secret.txt", 400),
        ("/a%5cb", 400),
        ("/x%00", 400),
        ("/escape.txt", 403),
        ("/.env", 403),
    ];
    for (path, want) in table {
        let reply = curl(&["--path-as-is", &format!("{}{path}", celer.url())]);
        assert_eq!(reply.status, want, "{path}");
    }
}

#[test]
fn large_files_arrive_whole() {
    let site = site();
    let data: Vec<u8> = (0..5 * 1024 * 1024 + 7)
        .map(|i: u32| (i % 253) as u8)
        .collect();
    std::fs::write(site.root.join("big.bin"), &data).unwrap();
    let celer = serve(&site.root, &[]);
    let script = r#"
import http.client, sys, hashlib
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=20)
c.request("GET", "/big.bin")
r = c.getresponse()
body = r.read()
print(r.status, r.getheader("content-length"), len(body), hashlib.sha256(body).hexdigest())
"#;
    let out = python(script, &[&celer.port().to_string()]);
    let want = python(
        "import sys, hashlib; print(hashlib.sha256(open(sys.argv[1], 'rb').read()).hexdigest())",
        &[site.root.join("big.bin").to_str().unwrap()],
    );
    let n = data.len();
    assert_eq!(out.trim(), format!("200 {n} {n} {}", want.trim()));
}

#[test]
fn unix_socket_listener() {
    let site = site();
    let sock = site.root.parent().unwrap().join("celer.sock");
    let spec = format!("unix:{}", sock.display());
    let mut celer = Celer::serve(&[
        "--root",
        site.root.to_str().unwrap(),
        "--listen",
        &spec,
        "--listen",
        "tcp://127.0.0.1:0",
        "--unix-mode",
        "600",
    ]);
    assert!(celer.specs.contains(&spec), "{:?}", celer.specs);
    let reply = curl(&[
        "--unix-socket",
        sock.to_str().unwrap(),
        "http://localhost/notes.txt",
    ]);
    assert_eq!((reply.status, reply.text().as_str()), (200, "plain text"));
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&sock).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    celer.signal("TERM");
    assert!(celer.wait().success());
    assert!(!sock.exists(), "the socket file is removed at exit");
}

#[test]
fn server_header_is_configurable() {
    let site = site();
    let celer = serve(&site.root, &[]);
    let reply = curl(&[&format!("{}/notes.txt", celer.url())]);
    assert_eq!(reply.header("server"), Some("celer"));
    let celer = serve(&site.root, &["--server-header", "example/1.0"]);
    let reply = curl(&[&format!("{}/notes.txt", celer.url())]);
    assert_eq!(reply.header("server"), Some("example/1.0"));
    let celer = serve(&site.root, &["--no-server-header"]);
    let reply = curl(&[&format!("{}/notes.txt", celer.url())]);
    assert_eq!(reply.header("server"), None);
}

#[test]
fn work_stealing_threading_serves_too() {
    let site = site();
    let celer = serve(
        &site.root,
        &["--threading", "work-stealing", "--workers", "2"],
    );
    let reply = curl(&[&format!("{}/notes.txt", celer.url())]);
    assert_eq!((reply.status, reply.text().as_str()), (200, "plain text"));
}

/// `--open-file-cache`: a file changed in place is served as it now is at
/// once; a file replaced, or created where a request found none, is seen
/// only once its entry expires (pinned here with a validity no test
/// outlives, and with the cache off).
#[test]
fn open_file_cache_reuses_descriptors_within_its_validity() {
    let site = site();
    let page = site.root.join("cached.txt");
    let fresh = site.root.join("fresh.txt");
    std::fs::write(&page, "first").unwrap();
    let replace = |text: &str| {
        let tmp = site.root.join("tmp.new");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &page).unwrap();
    };

    // One worker: each worker thread keeps its own table.
    let celer = serve(&site.root, &["--open-file-cache", "3600", "--workers", "1"]);
    let url = |name: &str| format!("{}{name}", celer.url());
    assert_eq!(curl(&[&url("/cached.txt")]).text(), "first");
    assert_eq!(curl(&[&url("/fresh.txt")]).status, 404);
    // Changed in place (same descriptor): the new bytes and length at once.
    std::fs::write(&page, "second!").unwrap();
    let reply = curl(&[&url("/cached.txt")]);
    assert_eq!(
        (reply.text().as_str(), reply.header("content-length")),
        ("second!", Some("7"))
    );
    // Replaced by a rename, and created: the cached answers stand.
    replace("third");
    std::fs::write(&fresh, "new").unwrap();
    assert_eq!(curl(&[&url("/cached.txt")]).text(), "second!");
    assert_eq!(curl(&[&url("/fresh.txt")]).status, 404);
    drop(celer);

    let celer = serve(&site.root, &["--open-file-cache", "0"]);
    let url = |name: &str| format!("{}{name}", celer.url());
    assert_eq!(curl(&[&url("/cached.txt")]).text(), "third");
    replace("fourth");
    assert_eq!(curl(&[&url("/cached.txt")]).text(), "fourth");
    assert_eq!(curl(&[&url("/fresh.txt")]).text(), "new");
}
