//! `celer serve --root` against nginx on the same directory: conditional
//! requests, ranges and HEAD, asked by Python's `http.client`, compared
//! status by status, Content-Range by Content-Range, byte by byte (for
//! multipart answers: each part's range and bytes, not the boundary).
//!
//! Where nginx departs from RFC 9110 the row says so and asserts the RFC's
//! answer for Celer; where the RFC allows both answers (coalescing
//! overlapping ranges) the row asserts each server's answer is a correct
//! one.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use celer_test_support::run_tool;
use serde_json::{Value, json};

use crate::support::{Celer, DEADLINE};

/// The Python client: asks each server the same requests, with `{etag}` and
/// `{lm}` replaced by that server's own validators for the path.
const CLIENT: &str = include_str!("files_client.py");

/// A running nginx serving a directory, stopped by PID on drop.
struct Nginx {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Nginx {
    fn serve(root: &Path) -> Nginx {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let d = dir.path().display();
        let conf = format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
             error_log {d}/error.log warn;\nevents {{ worker_connections 64; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {d}/cb;\n  proxy_temp_path {d}/px;\n\
             fastcgi_temp_path {d}/fc;\n  uwsgi_temp_path {d}/uw;\n  scgi_temp_path {d}/sc;\n\
             types {{ text/plain txt; }}\n  default_type application/octet-stream;\n\
             # RFC 9110 §13.1.3: not modified when Last-Modified <= the date.\n\
             if_modified_since before;\n\
             server {{ listen 127.0.0.1:{port}; root {root}; }}\n}}\n",
            root = root.display()
        );
        let conf_path = dir.path().join("nginx.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let child = Command::new(nginx_binary())
            .arg("-p")
            .arg(dir.path())
            .arg("-e")
            .arg(dir.path().join("error.log"))
            .arg("-c")
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx is installed by scripts/test");
        let nginx = Nginx {
            child,
            port,
            _dir: dir,
        };
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(start.elapsed() < DEADLINE, "nginx did not start listening");
            std::thread::sleep(Duration::from_millis(20));
        }
        nginx
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// nginx from PATH, or where Debian installs it (/usr/sbin is not on every
/// user's PATH).
fn nginx_binary() -> PathBuf {
    let in_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("nginx"))
            .find(|p| p.is_file())
    });
    in_path.unwrap_or_else(|| PathBuf::from("/usr/sbin/nginx"))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// What a row expects.
