//! The dashboard (`/ui`: a page, its script and style, embedded in the
//! binary) and the store-wide event stream it listens to (`/events`).
//!
//! The page has no inline script or style, so it runs under a strict
//! `Content-Security-Policy` (set here: `default-src 'self'`, no framing).
//! It talks to the API with `fetch`; the events arrive over a streamed
//! `fetch` rather than `EventSource`, which cannot send `Authorization`.

use std::time::Duration;

use celer::sse::{Event, EventStream};
use celer::{App, IntoResponse, Request, Response};
use futures_util::StreamExt;
use http::{HeaderValue, StatusCode, header};
use tokio::sync::broadcast::error::RecvError;

use crate::api::{ApiError, task_json};
use crate::tasks::Tasks;

const INDEX_HTML: &str = include_str!("../assets/dashboard/index.html");
const APP_JS: &str = include_str!("../assets/dashboard/app.js");
const APP_CSS: &str = include_str!("../assets/dashboard/app.css");

/// The page's policy: its own script, style and API, nothing else.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; base-uri 'none'; form-action 'self'; \
                   frame-ancestors 'none'";

/// Adds the dashboard's routes to the task API's app.
pub(crate) fn routes(app: &mut App) {
    // A page for people, not part of the API's OpenAPI document.
    let hidden = celer::openapi::Operation::hidden;
    app.get("/ui", |_req: Request| async {
        asset(INDEX_HTML, "text/html; charset=utf-8")
    })
    .describe(hidden);
    app.get("/ui/app.js", |_req: Request| async {
        asset(APP_JS, "text/javascript; charset=utf-8")
    })
    .describe(hidden);
    app.get("/ui/app.css", |_req: Request| async {
        asset(APP_CSS, "text/css; charset=utf-8")
    })
    .describe(hidden);
}

fn asset(text: &'static str, content_type: &'static str) -> Response {
    let mut res = text.into_response();
    let headers = res.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    // The assets change with the binary only; revalidate each load.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    res
}

/// `GET /events`: every task after each change, as `event: task` with the
/// task's JSON; `event: resync` when the stream fell more than
/// [`EVENT_BACKLOG`](crate::limits::EVENT_BACKLOG) changes behind (the
/// client reloads the list). Counts against
/// [`MAX_EVENT_STREAMS`](crate::limits::MAX_EVENT_STREAMS).
pub(crate) async fn feed(tasks: Tasks, req: Request) -> Result<Response, ApiError> {
    let Ok(permit) = tasks.inner.streams.clone().try_acquire_owned() else {
        let mut err = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "too many event streams")
            .into_response();
        err.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return Ok(err);
    };
    let receiver = tasks.inner.events.subscribe();
    let stream = futures_util::stream::unfold((receiver, permit), |(mut rx, permit)| async move {
        let event = match rx.recv().await {
            Ok(task) => Event::new()
                .event("task")
                .json(&task_json(&task))
                .unwrap_or_else(|_| Event::new().event("resync").data("")),
            Err(RecvError::Lagged(_)) => Event::new().event("resync").data(""),
            Err(RecvError::Closed) => return None,
        };
        Some((event, (rx, permit)))
    });
    Ok(EventStream::new(&req, stream.boxed())
        .heartbeat(Duration::from_secs(15))
        .into_response())
}
