//! Test helpers shared by Celer's crates: a raw-TCP client that writes exact
//! bytes and parses what comes back, and runners for external tools (curl,
//! python3) with a time bound.
//!
//! The response parser here is deliberately separate from the engine's
//! codecs, so wire tests check the engine against an independent reading of
//! RFC 9112.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Writes a fresh self-signed certificate for `localhost` and its key as
/// `cert.pem` and `key.pem` in `dir`, and returns their paths.
pub fn localhost_cert(dir: &Path) -> (PathBuf, PathBuf) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
        .expect("a self-signed certificate");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, certified.cert.pem()).expect("cert.pem written");
    std::fs::write(&key, certified.signing_key.serialize_pem()).expect("key.pem written");
    (cert, key)
}

/// Upper bound for any single wait in a test; reaching it fails the test
/// instead of hanging it.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A parsed HTTP/1.1 response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resp {
    /// The status code.
    pub status: u16,
    /// Header fields in order, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The decoded body.
    pub body: Vec<u8>,
    /// Trailer fields of a chunked body.
    pub trailers: Vec<(String, String)>,
}

impl Resp {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as UTF-8 text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A raw client connection.
#[derive(Debug)]
pub struct Raw {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    /// Connects to `addr`.
    pub async fn connect(addr: SocketAddr) -> Raw {
        let stream = bounded(TcpStream::connect(addr)).await.expect("connect");
        Raw {
            stream,
            buf: Vec::new(),
        }
    }

    /// Writes `bytes` as they are.
    pub async fn send(&mut self, bytes: &[u8]) {
        bounded(self.stream.write_all(bytes)).await.expect("write");
    }

    /// Writes `bytes` one byte per write, flushing each.
    pub async fn send_bytewise(&mut self, bytes: &[u8]) {
        for b in bytes {
            bounded(self.stream.write_all(std::slice::from_ref(b)))
                .await
                .expect("write");
            bounded(self.stream.flush()).await.expect("flush");
            tokio::task::yield_now().await;
        }
    }

    /// Half-closes the write side.
    pub async fn shutdown_write(&mut self) {
        let _ = self.stream.shutdown().await;
    }

    /// Reads one response to a request with method `method`.
    pub async fn response_to(&mut self, method: &str) -> Resp {
        loop {
            match parse_response(&self.buf, method == "HEAD") {
                Parse::Done(resp, n) => {
                    self.buf.drain(..n);
                    return resp;
                }
                Parse::More => {}
                Parse::Bad(why) => panic!(
                    "malformed response ({why}): {:?}",
                    String::from_utf8_lossy(&self.buf)
                ),
            }
            if self.read_more().await == 0 {
                // Close-delimited bodies end here.
                if let Some(resp) = close_delimited(&self.buf) {
                    self.buf.clear();
                    return resp;
                }
                panic!(
                    "connection closed mid-response: {:?}",
                    String::from_utf8_lossy(&self.buf)
                );
            }
        }
    }

    /// Reads one response to a GET-like request.
    pub async fn response(&mut self) -> Resp {
        self.response_to("GET").await
    }

    /// Reads until the server closes; returns everything not yet consumed.
    pub async fn read_to_close(&mut self) -> Vec<u8> {
        while self.read_more().await > 0 {}
        std::mem::take(&mut self.buf)
    }

    /// True when the server closed the connection (EOF or reset) with
    /// nothing more to read.
    pub async fn is_closed(&mut self) -> bool {
        self.buf.is_empty() && self.read_more().await == 0 && self.buf.is_empty()
    }

    /// Reads whatever arrives next (at least one byte, or EOF).
    pub async fn read_more(&mut self) -> usize {
        let mut chunk = [0u8; 16 * 1024];
        match bounded(self.stream.read(&mut chunk)).await {
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                n
            }
            Err(err) if err.kind() == io::ErrorKind::ConnectionReset => 0,
            Err(err) => panic!("read: {err}"),
        }
    }

    /// Bytes read and not yet consumed.
    pub fn buffered(&self) -> &[u8] {
        &self.buf
    }
}

/// Sends `request` on a fresh connection and returns everything the server
/// sends until it closes (the request should make it close).
pub async fn exchange(addr: SocketAddr, request: &[u8]) -> Vec<u8> {
    let mut c = Raw::connect(addr).await;
    c.send(request).await;
    c.read_to_close().await
}

