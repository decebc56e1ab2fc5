//! Closed-loop load: exact counts, pipelining, keep-alive off, body framings.

use crate::support::{Reply, bench, ok, serve};

#[test]
fn n_sends_exactly_that_many_requests() {
    let server = serve(Reply::Fixed(ok()));
    let report = bench(&["-n", "1000", "-c", "8", "-t", "2", &server.url()]);
    let run = &report["run"];
    assert_eq!(run["responses"], 1000);
    assert_eq!(run["status"]["200"], 1000);
    assert_eq!(run["error_total"], 0);
    assert_eq!(server.requests(), 1000);
    assert_eq!(run["connections_opened"], 8);
}

#[test]
fn pipelined_requests_are_all_answered() {
    let server = serve(Reply::Fixed(ok()));
    let report = bench(&[
        "-n",
        "1001",
        "-c",
        "4",
        "-t",
        "1",
        "--pipeline",
        "8",
        &server.url(),
    ]);
    let run = &report["run"];
    assert_eq!(run["responses"], 1001);
    assert_eq!(run["error_total"], 0);
    assert_eq!(run["connections_opened"], 4);
    assert_eq!(server.requests(), 1001);
}

#[test]
fn keep_alive_off_opens_a_connection_per_request() {
    let server = serve(Reply::Fixed(ok()));
    let report = bench(&[
        "-n",
        "200",
        "-c",
        "4",
        "-t",
        "1",
        "--no-keepalive",
        &server.url(),
    ]);
    let run = &report["run"];
    assert_eq!(run["responses"], 200);
    assert_eq!(run["connections_opened"], 200);
    assert_eq!(run["error_total"], 0);
    assert_eq!(server.requests(), 200);
}

#[test]
fn chunked_responses_with_trailers_are_read() {
    let response = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
                     5\r\nhello\r\n6;x=y\r\n world\r\n0\r\nTrailer: t\r\n\r\n"
        .to_vec();
    let server = serve(Reply::Fixed(response));
    let report = bench(&["-n", "300", "-c", "3", "--pipeline", "4", &server.url()]);
    assert_eq!(report["run"]["responses"], 300);
    assert_eq!(report["run"]["error_total"], 0);
}

#[test]
fn close_delimited_responses_end_at_eof() {
    let server = serve(Reply::ThenClose(
        b"HTTP/1.1 200 OK\r\n\r\nuntil close".to_vec(),
    ));
    let report = bench(&["-n", "50", "-c", "2", &server.url()]);
    let run = &report["run"];
    assert_eq!(run["responses"], 50);
    assert_eq!(run["error_total"], 0);
    assert_eq!(run["connections_opened"], 50);
}

#[test]
fn status_codes_are_counted_by_code() {
    let response = b"HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n".to_vec();
    let server = serve(Reply::Fixed(response));
    let report = bench(&["-n", "40", "-c", "2", &server.url()]);
    let run = &report["run"];
    assert_eq!(run["status"]["503"], 40);
    assert_eq!(run["status_errors"], 40);
    assert_eq!(run["error_total"], 0);
}

#[test]
fn large_bodies_stream_through_a_small_buffer() {
    let body = vec![b'x'; 1 << 20];
    let mut response =
        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
    response.extend_from_slice(&body);
    let server = serve(Reply::Fixed(response));
    let report = bench(&["-n", "20", "-c", "2", "--buffer", "4KiB", &server.url()]);
    let run = &report["run"];
    assert_eq!(run["responses"], 20);
    assert!(run["bytes"].as_u64().unwrap() >= 20 << 20);
    assert!(run["gbit_per_sec"].as_f64().unwrap() > 0.0);
}

#[test]
fn method_headers_and_body_are_sent() {
    let server = serve(Reply::Fixed(ok()));
    let report = bench(&[
        "-n",
        "10",
        "-c",
        "1",
        "-m",
        "POST",
        "-H",
        "X-Test: 1",
        "--body",
        "abc",
        &server.url(),
    ]);
    assert_eq!(report["run"]["responses"], 10);
    let lines = server.lines.lock().unwrap();
    assert_eq!(lines.get("POST / HTTP/1.1"), Some(&10));
}

#[test]
fn weighted_urls_from_a_file_are_all_used() {
    let server = serve(Reply::Fixed(ok()));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("urls.txt");
    let text = format!("# two paths\n3 http://{0}/a\n1 http://{0}/b\n", server.addr);
    std::fs::write(&path, text).unwrap();
    let report = bench(&["-n", "400", "-c", "2", "--urls", path.to_str().unwrap()]);
    assert_eq!(report["run"]["responses"], 400);
    let lines = server.lines.lock().unwrap();
    let a = lines.get("GET /a HTTP/1.1").copied().unwrap_or(0);
    let b = lines.get("GET /b HTTP/1.1").copied().unwrap_or(0);
    assert_eq!(a + b, 400);
    assert!(a > b && b > 0, "a={a} b={b}");
}

#[test]
fn duration_runs_report_a_timeline() {
    let server = serve(Reply::Fixed(ok()));
    let report = bench(&["-d", "1s", "-c", "2", &server.url()]);
    let run = &report["run"];
    assert!(run["responses"].as_u64().unwrap() > 0);
    let timeline = run["timeline"].as_array().unwrap();
    assert!(!timeline.is_empty());
    let sum: u64 = timeline
        .iter()
        .map(|s| s["responses"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, run["responses"].as_u64().unwrap());
}

#[test]
fn https_with_insecure_reports_handshakes_separately() {
    let server = crate::support::serve_tls(ok());
    let url = format!("https://localhost:{}/", server.addr.port());
    let report = bench(&[
        "-n",
        "100",
        "-c",
        "2",
        "--pipeline",
        "2",
        "--insecure",
        &url,
    ]);
    let run = &report["run"];
    assert_eq!(run["responses"], 100);
    assert_eq!(run["error_total"], 0);
    assert_eq!(run["tls_handshake_us"]["count"], 2);
    assert_eq!(report["settings"]["tls"], true);
    assert_eq!(server.requests(), 100);
}