enum Want {
    /// Same status, Content-Range and bytes as nginx.
    Same,
    /// nginx departs from RFC 9110 here; Celer answers `status` (the RFC's
    /// answer) and nginx `nginx`.
    NginxWrong {
        status: u16,
        nginx: u16,
        why: &'static str,
    },
    /// RFC 9110 §14.2 lets a server coalesce overlapping ranges: Celer
    /// answers one range covering them; nginx sends them as they were
    /// asked. Both carry the right bytes for what they claim.
    Coalesced { range: &'static str },
}

struct Row {
    method: &'static str,
    path: &'static str,
    headers: &'static [(&'static str, &'static str)],
    want: Want,
}

const fn row(
    method: &'static str,
    path: &'static str,
    headers: &'static [(&'static str, &'static str)],
) -> Row {
    Row {
        method,
        path,
        headers,
        want: Want::Same,
    }
}

const OLD: &str = "Mon, 01 Jan 2001 00:00:00 GMT";
const FUTURE: &str = "Fri, 01 Jan 2100 00:00:00 GMT";

fn rows() -> Vec<Row> {
    vec![
        row("GET", "/hello.txt", &[]),
        row("HEAD", "/hello.txt", &[]),
        row("GET", "/digits.bin", &[]),
        // If-None-Match: strong, weak, `*`, a list, no match.
        row("GET", "/hello.txt", &[("if-none-match", "{etag}")]),
        row("GET", "/hello.txt", &[("if-none-match", "W/{etag}")]),
        row("GET", "/hello.txt", &[("if-none-match", "*")]),
        row("GET", "/hello.txt", &[("if-none-match", "\"a\", {etag}")]),
        row("GET", "/hello.txt", &[("if-none-match", "\"other\"")]),
        row("HEAD", "/hello.txt", &[("if-none-match", "{etag}")]),
        // If-Modified-Since: equal, older, later; ignored beside If-None-Match.
        row("GET", "/hello.txt", &[("if-modified-since", "{lm}")]),
        row("GET", "/hello.txt", &[("if-modified-since", OLD)]),
        row("GET", "/hello.txt", &[("if-modified-since", FUTURE)]),
        row(
            "GET",
            "/hello.txt",
            &[
                ("if-none-match", "\"other\""),
                ("if-modified-since", "{lm}"),
            ],
        ),
        // If-Match and If-Unmodified-Since.
        row("GET", "/hello.txt", &[("if-match", "{etag}")]),
        row("GET", "/hello.txt", &[("if-match", "*")]),
        row("GET", "/hello.txt", &[("if-match", "\"other\"")]),
        row("GET", "/hello.txt", &[("if-unmodified-since", OLD)]),
        row("GET", "/hello.txt", &[("if-unmodified-since", "{lm}")]),
        row(
            "GET",
            "/hello.txt",
            &[("if-match", "\"other\""), ("if-none-match", "{etag}")],
        ),
        Row {
            want: Want::NginxWrong {
                status: 200,
                nginx: 412,
                why: "RFC 9110 §13.1.4: If-Unmodified-Since is ignored when If-Match is present",
            },
            ..row(
                "GET",
                "/hello.txt",
                &[("if-match", "{etag}"), ("if-unmodified-since", OLD)],
            )
        },
        // Ranges: single, suffix, open-ended, clipped, multiple, unsatisfiable.
        row("GET", "/digits.bin", &[("range", "bytes=0-4")]),
        row("GET", "/digits.bin", &[("range", "bytes=-5")]),
        row("GET", "/digits.bin", &[("range", "bytes=95-")]),
        row("GET", "/digits.bin", &[("range", "bytes=90-200")]),
        row("GET", "/digits.bin", &[("range", "bytes=-200")]),
        row("GET", "/digits.bin", &[("range", "bytes=0-0,10-12,50-")]),
        row("GET", "/digits.bin", &[("range", "bytes=60-61, 5-6")]),
        row("GET", "/digits.bin", &[("range", "bytes=100-")]),
        row("GET", "/digits.bin", &[("range", "bytes=100-200, 300-")]),
        row("GET", "/digits.bin", &[("range", "bytes=-0")]),
        row("GET", "/hello.txt", &[("range", "bytes=7-")]),
        Row {
            want: Want::Coalesced {
                range: "bytes 0-8/100",
            },
            ..row("GET", "/digits.bin", &[("range", "bytes=0-5,3-8")])
        },
        Row {
            want: Want::NginxWrong {
                status: 200,
                nginx: 416,
                why: "RFC 9110 §14.1.1/§14.2: a range whose last position is before its first is invalid and the field is ignored; 416 is for valid ranges that miss the representation",
            },
            ..row("GET", "/digits.bin", &[("range", "bytes=5-1")])
        },
        // If-Range with the current and stale validators.
        row(
            "GET",
            "/digits.bin",
            &[("range", "bytes=1-3"), ("if-range", "{etag}")],
        ),
        row(
            "GET",
            "/digits.bin",
            &[("range", "bytes=1-3"), ("if-range", "\"stale\"")],
        ),
        row(
            "GET",
            "/digits.bin",
            &[("range", "bytes=1-3"), ("if-range", "{lm}")],
        ),
        row(
            "GET",
            "/digits.bin",
            &[("range", "bytes=1-3"), ("if-range", OLD)],
        ),
        // Conditionals before ranges.
        row(
            "GET",
            "/digits.bin",
            &[("range", "bytes=1-3"), ("if-none-match", "{etag}")],
        ),
        row(
            "GET",
            "/digits.bin",
            &[("range", "bytes=1-3"), ("if-match", "\"other\"")],
        ),
        Row {
            want: Want::NginxWrong {
                status: 200,
                nginx: 206,
                why: "RFC 9110 §14.2: range handling is defined for GET only; a Range on HEAD MUST be ignored",
            },
            ..row("HEAD", "/digits.bin", &[("range", "bytes=0-4")])
        },
        row("GET", "/missing.txt", &[]),
    ]
}

/// A site with the 13-byte file and 100 digits.
fn site() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("www");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("hello.txt"), "Hello, World!").unwrap();
    let digits: String = (0..100)
        .map(|i| char::from(b'0' + (i % 10) as u8))
        .collect();
    std::fs::write(root.join("digits.bin"), digits).unwrap();
    (dir, root)
}

/// One answer as the client saw it.
#[derive(Debug, PartialEq)]
struct Seen {
    status: u16,
    content_range: Option<String>,
    /// The body, or for multipart/byteranges the parts' (range, bytes).
    parts: Vec<(Option<String>, Vec<u8>)>,
}

