//! Multipart uploads and urlencoded forms over the wire. The large and
//! hostile bodies go to a sink server in its own process (this test binary
//! run again, see [`sink_main`]), whose resident memory (`VmRSS` in /proc)
//! is sampled while a Python client generates the body on the fly.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use std::collections::HashMap;

use celer::form::FormLimits;
use celer::multipart::Multipart;
use celer::{App, Error, Request};

use crate::wire::{Served, curl};

const MIB: u64 = 1024 * 1024;

/// The Python client: sends one request whose body it generates as it
/// goes (`case` names the body), then prints the status line and body of
/// the answer. Sending may fail once the server has answered early; the
/// answer is read anyway.
const CLIENT: &str = r#"
import socket, sys
port, path, case, size = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
B = b'B0uNd'
MP = 'multipart/form-data; boundary=B0uNd'
def part(name, filename=None):
    d = b'Content-Disposition: form-data; name="' + name + b'"'
    if filename:
        d += b'; filename="' + filename + b'"'
    return b'--' + B + b'\r\n' + d + b'\r\n\r\n'
block = bytes(range(256)) * 4096  # 1 MiB, with CRs and dashes in it
def repeat(n):
    while n:
        k = min(n, len(block))
        yield block[:k]
        n -= k
if case == 'big':
    pre = part(b'title') + b'hello\r\n' + part(b'big', b'big.bin')
    post = b'\r\n' + part(b'after') + b'ok\r\n--' + B + b'--\r\n'
    chunks, length, ctype = [pre, repeat(size), post], len(pre) + size + len(post), MP
elif case == 'truncated':
    pre = part(b'f', b'a.bin')
    chunks, length, ctype = [pre, repeat(size)], len(pre) + size, MP
elif case == 'no-boundary':
    chunks, length, ctype = [repeat(size)], size, MP
elif case == 'malformed':
    body = part(b'a') + b'x\r\n--' + B + b'garbage\r\n\r\n'
    chunks, length, ctype = [body], len(body), MP
elif case == 'tiny-parts':
    body = b''.join(part(b'p') + b'x\r\n' for _ in range(size)) + b'--' + B + b'--\r\n'
    chunks, length, ctype = [body], len(body), MP
elif case == 'huge-head':
    pre = b'--' + B + b'\r\nX-Pad: '
    post = b'\r\nContent-Disposition: form-data; name="a"\r\n\r\nx\r\n--' + B + b'--\r\n'
    chunks, length, ctype = [pre, (b'a' * len(c) for c in repeat(size)), post], len(pre) + size + len(post), MP
elif case == 'fields':
    body = b'&'.join(b'f%d=1' % i for i in range(size))
    chunks, length, ctype = [body], len(body), 'application/x-www-form-urlencoded'
s = socket.create_connection(('127.0.0.1', port))
s.sendall(b'POST %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n'
          % (path.encode(), ctype.encode(), length))
try:
    for c in chunks:
        for piece in ([c] if isinstance(c, bytes) else c):
            s.sendall(piece)
    s.shutdown(socket.SHUT_WR)
except OSError:
    pass
data = b''
try:
    while True:
        got = s.recv(65536)
        if not got:
            break
        data += got
except OSError:
    pass
head, _, body = data.partition(b'\r\n\r\n')
print(head.split(b'\r\n')[0].decode(), body.decode(errors='replace'), sep='\n', end='')
"#;

/// Set in the environment of the sink process.
const SINK_ENV: &str = "CELER_TEST_UPLOAD_SINK";

async fn sink_upload(mut req: Request) -> Result<String, Error> {
    let mut form: Multipart = req.extract().await?;
    let mut out = Vec::new();
    while let Some(mut part) = form.next_part().await? {
        let name = part.name().to_owned();
        let mut len = 0u64;
        while let Some(chunk) = part.chunk().await? {
            len += chunk.len() as u64;
        }
        out.push(format!("{name}={len}"));
    }
    Ok(out.join("&"))
}

async fn sink_form(mut req: Request) -> Result<String, Error> {
    let limits = FormLimits {
        bytes: 8 << 20,
        fields: 1000,
    };
    let fields: HashMap<String, String> = limits.read(&mut req).await?;
    Ok(fields.len().to_string())
}

