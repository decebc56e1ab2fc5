//! `celer serve --config FILE`: every key family taking effect over a real
//! socket, flags winning over the file, paths relative to the file, the
//! example file loading, `--check`, and bad files refused with the file,
//! line and key. Also `--feed-schema` and `[[feed]] schema`: a version
//! that fails the JSON Schema is refused and counted.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::{Celer, DEADLINE, curl, run_celer, run_celer_stdout};

/// The repository's example configuration.
const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/celer.toml");

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    path.display().to_string()
}

/// Polls `/feeds/NAME/status` until `done` holds.
fn wait_status(
    url: &str,
    name: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let start = Instant::now();
    loop {
        let reply = curl(&[&format!("{url}/feeds/{name}/status")]);
        let status: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        if done(&status) {
            return status;
        }
        assert!(start.elapsed() < DEADLINE, "never reached: {status}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until a stderr line contains `needle` and returns it.
fn stderr_line(celer: &Celer, needle: &str) -> String {
    let start = Instant::now();
    loop {
        if let Some(line) = celer.stderr_lines().iter().find(|l| l.contains(needle)) {
            return line.clone();
        }
        assert!(
            start.elapsed() < DEADLINE,
            "no stderr line with {needle:?}: {:?}",
            celer.stderr_lines()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn limits_from_the_file_answer_413_and_431_and_flags_win() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "celer.toml",
        r#"
listen = ["tcp://127.0.0.1:0"]
workers = 1
server_header = "from-the-file"

[limits]
max_body = "1k"
max_head = 2048
"#,
    );
    let celer = Celer::serve(&["--config", &config]);
    let url = celer.url();
    let body = "x".repeat(1500);
    let big = curl(&["--data-binary", &body, &url]);
    assert_eq!(big.status, 413);
    assert_eq!(big.header("server"), Some("from-the-file"));
    let header = format!("x-filler: {}", "y".repeat(3000));
    assert_eq!(curl(&["-H", &header, &url]).status, 431);
    assert_eq!(curl(&[&url]).status, 200);
    drop(celer);

    // The same file with flags: each wins over its key, the rest stays.
    let celer = Celer::serve(&[
        "--config",
        &config,
        "--max-body",
        "4k",
        "--no-server-header",
    ]);
    let url = celer.url();
    let fits = curl(&["--data-binary", &body, &url]);
    assert_ne!(fits.status, 413);
    assert_eq!(fits.header("server"), None);
    assert_eq!(
        curl(&["--data-binary", &"x".repeat(5000), &url]).status,
        413
    );
    assert_eq!(curl(&["-H", &header, &url]).status, 431);
}

#[test]
fn files_and_paths_are_relative_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("conf/site/docs")).unwrap();
    write(
        &dir.path().join("conf/site"),
        "hello.txt",
        "hello from the file",
    );
    write(&dir.path().join("conf/site/docs"), "a.txt", "a");
    let config = write(
        &dir.path().join("conf"),
        "celer.toml",
        r#"
listen = ["tcp://127.0.0.1:0", "unix:celer.sock"]
workers = 1

[files]
root = "site"
listing = true
cache_max_age = "2m"
"#,
    );
    // Run from another directory: "site" and "celer.sock" are conf's.
    let elsewhere = tempfile::tempdir().unwrap();
    let celer = Celer::serve_in(elsewhere.path(), &["--config", &config]);
    let url = celer.url();
    let file = curl(&[&format!("{url}/hello.txt")]);
    assert_eq!(file.text(), "hello from the file");
    assert_eq!(file.header("cache-control"), Some("max-age=120"));
    let listing = curl(&[&format!("{url}/docs/")]);
    assert_eq!(listing.status, 200);
    assert!(listing.text().contains("a.txt"), "{}", listing.text());
    let sock = dir.path().join("conf/celer.sock");
    assert!(
        celer.specs.iter().any(|s| s.ends_with("conf/celer.sock")),
        "{:?}",
        celer.specs
    );
    let over_unix = curl(&[
        "--unix-socket",
        &sock.display().to_string(),
        "http://localhost/hello.txt",
    ]);
    assert_eq!(over_unix.status, 200);
    drop(celer);

    // --root and --listen on the command line win; the file's [files]
    // options apply to that root.
    let other = tempfile::tempdir().unwrap();
    std::fs::create_dir(other.path().join("sub")).unwrap();
    let root = other.path().display().to_string();
    let celer = Celer::serve(&[
        "--config",
        &config,
        "--root",
        &root,
        "--listen",
        "tcp://127.0.0.1:0",
    ]);
    let url = celer.url();
    assert_eq!(curl(&[&format!("{url}/hello.txt")]).status, 404);
    assert_eq!(curl(&[&format!("{url}/sub/")]).status, 200);
    assert_eq!(celer.specs.len(), 1, "{:?}", celer.specs);
}

#[test]
fn tls_http2_and_tasks_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    write(dir.path(), "site.crt", &generated.cert.pem());
    write(
        dir.path(),
        "site.key",
        &generated.signing_key.serialize_pem(),
    );
    let config = write(
        dir.path(),
        "celer.toml",
        r#"
listen = ["tcp://127.0.0.1:0"]
workers = 1

[tls]
certificates = [{ cert = "site.crt", key = "site.key" }]
hsts = "1h"

[http2]
enabled = false

[tasks]
enabled = true
data_dir = "store"
"#,
    );
    let celer = Celer::serve(&["--config", &config]);
    let port = celer.port();
    let url = format!("https://localhost:{port}");
    let resolve = format!("localhost:{port}:127.0.0.1");
    let reply = curl(&["-k", "--http2", "--resolve", &resolve, &url]);
    assert_eq!(reply.status, 200);
    // [http2] enabled = false: ALPN offers only http/1.1.
    assert_eq!(reply.version, "HTTP/1.1");
    assert_eq!(
        reply.header("strict-transport-security"),
        Some("max-age=3600")
    );
    let tasks = curl(&["-k", "--resolve", &resolve, &format!("{url}/tasks")]);
    assert_eq!(tasks.status, 200, "{}", tasks.text());
    assert!(dir.path().join("store").is_dir());
    drop(celer);

    // --self-signed on the command line replaces the file's certificates;
    // HTTP/2 stays off.
    let celer = Celer::serve(&["--config", &config, "--self-signed"]);
    let port = celer.port();
    let reply = curl(&["-k", "--http2", &format!("https://127.0.0.1:{port}/")]);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.version, "HTTP/1.1");
    stderr_line(&celer, "self-signed certificate");
}

