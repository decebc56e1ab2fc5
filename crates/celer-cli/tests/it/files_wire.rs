//! `celer serve --root` with the file flags, asked by curl: large files
//! through the engine's `sendfile(2)` path, ranges, precompressed siblings,
//! listings, Cache-Control, hidden names, and traversal attempts sent as
//! raw bytes.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::time::Duration;

use crate::support::{Celer, curl};

/// Bytes that are not a repetition, so a misplaced chunk shows.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i * 7 + i / 251) % 256) as u8).collect()
}

fn site() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("www");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("big.bin"), pattern(300 * 1024 + 7)).unwrap();
    std::fs::write(root.join("app.0a1b2c3d.js"), "plain();").unwrap();
    std::fs::write(root.join("app.0a1b2c3d.js.zst"), "ZSTD").unwrap();
    std::fs::write(root.join("sub/x <y>.txt"), "x").unwrap();
    std::fs::write(root.join(".secret"), "SECRET").unwrap();
    std::fs::write(dir.path().join("outside.txt"), "OUTSIDE").unwrap();
    symlink(dir.path().join("outside.txt"), root.join("link-out")).unwrap();
    (dir, root)
}

fn serve(root: &std::path::Path, flags: &[&str]) -> Celer {
    let mut args = vec![
        "--root",
        root.to_str().unwrap(),
        "--listen",
        "tcp://127.0.0.1:0",
    ];
    args.extend_from_slice(flags);
    Celer::serve(&args)
}

#[test]
fn large_files_and_ranges_arrive_byte_exact() {
    let (_dir, root) = site();
    let celer = serve(&root, &[]);
    let data = pattern(300 * 1024 + 7);
    let got = curl(&[&format!("{}/big.bin", celer.url())]);
    assert_eq!(got.status, 200);
    assert_eq!(got.body, data);
    let got = curl(&["-r", "70000-200000", &format!("{}/big.bin", celer.url())]);
    assert_eq!(got.status, 206);
    assert_eq!(
        got.header("content-range"),
        Some("bytes 70000-200000/307207")
    );
    assert_eq!(got.body, &data[70000..=200000]);
    // Two requests on one connection: the second after a sendfile body.
    let out = std::process::Command::new("curl")
        .args([
            "-s",
            "--max-time",
            "20",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{num_connects}\n",
        ])
        .arg(format!("{}/big.bin", celer.url()))
        .arg(format!("{}/big.bin", celer.url()))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text, "200 1\n200 0\n", "keep-alive after a file body");
}

#[test]
fn head_matches_get() {
    let (_dir, root) = site();
    let celer = serve(&root, &[]);
    let url = format!("{}/big.bin", celer.url());
    let get = curl(&[&url]);
    let head = curl(&["-I", &url]);
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    for name in [
        "content-length",
        "etag",
        "last-modified",
        "content-type",
        "accept-ranges",
    ] {
        assert_eq!(head.header(name), get.header(name), "{name}");
    }
}

#[test]
fn file_flags_shape_the_answers() {
    let (_dir, root) = site();
    let celer = serve(
        &root,
        &[
            "--listing",
            "--hidden",
            "ignore",
            "--cache-max-age",
            "60",
            "--cache-public",
            "--cache-immutable",
        ],
    );
    let url = celer.url();
    let js = curl(&[
        "-H",
        "accept-encoding: zstd",
        &format!("{url}/app.0a1b2c3d.js"),
    ]);
    assert_eq!(
        (js.header("content-encoding"), js.text().as_str()),
        (Some("zstd"), "ZSTD")
    );
    assert_eq!(js.header("vary"), Some("accept-encoding"));
    assert_eq!(
        js.header("cache-control"),
        Some("public, max-age=31536000, immutable")
    );
    let list = curl(&[&format!("{url}/sub/")]);
    assert!(
        list.text()
            .contains("<a href=\"./x%20%3Cy%3E.txt\">x &lt;y&gt;.txt</a>"),
        "{}",
        list.text()
    );
    let listed = curl(&[&format!("{url}/")]).text();
    assert!(
        listed.contains("big.bin") && !listed.contains("secret"),
        "{listed}"
    );
    assert_eq!(curl(&[&format!("{url}/.secret")]).status, 404);
    assert_eq!(curl(&[&format!("{url}/link-out")]).status, 403);

    let plain = serve(&root, &["--no-precompressed", "--symlinks", "follow"]);
    let js = curl(&[
        "-H",
        "accept-encoding: zstd",
        &format!("{}/app.0a1b2c3d.js", plain.url()),
    ]);
    assert_eq!(
        (js.header("content-encoding"), js.text().as_str()),
        (None, "plain();")
    );
    assert_eq!(
        curl(&[&format!("{}/link-out", plain.url())]).text(),
        "OUTSIDE"
    );
}

/// Sends one raw request line and returns the status and the response.
fn raw(port: u16, target: &[u8]) -> (u16, Vec<u8>) {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut req = b"GET ".to_vec();
    req.extend_from_slice(target);
    req.extend_from_slice(b" HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    conn.write_all(&req).unwrap();
    let mut out = Vec::new();
    let _ = conn.read_to_end(&mut out);
    let status = std::str::from_utf8(&out[9..12]).map_or(0, |s| s.parse().unwrap_or(0));
    (status, out)
}

#[test]
fn traversal_attempts_never_leave_the_root() {
    let (_dir, root) = site();
    let celer = serve(&root, &["--hidden", "allow"]);
    for target in [
        &b"/../outside.txt"[..],
        b"/%2e%2e/outside.txt",
        b"/%2E%2E%2Foutside.txt",
        b"/sub/..%2F..%2Foutside.txt",
        b"/sub/%2e%2e/%2e%2e/outside.txt",
        b"/..%5Coutside.txt",
        b"/sub%5C..%5C..%5Coutside.txt",
        b"/..\\outside.txt",
        b"/outside.txt%00",
        b"/%252e%252e/outside.txt",
        b"/%c0%ae%c0%ae/outside.txt",
        b"/.%2e/outside.txt",
        b"/link-out",
        b"//outside.txt",
    ] {
        let (status, out) = raw(celer.port(), target);
        assert!(
            matches!(status, 400 | 403 | 404),
            "{}: {status}",
            String::from_utf8_lossy(target)
        );
        assert!(
            !out.windows(7).any(|w| w == b"OUTSIDE"),
            "{}",
            String::from_utf8_lossy(target)
        );
    }
}

#[test]
fn help_documents_the_file_flags_and_they_need_a_root() {
    let (code, help) = crate::support::run_celer_stdout(&["serve", "--help"]);
    assert_eq!(code, Some(0));
    for flag in [
        "--index",
        "--listing",
        "--hidden",
        "--symlinks",
        "--cache-max-age",
        "--cache-public",
        "--cache-immutable",
        "--no-precompressed",
    ] {
        assert!(help.contains(flag), "{flag} missing from --help");
    }
    let (code, stderr) = crate::support::run_celer(&["serve", "--listing"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--root"), "{stderr}");
    let (code, stderr) = crate::support::run_celer(&["serve", "--root", "/nonexistent/dir"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("/nonexistent/dir"), "{stderr}");
}
