//! The HTTP API: a `celer::App` to mount (at `/tasks` in `celer serve`).
//!
//! | method and path | answer |
//! | --- | --- |
//! | `POST /` | `201` + `Location` + the task; `200` for a known `Idempotency-Key` with the same submission, `422` with another |
//! | `GET /` | the tasks, newest first: `?state=a,b&kind=k&limit=n&cursor=c`, with `next_cursor` |
//! | `GET /stats` | counts by state and kind, wait and run time percentiles |
//! | `GET /<id>` | the task |
//! | `GET /<id>/result` | the result (`ETag`, `304` on `If-None-Match`); `409` before success |
//! | `POST /<id>/cancel` | `202` with the task (a queued task is cancelled; a running one is asked to stop) |
//! | `GET /<id>/events` | server-sent events: the task after each change, until it is final |
//! | `GET /events` | server-sent events: every task after each change (`event: task`), `event: resync` after falling behind |
//! | `GET /ui` | the dashboard (with `/ui/app.js`, `/ui/app.css`) |
//! | `GET /openapi.json`, `GET /docs` | the OpenAPI 3.1 document of these routes, and a page of it |
//!
//! With [`TasksConfig::require_key`](crate::TasksConfig::require_key) every
//! route but the dashboard's needs `Authorization: Bearer <token>`: `401`
//! with `WWW-Authenticate: Bearer` without a known key, `403` for a revoked
//! one; a submit over the key's quotas is answered `429` with
//! `Retry-After` (`413` for an input that can never fit), the JSON error
//! naming the quota (`quota`, `limit`).

use std::sync::Arc;
use std::time::Duration;

use celer::openapi::{JsonSchema, Operation};
use celer::response::Json;
use celer::sse::{Event, EventStream};
use celer::{App, IntoResponse, MethodSet, Request, Response};
use futures_util::StreamExt;
use http::{HeaderValue, StatusCode, header};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::limits;
use crate::model::{
    ListFilter, NewTask, Submitted, Task, TaskId, now_millis, parse_rfc3339, rfc3339,
};
use crate::openapi as doc;
use crate::store::Submit as StoreSubmit;
use crate::tasks::{CallError, Tasks};

/// Route name of one task, for `Location` and links.
pub const TASK_ROUTE: &str = "celer_tasks.task";

/// An API error: a status, a message in a JSON body, maybe `Retry-After`.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    retry_after: Option<u64>,
    /// More fields of the JSON body.
    extra: Option<serde_json::Map<String, Value>>,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            retry_after: None,
            extra: None,
        }
    }

    /// A refusal by an API key's quota: `429` with `Retry-After`, or `413`
    /// when waiting cannot help.
    fn over_quota(over: &crate::keys::OverQuota) -> ApiError {
        let mut extra = serde_json::Map::new();
        extra.insert("quota".to_owned(), json!(over.quota.as_str()));
        extra.insert("limit".to_owned(), json!(over.limit));
        let retry_after = over.retry_after.map(|d| d.as_secs().max(1));
        if let Some(secs) = retry_after {
            extra.insert("retry_after".to_owned(), json!(secs));
        }
        ApiError {
            // RFC 6585 §4; RFC 9110 §15.5.14 when no wait makes it fit.
            status: match retry_after {
                Some(_) => StatusCode::TOO_MANY_REQUESTS,
                None => StatusCode::PAYLOAD_TOO_LARGE,
            },
            message: over.to_string(),
            retry_after,
            extra: Some(extra),
        }
    }

    fn busy(message: &str) -> ApiError {
        ApiError {
            retry_after: Some(1),
            ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message)
        }
    }
}

impl From<CallError> for ApiError {
    fn from(err: CallError) -> Self {
        match err {
            CallError::Busy(err) if err.is_overloaded() => ApiError::busy("task store is busy"),
            CallError::Busy(_) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "task API is stopping")
            }
            CallError::Store(err) => {
                tracing::error!(target: "celer::tasks", error = %err, "task store failed");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "task store failed")
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = self.extra.unwrap_or_default();
        body.insert("error".to_owned(), Value::String(self.message));
        let mut res = (self.status, Json(Value::Object(body))).into_response();
        if let Some(secs) = self.retry_after {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        res
    }
}

type ApiResult = Result<Response, ApiError>;

