//! `celer serve` over TLS: certificate files, `--self-signed`, bad files,
//! SIGHUP reload under load, the redirect listener and HSTS.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Celer, DEADLINE, curl, python, run_celer};

/// A self-signed certificate for localhost and its key, written as
/// `NAME.crt` and `NAME.key` in `dir` (through a rename, as an operator
/// replacing live files would). Returns the paths and the SHA-256.
fn write_cert(dir: &Path, name: &str) -> (PathBuf, PathBuf, String) {
    let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert = dir.join(format!("{name}.crt"));
    let key = dir.join(format!("{name}.key"));
    for (path, text) in [
        (&cert, generated.cert.pem()),
        (&key, generated.signing_key.serialize_pem()),
    ] {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, path).unwrap();
    }
    let sha = sha256_hex(generated.cert.der());
    (cert, key, sha)
}

fn sha256_hex(der: &[u8]) -> String {
    let out = python(
        "import hashlib,sys; print(hashlib.sha256(bytes.fromhex(sys.argv[1])).hexdigest().upper())",
        &[&der.iter().map(|b| format!("{b:02x}")).collect::<String>()],
    );
    out.trim().to_owned()
}

/// The SHA-256 of the certificate a new TLS connection to `port` gets,
/// verified against `ca` for the name localhost.
const PY_FINGERPRINT: &str = r#"
import hashlib, socket, ssl, sys
port, ca = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=ca) if ca != "-" else ssl._create_unverified_context()
with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
    with ctx.wrap_socket(raw, server_hostname="localhost") as s:
        print(hashlib.sha256(s.getpeercert(binary_form=True)).hexdigest().upper())
"#;

fn fingerprint(port: u16, ca: &str) -> String {
    python(PY_FINGERPRINT, &[&port.to_string(), ca])
        .trim()
        .to_owned()
}

#[test]
fn serves_https_from_certificate_files() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, sha) = write_cert(dir.path(), "site");
    let celer = Celer::serve(&[
        "--listen",
        "tcp://127.0.0.1:0",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    let port = celer.port();
    let reply = curl(&[
        "--cacert",
        cert.to_str().unwrap(),
        "--resolve",
        &format!("localhost:{port}:127.0.0.1"),
        &format!("https://localhost:{port}/"),
    ]);
    assert_eq!(reply.status, 200);
    assert!(reply.text().contains("<!doctype html>"), "{}", reply.text());
    assert_eq!(reply.header("strict-transport-security"), None);
    assert_eq!(fingerprint(port, cert.to_str().unwrap()), sha);
}

#[test]
fn self_signed_prints_the_fingerprint_it_serves() {
    let celer = Celer::serve(&["--listen", "tcp://127.0.0.1:0", "--self-signed"]);
    let line = stderr_line(&celer, "self-signed certificate");
    let printed = line.rsplit(' ').next().unwrap().replace(':', "");
    assert_eq!(fingerprint(celer.port(), "-"), printed, "{line}");
    let reply = curl(&["-k", &format!("https://127.0.0.1:{}/", celer.port())]);
    assert_eq!(reply.status, 200);
}

#[test]
fn bad_certificate_or_key_files_exit_2_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, _) = write_cert(dir.path(), "good");
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "nothing here\n").unwrap();
    let missing = dir.path().join("missing.pem");
    let (cert, key, garbage, missing) = (
        cert.to_str().unwrap(),
        key.to_str().unwrap(),
        garbage.to_str().unwrap(),
        missing.to_str().unwrap(),
    );
    let listen = ["serve", "--listen", "tcp://127.0.0.1:0"];
    let cases: [(&[&str], &str); 6] = [
        (&["--tls-cert", missing, "--tls-key", key], missing),
        (
            &["--tls-cert", garbage, "--tls-key", key],
            "no certificate found",
        ),
        (
            &["--tls-cert", cert, "--tls-key", garbage],
            "no private key found",
        ),
        (
            &["--tls-cert", cert, "--tls-key", cert],
            "no private key found",
        ),
        (&["--tls-cert", cert], "come in pairs"),
        (&["--hsts", "60"], "--hsts needs HTTPS"),
    ];
    for (args, needle) in cases {
        let args: Vec<&str> = listen.iter().chain(args).copied().collect();
        let (code, stderr) = run_celer(&args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("celer: error: "), "{stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
    // The file at fault is named.
    let (_, stderr) = run_celer(
        &listen
            .iter()
            .chain(&["--tls-cert", cert, "--tls-key", garbage])
            .copied()
            .collect::<Vec<_>>(),
    );
    assert!(stderr.contains(garbage), "{stderr}");
}

/// Two client threads until `STOP` exists: one opens a new TLS connection
/// per request (each a new handshake), one keeps a connection alive. Prints
/// `ready` once both have been answered, then at the end one JSON line:
/// requests, failures and the certificate fingerprints new connections saw.
const PY_LOAD: &str = r#"
import hashlib, json, os, socket, ssl, sys, threading
port, stop = int(sys.argv[1]), sys.argv[2]
ctx = ssl._create_unverified_context()
stats = {"requests": 0, "failures": [], "fingerprints": []}
lock = threading.Lock()
ready = threading.Barrier(3)

def request(s, f):
    s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
    status = f.readline().split()[1]
    length = 0
    while True:
        line = f.readline()
        if line in (b"\r\n", b""):
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    if len(f.read(length)) != length or status != b"200":
        raise RuntimeError(f"bad response {status!r}")

def connect():
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                        server_hostname="localhost")
    return s, s.makefile("rb")

