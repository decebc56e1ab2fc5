//! The command line: help, bad flags, unusable roots and addresses.

use std::net::TcpListener;

use crate::support::{Celer, run_celer, run_celer_stdout};

/// Asserts `celer ARGS` exits 2 with one stderr line containing `needle`.
fn fails_with(args: &[&str], needle: &str) {
    let (code, stderr) = run_celer(args);
    assert_eq!(code, Some(2), "{args:?}: {stderr}");
    assert_eq!(
        stderr.lines().count(),
        1,
        "{args:?}: not one line: {stderr}"
    );
    assert!(stderr.starts_with("celer: error: "), "{args:?}: {stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?}: {stderr:?} lacks {needle:?}"
    );
}

#[test]
fn help_documents_every_flag() {
    let (code, help) = run_celer_stdout(&["serve", "--help"]);
    assert_eq!(code, Some(0));
    let flags = [
        "--root",
        "--listen",
        "--workers",
        "--threading",
        "--server-header",
        "--no-server-header",
        "--max-connections",
        "--max-body",
        "--max-head",
        "--head-timeout",
        "--body-timeout",
        "--keep-alive-timeout",
        "--write-timeout",
        "--shutdown-timeout",
        "--max-requests-per-connection",
        "--backlog",
        "--unix-mode",
        "--log-level",
        "--tls-cert",
        "--tls-key",
        "--self-signed",
        "--redirect-http",
        "--hsts",
        "--tls-handshake-timeout",
        "--max-tls-handshakes",
        "--no-tls-resumption",
        "SIGHUP",
    ];
    for flag in flags {
        assert!(help.contains(flag), "serve --help lacks {flag}");
    }
    for default in [
        "[default: 16MiB]",
        "[default: 10s]",
        "[default: 10000]",
        "[default: per-core]",
    ] {
        assert!(help.contains(default), "serve --help lacks {default}");
    }
    let (code, help) = run_celer_stdout(&["--help"]);
    assert_eq!(code, Some(0));
    assert!(help.contains("serve") && help.contains("bench"), "{help}");
}

#[test]
fn bad_flags_exit_2_with_one_line() {
    fails_with(&["serve", "--bogus"], "--bogus");
    // The hint names the subcommand, not a flag given before the bad one.
    fails_with(
        &["serve", "--listen", "tcp://127.0.0.1:1", "--bogus"],
        "(see 'celer serve --help')",
    );
    fails_with(&["serve", "--workers", "0"], "--workers");
    fails_with(&["serve", "--workers", "many"], "--workers");
    fails_with(&["serve", "--threading", "fast"], "--threading");
    fails_with(&["serve", "--max-body", "lots"], "--max-body");
    fails_with(&["serve", "--head-timeout", "soon"], "--head-timeout");
    fails_with(&["serve", "--unix-mode", "999"], "--unix-mode");
    fails_with(
        &["serve", "--server-header", "x", "--no-server-header"],
        "--no-server-header",
    );
    fails_with(&["frobnicate"], "frobnicate");
}

#[test]
fn bad_listen_syntax_exits_2() {
    fails_with(
        &["serve", "--listen", "http://127.0.0.1:80"],
        "unknown scheme",
    );
    fails_with(&["serve", "--listen", "tcp://127.0.0.1"], "missing :PORT");
    fails_with(&["serve", "--listen", "tcp://127.0.0.1:99999"], "port");
}

#[test]
fn unusable_root_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    fails_with(&["serve", "--root", missing.to_str().unwrap()], "missing");
    let file = dir.path().join("file.txt");
    std::fs::write(&file, "x").unwrap();
    fails_with(
        &["serve", "--root", file.to_str().unwrap()],
        "not a directory",
    );
}

#[test]
fn port_in_use_exits_2_naming_the_address() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let spec = format!("tcp://{addr}");
    for workers in ["1", "2"] {
        fails_with(&["serve", "--listen", &spec, "--workers", workers], &spec);
    }
}

#[test]
fn unix_socket_path_in_use_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-socket");
    std::fs::write(&file, "x").unwrap();
    let spec = format!("unix:{}", file.display());
    fails_with(&["serve", "--listen", &spec], &spec);
}

/// A port another celer holds is refused, whatever the worker count (per-core
/// workers bind SO_REUSEPORT sockets, which must not join the other process).
#[test]
fn second_celer_on_a_taken_port() {
    let first = Celer::serve(&["--listen", "tcp://127.0.0.1:0", "--workers", "2"]);
    let spec = first.specs[0].clone();
    fails_with(&["serve", "--listen", &spec, "--workers", "1"], &spec);
    fails_with(&["serve", "--listen", &spec, "--workers", "2"], &spec);
}

#[test]
fn bench_is_wired() {
    let celer = Celer::serve(&["--listen", "tcp://127.0.0.1:0", "--workers", "1"]);
    let url = format!("{}/", celer.url());
    let (code, stderr) = run_celer(&["bench", "-n", "50", "-c", "2", "-t", "1", &url]);
    assert_eq!(code, Some(0), "{stderr}");
    let (code, help) = run_celer_stdout(&["bench", "--help"]);
    assert_eq!(code, Some(0));
    assert!(help.contains("--connections"), "{help}");
    fails_with(&["bench"], "URL");
}