/// A submission as posted.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(example = serde_json::json!({ "kind": "echo", "input": { "value": "hello" } }))]
pub(crate) struct Submit {
    /// The kind's name (`echo` is always there).
    kind: String,
    /// The kind's input.
    #[serde(default)]
    input: Value,
    /// Higher runs first among due tasks.
    #[serde(default)]
    priority: i32,
    /// Not before this time (RFC 3339); now by default.
    #[schemars(extend("format" = "date-time"))]
    run_at: Option<String>,
    /// Run time limit per attempt, in milliseconds.
    #[schemars(range(min = 1, max = limits::MAX_TIMEOUT.as_millis() as u64))]
    timeout_ms: Option<u64>,
    /// Attempts before the task is dead.
    #[schemars(range(min = 1, max = limits::MAX_ATTEMPTS))]
    max_attempts: Option<u32>,
}

/// `GET /` query.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    /// Only these states, comma-separated (`queued,running`).
    #[schemars(regex(pattern = r"^,*((queued|running|succeeded|failed|cancelled|dead)(,+|$))*$"))]
    state: Option<String>,
    /// Only this kind.
    kind: Option<String>,
    /// At most this many (1 to 1000, 100 by default; clamped).
    #[schemars(range(max = usize::MAX))]
    limit: Option<usize>,
    /// The `next_cursor` of the page before.
    #[schemars(range(min = TaskId::MIN, max = TaskId::MAX))]
    cursor: Option<TaskId>,
}

/// The task API as an app to mount, e.g. `app.mount("/tasks", tasks.app())`.
pub fn app(tasks: &Tasks) -> App {
    let mut app = App::new();
    app.body_limit(limits::MAX_SUBMIT_BYTES);
    let auth = tasks
        .inner
        .config
        .require_key
        .then(|| crate::keys::auth_layer(tasks));
    let guard = |route: celer::app::RouteBuilder<'_>| {
        if let Some(layer) = &auth {
            route.middleware(layer.clone());
        }
    };
    let t = tasks.clone();
    guard(
        app.post("", move |req| submit(t.clone(), req))
            .name("celer_tasks.submit")
            .describe(doc::submit),
    );
    let t = tasks.clone();
    guard(
        app.get("", move |req| list(t.clone(), req))
            .name("celer_tasks.list")
            .describe(doc::list),
    );
    let t = tasks.clone();
    guard(
        app.get("/stats", move |_req| stats(t.clone()))
            .name("celer_tasks.stats")
            .describe(doc::stats),
    );
    let t = tasks.clone();
    guard(
        app.get("/<int:id>", move |req| show(t.clone(), req))
            .name(TASK_ROUTE)
            .describe(doc::show),
    );
    let t = tasks.clone();
    guard(
        app.get("/<int:id>/result", move |req| result(t.clone(), req))
            .name("celer_tasks.result")
            .describe(doc::result),
    );
    let t = tasks.clone();
    guard(
        app.post("/<int:id>/cancel", move |req| cancel(t.clone(), req))
            .name("celer_tasks.cancel")
            .describe(doc::cancel),
    );
    let t = tasks.clone();
    guard(
        app.get("/<int:id>/events", move |req| events(t.clone(), req))
            .name("celer_tasks.events")
            .describe(doc::events),
    );
    let t = tasks.clone();
    guard(
        app.get("/events", move |req| crate::dashboard::feed(t.clone(), req))
            .name("celer_tasks.feed")
            .describe(Operation::hidden),
    );
    crate::dashboard::routes(&mut app);
    // An id that is not an integer names no task either: the same JSON
    // 404 as an unknown one, not the router's plain-text answer (found by
    // schemathesis). After the typed routes, so they are tried first.
    for (methods, rule) in [
        (MethodSet::GET, "/<id>"),
        (MethodSet::GET, "/<id>/result"),
        (MethodSet::POST, "/<id>/cancel"),
        (MethodSet::GET, "/<id>/events"),
    ] {
        app.route(methods, rule, |_req: Request| async { not_found() })
            .describe(Operation::hidden);
    }
    // Last: the document describes the routes added before it.
    doc::serve(&mut app);
    app
}

