//! The API's OpenAPI 3.1 document: its answers as types (which a Rust
//! client can deserialize them into) and what each route says of itself,
//! as [`api`](crate::api) registers it. The document is served at
//! `openapi.json` beside the routes, and an HTML page of it at `docs`.

use std::collections::BTreeMap;

use celer::App;
use celer::openapi::{JsonSchema, OpenApi, Operation, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::{ListQuery, Submit};
use crate::limits;
use crate::model::{State, TaskId};

/// Where the document is served, under the API's mount point.
pub const DOCUMENT_PATH: &str = "/openapi.json";
/// Where the HTML page of the document is served.
pub const DOCS_PATH: &str = "/docs";

/// Serves the document of `app`'s routes: call it after the last route.
pub(crate) fn serve(app: &mut App) {
    OpenApi::new("Celer tasks", env!("CARGO_PKG_VERSION"))
        .description(
            "Long-running tasks over HTTP: submit, watch, cancel and fetch results. \
             Every error answers a JSON object with an `error` message.",
        )
        .serve(app, DOCUMENT_PATH, DOCS_PATH);
}

const TAG: &str = "tasks";

fn error(op: Operation, status: u16, why: &str) -> Operation {
    op.response_json::<ErrorBody>(status, why)
}

/// What every route may answer when the store is busy or failed.
fn store_errors(op: Operation) -> Operation {
    let op = error(
        op,
        401,
        "No known API key (when the server requires keys: `Authorization: Bearer <token>`)",
    )
    .response_header::<String>(401, "WWW-Authenticate", "`Bearer realm=...`");
    let op = error(op, 403, "The API key was revoked");
    error(op, 500, "The task store failed")
        .response_json::<ErrorBody>(
            503,
            "The store is busy, the queue is full, or the API is stopping",
        )
        .response_header::<u64>(503, "Retry-After", "Seconds to wait, when busy")
}

fn task_id(op: Operation) -> Operation {
    error(op, 404, "No such task (or not kept any more)")
}

/// `POST /`.
pub(crate) fn submit(op: Operation) -> Operation {
    let op = op
        .tag(TAG)
        .summary("Submits a task")
        .header_schema(
            "Idempotency-Key",
            false,
            "Submitting again with the same key and submission gives the same task (200); \
             with another submission, 422",
            json_schema!({
                "type": "string",
                "minLength": 1,
                "maxLength": limits::MAX_IDEMPOTENCY_KEY_BYTES,
                "pattern": "^[!-~]+$",
            }),
        )
        .request_json::<Submit>()
        .response_json::<TaskView>(201, "The new task")
        .response_header::<String>(201, "Location", "The task's URL")
        .response_json::<TaskView>(200, "The task submitted before with this Idempotency-Key")
        .response_header::<String>(200, "Location", "The task's URL");
    let op = error(op, 400, "Malformed JSON, or an invalid Idempotency-Key");
    let op = error(
        op,
        413,
        "The submission is too large, or larger than the API key's per-task input cap",
    );
    let op = error(
        op,
        429,
        "Over one of the API key's quotas (concurrent tasks, tasks or input bytes per hour); \
         the body names the quota and its limit",
    )
    .response_header::<u64>(429, "Retry-After", "Seconds until the quota allows it");
    let op = error(op, 415, "The body is not `application/json`");
    let op = error(
        op,
        422,
        "Unknown kind, input the kind refuses, a field out of range, or an \
         Idempotency-Key used with another submission",
    );
    store_errors(op)
}

/// `GET /`.
pub(crate) fn list(op: Operation) -> Operation {
    let op = op
        .tag(TAG)
        .summary("Lists tasks, newest first")
        .query::<ListQuery>()
        .response_json::<TaskPage>(200, "One page of tasks");
    store_errors(error(op, 400, "An invalid query parameter"))
}

/// `GET /stats`.
pub(crate) fn stats(op: Operation) -> Operation {
    store_errors(
        op.tag(TAG)
            .summary("Counts by state and kind, wait and run time percentiles")
            .response_json::<StatsView>(200, "The statistics"),
    )
}

/// `GET /<id>`.
pub(crate) fn show(op: Operation) -> Operation {
    store_errors(task_id(
        op.tag(TAG)
            .summary("One task")
            .response_json::<TaskView>(200, "The task"),
    ))
}

/// `GET /<id>/result`.
pub(crate) fn result(op: Operation) -> Operation {
    let op = op
        .tag(TAG)
        .summary("A succeeded task's result")
        .header::<String>(
            "If-None-Match",
            false,
            "The result's ETag: answers 304 when it matches",
        )
        .response_body(
            200,
            "The result, as the kind gave it",
            "application/json",
            None,
        )
        .response_header::<String>(200, "ETag", "Names the result, which never changes")
        .response(304, "The result is the one the client has")
        .response_header::<String>(304, "ETag", "Names the result");
    let op = error(
        task_id(op),
        409,
        "The task has no result (it did not succeed)",
    );
    store_errors(op)
}

/// `POST /<id>/cancel`.
pub(crate) fn cancel(op: Operation) -> Operation {
    store_errors(task_id(
        op.tag(TAG)
            .summary("Cancels a task")
            .description(
                "A queued task is cancelled; a running one is asked to stop; a final one \
                 stays as it is.",
            )
            .response_json::<TaskView>(202, "The task after the request"),
    ))
}

/// `GET /<id>/events`.
pub(crate) fn events(op: Operation) -> Operation {
    let op = op
        .tag(TAG)
        .summary("Server-sent events: the task after each change")
        .description(
            "Each `task` event carries the task as JSON (a `TaskView`); the stream ends \
             after the task's final state.",
        )
        .response_body(200, "The event stream", "text/event-stream", None);
    store_errors(task_id(op))
}

/// A task, as `GET /tasks/{id}` and the other routes show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskView {
    /// Its number, increasing with submission.
    pub id: TaskId,
    /// The kind's name.
    pub kind: String,
    /// Where it is now.
    pub state: State,
    /// The input, as submitted.
    pub input: Value,
    /// Higher runs first among due tasks.
    pub priority: i32,
    /// Not before this time (moved by retries).
    #[schemars(extend("format" = "date-time"))]
    pub run_at: String,
    /// Run time limit per attempt, in milliseconds.
    pub timeout_ms: i64,
    /// Attempts before the task is dead.
    pub max_attempts: u32,
    /// Attempts started so far.
    pub attempts: u32,
    /// The kind's last progress report, 0 to 1.
    pub progress: Option<f64>,
    /// The last attempt's error.
    pub error: Option<String>,
    /// A cancel was asked while it ran.
    pub cancel_requested: bool,
    /// Whether a result is stored (`GET /tasks/{id}/result`).
    pub has_result: bool,
    /// When it was submitted.
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
    /// When its last attempt started.
    #[schemars(extend("format" = "date-time"))]
    pub started_at: Option<String>,
    /// When it reached its final state.
    #[schemars(extend("format" = "date-time"))]
    pub finished_at: Option<String>,
    /// When it last changed.
    #[schemars(extend("format" = "date-time"))]
    pub updated_at: String,
    /// The API key that submitted it (`celer tasks keys list`), when keys
    /// are required.
    pub key_id: Option<crate::keys::KeyId>,
}

