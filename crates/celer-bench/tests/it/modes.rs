//! Open loop, sweeps, hanging connections, server accounting and report shapes.

use crate::support::{Reply, args, bench, ok, serve};
use std::time::Duration;

#[test]
fn open_loop_shows_a_server_stall_in_p99() {
    let server = serve(Reply::StallOnce {
        body: ok(),
        after: Duration::from_millis(200),
        stall: Duration::from_secs(1),
    });
    let report = bench(&["--rate", "200", "-c", "4", "-d", "2s", &server.url()]);
    let run = &report["run"];
    // Half the intended requests fall into the stall; from their intended
    // send times they waited up to a second, so p99 is far above 0.5 s.
    assert!(
        run["latency_us"]["p99"].as_f64().unwrap() >= 500_000.0,
        "{run}"
    );
    assert!(run["uncorrected_latency_us"]["p50"].is_number());
    assert_eq!(report["settings"]["rate"], 200.0);
}

#[test]
fn sweep_reports_one_row_per_level() {
    let server = serve(Reply::Fixed(ok()));
    let report = bench(&["--sweep", "1,3", "-d", "300ms", &server.url()]);
    assert_eq!(report["mode"], "sweep");
    let levels = report["sweep"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    assert_eq!(levels[0]["connections"], 1);
    assert_eq!(levels[1]["connections"], 3);
    for level in levels {
        assert!(level["responses"].as_u64().unwrap() > 0);
        assert_eq!(level["error_rate"], 0.0);
    }
}

#[test]
fn hanging_connections_stay_open_and_answer() {
    let server = serve(Reply::Fixed(ok()));
    let me = std::process::id().to_string();
    let report = bench(&["--hang", "20", "-d", "300ms", "--pid", &me, &server.url()]);
    assert_eq!(report["mode"], "hang");
    let hang = &report["hang"];
    assert_eq!(hang["connections"], 20);
    assert_eq!(hang["established"], 20);
    assert_eq!(hang["alive_at_end"], 20);
    assert!(hang["rss_before"].is_u64());
    assert!(hang["rss_during"].is_u64());
    assert!(hang["rss_after"].is_u64());
    assert!(hang["bytes_per_idle_connection"].is_number());
    assert_eq!(server.requests(), 40);
}

#[test]
fn hanging_connections_closed_by_the_server_are_counted() {
    let server = serve(Reply::ThenClose(
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec(),
    ));
    let report = bench(&["--hang", "5", "-d", "100ms", &server.url()]);
    assert_eq!(report["hang"]["established"], 0);
    assert_eq!(report["hang"]["errors"]["closed"], 5);
}

#[test]
fn pid_gives_server_cpu_per_request() {
    let server = serve(Reply::Fixed(ok()));
    let me = std::process::id().to_string();
    let report = bench(&[
        "-d",
        "500ms",
        "-c",
        "2",
        "--pid",
        &me,
        "--pid-tree",
        &server.url(),
    ]);
    let cpu = &report["run"]["server"];
    assert!(cpu["cpu_seconds"].as_f64().unwrap() >= 0.0);
    assert!(cpu["cpu_us_per_request"].is_number());
}

#[test]
fn json_report_has_the_documented_shape() {
    let server = serve(Reply::Fixed(ok()));
    let report = bench(&["-n", "100", "-c", "2", &server.url()]);
    assert_eq!(report["mode"], "load");
    for key in [
        "urls",
        "connections",
        "threads",
        "keep_alive",
        "pipeline",
        "timeout_s",
    ] {
        assert!(!report["settings"][key].is_null(), "settings.{key}");
    }
    let run = &report["run"];
    for key in [
        "elapsed_s",
        "responses",
        "requests_per_sec",
        "bytes",
        "bytes_per_sec",
        "gbit_per_sec",
        "connections_opened",
        "error_total",
        "status_errors",
    ] {
        assert!(run[key].is_number(), "run.{key}");
    }
    for key in [
        "min", "mean", "stdev", "p50", "p75", "p90", "p99", "p999", "max",
    ] {
        assert!(run["latency_us"][key].is_number(), "latency_us.{key}");
    }
    assert!(run["latency_us"]["spectrum"].is_array());
    assert!(run["errors"].is_object());
    assert!(run["status"].is_object());
    assert!(run["timeline"].is_array());
    assert!(run["connect_us"]["p50"].is_number());
}

#[test]
fn html_and_markdown_reports_are_self_contained() {
    let server = serve(Reply::Fixed(ok()));
    let report = celer_bench::measure(&args(&["-d", "1600ms", "-c", "2", &server.url()])).unwrap();
    let html = report.to_html();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.matches("<svg").count() >= 2);
    assert!(!html.contains("<script") && !html.contains("src=") && !html.contains("href="));
    let markdown = report.to_markdown();
    assert!(markdown.contains("| p50 |"));
    assert!(report.to_terminal().contains("Latency"));
}
