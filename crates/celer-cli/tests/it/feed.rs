//! `celer serve --feed NAME=file:PATH`: the flags' errors, and a file feed
//! served by the binary, changed, broken and removed.

use std::time::{Duration, Instant};

use crate::support::{Celer, DEADLINE, curl, run_celer};

/// Polls until `done` holds for the feed's status.
fn wait_status(url: &str, done: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let start = Instant::now();
    loop {
        let status: serde_json::Value =
            serde_json::from_slice(&curl(&[&format!("{url}/feeds/scores/status")]).body).unwrap();
        if done(&status) {
            return status;
        }
        assert!(start.elapsed() < DEADLINE, "never reached: {status}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn write_atomically(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[test]
fn bad_feed_flags_are_refused_with_a_reason() {
    for (args, message) in [
        (&["--feed", "scores"][..], "expected NAME=SOURCE"),
        (&["--feed", "a/b=file:x"][..], "is not a feed name"),
        (&["--feed", "a=ftp://host/x"][..], "unknown source"),
        (&["--feed", "a=file:"][..], "file: needs a path"),
        (
            &["--feed", "a=file:/x", "--feed", "a=file:/y"][..],
            "a feed named \"a\" exists already",
        ),
        (
            &["--feed", "a=file:/x", "--feed-interval", "b=1s"][..],
            "no feed named \"b\"",
        ),
        (
            &["--feed", "a=file:/x", "--feed-interval", "0"][..],
            "must be more than 0",
        ),
        (&["--feed-interval", "1s"][..], "--feed"),
        (&["--feed", "a=redis://host"][..], "needs a key"),
        (&["--feed", "a=https://"][..], "is not a URL"),
        (
            &["--feed", "a=https://x/", "--feed-ca", "/nonexistent.pem"][..],
            "--feed-ca /nonexistent.pem",
        ),
        (
            &["--feed", "a=https://x/", "--feed-ca", "/dev/null"][..],
            "no certificate in the PEM",
        ),
    ] {
        let mut all = vec!["serve", "--listen", "tcp://127.0.0.1:0"];
        all.extend(args);
        let (code, stderr) = run_celer(&all);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}

#[test]
fn a_file_feed_follows_the_file_and_survives_its_loss() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scores.json");
    write_atomically(&path, r#"{"home": 1}"#);
    let spec = format!("scores=file:{}", path.display());
    let celer = Celer::serve(&[
        "--listen",
        "tcp://127.0.0.1:0",
        "--workers",
        "1",
        "--feed",
        &spec,
        "--feed-interval",
        "scores=200ms",
    ]);
    let url = celer.url();
    let feed = format!("{url}/feeds/scores");
    wait_status(&url, |s| s["version"] == 1);
    let first = curl(&[&feed]);
    assert_eq!(first.status, 200);
    assert_eq!(first.text(), r#"{"home": 1}"#);
    // The interval is the max-age, in whole seconds rounded up.
    assert_eq!(first.header("cache-control"), Some("max-age=1"));
    let etag = first.header("etag").unwrap().to_owned();
    let again = curl(&["-H", &format!("if-none-match: {etag}"), &feed]);
    assert_eq!(again.status, 304);

    write_atomically(&path, r#"{"home": 2}"#);
    wait_status(&url, |s| s["version"] == 2);
    assert_eq!(curl(&[&feed]).text(), r#"{"home": 2}"#);

    // Gone: the last good version stays, the status says why.
    std::fs::remove_file(&path).unwrap();
    let status = wait_status(&url, |s| s["health"] == "failing");
    assert!(
        status["last_error"]
            .as_str()
            .unwrap()
            .contains("No such file"),
        "{status}"
    );
    assert_eq!(curl(&[&feed]).text(), r#"{"home": 2}"#);
    write_atomically(&path, r#"{"home": 3}"#);
    let status = wait_status(&url, |s| s["version"] == 3);
    assert_eq!(status["health"], "ok");
    assert_eq!(status["interval_ms"], 200);
    // The page and the index are served beside.
    assert_eq!(curl(&[&format!("{url}/feeds/")]).status, 200);
    assert_eq!(curl(&[&format!("{url}/feeds")]).status, 308);
    let index: serde_json::Value =
        serde_json::from_slice(&curl(&[&format!("{url}/feeds/index.json")]).body).unwrap();
    assert_eq!(index["feeds"][0]["name"], "scores");
}

/// A redis-server on a free port with keyspace notifications, killed on drop.
struct Redis(std::process::Child, u16);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn redis_and_http_sources_are_served_by_the_binary() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let redis = Redis(
        std::process::Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--appendonly", "no", "--notify-keyspace-events", "K$"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server (scripts/test installs it)"),
        port,
    );
    let cli = |args: &[&str]| {
        let out = std::process::Command::new("redis-cli")
            .args(["-p", &redis.1.to_string()])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", redis.1)).is_err() {
        assert!(start.elapsed() < DEADLINE, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    cli(&["SET", "scores", r#"{"home": 1}"#]);
    // An upstream: another celer with a file feed.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("up.json");
    write_atomically(&path, r#"{"up": 1}"#);
    let up_spec = format!("up=file:{}", path.display());
    let upstream = Celer::serve(&["--listen", "tcp://127.0.0.1:0", "--feed", &up_spec]);
    let redis_spec = format!("scores=redis://127.0.0.1:{}/scores", redis.1);
    let http_spec = format!("mirror={}/feeds/up", upstream.url());
    let celer = Celer::serve(&[
        "--listen",
        "tcp://127.0.0.1:0",
        "--feed",
        &redis_spec,
        "--feed",
        &http_spec,
        "--feed-interval",
        "mirror=100ms",
    ]);
    let url = celer.url();
    let wait = |feed: &str, want: &str| {
        let start = Instant::now();
        loop {
            let reply = curl(&[&format!("{url}/feeds/{feed}")]);
            if reply.status == 200 && reply.text() == want {
                return;
            }
            assert!(start.elapsed() < DEADLINE, "{feed} never served {want}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait("scores", r#"{"home": 1}"#);
    wait("mirror", r#"{"up": 1}"#);
    cli(&["SET", "scores", r#"{"home": 2}"#]);
    wait("scores", r#"{"home": 2}"#);
    write_atomically(&path, r#"{"up": 2}"#);
    wait("mirror", r#"{"up": 2}"#);
    let index: serde_json::Value =
        serde_json::from_slice(&curl(&[&format!("{url}/feeds/index.json")]).body).unwrap();
    assert_eq!(
        index["feeds"][0]["source"],
        format!("redis://127.0.0.1:{}/scores", redis.1)
    );
    assert_eq!(
        index["feeds"][1]["source"],
        format!("{}/feeds/up", upstream.url())
    );
}