/// The sink: prints `port=N`, then serves `POST /upload` (body limit
/// 2 GiB), which streams every part to a counter and answers `name=len`
/// for each, and `POST /form` (an 8 MiB urlencoded form of at most 1,000
/// fields), until stdin closes.
fn sink_main() {
    let mut app = App::new();
    app.post("/upload", sink_upload).body_limit(2 << 30);
    app.post("/form", sink_form).body_limit(8 << 20);
    let bound = celer::serve::Server::builder()
        .listen("tcp://127.0.0.1:0".parse().expect("listen spec"))
        .workers(1)
        .bind()
        .expect("bind");
    println!("port={}", bound.tcp_addr().expect("tcp address").port());
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
        let _ = tx.send(());
    });
    let signal = async move {
        let _ = tokio::task::spawn_blocking(move || rx.recv()).await;
    };
    app.run(bound, signal).expect("serve");
}

/// In the sink process, this test is the sink; otherwise it starts one
/// and checks a small upload through it.
#[test]
fn the_sink_should_count_the_parts_of_an_upload() {
    if std::env::var_os(SINK_ENV).is_some() {
        return sink_main();
    }
    let sink = Sink::start();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (status, body, _) = rt.block_on(sink.send("/upload", "big", 3));
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(body, "title=5&big=3&after=2");
}

/// The sink server running in its own process.
struct Sink {
    child: Child,
    port: u16,
}

