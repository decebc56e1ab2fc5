//! `celer tasks keys` and `celer serve --tasks --tasks-require-key`: keys
//! created, listed and revoked through the binary while the server runs,
//! requests without, with a wrong, a live and a revoked key, a quota at its
//! edge; and a large result sent in slices, the server's memory bounded
//! while slow clients hold it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use celer_test_support::{parse_all, run_tool};
use serde_json::{Value, json};

use crate::support::{CELER, Celer, DEADLINE};

/// Runs `celer ARGS` (bounded): exit code, stdout, stderr.
fn celer(args: &[&str]) -> (Option<i32>, String, String) {
    let out = run_tool(Command::new(CELER).args(args).env_remove("RUST_LOG"));
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// One request on a fresh connection with `headers`: status, headers (as
/// one text, names lowercase) and the JSON body.
fn call(
    port: u16,
    method: &str,
    path: &str,
    headers: &[String],
    body: Option<&Value>,
) -> (u16, String, Value) {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    conn.set_read_timeout(Some(DEADLINE)).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for header in headers {
        request.push_str(header);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    request.push_str(&body);
    conn.write_all(request.as_bytes()).unwrap();
    let mut bytes = Vec::new();
    conn.read_to_end(&mut bytes).unwrap();
    let resp = parse_all(&bytes).remove(0);
    let head: String = resp
        .headers
        .iter()
        .map(|(n, v)| format!("{}: {}\n", n.to_ascii_lowercase(), v))
        .collect();
    let json = serde_json::from_slice(&resp.body).unwrap_or(Value::Null);
    (resp.status, head, json)
}

fn bearer(token: &str) -> Vec<String> {
    vec![format!("Authorization: Bearer {token}")]
}

#[test]
fn keys_made_with_the_cli_guard_the_task_api_with_their_quotas() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();

    // Created before the server starts: the token once, on stdout.
    let (code, out, err) = celer(&[
        "tasks",
        "keys",
        "create",
        "--data-dir",
        data,
        "--name",
        "ci",
        "--per-hour",
        "2",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let ci: Value = serde_json::from_str(&out).unwrap();
    let ci_token = ci["token"].as_str().unwrap().to_owned();
    assert!(ci_token.starts_with("ctk_"));
    assert_eq!(ci["quotas"]["per_hour"], 2);
    assert_eq!(ci["quotas"]["max_concurrent"], Value::Null);
    let (code, out, err) = celer(&[
        "tasks",
        "keys",
        "create",
        "--data-dir",
        data,
        "--name",
        "ops",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let ops_token = out.trim().to_owned();
    assert!(
        ops_token.starts_with("ctk_") && !out.trim().contains('\n'),
        "{out}"
    );
    assert!(err.contains("created API key 2"), "{err}");

    // Listed without secrets.
    let (code, out, _) = celer(&["tasks", "keys", "list", "--data-dir", data]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("ci") && out.contains("ops") && out.contains("per-hour=2"),
        "{out}"
    );
    assert!(!out.contains(&ci_token) && !out.contains(&ops_token));
    assert!(out.contains(&ops_token[..10]), "the hint: {out}");
    let (_, out, _) = celer(&["tasks", "keys", "list", "--data-dir", data, "--json"]);
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 2);
    assert!(!out.contains(&ci_token) && !out.contains("token"));

    let celer_serve = Celer::serve(&[
        "--listen",
        "tcp://127.0.0.1:0",
        "--workers",
        "1",
        "--tasks",
        "--tasks-require-key",
        "--data-dir",
        data,
    ]);
    let port = celer_serve.port();
    let task = json!({"kind": "echo", "input": {"value": 1}});

    let (status, head, body) = call(port, "POST", "/tasks", &[], Some(&task));
    assert_eq!(status, 401);
    assert!(
        head.contains("www-authenticate: Bearer realm=\"celer tasks\"\n"),
        "{head}"
    );
    assert_eq!(body["error"], "bearer token required");
    let (status, head, _) = call(port, "GET", "/tasks", &bearer("ctk_wrong"), None);
    assert_eq!(status, 401);
    assert!(head.contains("error=\"invalid_token\""), "{head}");

    // Two tasks an hour for ci: the third is refused, naming the quota.
    for _ in 0..2 {
        let (status, _, body) = call(port, "POST", "/tasks", &bearer(&ci_token), Some(&task));
        assert_eq!(status, 201, "{body}");
        assert_eq!(body["key_id"], ci["id"]);
    }
    let (status, head, body) = call(port, "POST", "/tasks", &bearer(&ci_token), Some(&task));
    assert_eq!(status, 429, "{body}");
    let wait: u64 = head
        .lines()
        .find_map(|l| l.strip_prefix("retry-after: "))
        .unwrap()
        .parse()
        .unwrap();
    assert!((3500..=3600).contains(&wait), "{wait}");
    assert_eq!(body["quota"], "per_hour");
    assert_eq!(body["limit"], 2);
    // Another key has its own quotas.
    let (status, _, _) = call(port, "POST", "/tasks", &bearer(&ops_token), Some(&task));
    assert_eq!(status, 201);

    // Created while the server runs: usable at once.
    let (_, out, _) = celer(&["tasks", "keys", "create", "--data-dir", data, "--json"]);
    let late: Value = serde_json::from_str(&out).unwrap();
    let (status, _, _) = call(
        port,
        "GET",
        "/tasks/stats",
        &bearer(late["token"].as_str().unwrap()),
        None,
    );
    assert_eq!(status, 200);

    // Revoked while the server runs: 403 from the next request.
    let (code, _, err) = celer(&["tasks", "keys", "revoke", "--data-dir", data, "2"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("API key 2 revoked"), "{err}");
    let (status, head, body) = call(port, "POST", "/tasks", &bearer(&ops_token), Some(&task));
    assert_eq!(status, 403, "{body}");
    assert!(head.contains("www-authenticate: Bearer"), "{head}");
    let (_, out, _) = celer(&["tasks", "keys", "list", "--data-dir", data, "--json"]);
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert!(listed[1]["revoked_at"].is_string() && listed[0]["revoked_at"].is_null());

    // Bad uses of the CLI say what is wrong.
    let (code, _, err) = celer(&["tasks", "keys", "revoke", "--data-dir", data, "99"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("no API key 99"), "{err}");
    let (code, _, err) = celer(&[
        "tasks",
        "keys",
        "create",
        "--data-dir",
        data,
        "--per-hour",
        "x",
    ]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--per-hour"), "{err}");
    let missing = dir.path().join("missing");
    let (code, _, err) = celer(&[
        "tasks",
        "keys",
        "list",
        "--data-dir",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2));
    assert!(err.contains("no task store in"), "{err}");
    assert!(!missing.exists());
    let long = "n".repeat(101);
    let (code, _, err) = celer(&[
        "tasks",
        "keys",
        "create",
        "--data-dir",
        data,
        "--name",
        &long,
    ]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--name"), "{err}");
    drop(celer_serve);

    // Keys without --tasks-require-key: open, and the operator is told.
    let open = Celer::serve(&[
        "--listen",
        "tcp://127.0.0.1:0",
        "--tasks",
        "--data-dir",
        data,
    ]);
    let (status, _, _) = call(open.port(), "GET", "/tasks", &[], None);
    assert_eq!(status, 200);
    let start = Instant::now();
    while !open
        .stderr_lines()
        .iter()
        .any(|l| l.contains("without --tasks-require-key"))
    {
        assert!(start.elapsed() < DEADLINE, "{:?}", open.stderr_lines());
        std::thread::sleep(Duration::from_millis(20));
    }
}
