//! SIGTERM and SIGINT: graceful shutdown, exit 0, downloads in flight finish.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::support::{Celer, wait_deadline};

#[test]
fn sigterm_while_idle_exits_0() {
    let mut celer = Celer::serve(&["--listen", "tcp://127.0.0.1:0"]);
    celer.signal("TERM");
    let status = celer.wait();
    assert_eq!(status.code(), Some(0), "{:?}", celer.stderr_lines());
}

#[test]
fn sigint_while_idle_exits_0() {
    let mut celer = Celer::serve(&[
        "--listen",
        "tcp://127.0.0.1:0",
        "--threading",
        "work-stealing",
    ]);
    celer.signal("INT");
    assert_eq!(celer.wait().code(), Some(0), "{:?}", celer.stderr_lines());
}

/// A client starts a large download and reads slowly; SIGTERM arrives
/// mid-transfer; the download still completes, then the server exits 0.
#[test]
fn sigterm_lets_a_download_in_flight_finish() {
    let dir = tempfile::tempdir().unwrap();
    let len = 32 * 1024 * 1024;
    let file = std::fs::File::create(dir.path().join("big.bin")).unwrap();
    file.set_len(len).unwrap();
    let mut celer = Celer::serve(&[
        "--root",
        dir.path().to_str().unwrap(),
        "--listen",
        "tcp://127.0.0.1:0",
    ]);
    let script = r#"
import http.client, sys, time
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=20)
c.request("GET", "/big.bin")
r = c.getresponse()
n = len(r.read(64 * 1024))
print("started", flush=True)
# Wait until the test has sent the signal.
sys.stdin.readline()
while True:
    chunk = r.read(256 * 1024)
    if not chunk:
        break
    n += len(chunk)
print(r.status, r.getheader("content-length"), n, flush=True)
"#;
    let mut client = Command::new("python3")
        .args(["-c", script, &celer.port().to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run python3");
    let mut out = BufReader::new(client.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "started");
    celer.signal("TERM");
    // The signal is handled once the server logs it; only then let the
    // client read on, so shutdown really overlaps the transfer.
    let start = std::time::Instant::now();
    while !celer
        .stderr_lines()
        .iter()
        .any(|l| l.contains("shutting down"))
        && start.elapsed() < crate::support::DEADLINE
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    drop(client.stdin.take());
    line.clear();
    out.read_line(&mut line).unwrap();
    assert!(wait_deadline(&mut client).is_some_and(|s| s.success()));
    assert_eq!(line.trim(), format!("200 {len} {len}"));
    assert_eq!(celer.wait().code(), Some(0), "{:?}", celer.stderr_lines());
}
