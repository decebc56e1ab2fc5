//! The task API served on loopback, driven over raw TCP and curl: submit,
//! poll, result with ETag, idempotency under concurrency, cancel, a
//! panicking kind, a full queue, bad input, events; API keys and quotas,
//! a large result sent in slices, the store-wide event stream and the
//! dashboard's files.

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use celer::App;
use celer::serve::Shutdown;
use celer_tasks::{Kinds, TaskError, Tasks, TasksConfig};
use celer_test_support::{Resp, bounded, exchange, parse_all, run_tool};
use serde_json::{Value, json};

/// Upper bound for anything a test waits on; never asserted.
const DEADLINE: Duration = Duration::from_secs(30);

struct Server {
    addr: SocketAddr,
    tasks: Tasks,
    shutdown: Shutdown,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    _dir: tempfile::TempDir,
}

fn kinds() -> Kinds {
    let mut kinds = Kinds::new();
    kinds.register("boom", |_input: Value, _ctx| async move {
        if true {
            panic!("the kind exploded");
        }
        Ok::<Value, TaskError>(Value::Null)
    });
    kinds.register_blocking("double", |input: u64, ctx: &celer_tasks::Context| {
        ctx.progress(0.5);
        Ok(json!({ "doubled": input * 2, "attempt": ctx.attempt() }))
    });
    kinds.register_blocking(
        "boom-blocking",
        |_input: Value, _ctx: &celer_tasks::Context| {
            if true {
                panic!("the blocking kind exploded");
            }
            Ok::<Value, TaskError>(Value::Null)
        },
    );
    // Ignores its cancel: dropped after the grace period.
    kinds.register("stubborn", |_input: Value, _ctx| async move {
        tokio::time::sleep(Duration::from_secs(600)).await;
        Ok::<_, TaskError>(Value::Null)
    });
    let command = |argv: &[&str]| {
        celer_tasks::CommandKind::new(argv.iter().map(|a| (*a).to_owned()).collect()).unwrap()
    };
    // A result of `bytes` bytes of JSON: a string of letters.
    kinds.register("big", |input: usize, _ctx| async move {
        let text: String = (0..input.saturating_sub(2))
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        Ok::<_, TaskError>(text)
    });
    kinds.register_command("cmd-cat", command(&["/bin/sh", "-c", "cat"]));
    kinds.register_command(
        "cmd-env",
        command(&["/bin/sh", "-c", r#"printf '{"home":"%s"}' "$HOME""#]),
    );
    kinds.register_command("cmd-hang", command(&["/bin/sleep", "600"]));
    kinds.register_command("cmd-loud", command(&["/usr/bin/yes"]).max_output(1024));
    kinds.register_command(
        "cmd-fail",
        command(&[
            "/bin/sh",
            "-c",
            "echo starting; echo 'disk on fire' >&2; exit 3",
        ]),
    );
    kinds
}

impl Server {
    async fn start(configure: impl FnOnce(&mut TasksConfig)) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let mut config = TasksConfig::new(dir.path());
        config.backoff_base = Duration::from_millis(1);
        configure(&mut config);
        let tasks = Tasks::open(config, kinds()).unwrap();
        let mut app = App::new();
        app.mount("/tasks", tasks.app());
        let bound = celer::serve::bind("tcp://127.0.0.1:0").unwrap();
        let addr = bound.tcp_addr().unwrap();
        let shutdown = Shutdown::new();
        let task = tokio::spawn(app.serve(bound, shutdown.clone()));
        Server {
            addr,
            tasks,
            shutdown,
            task,
            _dir: dir,
        }
    }

    async fn request(&self, method: &str, path: &str, headers: &[&str], body: &str) -> Resp {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n");
        for header in headers {
            head.push_str(header);
            head.push_str("\r\n");
        }
        if !body.is_empty() || method == "POST" {
            head.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        head.push_str("\r\n");
        head.push_str(body);
        let bytes = bounded(exchange(self.addr, head.as_bytes())).await;
        parse_all(&bytes).remove(0)
    }

    async fn submit(&self, body: Value) -> Value {
        let resp = self.request("POST", "/tasks", &[], &body.to_string()).await;
        assert_eq!(resp.status, 201, "{}", resp.text());
        json_of(&resp)
    }

    async fn get(&self, id: i64) -> Value {
        let resp = self.request("GET", &format!("/tasks/{id}"), &[], "").await;
        assert_eq!(resp.status, 200, "{}", resp.text());
        json_of(&resp)
    }

    /// Polls the task until `done` holds for it.
    async fn wait_for(&self, id: i64, done: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let task = self.get(id).await;
            if done(&task) {
                return task;
            }
            assert!(start.elapsed() < DEADLINE, "task never got there: {task}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn wait_final(&self, id: i64) -> Value {
        self.wait_for(id, |t| {
            !matches!(t["state"].as_str(), Some("queued" | "running"))
        })
        .await
    }

    async fn stop(self) {
        self.shutdown.trigger();
        bounded(self.task).await.unwrap().unwrap();
        let tasks = self.tasks;
        tokio::task::spawn_blocking(move || tasks.shutdown())
            .await
            .unwrap();
    }
}

fn json_of(resp: &Resp) -> Value {
    serde_json::from_slice(&resp.body)
        .unwrap_or_else(|err| panic!("not JSON ({err}): {}", resp.text()))
}

fn id_of(task: &Value) -> i64 {
    task["id"].as_i64().unwrap()
}

fn future_run_at() -> &'static str {
    "2999-01-01T00:00:00Z"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_echo_task_runs_and_its_result_has_an_etag() {
    let server = Server::start(|_| {}).await;
    let resp = server
        .request(
            "POST",
            "/tasks",
            &[],
            &json!({"kind": "echo", "input": {"value": {"x": [1, 2]}, "delay_ms": 1}}).to_string(),
        )
        .await;
    assert_eq!(resp.status, 201, "{}", resp.text());
    let task = json_of(&resp);
    let id = id_of(&task);
    assert_eq!(
        resp.header("location"),
        Some(format!("/tasks/{id}").as_str())
    );
    assert!(matches!(task["state"].as_str(), Some("queued" | "running")));

    let done = server.wait_final(id).await;
    assert_eq!(done["state"], "succeeded");
    assert_eq!(done["attempts"], 1);
    assert!(done["finished_at"].is_string());

    let result = server
        .request("GET", &format!("/tasks/{id}/result"), &[], "")
        .await;
    assert_eq!(result.status, 200);
    assert_eq!(json_of(&result), json!({"x": [1, 2]}));
    let etag = result.header("etag").unwrap().to_owned();
    let again = server
        .request(
            "GET",
            &format!("/tasks/{id}/result"),
            &[&format!("If-None-Match: {etag}")],
            "",
        )
        .await;
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());

    // A blocking Rust kind, typed input and output, on the dispatcher.
    let doubled = server.submit(json!({"kind": "double", "input": 21})).await;
    let done = server.wait_final(id_of(&doubled)).await;
    assert_eq!(done["state"], "succeeded");
    let result = server
        .request(
            "GET",
            &format!("/tasks/{}/result", id_of(&doubled)),
            &[],
            "",
        )
        .await;
    assert_eq!(json_of(&result), json!({"doubled": 42, "attempt": 1}));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_submits_with_one_idempotency_key_make_one_task() {
    let server = Server::start(|_| {}).await;
    let body =
        json!({"kind": "echo", "input": {"value": 7}, "run_at": future_run_at()}).to_string();
    let mut replies = Vec::new();
    for _ in 0..16 {
        let addr = server.addr;
        let request = format!(
            "POST /tasks HTTP/1.1\r\nHost: t\r\nConnection: close\r\nIdempotency-Key: order-1\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        replies.push(tokio::spawn(async move {
            parse_all(&exchange(addr, request.as_bytes()).await).remove(0)
        }));
    }
    let mut ids = Vec::new();
    let mut created = 0;
    for reply in replies {
        let resp = bounded(reply).await.unwrap();
        assert!(matches!(resp.status, 200 | 201), "{}", resp.text());
        created += usize::from(resp.status == 201);
        ids.push(id_of(&json_of(&resp)));
    }
    assert_eq!(created, 1);
    ids.dedup();
    assert_eq!(ids.len(), 1, "one task for one key");

    let other = json!({"kind": "echo", "input": {"value": 8}}).to_string();
    let conflict = server
        .request("POST", "/tasks", &["Idempotency-Key: order-1"], &other)
        .await;
    assert_eq!(conflict.status, 422);
    let list = json_of(&server.request("GET", "/tasks", &[], "").await);
    assert_eq!(list["tasks"].as_array().unwrap().len(), 1);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_a_queued_task_before_it_runs_and_a_running_one() {
    let server = Server::start(|_| {}).await;
    let queued = server
        .submit(json!({"kind": "echo", "input": {"value": 1}, "run_at": future_run_at()}))
        .await;
    let resp = server
        .request(
            "POST",
            &format!("/tasks/{}/cancel", id_of(&queued)),
            &[],
            "",
        )
        .await;
    assert_eq!(resp.status, 202);
    let task = json_of(&resp);
    assert_eq!(
        (task["state"].as_str(), task["attempts"].as_u64()),
        (Some("cancelled"), Some(0))
    );

    let running = server
        .submit(json!({"kind": "echo", "input": {"value": 1, "delay_ms": 600_000}}))
        .await;
    let id = id_of(&running);
    server.wait_for(id, |t| t["state"] == "running").await;
    let resp = server
        .request("POST", &format!("/tasks/{id}/cancel"), &[], "")
        .await;
    assert_eq!(resp.status, 202);
    let done = server.wait_final(id).await;
    assert_eq!(
        (done["state"].as_str(), done["attempts"].as_u64()),
        (Some("cancelled"), Some(1))
    );
    let result = server
        .request("GET", &format!("/tasks/{id}/result"), &[], "")
        .await;
    assert_eq!(result.status, 409);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_kind_is_retried_then_dead_and_the_runner_goes_on() {
    let server = Server::start(|_| {}).await;
    let boom = server
        .submit(json!({"kind": "boom", "input": null, "max_attempts": 2}))
        .await;
    let dead = server.wait_final(id_of(&boom)).await;
    assert_eq!(
        (dead["state"].as_str(), dead["attempts"].as_u64()),
        (Some("dead"), Some(2))
    );
    assert!(
        dead["error"]
            .as_str()
            .unwrap()
            .contains("the kind exploded")
    );
    let echo = server
        .submit(json!({"kind": "echo", "input": {"value": "after"}}))
        .await;
    assert_eq!(server.wait_final(id_of(&echo)).await["state"], "succeeded");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_answers_503_with_retry_after() {
    let server = Server::start(|config| config.max_queued = 3).await;
    let body = json!({"kind": "echo", "input": {"value": 1}, "run_at": future_run_at()});
    for _ in 0..3 {
        server.submit(body.clone()).await;
    }
    let refused = server
        .request("POST", "/tasks", &[], &body.to_string())
        .await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("retry-after"), Some("1"));
    let stats = json_of(&server.request("GET", "/tasks/stats", &[], "").await);
    assert_eq!(stats["by_state"]["queued"], 3);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_submissions_and_unknown_tasks_get_clear_errors() {
    let server = Server::start(|_| {}).await;
    let cases = [
        (json!({"kind": "nope"}).to_string(), 422, "unknown kind"),
        (
            json!({"kind": "echo", "input": {"delay_ms": 1}}).to_string(),
            422,
            "value",
        ),
        (
            json!({"kind": "double", "input": "x"}).to_string(),
            422,
            "invalid input",
        ),
        (
            json!({"kind": "echo", "input": {"value": 1}, "timeout_ms": 0}).to_string(),
            422,
            "timeout_ms",
        ),
        (
            json!({"kind": "echo", "input": {"value": 1}, "max_attempts": 1000}).to_string(),
            422,
            "max_attempts",
        ),
        (
            json!({"kind": "echo", "input": {"value": 1}, "run_at": "tomorrow"}).to_string(),
            422,
            "run_at",
        ),
        (
            json!({"kind": "echo", "extra": 1}).to_string(),
            422,
            "extra",
        ),
        ("{not json".to_owned(), 400, ""),
    ];
    for (body, status, needle) in cases {
        let resp = server.request("POST", "/tasks", &[], &body).await;
        assert_eq!(resp.status, status, "{body}: {}", resp.text());
        assert!(resp.text().contains(needle), "{body}: {}", resp.text());
    }
    let long_key = format!("Idempotency-Key: {}", "k".repeat(256));
    let resp = server
        .request(
            "POST",
            "/tasks",
            &[&long_key],
            &json!({"kind": "echo", "input": {"value": 1}}).to_string(),
        )
        .await;
    assert_eq!(resp.status, 400);
    let too_big = json!({"kind": "echo", "input": {"value": "x".repeat(celer_tasks::limits::MAX_SUBMIT_BYTES)}});
    let resp = server
        .request("POST", "/tasks", &[], &too_big.to_string())
        .await;
    assert_eq!(resp.status, 413);
    assert_eq!(
        server.request("GET", "/tasks/999", &[], "").await.status,
        404
    );
    assert_eq!(
        server
            .request("POST", "/tasks/999/cancel", &[], "")
            .await
            .status,
        404
    );
    assert_eq!(
        server
            .request("GET", "/tasks?state=bogus", &[], "")
            .await
            .status,
        400
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_pages_with_a_cursor_and_filters() {
    let server = Server::start(|_| {}).await;
    let mut ids = Vec::new();
    for n in 0..5 {
        let body = json!({"kind": "echo", "input": {"value": n}, "run_at": future_run_at()});
        ids.push(id_of(&server.submit(body).await));
    }
    let first = json_of(&server.request("GET", "/tasks?limit=2", &[], "").await);
    let page: Vec<i64> = first["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(id_of)
        .collect();
    assert_eq!(page, vec![ids[4], ids[3]]);
    let cursor = first["next_cursor"].as_i64().unwrap();
    let second = json_of(
        &server
            .request(
                "GET",
                &format!("/tasks?limit=2&cursor={cursor}&state=queued&kind=echo"),
                &[],
                "",
            )
            .await,
    );
    let page: Vec<i64> = second["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(id_of)
        .collect();
    assert_eq!(page, vec![ids[2], ids[1]]);
    let none = json_of(
        &server
            .request("GET", "/tasks?state=succeeded", &[], "")
            .await,
    );
    assert!(none["tasks"].as_array().unwrap().is_empty());
    assert!(none["next_cursor"].is_null());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_stream_the_task_until_it_is_final() {
    let server = Server::start(|_| {}).await;
    let task = server
        .submit(json!({"kind": "echo", "input": {"value": "sse", "delay_ms": 300}}))
        .await;
    let url = format!("http://{}/tasks/{}/events", server.addr, id_of(&task));
    let out = tokio::task::spawn_blocking(move || {
        run_tool(Command::new("curl").args(["-sS", "-N", "--max-time", "20", &url]))
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("event: task\n") || text.contains("\nevent: task\n"),
        "{text}"
    );
    let last = text
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .next_back()
        .unwrap();
    let last: Value = serde_json::from_str(last).unwrap();
    assert_eq!(last["state"], "succeeded");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_kinds_get_json_on_stdin_and_give_stdout_in_a_cleared_environment() {
    // The server's own environment has HOME; the command must not see it.
    assert!(std::env::var_os("HOME").is_some_and(|home| !home.is_empty()));
    let server = Server::start(|_| {}).await;
    let cat = server
        .submit(json!({"kind": "cmd-cat", "input": {"a": [1, "two"]}}))
        .await;
    assert_eq!(server.wait_final(id_of(&cat)).await["state"], "succeeded");
    let result = server
        .request("GET", &format!("/tasks/{}/result", id_of(&cat)), &[], "")
        .await;
    assert_eq!(json_of(&result), json!({"a": [1, "two"]}));

    let env = server
        .submit(json!({"kind": "cmd-env", "input": null}))
        .await;
    assert_eq!(server.wait_final(id_of(&env)).await["state"], "succeeded");
    let result = server
        .request("GET", &format!("/tasks/{}/result", id_of(&env)), &[], "")
        .await;
    assert_eq!(json_of(&result), json!({"home": ""}));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_command_is_killed_at_its_timeout_and_a_loud_one_at_its_cap() {
    let server = Server::start(|_| {}).await;
    let hang = server
        .submit(json!({"kind": "cmd-hang", "input": null, "timeout_ms": 200, "max_attempts": 2}))
        .await;
    let dead = server.wait_final(id_of(&hang)).await;
    assert_eq!(
        (dead["state"].as_str(), dead["attempts"].as_u64()),
        (Some("dead"), Some(2))
    );
    assert!(
        dead["error"].as_str().unwrap().contains("timed out"),
        "{dead}"
    );

    let loud = server
        .submit(json!({"kind": "cmd-loud", "input": null}))
        .await;
    let failed = server.wait_final(id_of(&loud)).await;
    assert_eq!(
        (failed["state"].as_str(), failed["attempts"].as_u64()),
        (Some("failed"), Some(1))
    );
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("over the limit of 1024"),
        "{failed}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_command_fails_with_its_stderr_tail_and_a_running_one_can_be_cancelled() {
    let server = Server::start(|_| {}).await;
    let fail = server
        .submit(json!({"kind": "cmd-fail", "input": null}))
        .await;
    let failed = server.wait_final(id_of(&fail)).await;
    assert_eq!(failed["state"], "failed");
    let error = failed["error"].as_str().unwrap();
    assert!(
        error.contains("disk on fire") && error.contains('3'),
        "{error}"
    );

    let hang = server
        .submit(json!({"kind": "cmd-hang", "input": null}))
        .await;
    let id = id_of(&hang);
    server.wait_for(id, |t| t["state"] == "running").await;
    let resp = server
        .request("POST", &format!("/tasks/{id}/cancel"), &[], "")
        .await;
    assert_eq!(resp.status, 202);
    assert_eq!(server.wait_final(id).await["state"], "cancelled");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_that_ignores_its_cancel_is_dropped_after_the_grace_period() {
    let server = Server::start(|config| {
        config.cancel_grace = Duration::from_millis(50);
        config.concurrency = 1;
    })
    .await;
    let stubborn = server
        .submit(json!({"kind": "stubborn", "input": null}))
        .await;
    let id = id_of(&stubborn);
    server.wait_for(id, |t| t["state"] == "running").await;
    server
        .request("POST", &format!("/tasks/{id}/cancel"), &[], "")
        .await;
    assert_eq!(server.wait_final(id).await["state"], "cancelled");
    // Its worker is free again: with a concurrency of one, the next runs.
    let echo = server
        .submit(json!({"kind": "echo", "input": {"value": 2}}))
        .await;
    assert_eq!(server.wait_final(id_of(&echo)).await["state"], "succeeded");
    server.stop().await;
}

/// A server that requires API keys, and a key with `quotas`: its token.
async fn keyed(quotas: celer_tasks::keys::Quotas) -> (Server, i64, String) {
    let server = Server::start(|config| config.require_key = true).await;
    let new = celer_tasks::keys::NewKey {
        name: "test".to_owned(),
        quotas,
    };
    let (key, token) =
        celer_tasks::keys::create_key(server.tasks.store(), &new, celer_tasks::model::now_millis())
            .unwrap();
    (server, key.id, token)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_keys_required_a_request_needs_a_live_key() {
    let (server, key_id, token) = keyed(Default::default()).await;
    let body = json!({"kind": "echo", "input": {"value": 1}}).to_string();
    let bearer = format!("Authorization: Bearer {token}");

    // None: 401 with the challenge (RFC 6750 §3), as JSON.
    let resp = server.request("POST", "/tasks", &[], &body).await;
    assert_eq!(resp.status, 401);
    assert_eq!(
        resp.header("www-authenticate"),
        Some(r#"Bearer realm="celer tasks""#)
    );
    assert_eq!(json_of(&resp)["error"], "bearer token required");
    for path in ["/tasks", "/tasks/stats", "/tasks/1", "/tasks/events"] {
        let resp = server.request("GET", path, &[], "").await;
        assert_eq!(resp.status, 401, "{path}");
    }
    // A wrong one, or another scheme: 401, invalid_token for the wrong one.
    let resp = server
        .request("POST", "/tasks", &["Authorization: Bearer ctk_nope"], &body)
        .await;
    assert_eq!(resp.status, 401);
    assert_eq!(
        resp.header("www-authenticate"),
        Some(r#"Bearer realm="celer tasks", error="invalid_token""#)
    );
    let resp = server
        .request("GET", "/tasks", &["Authorization: Basic dTpw"], "")
        .await;
    assert_eq!(resp.status, 401);

    // The key: the task records it.
    let resp = server.request("POST", "/tasks", &[&bearer], &body).await;
    assert_eq!(resp.status, 201, "{}", resp.text());
    let task = json_of(&resp);
    assert_eq!(task["key_id"], key_id);
    let id = id_of(&task);
    let resp = server
        .request("GET", &format!("/tasks/{id}"), &[&bearer], "")
        .await;
    assert_eq!(json_of(&resp)["key_id"], key_id);
    // The scheme's name is case-insensitive (RFC 9110 §11.1).
    let lower = format!("authorization: bearer {token}");
    let resp = server.request("GET", "/tasks/stats", &[&lower], "").await;
    assert_eq!(resp.status, 200);

    // The dashboard's files need no key (they hold no data).
    for path in ["/tasks/ui", "/tasks/ui/app.js", "/tasks/ui/app.css"] {
        let resp = server.request("GET", path, &[], "").await;
        assert_eq!(resp.status, 200, "{path}");
    }

    // Revoked: 403 at once, for reads and submits.
    server
        .tasks
        .store()
        .revoke_key(key_id, celer_tasks::model::now_millis())
        .unwrap();
    let resp = server.request("POST", "/tasks", &[&bearer], &body).await;
    assert_eq!(resp.status, 403);
    assert_eq!(json_of(&resp)["error"], "revoked API key");
    let resp = server
        .request("GET", &format!("/tasks/{id}"), &[&bearer], "")
        .await;
    assert_eq!(resp.status, 403);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_answer_429_with_retry_after_naming_the_quota() {
    let (server, _, token) = keyed(celer_tasks::keys::Quotas {
        max_concurrent: Some(1),
        per_hour: Some(3),
        max_input_bytes: Some(64),
        ..Default::default()
    })
    .await;
    let bearer = format!("Authorization: Bearer {token}");
    let post = |body: Value| {
        let bearer = bearer.clone();
        let server = &server;
        async move {
            server
                .request("POST", "/tasks", &[&bearer], &body.to_string())
                .await
        }
    };
    let wait_final = |id: i64| {
        let bearer = bearer.clone();
        let server = &server;
        async move {
            let start = Instant::now();
            loop {
                let resp = server
                    .request("GET", &format!("/tasks/{id}"), &[&bearer], "")
                    .await;
                let task = json_of(&resp);
                if !matches!(task["state"].as_str(), Some("queued" | "running")) {
                    return task;
                }
                assert!(start.elapsed() < DEADLINE, "{task}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    // One running: the next is over max_concurrent.
    let first = post(json!({"kind": "echo", "input": {"value": 1, "delay_ms": 600_000}})).await;
    assert_eq!(first.status, 201);
    let over = post(json!({"kind": "echo", "input": {"value": 2}})).await;
    assert_eq!(over.status, 429, "{}", over.text());
    assert_eq!(over.header("retry-after"), Some("1"));
    let error = json_of(&over);
    assert_eq!(error["quota"], "max_concurrent");
    assert_eq!(error["limit"], 1);
    assert!(error["error"].as_str().unwrap().contains("max_concurrent"));

    // Cancelled, it frees its place.
    let id = id_of(&json_of(&first));
    server
        .request("POST", &format!("/tasks/{id}/cancel"), &[&bearer], "")
        .await;
    wait_final(id).await;
    // 64 bytes of input fit; 65 do not, and no wait helps: 413.
    let value = "x".repeat(64 - r#"{"value":""}"#.len());
    let fits = post(json!({"kind": "echo", "input": {"value": value}})).await;
    assert_eq!(fits.status, 201, "{}", fits.text());
    wait_final(id_of(&json_of(&fits))).await;
    let too_big = post(json!({"kind": "echo", "input": {"value": format!("{value}x")}})).await;
    assert_eq!(too_big.status, 413);
    assert_eq!(too_big.header("retry-after"), None);
    assert_eq!(json_of(&too_big)["quota"], "max_input_bytes");

    // Third task of the hour fits, the fourth waits about an hour.
    let third = post(json!({"kind": "echo", "input": {"value": 3}})).await;
    assert_eq!(third.status, 201);
    wait_final(id_of(&json_of(&third))).await;
    let fourth = post(json!({"kind": "echo", "input": {"value": 4}})).await;
    assert_eq!(fourth.status, 429);
    let wait: u64 = fourth.header("retry-after").unwrap().parse().unwrap();
    assert!((3500..=3600).contains(&wait), "{wait}");
    let error = json_of(&fourth);
    assert_eq!(error["quota"], "per_hour");
    assert_eq!(error["retry_after"], wait);

    // Bytes of input per hour: `{"value":1}` is 11 bytes, two fit in 22.
    let new = celer_tasks::keys::NewKey {
        name: "bytes".to_owned(),
        quotas: celer_tasks::keys::Quotas {
            input_bytes_per_hour: Some(22),
            ..Default::default()
        },
    };
    let (_, token) =
        celer_tasks::keys::create_key(server.tasks.store(), &new, celer_tasks::model::now_millis())
            .unwrap();
    let bytes = format!("Authorization: Bearer {token}");
    let eleven = json!({"kind": "echo", "input": {"value": 1}}).to_string();
    for _ in 0..2 {
        let resp = server.request("POST", "/tasks", &[&bytes], &eleven).await;
        assert_eq!(resp.status, 201, "{}", resp.text());
    }
    let over = server.request("POST", "/tasks", &[&bytes], &eleven).await;
    assert_eq!(over.status, 429);
    assert_eq!(json_of(&over)["quota"], "input_bytes_per_hour");
    let wait: u64 = over.header("retry-after").unwrap().parse().unwrap();
    assert!((3500..=3600).contains(&wait), "{wait}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_result_is_sent_whole_in_slices_with_its_etag() {
    let server = Server::start(|_| {}).await;
    let size = 5 * 1024 * 1024 + 123;
    let task = server.submit(json!({"kind": "big", "input": size})).await;
    let id = id_of(&task);
    assert_eq!(server.wait_final(id).await["state"], "succeeded");
    let url = format!("http://{}/tasks/{id}/result", server.addr);
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body");
    let out = run_tool(Command::new("curl").args([
        "-sS",
        "-D",
        "-",
        "-o",
        body.to_str().unwrap(),
        "--max-time",
        "20",
        &url,
    ]));
    assert!(out.status.success(), "{out:?}");
    let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(
        head.contains(&format!("content-length: {size}\r\n")),
        "{head}"
    );
    assert!(head.contains(&format!("etag: \"task-{id}\"")), "{head}");
    let bytes = std::fs::read(&body).unwrap();
    assert_eq!(bytes.len(), size);
    let text: String = serde_json::from_slice(&bytes).unwrap();
    assert!(
        text.bytes()
            .enumerate()
            .all(|(i, b)| b == b'a' + (i % 26) as u8)
    );
    // Revalidation: 304, nothing sent.
    let again = server
        .request(
            "GET",
            &format!("/tasks/{id}/result"),
            &[&format!("If-None-Match: \"task-{id}\"")],
            "",
        )
        .await;
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());
    // A client that leaves after the first bytes: the server goes on.
    let mut raw = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    raw.write_all(format!("GET /tasks/{id}/result HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut first = [0u8; 1024];
    let n = bounded(raw.read(&mut first)).await.unwrap();
    assert!(n > 0);
    drop(raw);
    let resp = server.request("GET", "/tasks/stats", &[], "").await;
    assert_eq!(resp.status, 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_wide_event_stream_sends_every_change() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = Server::start(|_| {}).await;
    let mut feed = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    feed.write_all(b"GET /tasks/events HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    // The head comes once the stream is subscribed: what follows is seen.
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = bounded(feed.read(&mut buf)).await.unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&seen).contains("text/event-stream"));
    let task = server
        .submit(json!({"kind": "echo", "input": {"value": "feed"}}))
        .await;
    let id = id_of(&task);
    let states = |seen: &[u8]| -> Vec<String> {
        String::from_utf8_lossy(seen)
            .split("\n\n")
            .filter(|block| block.contains("event: task"))
            .filter_map(|block| block.lines().find_map(|l| l.strip_prefix("data: ")))
            .filter_map(|data| serde_json::from_str::<Value>(data).ok())
            .filter(|task| task["id"] == id)
            .map(|task| task["state"].as_str().unwrap().to_owned())
            .collect()
    };
    while !states(&seen).contains(&"succeeded".to_owned()) {
        let n = bounded(feed.read(&mut buf)).await.unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    assert_eq!(states(&seen), ["queued", "running", "succeeded"]);
    drop(feed);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_is_served_under_a_strict_policy() {
    let server = Server::start(|_| {}).await;
    let page = server.request("GET", "/tasks/ui", &[], "").await;
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let csp = page.header("content-security-policy").unwrap();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe"),
        "{csp}"
    );
    let html = page.text();
    assert!(html.contains(r#"<script src="ui/app.js" defer></script>"#));
    // No inline script or style for the policy to block.
    assert_eq!(html.matches("<script").count(), 1);
    assert!(!html.contains("<style") && !html.contains(" style="));
    // No event handler attributes (`onclick=` and the like).
    for rest in html.split(" on").skip(1) {
        let name_end = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(0);
        assert!(
            name_end == 0 || !rest[name_end..].starts_with('='),
            "{rest}"
        );
    }
    let js = server.request("GET", "/tasks/ui/app.js", &[], "").await;
    assert_eq!(
        js.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert!(js.text().contains("/events"));
    let css = server.request("GET", "/tasks/ui/app.css", &[], "").await;
    assert_eq!(css.header("content-type"), Some("text/css; charset=utf-8"));
    server.stop().await;
}
