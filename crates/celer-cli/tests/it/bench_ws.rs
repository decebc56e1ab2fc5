//! `celer bench` with ws:// URLs: the help, one-line usage errors, and a run
//! against a server that refuses the upgrade.

use std::process::Command;

use crate::support::{CELER, Celer, run_celer, run_celer_stdout};

#[test]
fn help_documents_the_websocket_flags_and_defaults() {
    let (code, help) = run_celer_stdout(&["bench", "--help"]);
    assert_eq!(code, Some(0));
    for needle in [
        "ws:// or wss://",
        "WebSocket (ws:// and wss:// URLs)",
        "--message-size",
        "[default: 64]",
        "--binary",
        "--deflate",
        "--subprotocol",
        "--fanout",
        "--rounds",
        "[default: 10]",
        "--publish",
        "--post",
        "{message}",
        "in flight per connection",
    ] {
        assert!(help.contains(needle), "bench --help lacks {needle:?}");
    }
}

#[test]
fn bad_websocket_flags_are_one_line_and_exit_2() {
    for (args, needle) in [
        (
            vec!["--fanout", "3", "http://127.0.0.1:9/"],
            "--fanout needs a ws:// or wss:// URL",
        ),
        (
            vec!["--message-size", "0", "ws://127.0.0.1:9/"],
            "--message-size must be at least 1",
        ),
        (
            vec!["--rate", "5", "ws://127.0.0.1:9/"],
            "--rate is not supported",
        ),
        (
            vec!["--fanout", "2", "--rounds", "0", "ws://127.0.0.1:9/"],
            "--rounds",
        ),
        (vec!["--rounds", "many", "ws://127.0.0.1:9/"], "many"),
        (
            vec!["--hang", "2", "--fanout", "2", "ws://127.0.0.1:9/"],
            "--fanout",
        ),
    ] {
        let mut argv = vec!["bench"];
        argv.extend(args.iter().copied());
        let (code, stderr) = run_celer(&argv);
        assert_eq!(code, Some(2), "{argv:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{argv:?}: {stderr}");
        assert!(stderr.starts_with("celer: error: "), "{stderr}");
        assert!(
            stderr.contains(needle),
            "{argv:?}: {stderr:?} lacks {needle:?}"
        );
    }
}

#[test]
fn a_server_without_websockets_gives_handshake_errors() {
    let celer = Celer::serve(&["--listen", "tcp://127.0.0.1:0", "--workers", "1"]);
    let url = celer.url().replacen("http://", "ws://", 1) + "/";
    let out = Command::new(CELER)
        .args(["bench", "--json", "-q", "-n", "5", "-c", "1", &url])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["mode"], "ws-echo");
    assert_eq!(report["run"]["responses"], 0);
    assert_eq!(report["run"]["errors"]["handshake"], 5, "{report}");
}