/// One page of `GET /tasks`, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskPage {
    /// The tasks of this page.
    pub tasks: Vec<TaskView>,
    /// The `cursor` of the next page; `null` on the last one.
    pub next_cursor: Option<TaskId>,
}

/// An error answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: String,
}

/// `GET /tasks/stats`: counts and times over the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StatsView {
    /// Tasks per state.
    pub by_state: BTreeMap<String, u64>,
    /// Tasks per kind, then per state.
    pub by_kind: BTreeMap<String, BTreeMap<String, u64>>,
    /// Submission to last start, over the most recent finished tasks, ms.
    pub wait_ms: PercentilesView,
    /// Last start to finish, over the most recent finished tasks, ms.
    pub run_ms: PercentilesView,
}

/// Percentiles of a sample, in milliseconds; zero over no sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PercentilesView {
    /// How many values.
    pub count: u64,
    /// Median.
    pub p50: i64,
    /// 90th percentile.
    pub p90: i64,
    /// 99th percentile.
    pub p99: i64,
    /// Largest.
    pub max: i64,
}

impl JsonSchema for State {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "State".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = crate::model::STATES.iter().map(|s| s.as_str()).collect();
        schemars::json_schema!({
            "description": "`queued` and `running` move on; the others are final.",
            "type": "string",
            "enum": names,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Task;

    fn task() -> Task {
        Task {
            id: 7,
            kind: "echo".into(),
            input: r#"{"value":1}"#.into(),
            priority: 0,
            run_at: 1_000,
            timeout_ms: 5_000,
            max_attempts: 3,
            state: State::Running,
            attempts: 1,
            progress: Some(0.5),
            error: None,
            cancel_requested: false,
            has_result: false,
            created_at: 1_000,
            started_at: Some(2_000),
            finished_at: None,
            updated_at: 2_000,
            key_id: Some(3),
        }
    }

    /// The view and `task_json` have the same fields: a field added to
    /// one and not the other fails here.
    #[test]
    fn task_view_is_task_json() {
        let json = crate::api::task_json(&task());
        let view: TaskView = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(serde_json::to_value(&view).unwrap(), json);
        let schema = schemars::schema_for!(TaskView);
        let properties = schema.get("properties").unwrap().as_object().unwrap();
        let mut in_schema: Vec<_> = properties.keys().collect();
        let mut in_json: Vec<_> = json.as_object().unwrap().keys().collect();
        in_schema.sort();
        in_json.sort();
        assert_eq!(in_schema, in_json);
    }

    #[test]
    fn stats_view_is_stats() {
        let mut stats = crate::model::Stats::default();
        stats.by_state.insert("queued".into(), 2);
        let json = serde_json::to_value(&stats).unwrap();
        let view: StatsView = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(serde_json::to_value(&view).unwrap(), json);
    }
}
