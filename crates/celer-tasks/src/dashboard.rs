//! The dashboard (`/ui`: a page, its script and style, embedded in the
//! binary), the store-wide event stream it listens to (`/events`), and the
//! API key check in front of the API's routes.
//!
//! The page has no inline script or style, so it runs under a strict
//! `Content-Security-Policy` (set here: `default-src 'self'`, no framing).
//! It talks to the API with `fetch`; the events arrive over a streamed
//! `fetch` rather than `EventSource`, which cannot send `Authorization`.

use std::sync::Arc;
use std::time::Duration;

use celer::sse::{Event, EventStream};
use celer::{App, IntoResponse, Next, Request, Response};
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use http::{HeaderValue, StatusCode, header};
use tokio::sync::broadcast::error::RecvError;

use crate::api::{ApiError, task_json};
use crate::keys::TaskKeys;
use crate::tasks::Tasks;

const INDEX_HTML: &str = include_str!("../assets/dashboard/index.html");
const APP_JS: &str = include_str!("../assets/dashboard/app.js");
const APP_CSS: &str = include_str!("../assets/dashboard/app.css");

/// The page's policy: its own script, style and API, nothing else.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; base-uri 'none'; form-action 'self'; \
                   frame-ancestors 'none'";

/// The realm of the task API's `WWW-Authenticate: Bearer` challenge.
pub(crate) const REALM: &str = "celer tasks";

/// Adds the dashboard's routes to the task API's app.
pub(crate) fn routes(app: &mut App) {
    app.get("/ui", |_req: Request| async {
        asset(INDEX_HTML, "text/html; charset=utf-8")
    });
    app.get("/ui/app.js", |_req: Request| async {
        asset(APP_JS, "text/javascript; charset=utf-8")
    });
    app.get("/ui/app.css", |_req: Request| async {
        asset(APP_CSS, "text/css; charset=utf-8")
    });
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

/// The API key check: the framework's bearer middleware over the store's
/// keys, its plain-text refusals answered as the API's JSON errors.
pub(crate) fn auth_layer(
    tasks: &Tasks,
) -> impl Fn(Request, Next) -> BoxFuture<'static, Response> + Clone + Send + Sync + 'static {
    let bearer = Arc::new(celer::auth::bearer(REALM, TaskKeys::new(tasks)));
    move |req: Request, next: Next| {
        let bearer = bearer.clone();
        Box::pin(async move {
            let res = bearer(req, next).await;
            let refused = matches!(
                res.status(),
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN | StatusCode::SERVICE_UNAVAILABLE
            );
            let text = res
                .headers()
                .get(header::CONTENT_TYPE)
                .is_some_and(|v| v.as_bytes().starts_with(b"text/plain"));
            if !refused || !text {
                return res;
            }
            let (parts, body) = res.into_parts();
            let detail = body.collect_bytes().await.unwrap_or_default();
            let message = String::from_utf8_lossy(&detail).trim().to_owned();
            let mut json = ApiError::new(parts.status, message).into_response();
            for name in [header::WWW_AUTHENTICATE, header::RETRY_AFTER] {
                for value in parts.headers.get_all(&name) {
                    json.headers_mut().append(name.clone(), value.clone());
                }
            }
            json
        })
    }
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
