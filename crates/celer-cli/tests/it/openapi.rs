//! The task API's OpenAPI document, live: `celer serve --tasks` serves it
//! and a page of it, and schemathesis (PyPI) fuzzes the API from it and
//! finds no failure.

use std::process::Command;

use serde_json::Value;

use crate::support::{Celer, curl};

/// The upper bound of the schemathesis run, in seconds (`timeout(1)`):
/// generous, never asserted; a run past it fails the test.
const SCHEMATHESIS_BOUND: &str = "240";

/// Test cases per operation and phase: small, so the run stays short.
/// `docs/decisions/117-openapi.md` has the command for a longer one.
const MAX_EXAMPLES: &str = "25";

fn serve(dir: &std::path::Path) -> Celer {
    Celer::serve(&[
        "--listen",
        "tcp://127.0.0.1:0",
        "--workers",
        "1",
        "--tasks",
        "--data-dir",
        dir.to_str().unwrap(),
    ])
}

#[test]
fn the_task_api_serves_its_document_and_a_page_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let celer = serve(dir.path());
    let url = celer.url();
    let reply = curl(&[&format!("{url}/tasks/openapi.json")]);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let doc: Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    let mut paths: Vec<&str> = doc["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    paths.sort_unstable();
    assert_eq!(
        paths,
        [
            "/tasks",
            "/tasks/stats",
            "/tasks/{id}",
            "/tasks/{id}/cancel",
            "/tasks/{id}/events",
            "/tasks/{id}/result",
        ]
    );
    let submit = &doc["paths"]["/tasks"]["post"];
    assert_eq!(submit["operationId"], "celer_tasks.submit");
    let responses: Vec<&String> = submit["responses"].as_object().unwrap().keys().collect();
    assert_eq!(
        responses,
        [
            "200", "201", "400", "401", "403", "413", "415", "422", "429", "500", "503"
        ]
    );
    let id = &doc["paths"]["/tasks/{id}"]["get"]["parameters"][0];
    assert_eq!(id["schema"]["type"], "integer");
    assert_eq!(
        doc["paths"]["/tasks/{id}/result"]["get"]["responses"]["409"]["content"]["application/json"]
            ["schema"]["$ref"],
        "#/components/schemas/ErrorBody"
    );
    // An id that is not an integer is no task: the API's JSON 404.
    let reply = curl(&[&format!("{url}/tasks/abc/result")]);
    assert_eq!(reply.status, 404);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.text(), r#"{"error":"no such task"}"#);
    let page = curl(&[&format!("{url}/tasks/docs")]);
    assert_eq!(page.status, 200);
    let html = page.text();
    assert!(html.contains("<a href=\"/tasks/openapi.json\">"), "{html}");
    assert!(html.contains("<code>/tasks/{id}/cancel</code>"));
    assert!(html.contains("id=\"schema-TaskView\""));
}

/// The checks the brief of the API holds it to: no 5xx, only documented
/// statuses and media types, bodies that match their schemas.
const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,\
                      response_schema_conformance";

#[test]
fn schemathesis_finds_no_failure_in_the_task_api() {
    let dir = tempfile::tempdir().unwrap();
    let celer = serve(dir.path());
    let schema = format!("{}/tasks/openapi.json", celer.url());
    let report = dir.path().join("schemathesis");
    // The module of the python3 that scripts/test installs it for,
    // wherever pip put the console script.
    let out = Command::new("timeout")
        .args([
            "-k",
            "5",
            SCHEMATHESIS_BOUND,
            "python3",
            "-m",
            "schemathesis.cli",
        ])
        .args(["run", &schema])
        .args(["--checks", CHECKS])
        .args(["--max-examples", MAX_EXAMPLES])
        // An event stream stays open until its task is final: nothing a
        // request-response fuzzer can wait for (tests/it/tasks.rs and the
        // crate's tests cover it).
        .args(["--exclude-path-regex", "/events$"])
        .args(["--request-timeout", "10"])
        .args(["--workers", "1", "--seed", "17", "--no-shrink"])
        .arg("--report-dir")
        .arg(&report)
        // Its caches and Hypothesis's database go to the temporary
        // directory: each run starts afresh and the tree stays clean.
        .current_dir(dir.path())
        .env("SCHEMATHESIS_TELEMETRY", "false")
        .env("NO_COLOR", "1")
        .output()
        .expect("run schemathesis (scripts/test installs it)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "schemathesis failed ({:?}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // It did test the operations (not an empty run that passes): all but
    // the event stream. (The exit status is the verdict: the summary line
    // reads otherwise when schemathesis has a warning, such as many 404s
    // for ids it made up.)
    assert!(stdout.contains("Selected: 6/7"), "{stdout}");
    assert!(stdout.contains("Tested: 6"), "{stdout}");
}
