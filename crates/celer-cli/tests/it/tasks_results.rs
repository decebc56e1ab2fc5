//! A large result from `celer serve --tasks`: sent whole and byte for byte
//! with its `Content-Length` and `ETag`, and in slices: eight clients that
//! stall after the first bytes make the server hold a few slices each, not
//! eight copies of the result (its resident memory is read from /proc).

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Celer, DEADLINE, python};

/// Bytes the command prints: 12,000,000 letters `a`, a JSON string of
/// 12,000,002 bytes once stored.
const PRINTED: usize = 12_000_000;

/// Slow clients at once.
const CLIENTS: usize = 8;

/// Opens CLIENTS connections with small receive buffers, reads each
/// response's head and first bytes, waits a little for the server to fill
/// what it can, and reports the server's VmRSS before and while they
/// stall; then reads one response to its end and checks it.
const STALL: &str = r#"
import json, socket, sys, time
port, pid, task, clients = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
def rss():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
before = rss()
conns = []
for _ in range(clients):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    s.settimeout(20)
    s.connect(("127.0.0.1", port))
    s.sendall(f"GET /tasks/{task}/result HTTP/1.1\r\nHost: t\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        assert chunk, "closed early"
        head += chunk
    conns.append((s, head))
peak = rss()
for _ in range(10):
    time.sleep(0.05)
    peak = max(peak, rss())
s, got = conns[0]
head, body = got.split(b"\r\n\r\n", 1)
length = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0])
while len(body) < length:
    chunk = s.recv(1 << 20)
    assert chunk, f"closed after {len(body)} of {length}"
    body += chunk
ok = body == b'"' + b"a" * (length - 2) + b'"'
for s, _ in conns:
    s.close()
print(json.dumps({"before": before, "peak": peak, "length": length, "ok": ok, "head": head.decode()}))
"#;

#[test]
fn a_large_result_is_streamed_without_holding_it_per_client() {
    let dir = tempfile::tempdir().unwrap();
    let command = format!(r#"big=["/bin/sh","-c","head -c {PRINTED} /dev/zero | tr '\\000' a"]"#);
    let celer = Celer::serve(&[
        "--listen",
        "tcp://127.0.0.1:0",
        "--workers",
        "1",
        "--tasks",
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--task-command",
        &command,
    ]);
    let port = celer.port();
    let submitted = python(
        r#"
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=20)
c.request("POST", "/tasks", body='{"kind": "big", "input": null}', headers={"Content-Type": "application/json"})
print(c.getresponse().read().decode())
"#,
        &[&port.to_string()],
    );
    let id = serde_json::from_str::<Value>(&submitted).unwrap()["id"]
        .as_i64()
        .unwrap();
    let start = Instant::now();
    loop {
        let task = python(
            r#"
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=20)
c.request("GET", "/tasks/" + sys.argv[2])
print(c.getresponse().read().decode())
"#,
            &[&port.to_string(), &id.to_string()],
        );
        let task: Value = serde_json::from_str(&task).unwrap();
        if task["state"] == "succeeded" {
            break;
        }
        assert!(
            task["state"] == "queued" || task["state"] == "running",
            "{task}"
        );
        assert!(start.elapsed() < DEADLINE, "{task}");
        std::thread::sleep(Duration::from_millis(50));
    }

    let out = python(
        STALL,
        &[
            &port.to_string(),
            &celer.pid().to_string(),
            &id.to_string(),
            &CLIENTS.to_string(),
        ],
    );
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["length"], PRINTED + 2);
    assert_eq!(report["ok"], true, "the bytes differ");
    let head = report["head"].as_str().unwrap().to_ascii_lowercase();
    assert!(head.contains(&format!("etag: \"task-{id}\"")), "{head}");
    let before = report["before"].as_i64().unwrap();
    let peak = report["peak"].as_i64().unwrap();
    // Held whole, the result would take CLIENTS × 12 MB = 96 MB more;
    // in slices each client holds at most 5 × 64 KiB.
    let grown = peak - before;
    assert!(
        grown < 32 * 1024 * 1024,
        "the server grew by {grown} bytes with {CLIENTS} slow clients"
    );
}
