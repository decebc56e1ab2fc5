//! Starting `celer`, talking to it with curl and Python, waiting with
//! deadlines.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The binary under test.
pub(crate) const CELER: &str = env!("CARGO_BIN_EXE_celer");

/// Upper bound for anything a test waits on; generous, never asserted.
pub(crate) const DEADLINE: Duration = Duration::from_secs(30);

/// A running `celer serve`, killed on drop if still running.
pub(crate) struct Celer {
    child: Child,
    /// The bound addresses from the start-up line, as `--listen` specs.
    pub(crate) specs: Vec<String>,
    /// Every stderr line so far.
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Celer {
    /// Starts `celer serve ARGS` and waits for its start-up line.
    pub(crate) fn serve(args: &[&str]) -> Celer {
        Celer::serve_in(Path::new("."), args)
    }

    /// [`Celer::serve`] with `dir` as the working directory.
    pub(crate) fn serve_in(dir: &Path, args: &[&str]) -> Celer {
        let mut child = Command::new(CELER)
            .current_dir(dir)
            .arg("serve")
            .args(args)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn celer");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let ready = forward_stderr(&mut child, stderr.clone());
        let line = match ready.recv_timeout(DEADLINE) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "no start-up line from celer; stderr: {:?}",
                    stderr.lock().unwrap()
                );
            }
        };
        Celer {
            child,
            specs: parse_specs(&line),
            stderr,
        }
    }

    /// The first `tcp://` address as `http://HOST:PORT`.
    pub(crate) fn url(&self) -> String {
        let spec = self
            .specs
            .iter()
            .find(|s| s.starts_with("tcp://"))
            .expect("a tcp listener");
        format!("http://{}", &spec["tcp://".len()..])
    }

    /// The port of the first TCP listener.
    pub(crate) fn port(&self) -> u16 {
        let url = self.url();
        url.rsplit(':').next().unwrap().parse().unwrap()
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (`TERM`, `INT`) with kill(1).
    pub(crate) fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Waits for the process to exit, up to [`DEADLINE`].
    pub(crate) fn wait(&mut self) -> ExitStatus {
        wait_deadline(&mut self.child).unwrap_or_else(|| {
            let _ = self.child.kill();
            panic!("celer did not exit; stderr: {:?}", self.stderr_lines());
        })
    }

    pub(crate) fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for Celer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Copies the child's stderr into `lines` on a thread; the returned channel
/// yields the start-up line.
fn forward_stderr(child: &mut Child, lines: Arc<Mutex<Vec<String>>>) -> Receiver<String> {
    let (tx, rx) = channel();
    let pipe = child.stderr.take().expect("stderr is piped");
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if line.contains("listening on ") {
                let _ = tx.send(line.clone());
            }
            lines.lock().unwrap().push(line);
        }
    });
    rx
}

/// `celer: listening on tcp://127.0.0.1:1234, unix:/x (serving ...)` →
/// the specs.
fn parse_specs(line: &str) -> Vec<String> {
    let rest = &line[line.find("listening on ").unwrap() + "listening on ".len()..];
    let list = rest.split(" (").next().unwrap();
    list.split(", ").map(str::to_owned).collect()
}

/// Polls for the child's exit until [`DEADLINE`].
pub(crate) fn wait_deadline(child: &mut Child) -> Option<ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < DEADLINE {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Runs `celer ARGS` to completion (bounded) and returns the exit code and
/// stderr.
pub(crate) fn run_celer(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(CELER)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn celer");
    let lines = Arc::new(Mutex::new(Vec::new()));
    let _ready = forward_stderr(&mut child, lines.clone());
    let status = wait_deadline(&mut child);
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "celer {args:?} did not exit; stderr: {:?}",
            lines.lock().unwrap()
        );
    }
    // Give the reader thread the last lines (the pipe is closed by now).
    let start = Instant::now();
    while Arc::strong_count(&lines) > 1 && start.elapsed() < DEADLINE {
        std::thread::sleep(Duration::from_millis(5));
    }
    let stderr = lines.lock().unwrap().join("\n");
    (status.and_then(|s| s.code()), stderr)
}

/// One HTTP response as a client saw it.
#[derive(Debug)]
pub(crate) struct Reply {
    /// `HTTP/1.1`, `HTTP/2`, ... as curl printed it.
    pub(crate) version: String,
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Reply {
    /// The first value of header `name` (case-insensitive).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Runs `curl -s -i ARGS` and parses the last response it printed.
pub(crate) fn curl(args: &[&str]) -> Reply {
    let out = Command::new("curl")
        .args(["-s", "-i", "--max-time", "20"])
        .args(args)
        .output()
        .expect("run curl");
    assert!(out.status.success(), "curl {args:?} failed: {out:?}");
    parse_reply(&out.stdout)
}

fn parse_reply(raw: &[u8]) -> Reply {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete response head");
    let body = &raw[end + 4..];
    if body.starts_with(b"HTTP/") {
        // `curl -i -L` prints the head of every hop; the last one counts.
        return parse_reply(body);
    }
    let head = std::str::from_utf8(&raw[..end]).expect("an ASCII head");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let version = status_line.split(' ').next().unwrap().to_owned();
    let status = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    Reply {
        version,
        status,
        headers,
        body: body.to_vec(),
    }
}

/// Runs `python3 -c SCRIPT ARGS` and returns its stdout; fails the test if
/// it fails. Scripts set their own socket timeouts.
pub(crate) fn python(script: &str, args: &[&str]) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A Python `http.client` request: prints the status, the headers as
/// `name: value` lines, a blank line and the body length.
pub(crate) const PY_REQUEST: &str = r#"
import http.client, sys
port, method, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
c.putrequest(method, path, skip_host=False, skip_accept_encoding=True)
c.endheaders()
r = c.getresponse()
body = r.read()
print(r.status)
for k, v in r.getheaders():
    print(f"{k.lower()}: {v}")
print()
print(len(body))
"#;

/// The output of [`PY_REQUEST`] parsed: status, headers, body length.
pub(crate) fn py_request(
    port: u16,
    method: &str,
    path: &str,
) -> (u16, Vec<(String, String)>, usize) {
    let out = python(PY_REQUEST, &[&port.to_string(), method, path]);
    let (head, len) = out.split_once("\n\n").expect("blank line");
    let mut lines = head.lines();
    let status = lines.next().unwrap().parse().unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .collect();
    (status, headers, len.trim().parse().unwrap())
}

/// Runs `celer ARGS` that print and exit at once (help, version); returns
/// the exit code and stdout.
pub(crate) fn run_celer_stdout(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(CELER).args(args).output().expect("run celer");
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}