#[test]
fn a_feed_from_the_file_serves_and_its_schema_refuses_bad_versions() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "scores.json", r#"{"home": 1, "away": 0}"#);
    write(
        dir.path(),
        "scores.schema.json",
        r#"{
            "type": "object",
            "required": ["home", "away"],
            "properties": {"home": {"type": "integer"}, "away": {"type": "integer"}}
        }"#,
    );
    let config = write(
        dir.path(),
        "celer.toml",
        r#"
listen = ["tcp://127.0.0.1:0"]
workers = 1

[[feed]]
name = "scores"
source = "file:scores.json"
interval = "100ms"
schema = "scores.schema.json"
"#,
    );
    let celer = Celer::serve(&["--config", &config]);
    let url = celer.url();
    let status = wait_status(&url, "scores", |s| s["version"] == 1);
    assert_eq!(status["interval_ms"], 100);
    assert_eq!(
        curl(&[&format!("{url}/feeds/scores")]).text(),
        r#"{"home": 1, "away": 0}"#
    );

    // A valid update is served.
    write(dir.path(), "scores.json", r#"{"home": 2, "away": 0}"#);
    wait_status(&url, "scores", |s| s["version"] == 2);
    // One that fails the schema is refused, counted and logged with the
    // failing location; the last good version stays.
    write(dir.path(), "scores.json", r#"{"home": "three", "away": 0}"#);
    let status = wait_status(&url, "scores", |s| s["rejected_validator"] == 1);
    assert_eq!(status["version"], 2);
    // The status says why, as the log does.
    let reason = status["last_refusal"].as_str().unwrap();
    assert!(reason.contains("at /home"), "{reason}");
    let line = stderr_line(&celer, "update refused");
    assert!(line.contains("at /home"), "{line}");
    assert!(line.contains("scores.schema.json"), "{line}");
    assert_eq!(
        curl(&[&format!("{url}/feeds/scores")]).text(),
        r#"{"home": 2, "away": 0}"#
    );
    // Not JSON at all: counted apart.
    write(dir.path(), "scores.json", r#"{"home": "#);
    let status = wait_status(&url, "scores", |s| s["rejected_invalid"] == 1);
    assert_eq!(status["version"], 2);
    assert_ne!(status["last_refusal"].as_str().unwrap(), reason);
    // A valid one again.
    write(dir.path(), "scores.json", r#"{"home": 3, "away": 1}"#);
    let status = wait_status(&url, "scores", |s| s["version"] == 3);
    assert_eq!(status["rejected_validator"], 1);
}

#[test]
fn feed_flags_merge_with_the_file_by_name() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.json", "[1]");
    write(dir.path(), "b.json", "[\"b\"]");
    write(
        dir.path(),
        "numbers.schema.json",
        r#"{"type": "array", "items": {"type": "number"}}"#,
    );
    let config = write(
        dir.path(),
        "celer.toml",
        r#"
listen = ["tcp://127.0.0.1:0"]
workers = 1

[feeds]
interval = "300ms"
max_bytes = "1k"

[[feed]]
name = "a"
source = "file:a.json"
max_bytes = "4"
"#,
    );
    // The file's max_bytes for "a" (4 bytes) holds "[1]"; --feed adds "b",
    // whose document fails the schema given by flag.
    let b = format!("b=file:{}", dir.path().join("b.json").display());
    let schema = format!("b={}", dir.path().join("numbers.schema.json").display());
    let celer = Celer::serve(&[
        "--config",
        &config,
        "--feed",
        &b,
        "--feed-schema",
        &schema,
        "--feed-interval",
        "b=200ms",
    ]);
    let url = celer.url();
    let a = wait_status(&url, "a", |s| s["version"] == 1);
    assert_eq!(a["interval_ms"], 300);
    let b_status = wait_status(&url, "b", |s| s["rejected_validator"] == 1);
    assert_eq!(b_status["interval_ms"], 200);
    assert_eq!(b_status["version"], 0);
    assert_eq!(curl(&[&format!("{url}/feeds/b")]).status, 503);
    // Over a's own limit: refused.
    write(dir.path(), "a.json", "[1,2]");
    wait_status(&url, "a", |s| s["rejected_too_large"] == 1);
    drop(celer);

    // --feed-max-bytes wins over every max_bytes of the file.
    let celer = Celer::serve(&["--config", &config, "--feed-max-bytes", "64"]);
    let url = celer.url();
    wait_status(&url, "a", |s| s["version"] == 1 && s["bytes"] == 5);
}

#[test]
fn the_example_configuration_loads_and_documents_every_flag() {
    // Copied beside the files it names, so that its relative paths resolve.
    let dir = tempfile::tempdir().unwrap();
    let example = std::fs::read_to_string(EXAMPLE).unwrap();
    let config = write(dir.path(), "celer.toml", &example);
    std::fs::create_dir(dir.path().join("public")).unwrap();
    let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    write(dir.path(), "site.crt", &generated.cert.pem());
    write(
        dir.path(),
        "site.key",
        &generated.signing_key.serialize_pem(),
    );
    write(dir.path(), "scores.schema.json", r#"{"type": "object"}"#);
    let (code, stderr) = run_celer(&["serve", "--config", &config, "--check"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("configuration OK"), "{stderr}");
    // --check binds nothing and creates nothing.
    assert!(!dir.path().join("celer-data").exists());

    // Every flag of `celer serve --help` is named in the example.
    let (code, help) = run_celer_stdout(&["serve", "--help"]);
    assert_eq!(code, Some(0));
    // Option lines: `      --max-body <BYTES>`, `  -h, --help`.
    let mut flags: Vec<&str> = help
        .lines()
        .map(|line| {
            line.trim_start()
                .trim_start_matches("-h, ")
                .trim_start_matches("-V, ")
        })
        .filter(|line| line.starts_with("--"))
        .filter_map(|line| line.split([' ', '=', '<']).next())
        .collect();
    flags.sort_unstable();
    flags.dedup();
    assert!(flags.len() > 40, "{flags:?}");
    for flag in flags {
        if ["--help", "--version", "--config", "--check"].contains(&flag) {
            continue;
        }
        assert!(
            example.contains(flag),
            "examples/celer.toml does not name {flag}"
        );
    }
}

#[test]
fn check_reports_what_serving_would_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "celer.toml",
        "listen = [\"tcp://127.0.0.1:1\"]\n[files]\nroot = \"missing\"\n",
    );
    let (code, stderr) = run_celer(&["serve", "--config", &config, "--check"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("missing"), "{stderr}");
    // Fixed by a flag: the flag wins.
    let root = dir.path().display().to_string();
    let (code, stderr) = run_celer(&["serve", "--config", &config, "--root", &root, "--check"]);
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn bad_files_are_refused_naming_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "bad.schema.json", r#"{"type": "no-such-type"}"#);
    write(dir.path(), "notjson.schema.json", "{");
    let cases: &[(&str, &[&str])] = &[
        (
            "workers = 1\nwokers = 2\n",
            &[":2: wokers: unknown field `wokers`"],
        ),
        (
            "[limits]\nmax_body = 1\nmax_hedaers = 3\n",
            &[
                ":3: limits.max_hedaers: unknown field",
                "expected one of",
                "`max_headers`",
            ],
        ),
        (
            "workers = \"eight\"\n",
            &[":1: workers: invalid type: string \"eight\", expected an integer from 1 to 65535"],
        ),
        (
            "[limits]\nmax_headers = 300\n",
            &[":2: limits.max_headers: 300 is out of range"],
        ),
        (
            "\n[limits]\nmax_body = \"10 parsecs\"\n",
            &[":3: limits.max_body: unknown unit \"parsecs\""],
        ),
        (
            "[limits]\nhead_timeout = true\n",
            &[":2: limits.head_timeout: invalid type: boolean `true`, expected a duration"],
        ),
        (
            "threading = \"fast\"\n",
            &[":1: threading: unknown variant `fast`", "`per-core`"],
        ),
        (
            "unix_mode = 660\n",
            &[":1: unix_mode: invalid type: integer `660`, expected an octal file mode"],
        ),
        (
            "listen = [\"tcp://nowhere\"]\n",
            &[":1: listen: ", "missing :PORT"],
        ),
        ("workers = \n", &[":1: ", "string values must be quoted"]),
        (
            "[files]\nlisting = true\n",
            &[":2: files.listing: needs a root"],
        ),
        (
            "[tasks]\nlease = \"1m\"\n",
            &[":2: tasks.lease: needs the task API on"],
        ),
        (
            "[tasks]\nlease = 0\n",
            &[":2: tasks.lease: must be more than 0"],
        ),
        (
            "[tls]\nself_signed = true\ncertificates = [{ cert = \"a\", key = \"b\" }]\n",
            &[":2: tls.self_signed: cannot be used with tls.certificates"],
        ),
        (
            "[tls]\ncertificates = [{ cert = \"a\" }]\n",
            &[":2: tls.certificates[0]: missing field `key`"],
        ),
        (
            "[http2]\nstream_window = 100\n",
            &[":2: http2.stream_window: 100 is not a flow-control window"],
        ),
        (
            "[[feed]]\nname = \"a/b\"\nsource = \"file:x\"\n",
            &[":2: feed[0].name: \"a/b\" is not a feed name"],
        ),
        (
            "[[feed]]\nname = \"a\"\nsource = \"ftp://x\"\n",
            &[":3: feed[0].source: unknown source"],
        ),
        (
            "[[feed]]\nname = \"a\"\n",
            &["feed[0]: missing field `source`"],
        ),
        (
            "[[feed]]\nname = \"a\"\nsource = \"file:x\"\n[[feed]]\nname = \"a\"\nsource = \"file:y\"\n",
            &["feed \"a\" is defined twice"],
        ),
        (
            "[[feed]]\nname = \"a\"\nsource = \"file:x\"\nschema = \"bad.schema.json\"\n",
            &["bad.schema.json", "not a valid JSON Schema"],
        ),
        (
            "[[feed]]\nname = \"a\"\nsource = \"file:x\"\nschema = \"notjson.schema.json\"\n",
            &["notjson.schema.json: not JSON"],
        ),
        (
            "[[feed]]\nname = \"a\"\nsource = \"file:x\"\nschema = \"none.json\"\n",
            &["none.json: No such file"],
        ),
    ];
    for (text, needles) in cases {
        let config = write(dir.path(), "celer.toml", text);
        let (code, stderr) = run_celer(&["serve", "--config", &config, "--check"]);
        assert_eq!(code, Some(2), "{text:?}: {stderr}");
        assert!(stderr.starts_with("celer: error: "), "{text:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{text:?}: {stderr}");
        for needle in *needles {
            assert!(
                stderr.contains(needle),
                "{text:?}: wanted {needle:?} in {stderr}"
            );
        }
        if needles[0].starts_with(':') {
            assert!(
                stderr.contains(&format!("{config}{}", needles[0])),
                "{stderr}"
            );
        }
    }
    let (code, stderr) = run_celer(&["serve", "--config", "/nonexistent/celer.toml"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("--config /nonexistent/celer.toml: No such file"),
        "{stderr}"
    );
}

#[test]
fn feed_schema_flag_errors() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(dir.path(), "bad.schema.json", r#"{"minimum": "zero"}"#);
    for (args, needle) in [
        (
            vec!["--feed-schema", "a=x.json"],
            "--feed-schema needs --feed",
        ),
        (
            vec!["--feed", "a=file:/x", "--feed-schema", "a"],
            "expected NAME=FILE",
        ),
        (
            vec!["--feed", "a=file:/x", "--feed-schema", "b=x.json"],
            "no feed named \"b\"",
        ),
        (
            vec!["--feed", "a=file:/x", "--feed-schema", &format!("a={bad}")],
            "bad.schema.json: not a valid JSON Schema",
        ),
    ] {
        let mut all = vec!["serve", "--listen", "tcp://127.0.0.1:0"];
        all.extend(args.iter().copied());
        let (code, stderr) = run_celer(&all);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}