def new_connections():
    first = True
    while first or not os.path.exists(stop):
        try:
            s, f = connect()
            fp = hashlib.sha256(s.getpeercert(binary_form=True)).hexdigest().upper()
            request(s, f)
            s.close()
            with lock:
                stats["requests"] += 1
                if fp not in stats["fingerprints"]:
                    stats["fingerprints"].append(fp)
        except Exception as e:
            with lock:
                stats["failures"].append(f"new: {e!r}")
        if first:
            first = False
            ready.wait()

def keep_alive():
    s, f = connect()
    first = True
    while first or not os.path.exists(stop):
        try:
            request(s, f)
            with lock:
                stats["requests"] += 1
        except Exception as e:
            with lock:
                stats["failures"].append(f"keep-alive: {e!r}")
            s, f = connect()
        if first:
            first = False
            ready.wait()

threads = [threading.Thread(target=t) for t in (new_connections, keep_alive)]
for t in threads:
    t.start()
ready.wait()
print("ready", flush=True)
for t in threads:
    t.join()
print(json.dumps(stats), flush=True)
"#;

#[test]
fn sighup_reloads_certificates_under_load_without_a_failed_request() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, old) = write_cert(dir.path(), "site");
    let celer = Celer::serve(&[
        "--listen",
        "tcp://127.0.0.1:0",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    let port = celer.port();
    let stop = dir.path().join("stop");
    let mut load = Command::new("python3")
        .arg("-c")
        .arg(PY_LOAD)
        .arg(port.to_string())
        .arg(&stop)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3");
    let mut out = BufReader::new(load.stdout.take().unwrap()).lines();
    assert_eq!(out.next().unwrap().unwrap(), "ready");

    // New files in place, then SIGHUP: new handshakes get the new one.
    let (_, _, new) = write_cert(dir.path(), "site");
    celer.signal("HUP");
    wait_for(|| fingerprint(port, "-") == new, "the new certificate");

    // A broken key: the reload fails, says why, and the new cert stays.
    std::fs::write(&key, "broken\n").unwrap();
    celer.signal("HUP");
    wait_for(
        || {
            celer
                .stderr_lines()
                .iter()
                .any(|l| l.contains("TLS reload failed") && l.contains("site.key"))
        },
        "the reload error",
    );
    assert_eq!(fingerprint(port, "-"), new);

    std::fs::write(&stop, "").unwrap();
    let stats = out.next().unwrap().unwrap();
    let _ = load.wait();
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(stats["failures"], serde_json::json!([]), "{stats}");
    assert!(stats["requests"].as_u64().unwrap() >= 2, "{stats}");
    let seen = stats["fingerprints"].as_array().unwrap();
    assert!(seen.contains(&old.clone().into()), "{stats}");
    assert!(seen.contains(&new.clone().into()), "{stats}");
}

/// The first stderr line containing `needle`, waiting for it to arrive.
fn stderr_line(celer: &Celer, needle: &str) -> String {
    let mut found = None;
    wait_for(
        || {
            found = celer
                .stderr_lines()
                .into_iter()
                .find(|l| l.contains(needle));
            found.is_some()
        },
        needle,
    );
    found.unwrap()
}

fn wait_for(mut done: impl FnMut() -> bool, what: &str) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn redirect_listener_and_hsts() {
    let celer = Celer::serve(&[
        "--listen",
        "tcp://127.0.0.1:0",
        "--self-signed",
        "--redirect-http",
        "tcp://127.0.0.1:0",
        "--hsts",
        "600",
    ]);
    let ready = stderr_line(&celer, "listening on");
    let redirect_port: u16 = ready
        .split("redirecting tcp://127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{ready}"));
    let port = celer.port();

    let reply = curl(&[&format!("http://127.0.0.1:{redirect_port}/a?b=c")]);
    assert_eq!(reply.status, 308);
    let location = format!("https://127.0.0.1:{port}/a?b=c");
    assert_eq!(reply.header("location"), Some(location.as_str()));
    assert_eq!(reply.header("strict-transport-security"), None);

    let reply = curl(&["-k", "-L", &format!("http://127.0.0.1:{redirect_port}/")]);
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("strict-transport-security"),
        Some("max-age=600")
    );
}
