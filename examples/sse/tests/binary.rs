//! The `example-sse` binary as a process: a page's event stream gets the
//! counter's events, and SIGTERM ends the stream after a whole event and
//! the process with status 0.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Upper bound of every wait; reaching it fails the test.
const BOUND: Duration = Duration::from_secs(10);

async fn bounded<F: std::future::Future>(fut: F) -> F::Output {
    tokio::time::timeout(BOUND, fut)
        .await
        .expect("step did not finish in time")
}

/// The server process; killed if the test fails before it exits.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start() -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_example-sse"))
            .args(["--listen", "tcp://127.0.0.1:0", "--tick-ms", "50"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start example-sse");
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        let addr = line
            .trim()
            .rsplit("tcp://")
            .next()
            .and_then(|addr| addr.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        // Keep draining stderr so the process never blocks on it.
        std::thread::spawn(move || for _ in stderr.lines() {});
        Server { child, addr }
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    async fn wait(&mut self) -> std::process::ExitStatus {
        bounded(async {
            loop {
                if let Some(status) = self.child.try_wait().unwrap() {
                    return status;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Sends a request that asks to close, returns everything read.
async fn exchange(addr: SocketAddr, request: &str) -> String {
    let mut conn = bounded(TcpStream::connect(addr)).await.unwrap();
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    bounded(conn.read_to_end(&mut out)).await.unwrap();
    String::from_utf8(out).unwrap()
}

/// An event stream read raw: the decoded body so far.
struct Stream {
    conn: TcpStream,
    raw: Vec<u8>,
    body: String,
    ended: bool,
}

impl Stream {
    async fn open(addr: SocketAddr) -> Stream {
        let mut conn = bounded(TcpStream::connect(addr)).await.unwrap();
        conn.write_all(b"GET /events HTTP/1.1\r\nHost: t\r\n\r\n")
            .await
            .unwrap();
        let mut stream = Stream {
            conn,
            raw: Vec::new(),
            body: String::new(),
            ended: false,
        };
        while !stream.raw.windows(4).any(|w| w == b"\r\n\r\n") {
            assert!(stream.read().await > 0);
        }
        let at = stream
            .raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap();
        let head = String::from_utf8(stream.raw.drain(..at + 4).collect()).unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(head.contains("content-type: text/event-stream"), "{head}");
        stream
    }

    async fn read(&mut self) -> usize {
        let mut buf = [0u8; 16 * 1024];
        let n = bounded(self.conn.read(&mut buf)).await.unwrap_or(0);
        self.raw.extend_from_slice(&buf[..n]);
        n
    }

    /// Decodes the complete chunks read so far.
    fn decode(&mut self) {
        while let Some(line) = self.raw.windows(2).position(|w| w == b"\r\n") {
            let size = usize::from_str_radix(std::str::from_utf8(&self.raw[..line]).unwrap(), 16)
                .expect("chunk size");
            if self.raw.len() < line + 4 + size {
                return;
            }
            let data = self.raw[line + 2..line + 2 + size].to_vec();
            self.raw.drain(..line + 4 + size);
            if size == 0 {
                self.ended = true;
                return;
            }
            self.body.push_str(std::str::from_utf8(&data).unwrap());
        }
    }

    /// Reads until `text` is in the body.
    async fn until(&mut self, text: &str) {
        while !self.body.contains(text) {
            assert!(self.read().await > 0, "closed before {text:?}");
            self.decode();
        }
    }

    /// Reads until the server closes the connection.
    async fn read_to_close(&mut self) {
        while self.read().await > 0 {}
        self.decode();
    }
}

#[tokio::test]
async fn sigterm_ends_the_streams_after_a_whole_event_and_exits_0() {
    let mut server = Server::start();
    let mut streams = vec![
        Stream::open(server.addr).await,
        Stream::open(server.addr).await,
    ];

    let bumped = exchange(
        server.addr,
        "POST /count HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(bumped.starts_with("HTTP/1.1 200"), "{bumped}");
    assert!(bumped.ends_with("\r\n\r\n1"), "{bumped}");
    for stream in &mut streams {
        stream.until("event: count\n").await;
        stream.until("event: tick\n").await;
    }

    server.signal("TERM");
    for stream in &mut streams {
        stream.read_to_close().await;
        assert!(stream.ended, "the body ended with its last chunk");
        assert!(stream.body.ends_with("\n\n"), "ended inside an event");
        for event in stream.body.trim_end().split("\n\n") {
            assert!(
                event.starts_with("event: count\n") || event.starts_with("event: tick\n"),
                "{event:?}"
            );
        }
    }
    let status = server.wait().await;
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn the_page_listens_with_event_source() {
    let server = Server::start();
    let page = exchange(
        server.addr,
        "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains("new EventSource(\"/events\")"));
    assert!(page.contains("<output id=\"count\">0</output>"));
    server.signal("INT");
}
