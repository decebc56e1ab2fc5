//! WebSocket modes against a real peer: the Python `websockets` server in
//! `ws_peer.py`, over loopback, plain and TLS.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};

use crate::support::{args, bench};

/// The running Python peer; killed (by its pid) when dropped.
struct Peer {
    child: Child,
    ws_port: u16,
    http_port: u16,
    scheme: (&'static str, &'static str),
    _dir: Option<tempfile::TempDir>,
}

impl Peer {
    fn start() -> Peer {
        Peer::spawn(None)
    }

    fn start_tls() -> Peer {
        let dir = tempfile::tempdir().unwrap();
        let (key, cert) = (dir.path().join("key.pem"), dir.path().join("cert.pem"));
        let status = Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
            ])
            .args(["-nodes", "-days", "1", "-subj", "/CN=localhost"])
            .args(["-addext", "subjectAltName=DNS:localhost"])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stderr(Stdio::null())
            .status()
            .expect("the openssl command makes the test certificate");
        assert!(status.success());
        Peer::spawn(Some(dir))
    }

    fn spawn(tls: Option<tempfile::TempDir>) -> Peer {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/ws_peer.py");
        let mut command = Command::new("python3");
        command.arg(script);
        if let Some(dir) = &tls {
            command
                .arg(dir.path().join("cert.pem"))
                .arg(dir.path().join("key.pem"));
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs the WebSocket peer (scripts/test installs `websockets`)");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let ports: Vec<u16> = line
            .strip_prefix("READY ")
            .unwrap_or_else(|| panic!("the peer did not start: {line:?}"))
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        let scheme = if tls.is_some() {
            ("wss", "https")
        } else {
            ("ws", "http")
        };
        Peer {
            child,
            ws_port: ports[0],
            http_port: ports[1],
            scheme,
            _dir: tls,
        }
    }

    fn ws(&self, path: &str) -> String {
        let host = if self.scheme.0 == "wss" {
            "localhost"
        } else {
            "127.0.0.1"
        };
        format!("{}://{host}:{}{path}", self.scheme.0, self.ws_port)
    }

    fn http(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.http_port)
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// The peer's counters (plain HTTP only).
    fn stats(&self) -> serde_json::Value {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.http_port)).unwrap();
        stream
            .write_all(b"GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        let body = text.split("\r\n\r\n").nth(1).unwrap();
        serde_json::from_str(body).unwrap()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn echo_matches_every_message() {
    let peer = Peer::start();
    let report = bench(&["-n", "500", "-c", "4", &peer.ws("/echo")]);
    assert_eq!(report["mode"], "ws-echo");
    let run = &report["run"];
    assert_eq!(run["responses"], 500, "{run}");
    assert_eq!(run["error_total"], 0, "{run}");
    assert_eq!(run["latency_us"]["count"], 500);
    assert_eq!(run["upgrade_us"]["count"], 4);
    // 500 frames of 64 bytes came back, each with a 2-byte head (RFC 6455 section 5.2).
    assert_eq!(run["bytes"], 500 * (2 + 64));
    assert_eq!(peer.stats()["echoed"], 500);
    assert_eq!(peer.stats()["deflate"], 0);
    assert_eq!(report["settings"]["websocket"]["message_size"], 64);
}

#[test]
fn echo_keeps_several_messages_in_flight_in_binary_and_large() {
    let peer = Peer::start();
    let report = bench(&[
        "-n",
        "200",
        "-c",
        "2",
        "--pipeline",
        "8",
        "--binary",
        "--message-size",
        "300KiB",
        &peer.ws("/echo"),
    ]);
    let run = &report["run"];
    assert_eq!(run["responses"], 200, "{run}");
    assert_eq!(run["error_total"], 0, "{run}");
    // Each frame has a 10-byte head: a 64-bit length.
    assert_eq!(run["bytes"], 200 * (10 + 300 * 1024));
    assert_eq!(report["settings"]["websocket"]["in_flight"], 8);
}

#[test]
fn echo_with_permessage_deflate_is_compressed_and_matched() {
    let peer = Peer::start();
    let report = bench(&[
        "-n",
        "300",
        "-c",
        "3",
        "--pipeline",
        "4",
        "--deflate",
        "--message-size",
        "4KiB",
        &peer.ws("/echo"),
    ]);
    let run = &report["run"];
    assert_eq!(run["responses"], 300, "{run}");
    assert_eq!(run["error_total"], 0, "{run}");
    assert_eq!(peer.stats()["deflate"], 3);
    // The echoes came back compressed: far fewer bytes than 300 x 4 KiB.
    assert!(run["bytes"].as_u64().unwrap() < 300 * 4096 / 2, "{run}");
}

#[test]
fn echo_sends_the_lines_of_a_message_file_in_turn() {
    let peer = Peer::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("messages.jsonl");
    let lines = [
        r#"{"id":1,"name":"Ada","city":"London"}"#,
        r#"{"id":2,"name":"Zoë","city":"Αθήνα"}"#,
        r#"{"id":3,"name":"Grace","tags":["navy","cobol","compilers"]}"#,
    ];
    // A blank line is skipped; CRLF line ends are taken off.
    let text = format!("{}\r\n\n{}\n{}", lines[0], lines[1], lines[2]);
    std::fs::write(&path, text).unwrap();
    let report = bench(&[
        "-n",
        "30",
        "-c",
        "2",
        "--deflate",
        "--message-file",
        path.to_str().unwrap(),
        &peer.ws("/echo"),
    ]);
    let run = &report["run"];
    assert_eq!(run["responses"], 30, "{run}");
    assert_eq!(run["error_total"], 0, "{run}");
    assert_eq!(peer.stats()["echoed"], 30);
    let ws = &report["settings"]["websocket"];
    let mean = lines.iter().map(|l| l.len()).sum::<usize>() as f64 / 3.0;
    assert_eq!(ws["message_size"], mean.round() as u64);
    assert_eq!(ws["message_file"], path.to_str().unwrap());
    // The mangling endpoint changes each echo: every one is caught.
    let report = bench(&[
        "-n",
        "9",
        "-c",
        "1",
        "--message-file",
        path.to_str().unwrap(),
        &peer.ws("/mangle"),
    ]);
    assert_eq!(report["run"]["errors"]["mismatch"], 9, "{}", report["run"]);
}

#[test]
fn altered_echoes_are_counted_as_mismatches() {
    let peer = Peer::start();
    let report = bench(&["-n", "50", "-c", "1", &peer.ws("/mangle")]);
    let run = &report["run"];
    assert_eq!(run["responses"], 0, "{run}");
    assert_eq!(run["errors"]["mismatch"], 50, "{run}");
}

#[test]
fn a_message_over_the_limit_fails_its_connection() {
    let peer = Peer::start();
    let report = bench(&["-n", "2", "-c", "1", &peer.ws("/big")]);
    assert_eq!(report["run"]["responses"], 0);
    assert_eq!(report["run"]["errors"]["too_big"], 2, "{}", report["run"]);
}

#[test]
fn a_refused_upgrade_is_a_handshake_error() {
    let peer = Peer::start();
    let report = bench(&["-n", "5", "-c", "1", &peer.ws("/refuse")]);
    assert_eq!(report["run"]["responses"], 0);
    assert_eq!(report["run"]["errors"]["handshake"], 5);
}

#[test]
fn a_server_close_is_counted_as_closed() {
    let peer = Peer::start();
    let report = bench(&["-n", "3", "-c", "1", &peer.ws("/bye")]);
    assert_eq!(report["run"]["responses"], 0);
    assert_eq!(report["run"]["errors"]["closed"], 3);
}

#[test]
fn echo_over_tls_with_server_cpu() {
    let peer = Peer::start_tls();
    let pid = peer.pid();
    let report = bench(&[
        "-k",
        "-n",
        "200",
        "-c",
        "2",
        "--pid",
        &pid,
        &peer.ws("/echo"),
    ]);
    let run = &report["run"];
    assert_eq!(run["responses"], 200, "{run}");
    assert_eq!(run["error_total"], 0, "{run}");
    assert_eq!(report["settings"]["tls"], true);
    assert_eq!(run["tls_handshake_us"]["count"], 2);
    assert!(run["server"]["cpu_seconds"].as_f64().unwrap() >= 0.0);
    assert!(run["server"]["cpu_us_per_request"].is_number());
}

#[test]
fn idle_sockets_stay_open_and_answer_a_ping() {
    let peer = Peer::start();
    let pid = peer.pid();
    let report = bench(&[
        "--hang",
        "30",
        "-d",
        "300ms",
        "--pid",
        &pid,
        &peer.ws("/echo"),
    ]);
    assert_eq!(report["mode"], "ws-idle");
    let hang = &report["hang"];
    assert_eq!(hang["established"], 30, "{hang}");
    assert_eq!(hang["alive_at_end"], 30, "{hang}");
    for key in ["rss_before", "rss_during", "rss_after"] {
        assert!(hang[key].as_u64().unwrap() > 0, "{key}: {hang}");
    }
    assert!(hang["bytes_per_idle_connection"].is_number());
    assert_eq!(peer.stats()["connections"], 30);
}

#[test]
fn idle_sockets_with_a_message_file_each_echo_a_line_first() {
    let peer = Peer::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.jsonl");
    std::fs::write(&path, "{\"n\":1}\n{\"n\":2}\n").unwrap();
    let report = bench(&[
        "--hang",
        "7",
        "-d",
        "200ms",
        "--deflate",
        "--message-file",
        path.to_str().unwrap(),
        &peer.ws("/echo"),
    ]);
    let hang = &report["hang"];
    assert_eq!(hang["established"], 7, "{hang}");
    assert_eq!(hang["alive_at_end"], 7, "{hang}");
    assert_eq!(peer.stats()["echoed"], 7);
    // Each echo is checked: a server that alters it fails every socket.
    let report = bench(&[
        "--hang",
        "3",
        "-d",
        "200ms",
        "--message-file",
        path.to_str().unwrap(),
        &peer.ws("/mangle"),
    ]);
    assert_eq!(report["hang"]["established"], 0, "{}", report["hang"]);
}

#[test]
fn fanout_through_a_publisher_reaches_every_receiver() {
    let peer = Peer::start();
    let report = bench(&[
        "--fanout",
        "40",
        "--rounds",
        "5",
        "--message-size",
        "100",
        &peer.ws("/room"),
    ]);
    assert_eq!(report["mode"], "ws-fanout");
    let fanout = &report["fanout"];
    assert_eq!(fanout["connected"], 40, "{fanout}");
    assert_eq!(fanout["trigger"], "publish");
    assert_eq!(fanout["complete_rounds"], 5, "{fanout}");
    assert_eq!(fanout["missing"], 0);
    let rounds = fanout["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 5);
    for round in rounds {
        assert_eq!(round["received"], 40, "{round}");
        assert!(round["last_us"].as_f64().unwrap() >= round["p50_us"].as_f64().unwrap());
    }
    assert!(fanout["median_last_us"].is_number());
    assert_eq!(fanout["arrival_us"]["count"], 200);
}

#[test]
fn fanout_through_an_http_post_reaches_every_receiver() {
    let peer = Peer::start();
    let pid = peer.pid();
    let report = bench(&[
        "--fanout",
        "25",
        "--rounds",
        "4",
        "--post",
        &peer.http("/post"),
        "--body",
        "{\"text\":\"{message}\"}",
        "--pid",
        &pid,
        &peer.ws("/room"),
    ]);
    let fanout = &report["fanout"];
    assert_eq!(fanout["trigger"], "post");
    assert_eq!(fanout["complete_rounds"], 4, "{fanout}");
    assert!(
        fanout["trigger_errors"].as_object().unwrap().is_empty(),
        "{fanout}"
    );
    assert_eq!(peer.stats()["posted"], 4);
    assert!(fanout["server"]["cpu_seconds"].is_number());
    let measured = celer_bench::measure(&args(&[
        "--fanout",
        "3",
        "--rounds",
        "2",
        "--deflate",
        &peer.ws("/room"),
    ]))
    .unwrap();
    assert!(measured.to_html().contains("<svg"));
    assert!(measured.to_markdown().contains("| round |"));
    assert!(measured.to_terminal().contains("median time to last"));
}

#[test]
fn websocket_flags_are_checked() {
    let usage = |list: &[&str]| celer_bench::measure(&args(list)).unwrap_err();
    let peer = Peer::start();
    let url = peer.ws("/echo");
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let empty = &file("empty.jsonl", b"\n\r\n\n");
    let latin1 = &file("latin1.txt", b"fine\ncaf\xe9\n");
    let missing = &format!("{}/nothing-here", dir.path().display());
    for (list, needle) in [
        (
            vec!["--fanout", "3", "http://127.0.0.1:1/"],
            "--fanout needs a ws://",
        ),
        (vec!["--rate", "10", url.as_str()], "--rate"),
        (vec!["--message-size", "0", url.as_str()], "--message-size"),
        (
            vec!["--message-size", "17MiB", url.as_str()],
            "--message-size",
        ),
        (
            vec!["--fanout", "3", "--rounds", "0", url.as_str()],
            "--rounds",
        ),
        (
            vec!["--fanout", "3", "--post", "ws://127.0.0.1:1/", url.as_str()],
            "--post",
        ),
        (
            vec!["--publish", "ws://127.0.0.1:1/", url.as_str()],
            "need --fanout",
        ),
        (
            vec!["--fanout", "3", "--message-size", "10", url.as_str()],
            "--message-size",
        ),
        (vec!["--message-file", empty, url.as_str()], "no message"),
        (
            vec!["--message-file", latin1, url.as_str()],
            "line 2 is not UTF-8",
        ),
        (
            vec!["--message-file", missing, url.as_str()],
            "--message-file",
        ),
        (
            vec!["--message-file", latin1, "http://127.0.0.1:1/"],
            "--message-file needs a ws://",
        ),
    ] {
        let error = usage(&list);
        assert!(error.is_usage(), "{list:?}: {error}");
        assert!(error.to_string().contains(needle), "{list:?}: {error}");
        assert_eq!(error.to_string().lines().count(), 1);
    }
}