/// Parses every response in `bytes` (answers to GET-like requests).
pub fn parse_all(mut bytes: &[u8]) -> Vec<Resp> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        match parse_response(bytes, false) {
            Parse::Done(resp, n) => {
                out.push(resp);
                bytes = &bytes[n..];
            }
            Parse::More | Parse::Bad(_) => {
                panic!("trailing bytes: {:?}", String::from_utf8_lossy(bytes))
            }
        }
    }
    out
}

/// Awaits `fut` for at most [`TEST_TIMEOUT`], panicking after.
pub async fn bounded<F: std::future::Future>(fut: F) -> F::Output {
    match tokio::time::timeout(TEST_TIMEOUT, fut).await {
        Ok(out) => out,
        Err(_) => panic!("test step did not finish within {TEST_TIMEOUT:?}"),
    }
}

enum Parse {
    Done(Resp, usize),
    More,
    Bad(&'static str),
}

fn parse_response(buf: &[u8], head_only: bool) -> Parse {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut r = httparse::Response::new(&mut headers);
    let n = match r.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Parse::More,
        Err(_) => return Parse::Bad("head"),
    };
    let status = r.code.unwrap_or(0);
    let headers: Vec<(String, String)> = r
        .headers
        .iter()
        .map(|h| {
            (
                h.name.to_ascii_lowercase(),
                String::from_utf8_lossy(h.value).into_owned(),
            )
        })
        .collect();
    let mut resp = Resp {
        status,
        headers,
        body: Vec::new(),
        trailers: Vec::new(),
    };
    if head_only || status < 200 || status == 204 || status == 304 {
        return Parse::Done(resp, n);
    }
    let rest = &buf[n..];
    if resp
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        return match dechunk(rest) {
            Some(Ok((body, trailers, used))) => {
                resp.body = body;
                resp.trailers = trailers;
                Parse::Done(resp, n + used)
            }
            Some(Err(why)) => Parse::Bad(why),
            None => Parse::More,
        };
    }
    match resp.header("content-length").map(str::parse::<usize>) {
        Some(Ok(len)) if rest.len() >= len => {
            resp.body = rest[..len].to_vec();
            Parse::Done(resp, n + len)
        }
        Some(Ok(_)) => Parse::More,
        Some(Err(_)) => Parse::Bad("content-length"),
        None => Parse::More,
    }
}

type Dechunked = (Vec<u8>, Vec<(String, String)>, usize);

fn dechunk(buf: &[u8]) -> Option<Result<Dechunked, &'static str>> {
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let line_end = at + buf[at..].windows(2).position(|w| w == b"\r\n")?;
        let line = std::str::from_utf8(&buf[at..line_end]).ok()?;
        let size = match usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16) {
            Ok(s) => s,
            Err(_) => return Some(Err("chunk size")),
        };
        at = line_end + 2;
        if size == 0 {
            let mut trailers = Vec::new();
            loop {
                let end = at + buf[at..].windows(2).position(|w| w == b"\r\n")?;
                if end == at {
                    return Some(Ok((body, trailers, end + 2)));
                }
                let line = String::from_utf8_lossy(&buf[at..end]);
                if let Some((k, v)) = line.split_once(':') {
                    trailers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
                }
                at = end + 2;
            }
        }
        if buf.len() < at + size + 2 {
            return None;
        }
        body.extend_from_slice(&buf[at..at + size]);
        if &buf[at + size..at + size + 2] != b"\r\n" {
            return Some(Err("chunk data"));
        }
        at += size + 2;
    }
}

fn close_delimited(buf: &[u8]) -> Option<Resp> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut r = httparse::Response::new(&mut headers);
    let Ok(httparse::Status::Complete(n)) = r.parse(buf) else {
        return None;
    };
    Some(Resp {
        status: r.code.unwrap_or(0),
        headers: r
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_ascii_lowercase(),
                    String::from_utf8_lossy(h.value).into_owned(),
                )
            })
            .collect(),
        body: buf[n..].to_vec(),
        trailers: Vec::new(),
    })
}

/// Runs an external command with a time bound; panics if it cannot start
/// or does not finish.
pub fn run_tool(cmd: &mut Command) -> Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(TEST_TIMEOUT) {
        Ok(out) => out.expect("tool output"),
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("{cmd:?} did not finish within {TEST_TIMEOUT:?}");
        }
    }
}