/// The task as JSON.
pub fn task_json(task: &Task) -> Value {
    let input: Value = serde_json::from_str(&task.input).unwrap_or(Value::Null);
    json!({
        "id": task.id,
        "kind": task.kind,
        "state": task.state,
        "input": input,
        "priority": task.priority,
        "run_at": rfc3339(task.run_at),
        "timeout_ms": task.timeout_ms,
        "max_attempts": task.max_attempts,
        "attempts": task.attempts,
        "progress": task.progress,
        "error": task.error,
        "cancel_requested": task.cancel_requested,
        "has_result": task.has_result,
        "created_at": rfc3339(task.created_at),
        "started_at": task.started_at.map(rfc3339),
        "finished_at": task.finished_at.map(rfc3339),
        "updated_at": rfc3339(task.updated_at),
        "key_id": task.key_id,
    })
}

fn id_of(req: &Request) -> Result<TaskId, ApiError> {
    req.param("id")
        .map_err(|_| ApiError::new(StatusCode::NOT_FOUND, "no such task"))
}

fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such task")
}

fn unprocessable(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message)
}

/// Checks a submission against the kinds and the limits.
fn check(tasks: &Tasks, submit: Submit, now: i64) -> Result<NewTask, ApiError> {
    let kind = tasks
        .kinds()
        .get(&submit.kind)
        .ok_or_else(|| unprocessable(format!("unknown kind {:?}", submit.kind)))?;
    let input = submit.input.to_string();
    kind.check(&input)
        .map_err(|err| unprocessable(format!("invalid input for kind {:?}: {err}", submit.kind)))?;
    let run_at = match &submit.run_at {
        Some(text) => parse_rfc3339(text)
            .ok_or_else(|| unprocessable("run_at is not an RFC 3339 date-time"))?,
        None => now,
    };
    let max_timeout = limits::MAX_TIMEOUT.as_millis() as u64;
    let timeout_ms = submit
        .timeout_ms
        .unwrap_or(limits::DEFAULT_TIMEOUT.as_millis() as u64);
    if timeout_ms == 0 || timeout_ms > max_timeout {
        return Err(unprocessable(format!(
            "timeout_ms must be between 1 and {max_timeout}"
        )));
    }
    let max_attempts = submit.max_attempts.unwrap_or(limits::DEFAULT_MAX_ATTEMPTS);
    if max_attempts == 0 || max_attempts > limits::MAX_ATTEMPTS {
        return Err(unprocessable(format!(
            "max_attempts must be between 1 and {}",
            limits::MAX_ATTEMPTS
        )));
    }
    Ok(NewTask {
        kind: submit.kind,
        input,
        priority: submit.priority,
        run_at,
        timeout_ms: timeout_ms as i64,
        max_attempts,
        key_id: None,
    })
}

fn idempotency_key(req: &Request) -> Result<Option<String>, ApiError> {
    let Some(value) = req.headers().get("idempotency-key") else {
        return Ok(None);
    };
    let key = value
        .to_str()
        .ok()
        .filter(|key| !key.is_empty() && key.len() <= limits::MAX_IDEMPOTENCY_KEY_BYTES)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                format!(
                    "Idempotency-Key must be 1 to {} visible ASCII characters",
                    limits::MAX_IDEMPOTENCY_KEY_BYTES
                ),
            )
        })?;
    Ok(Some(key.to_owned()))
}

fn with_task(status: StatusCode, req: &Request, task: &Task) -> Response {
    let mut res = (status, Json(task_json(task))).into_response();
    if let Ok(url) = req.url_for(TASK_ROUTE, &[("id", &task.id)])
        && let Ok(value) = HeaderValue::from_str(&url)
    {
        res.headers_mut().insert(header::LOCATION, value);
    }
    res
}

async fn submit(tasks: Tasks, mut req: Request) -> ApiResult {
    let key = idempotency_key(&req)?;
    let body: Submit = match req.json().await {
        Ok(body) => body,
        Err(rejection) => {
            return Err(ApiError::new(rejection.status(), rejection.to_string()));
        }
    };
    let now = now_millis();
    let mut new = check(&tasks, body, now)?;
    // Set by the bearer middleware when keys are required: the key's id.
    new.key_id = req
        .extensions()
        .get::<celer::auth::User>()
        .and_then(|user| user.0.parse().ok());
    let submitted = tasks
        .inner
        .submit(StoreSubmit {
            task: new,
            idempotency_key: key,
        })
        .await?;
    match submitted {
        Submitted::Created(task) => {
            // A task due later is found by the runner's poll; waking it
            // now would only scan the queue for nothing.
            if task.run_at <= now {
                tasks.inner.wake.notify_one();
            }
            Ok(with_task(StatusCode::CREATED, &req, &task))
        }
        Submitted::Existing(task) => Ok(with_task(StatusCode::OK, &req, &task)),
        Submitted::KeyConflict => Err(unprocessable(
            "Idempotency-Key was used with another submission",
        )),
        Submitted::QueueFull => Err(ApiError::busy("too many queued tasks")),
        Submitted::KeyRevoked => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "the API key was revoked",
        )),
        Submitted::OverQuota(over) => Err(ApiError::over_quota(&over)),
    }
}

