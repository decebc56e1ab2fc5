//! Error classification and one-line failures.

use crate::support::{Reply, args, bench, serve};

#[test]
fn resets_are_counted_as_resets() {
    let server = serve(Reply::Reset);
    let report = bench(&["-n", "30", "-c", "2", &server.url()]);
    let run = &report["run"];
    assert_eq!(run["responses"], 0);
    assert_eq!(run["errors"]["reset"], 30);
    assert_eq!(run["error_total"], 30);
}

#[test]
fn garbage_is_counted_as_malformed() {
    let server = serve(Reply::Fixed(b"garbage\r\n\r\n".to_vec()));
    let report = bench(&["-n", "30", "-c", "2", &server.url()]);
    assert_eq!(report["run"]["errors"]["malformed"], 30);
    assert_eq!(report["run"]["responses"], 0);
}

#[test]
fn conflicting_framing_is_counted_as_malformed() {
    let response =
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!".to_vec();
    let server = serve(Reply::Fixed(response));
    let report = bench(&["-n", "10", "-c", "1", &server.url()]);
    assert_eq!(report["run"]["errors"]["malformed"], 10);
}

#[test]
fn a_close_before_the_response_is_counted_as_closed() {
    let server = serve(Reply::Close);
    let report = bench(&["-n", "10", "-c", "1", &server.url()]);
    assert_eq!(report["run"]["errors"]["closed"], 10);
}

#[test]
fn a_stalled_server_times_out() {
    let server = serve(Reply::Stall);
    let report = bench(&["-n", "4", "-c", "2", "--timeout", "100ms", &server.url()]);
    assert_eq!(report["run"]["errors"]["timeout"], 4);
    assert_eq!(report["run"]["responses"], 0);
}

#[test]
fn an_unreachable_target_is_one_line_error() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/");
    let error = celer_bench::measure(&args(&["-n", "1", &url])).unwrap_err();
    assert!(error.is_connect());
    let message = error.to_string();
    assert!(
        message.starts_with("cannot connect to 127.0.0.1:"),
        "{message}"
    );
    assert!(!message.contains('\n'));
}

#[test]
fn bad_arguments_are_usage_errors() {
    for list in [
        &["-c", "0", "http://127.0.0.1:1/"][..],
        &["ftp://127.0.0.1/"],
        &["--rate", "100", "--pipeline", "2", "http://127.0.0.1:1/"],
        &["-H", "no colon", "http://127.0.0.1:1/"],
        &[],
    ] {
        let error = celer_bench::measure(&args(list)).unwrap_err();
        assert!(error.is_usage(), "{list:?}: {error}");
        assert!(!error.to_string().contains('\n'));
    }
}

#[test]
fn an_untrusted_certificate_is_one_line_error() {
    let server = crate::support::serve_tls(crate::support::ok());
    let url = format!("https://localhost:{}/", server.addr.port());
    let error = celer_bench::measure(&args(&["-n", "1", &url])).unwrap_err();
    assert!(error.is_connect());
    assert!(
        error
            .to_string()
            .starts_with("TLS handshake with localhost:"),
        "{error}"
    );
}
