//! `--sse`: subscribers to a real event stream over loopback, served by a
//! small server in the test that re-reads its source file when it changes
//! (polled every few milliseconds) and pushes it as one event, chunked,
//! to every subscriber; and `--ramp` with the set-up counts of a load run.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{Reply, args, bench, ok, serve};

/// How often the test server looks at its file.
const POLL: Duration = Duration::from_millis(5);

/// Calls `on_change` with the contents of `file` each time they change
/// (polled every [`POLL`]; an empty read is a file being replaced).
pub(crate) fn watch(file: std::path::PathBuf, mut on_change: impl FnMut(&[u8]) + Send + 'static) {
    std::thread::spawn(move || {
        let mut last = std::fs::read(&file).unwrap();
        loop {
            std::thread::sleep(POLL);
            let Ok(now) = std::fs::read(&file) else {
                continue;
            };
            if now != last && !now.is_empty() {
                on_change(&now);
                last = now;
            }
        }
    });
}

/// A request head read byte by byte up to its blank line (or the end).
pub(crate) fn read_head(stream: &mut TcpStream) -> Vec<u8> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
        head.push(byte[0]);
    }
    head
}

/// Starts an SSE server publishing `file`; returns its stream's URL.
fn sse_server(file: std::path::PathBuf, status: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/events", listener.local_addr().unwrap());
    let subscribers: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
    let event = |doc: &[u8]| {
        let text = String::from_utf8_lossy(doc).replace('\n', " ");
        let event = format!("id: x\ndata: {text}\n\n");
        // Two chunks, so an event spans chunk framing.
        let (a, b) = event.as_bytes().split_at(event.len() / 2);
        let mut out = format!("{:x}\r\n", a.len()).into_bytes();
        out.extend_from_slice(a);
        out.extend_from_slice(format!("\r\n{:x}\r\n", b.len()).as_bytes());
        out.extend_from_slice(b);
        out.extend_from_slice(b"\r\n");
        out
    };
    let watched = subscribers.clone();
    watch(file.clone(), move |now| {
        let bytes = event(now);
        watched
            .lock()
            .unwrap()
            .retain_mut(|s| s.write_all(&bytes).is_ok());
    });
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            read_head(&mut stream);
            if status != "200 OK" {
                let _ = stream.write_all(
                    format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n").as_bytes(),
                );
                continue;
            }
            let mut subscribers = subscribers.lock().unwrap();
            let current = std::fs::read(&file).unwrap();
            let mut out = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                Transfer-Encoding: chunked\r\n\r\n"
                .to_vec();
            out.extend_from_slice(&event(&current));
            if stream.write_all(&out).is_ok() {
                subscribers.push(stream);
            }
        }
    });
    url
}

#[test]
fn every_subscriber_times_every_update() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("doc.json");
    let original = b"{\n \"rows\": [1, 2, 3]\n}\n";
    std::fs::write(&file, original).unwrap();
    let url = sse_server(file.clone(), "200 OK");
    let path = file.to_str().unwrap();
    let report = bench(&[
        "--sse",
        "20",
        "--sse-file",
        path,
        "--rounds",
        "3",
        "-t",
        "2",
        "--ramp",
        "100ms",
        &url,
    ]);
    assert_eq!(report["mode"], "sse");
    let sse = &report["sse"];
    assert_eq!(sse["ready"], 20, "{sse}");
    assert_eq!(sse["complete_updates"], 3, "{sse}");
    assert_eq!(sse["missing"], 0);
    assert_eq!(sse["latency_us"]["count"], 60);
    assert_eq!(sse["updates"].as_array().unwrap().len(), 3);
    assert!(sse["errors"].as_object().unwrap().is_empty());
    // The file is put back as it was.
    assert_eq!(std::fs::read(&file).unwrap(), original);
}

#[test]
fn a_refused_subscription_is_counted_not_hung() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("doc.json");
    std::fs::write(&file, b"{}").unwrap();
    let url = sse_server(file.clone(), "404 Not Found");
    let report = bench(&[
        "--sse",
        "5",
        "--sse-file",
        file.to_str().unwrap(),
        "--rounds",
        "1",
        "--timeout",
        "2s",
        &url,
    ]);
    let sse = &report["sse"];
    assert_eq!(sse["ready"], 0);
    assert_eq!(sse["errors"]["status"], 5, "{sse}");
    assert_eq!(sse["updates"].as_array().unwrap().len(), 0);
}

#[test]
fn sse_arguments_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("list.json");
    std::fs::write(&file, b"[1, 2]").unwrap();
    let path = file.to_str().unwrap();
    let err = celer_bench::measure(&args(&[
        "--sse",
        "1",
        "--sse-file",
        path,
        "http://127.0.0.1:9/events",
    ]))
    .unwrap_err();
    assert!(err.is_usage());
    assert!(err.to_string().contains("JSON object"), "{err}");
    let err = celer_bench::measure(&args(&[
        "--sse",
        "1",
        "--sse-file",
        path,
        "ws://127.0.0.1:9/events",
    ]))
    .unwrap_err();
    assert!(err.to_string().contains("http://"), "{err}");
}

#[test]
fn ramped_connections_are_all_set_up_and_counted_through_warm_up() {
    let server = serve(Reply::Fixed(ok()));
    let report = bench(&[
        "-c",
        "40",
        "-t",
        "1",
        "--ramp",
        "200ms",
        "--warmup",
        "300ms",
        "-d",
        "300ms",
        &server.url(),
    ]);
    let run = &report["run"];
    // Every connection opened during the warm-up, none while measuring.
    assert_eq!(run["connections_set_up"], 40);
    assert_eq!(run["connections_opened"], 0);
    assert!(run["setup_errors"].as_object().unwrap().is_empty());
    assert_eq!(run["error_total"], 0);
}