async fn show(tasks: Tasks, req: Request) -> ApiResult {
    let id = id_of(&req)?;
    let task = tasks
        .call(move |store| store.get(id))
        .await?
        .ok_or_else(not_found)?;
    Ok(Json(task_json(&task)).into_response())
}

async fn result(tasks: Tasks, req: Request) -> ApiResult {
    let id = id_of(&req)?;
    crate::results::result(tasks, req, id).await
}

async fn cancel(tasks: Tasks, req: Request) -> ApiResult {
    let id = id_of(&req)?;
    let events = tasks.inner.publisher();
    let task = tasks
        .call(move |store| {
            let task = store.cancel(id, now_millis())?;
            if let Some(task) = task.as_ref().filter(|task| task.state.is_final()) {
                events.publish(task);
            }
            Ok(task)
        })
        .await?
        .ok_or_else(not_found)?;
    if task.cancel_requested
        && let Some(run) = crate::runner::lock(&tasks.inner.running).get(&id)
    {
        run.cancel.set();
    }
    Ok((StatusCode::ACCEPTED, Json(task_json(&task))).into_response())
}

async fn list(tasks: Tasks, req: Request) -> ApiResult {
    let query: ListQuery = req
        .query()
        .map_err(|err| ApiError::new(StatusCode::BAD_REQUEST, err.to_string()))?;
    let mut filter = ListFilter {
        kind: query.kind,
        before: query.cursor,
        limit: query
            .limit
            .unwrap_or(limits::DEFAULT_PAGE)
            .clamp(1, limits::MAX_PAGE),
        ..ListFilter::default()
    };
    if let Some(states) = query.state {
        for name in states.split(',').filter(|s| !s.is_empty()) {
            filter.states.push(
                name.parse()
                    .map_err(|err: String| ApiError::new(StatusCode::BAD_REQUEST, err))?,
            );
        }
    }
    let limit = filter.limit;
    let found = tasks.call(move |store| store.list(&filter)).await?;
    let next = (found.len() == limit)
        .then(|| found.last().map(|t| t.id))
        .flatten();
    let items: Vec<Value> = found.iter().map(task_json).collect();
    Ok(Json(json!({ "tasks": items, "next_cursor": next })).into_response())
}

async fn stats(tasks: Tasks) -> ApiResult {
    let stats = tasks
        .call(|store| store.stats(limits::STATS_WINDOW))
        .await?;
    Ok(Json(stats).into_response())
}

async fn events(tasks: Tasks, req: Request) -> ApiResult {
    let id = id_of(&req)?;
    let Ok(permit) = tasks.inner.streams.clone().try_acquire_owned() else {
        return Err(ApiError::busy("too many event streams"));
    };
    // Subscribe before reading, so no change falls between the two.
    let receiver = tasks.inner.events.subscribe();
    let first = tasks
        .call(move |store| store.get(id))
        .await?
        .ok_or_else(not_found)?;
    let state = (
        Some(Arc::new(first)),
        receiver,
        tasks.clone(),
        false,
        permit,
    );
    let stream = futures_util::stream::unfold(
        state,
        move |(next, mut rx, tasks, done, permit)| async move {
            if done {
                return None;
            }
            let task = match next {
                Some(task) => task,
                None => loop {
                    match rx.recv().await {
                        Ok(task) if task.id == id => break task,
                        Ok(_) => continue,
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                            match tasks.call(move |store| store.get(id)).await {
                                Ok(Some(task)) => break Arc::new(task),
                                _ => return None,
                            }
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                    }
                },
            };
            let event = Event::new()
                .event("task")
                .id(format!("{}-{}", task.updated_at, task.attempts))
                .json(&task_json(&task))
                .unwrap_or_else(|_| Event::new().event("task"));
            let done = task.state.is_final();
            Some((event, (None, rx, tasks, done, permit)))
        },
    );
    Ok(EventStream::new(&req, stream.boxed())
        .heartbeat(Duration::from_secs(15))
        .into_response())
}
