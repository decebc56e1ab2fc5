//! `celer serve --tasks`: the task API of the binary, and what a kill -9
//! while tasks run leaves: after a restart no task is lost and each ends in
//! exactly one final state, its attempts recorded.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use celer_test_support::parse_all;
use serde_json::{Value, json};

use crate::support::{Celer, DEADLINE};

/// One request on a fresh connection; the status and the JSON body.
fn call(port: u16, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    conn.set_read_timeout(Some(DEADLINE)).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(request.as_bytes()).unwrap();
    let mut bytes = Vec::new();
    conn.read_to_end(&mut bytes).unwrap();
    let resp = parse_all(&bytes).remove(0);
    let json = serde_json::from_slice(&resp.body).unwrap_or(Value::Null);
    (resp.status, json)
}

fn serve(dir: &std::path::Path) -> Celer {
    Celer::serve(&[
        "--listen",
        "tcp://127.0.0.1:0",
        "--workers",
        "1",
        "--tasks",
        "--data-dir",
        dir.to_str().unwrap(),
        "--task-lease",
        "1",
    ])
}

/// Polls `GET /tasks?...` until `done` holds for the page.
fn wait_list(port: u16, query: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let (status, page) = call(port, "GET", &format!("/tasks?limit=1000&{query}"), None);
        assert_eq!(status, 200);
        let tasks = page["tasks"].as_array().unwrap().clone();
        if done(&tasks) {
            return tasks;
        }
        assert!(start.elapsed() < DEADLINE, "never reached: {tasks:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_kill_9_while_tasks_run_loses_no_task_and_each_ends_once() {
    let dir = tempfile::tempdir().unwrap();
    let celer = serve(dir.path());
    let port = celer.port();
    let mut ids = Vec::new();
    // Long enough to be running at the kill, short enough to finish after.
    for n in 0..12 {
        let task =
            json!({"kind": "echo", "input": {"value": n, "delay_ms": 2000}, "max_attempts": 5});
        let (status, body) = call(port, "POST", "/tasks", Some(&task));
        assert_eq!(status, 201, "{body}");
        ids.push(body["id"].as_i64().unwrap());
    }
    // Queued at the kill: due a little later.
    let later = time_in(Duration::from_secs(5));
    for n in 0..4 {
        let task = json!({"kind": "echo", "input": {"value": n}, "run_at": later});
        let (status, body) = call(port, "POST", "/tasks", Some(&task));
        assert_eq!(status, 201, "{body}");
        ids.push(body["id"].as_i64().unwrap());
    }
    let running = wait_list(port, "state=running", |tasks| tasks.len() == 12);
    assert!(running.iter().all(|t| t["attempts"] == 1));

    drop(celer); // SIGKILL: no shutdown, leases left held.

    let celer = serve(dir.path());
    let port = celer.port();
    let all = wait_list(port, "", |tasks| {
        tasks.len() == ids.len()
            && tasks
                .iter()
                .all(|t| !matches!(t["state"].as_str(), Some("queued" | "running")))
    });
    for task in &all {
        let id = task["id"].as_i64().unwrap();
        assert!(ids.contains(&id), "unknown task {task}");
        assert_eq!(task["state"], "succeeded", "{task}");
        let expected_attempts = if task["input"]["delay_ms"] == 2000 {
            2
        } else {
            1
        };
        assert_eq!(task["attempts"], expected_attempts, "{task}");
        let (status, result) = call(port, "GET", &format!("/tasks/{id}/result"), None);
        assert_eq!((status, &result), (200, &task["input"]["value"]));
    }
    let (_, stats) = call(port, "GET", "/tasks/stats", None);
    assert_eq!(stats["by_state"]["succeeded"], ids.len());
}

#[test]
fn the_task_api_sits_beside_the_welcome_site_and_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut celer = serve(dir.path());
    let port = celer.port();
    let (status, _) = call(port, "GET", "/", None);
    assert_eq!(status, 200);
    let (status, task) = call(
        port,
        "POST",
        "/tasks",
        Some(&json!({"kind": "echo", "input": {"value": "hi"}})),
    );
    assert_eq!(status, 201);
    let id = task["id"].as_i64().unwrap();
    wait_list(port, "state=succeeded", |tasks| tasks.len() == 1);
    let (status, result) = call(port, "GET", &format!("/tasks/{id}/result"), None);
    assert_eq!((status, result), (200, json!("hi")));
    // A task that would run for minutes goes back to the store at SIGTERM.
    let (_, long) = call(
        port,
        "POST",
        "/tasks",
        Some(&json!({"kind": "echo", "input": {"value": 1, "delay_ms": 600_000}})),
    );
    wait_list(port, "state=running", |tasks| tasks.len() == 1);
    celer.signal("TERM");
    assert!(celer.wait().success(), "{:?}", celer.stderr_lines());
    let celer = Celer::serve(&[
        "--listen",
        "tcp://127.0.0.1:0",
        "--tasks",
        "--data-dir",
        dir.path().to_str().unwrap(),
    ]);
    let (_, again) = call(celer.port(), "GET", &format!("/tasks/{}", long["id"]), None);
    // Given back unrun: queued (or already claimed again) with no attempt
    // lost to the stop.
    assert!(
        matches!(again["state"].as_str(), Some("queued" | "running")),
        "{again}"
    );
    assert!(again["attempts"].as_u64().unwrap() <= 1, "{again}");
}

#[test]
fn an_operator_command_kind_runs_with_json_on_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let celer = Celer::serve(&[
        "--listen",
        "tcp://127.0.0.1:0",
        "--tasks",
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--task-command",
        r#"upper=["/usr/bin/tr", "a-z", "A-Z"]"#,
    ]);
    let port = celer.port();
    let (status, task) = call(
        port,
        "POST",
        "/tasks",
        Some(&json!({"kind": "upper", "input": "shout"})),
    );
    assert_eq!(status, 201, "{task}");
    wait_list(port, "state=succeeded", |tasks| tasks.len() == 1);
    let (status, result) = call(port, "GET", &format!("/tasks/{}/result", task["id"]), None);
    assert_eq!((status, result), (200, json!("SHOUT")));
    // A client cannot name a program.
    let (status, _) = call(
        port,
        "POST",
        "/tasks",
        Some(&json!({"kind": "/bin/sh", "input": "x"})),
    );
    assert_eq!(status, 422);
}

#[test]
fn task_flags_need_tasks_and_a_zero_lease_is_refused() {
    let out = std::process::Command::new(crate::support::CELER)
        .args(["serve", "--data-dir", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tasks"));
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(crate::support::CELER)
        .args([
            "serve",
            "--listen",
            "tcp://127.0.0.1:0",
            "--tasks",
            "--task-lease",
            "0",
            "--data-dir",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--task-lease"));
    for bad in [
        "noequals",
        "echo=[\"/bin/true\"]",
        "x=[]",
        "x=\"/bin/true\"",
        "a b=[\"/bin/true\"]",
    ] {
        let out = std::process::Command::new(crate::support::CELER)
            .args([
                "serve",
                "--listen",
                "tcp://127.0.0.1:0",
                "--tasks",
                "--task-command",
                bad,
                "--data-dir",
            ])
            .arg(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--task-command"),
            "{bad}"
        );
    }
}

/// An RFC 3339 UTC time `after` from now.
fn time_in(after: Duration) -> String {
    let at = std::time::SystemTime::now() + after;
    rfc3339_utc(at)
}

fn rfc3339_utc(at: std::time::SystemTime) -> String {
    let secs = at.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let out = std::process::Command::new("date")
        .args(["-u", "-d", &format!("@{secs}"), "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}