impl Sink {
    fn start() -> Sink {
        let exe = std::env::current_exe().expect("test binary");
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "multipart::the_sink_should_count_the_parts_of_an_upload",
            ])
            .args(["--nocapture", "--test-threads=1"])
            .env(SINK_ENV, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|err| panic!("{}: {err}", exe.display()));
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let port = loop {
            let line = lines
                .next()
                .expect("the sink printed its port")
                .expect("stdout");
            if let Some((_, port)) = line.split_once("port=") {
                break port.parse().expect("port");
            }
        };
        // Keep reading so the sink never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Sink { child, port }
    }

    fn rss_bytes(&self) -> u64 {
        rss_of(self.child.id())
    }

    /// Sends the `case` body and returns (status line, body, peak RSS
    /// while it ran).
    async fn send(&self, path: &str, case: &str, size: u64) -> (String, String, u64) {
        let peak = Arc::new(AtomicU64::new(self.rss_bytes()));
        let done = Arc::new(AtomicBool::new(false));
        let sampler = {
            let (peak, done, pid) = (peak.clone(), done.clone(), self.child.id());
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    peak.fetch_max(rss_of(pid), Ordering::Relaxed);
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            })
        };
        let port = self.port.to_string();
        let size = size.to_string();
        let args = [port, path.to_owned(), case.to_owned(), size];
        let out = tokio::task::spawn_blocking(move || client(&args))
            .await
            .expect("client thread");
        done.store(true, Ordering::Relaxed);
        sampler.join().expect("sampler");
        let (status, body) = out.split_once('\n').unwrap_or((&out, ""));
        (
            status.to_owned(),
            body.to_owned(),
            peak.load(Ordering::Relaxed),
        )
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        // Closing stdin shuts the server down; kill it if it lingers.
        drop(self.child.stdin.take());
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long one client run may take: a gigabyte through a debug build on
/// a busy machine takes far longer than the other tools' bound.
const CLIENT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// Runs [`CLIENT`] with `args`; its stdout. Fails the test if it fails or
/// does not finish within [`CLIENT_TIMEOUT`].
fn client(args: &[String]) -> String {
    let child = Command::new("python3")
        .arg("-c")
        .arg(CLIENT)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let Ok(out) = rx.recv_timeout(CLIENT_TIMEOUT) else {
        let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        panic!("the client {args:?} did not finish within {CLIENT_TIMEOUT:?}");
    };
    let out = out.expect("client output");
    assert!(
        out.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 from the client")
}

fn rss_of(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// How much the server's memory may grow while it reads a body, whatever
/// the body's size: buffers of the engine and the parser, far below the
/// bodies sent here (1 GiB, 100 MiB).
const RSS_GROWTH: u64 = 48 * MIB;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1_gib_upload_should_stream_through_with_bounded_memory() {
    let sink = Sink::start();
    let before = sink.rss_bytes();
    let (status, body, peak) = sink.send("/upload", "big", 1024 * MIB).await;
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert_eq!(body, "title=5&big=1073741824&after=2");
    eprintln!("1 GiB upload: server RSS {before} bytes before, {peak} at peak");
    assert!(
        peak < before + RSS_GROWTH,
        "RSS went from {before} to {peak} bytes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_bodies_should_get_a_clear_4xx_with_bounded_memory() {
    let sink = Sink::start();
    let before = sink.rss_bytes();
    let cases: [(&str, &str, u64, &str, &str); 7] = [
        // A file whose closing boundary never comes: streamed, then 400.
        (
            "/upload",
            "truncated",
            100 * MIB,
            "400",
            "the multipart body ended before its closing boundary",
        ),
        // No boundary at all: refused after the preamble limit.
        (
            "/upload",
            "no-boundary",
            100 * MIB,
            "400",
            "the multipart boundary never came",
        ),
        (
            "/upload",
            "malformed",
            0,
            "400",
            "a multipart delimiter is malformed",
        ),
        (
            "/upload",
            "tiny-parts",
            10_000,
            "413",
            "too many multipart parts",
        ),
        (
            "/upload",
            "huge-head",
            4 * MIB,
            "413",
            "a multipart part's header block is too large",
        ),
        ("/form", "fields", 100_000, "413", "too many form fields"),
        ("/form", "fields", 999, "200", "999"),
    ];
    for (path, case, size, status, text) in cases {
        let (got, body, peak) = sink.send(path, case, size).await;
        assert!(got.contains(status), "{case}: {got} {body}");
        assert_eq!(body, text, "{case}");
        eprintln!("{case}: server RSS {before} bytes before, {peak} at peak");
        assert!(
            peak < before + RSS_GROWTH,
            "{case}: RSS went from {before} to {peak} bytes"
        );
    }
}

async fn save(mut req: Request) -> Result<String, Error> {
    let dir: &std::path::PathBuf = req.state()?;
    let dir = dir.clone();
    let mut form: Multipart = req.extract().await?;
    let mut out = Vec::new();
    while let Some(mut part) = form.next_part().await? {
        match part.file_name().map(str::to_owned) {
            Some(name) => {
                let len = part.save(dir.join(&name)).await?;
                out.push(format!("{}:{name}:{len}", part.name()));
            }
            None => {
                let name = part.name().to_owned();
                out.push(format!("{name}={}", part.text().await?));
            }
        }
    }
    Ok(out.join(","))
}

fn save_app(dir: std::path::PathBuf) -> App {
    let mut app = App::new();
    app.state(dir);
    app.post("/save", save).body_limit(64 << 20);
    app.post("/small", save).body_limit(1 << 20);
    app
}

#[tokio::test]
async fn curl_uploads_should_be_saved_to_disk_under_a_sanitised_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let uploads = dir.path().join("uploads");
    std::fs::create_dir(&uploads).expect("mkdir");
    let src = dir.path().join("src.bin");
    let data: Vec<u8> = (0..5 * MIB).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&src, &data).expect("write");
    let served = Served::start(save_app(uploads.clone())).await;
    let file_arg = format!("doc=@{};filename=../../x/evil.bin", src.display());
    let out = curl(&[
        "-F",
        "title=a report",
        "-F",
        &file_arg,
        &served.url("/save"),
    ])
    .await;
    assert_eq!(out, format!("title=a report,doc:evil.bin:{}", data.len()));
    assert_eq!(
        std::fs::read(uploads.join("evil.bin")).expect("saved"),
        data
    );
    // Over the route's body limit: 413, and no partial file is left.
    let out = curl(&[
        "-w",
        " %{http_code}",
        "-F",
        &format!("big=@{};filename=big.bin", src.display()),
        &served.url("/small"),
    ])
    .await;
    assert_eq!(out, "payload too large 413");
    assert!(!uploads.join("big.bin").exists());
    served.stop().await;
}