fn seen(v: &Value) -> Seen {
    let body = hex(v["body"].as_str().unwrap());
    let ctype = v["content_type"].as_str().unwrap_or("");
    let status = v["status"].as_u64().unwrap() as u16;
    let parts = match ctype.split_once("boundary=") {
        // Error pages are each server's own prose.
        _ if status >= 300 => Vec::new(),
        Some((_, boundary)) if ctype.starts_with("multipart/byteranges") => {
            multipart(&body, boundary.trim_matches('"'))
        }
        _ => vec![(None, body)],
    };
    Seen {
        status,
        content_range: v["content_range"].as_str().map(str::to_owned),
        parts,
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The parts of a multipart/byteranges body as (Content-Range, bytes).
fn multipart(body: &[u8], boundary: &str) -> Vec<(Option<String>, Vec<u8>)> {
    let delim = format!("--{boundary}");
    let mut parts = Vec::new();
    let mut rest = body;
    while let Some(at) = find(rest, delim.as_bytes()) {
        rest = &rest[at + delim.len()..];
        if rest.starts_with(b"--") {
            break;
        }
        let head_end = find(rest, b"\r\n\r\n").expect("part head");
        let head = String::from_utf8_lossy(&rest[..head_end]).to_ascii_lowercase();
        let range = head
            .lines()
            .find_map(|l| l.strip_prefix("content-range: "))
            .expect("content-range")
            .to_owned();
        let (first, last) = span(&range);
        let len = (last - first + 1) as usize;
        parts.push((Some(range), rest[head_end + 4..head_end + 4 + len].to_vec()));
        rest = &rest[head_end + 4 + len..];
    }
    parts
}

/// `bytes A-B/LEN` → (A, B).
fn span(range: &str) -> (u64, u64) {
    let (a, rest) = range["bytes ".len()..].split_once('-').unwrap();
    let b = rest.split('/').next().unwrap();
    (a.parse().unwrap(), b.parse().unwrap())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Every byte a 206 claims (in Content-Range or in its parts) is the
/// file's byte at that position.
fn assert_bytes_true(seen: &Seen, file: &[u8], who: &str) {
    let claims: Vec<(String, &Vec<u8>)> = match &seen.content_range {
        Some(range) => vec![(range.clone(), &seen.parts[0].1)],
        None => seen
            .parts
            .iter()
            .map(|(r, b)| (r.clone().unwrap(), b))
            .collect(),
    };
    for (range, bytes) in claims {
        let (a, b) = span(&range);
        assert_eq!(&file[a as usize..=b as usize], &bytes[..], "{who}: {range}");
    }
}

#[test]
fn conditionals_and_ranges_match_nginx() {
    let (_dir, root) = site();
    let nginx = Nginx::serve(&root);
    let celer = Celer::serve(&[
        "--root",
        root.to_str().unwrap(),
        "--listen",
        "tcp://127.0.0.1:0",
    ]);
    let rows = rows();
    let requests: Vec<Value> = rows
        .iter()
        .map(|r| json!({"method": r.method, "path": r.path, "headers": r.headers}))
        .collect();
    let spec = json!({
        "servers": {"celer": celer.port(), "nginx": nginx.port},
        "requests": requests,
    });
    let out = run_tool(
        Command::new("python3")
            .arg("-c")
            .arg(CLIENT)
            .arg(spec.to_string()),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answers: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut failures = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let ours = seen(&answers["celer"][i]);
        let theirs = seen(&answers["nginx"][i]);
        let what = format!("{} {} {:?}", row.method, row.path, row.headers);
        let file = std::fs::read(root.join(&row.path[1..])).unwrap_or_default();
        match row.want {
            Want::Same => {
                if ours != theirs {
                    failures.push(format!("{what}:\n  celer {ours:?}\n  nginx {theirs:?}"));
                }
            }
            Want::NginxWrong { status, nginx, why } => {
                if ours.status != status || theirs.status != nginx {
                    failures.push(format!(
                        "{what} ({why}): celer {}, nginx {}",
                        ours.status, theirs.status
                    ));
                }
            }
            Want::Coalesced { range } => {
                assert_eq!(
                    (ours.status, ours.content_range.as_deref()),
                    (206, Some(range)),
                    "{what}"
                );
                assert_eq!(theirs.status, 206, "{what}");
                assert_bytes_true(&ours, &file, "celer");
                assert_bytes_true(&theirs, &file, "nginx");
            }
        }
        if ours.status == 206 {
            assert_bytes_true(&ours, &file, &what);
        }
    }
    assert!(
        failures.is_empty(),
        "{} rows differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
