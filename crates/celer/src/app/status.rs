//! Status handlers: render the responses of a given status or range.

use std::future::Future;
use std::ops::RangeInclusive;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use http::{StatusCode, header};

use crate::Request;
use crate::handler::{BoxHandler, Next, NextFuture};
use crate::response::{IntoResponse, Response};

/// The statuses a status handler covers: one status or an inclusive range.
///
/// ```
/// use celer::app::StatusMatch;
/// assert!(StatusMatch::from(404).matches(http::StatusCode::NOT_FOUND));
/// assert!(StatusMatch::from(500..=599).matches(http::StatusCode::BAD_GATEWAY));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusMatch {
    low: u16,
    high: u16,
}

impl StatusMatch {
    /// Whether `status` is covered.
    pub fn matches(&self, status: StatusCode) -> bool {
        (self.low..=self.high).contains(&status.as_u16())
    }
}

impl From<StatusCode> for StatusMatch {
    fn from(status: StatusCode) -> Self {
        StatusMatch::from(status.as_u16())
    }
}

impl From<u16> for StatusMatch {
    fn from(status: u16) -> Self {
        StatusMatch {
            low: status,
            high: status,
        }
    }
}

impl From<RangeInclusive<u16>> for StatusMatch {
    fn from(range: RangeInclusive<u16>) -> Self {
        StatusMatch {
            low: *range.start(),
            high: *range.end(),
        }
    }
}

pub(crate) type BoxStatusHandler =
    Arc<dyn Fn(Response) -> BoxFuture<'static, Response> + Send + Sync>;

/// An async function that renders a response of a given status:
/// `Fn(Response) -> impl Future<Output = impl IntoResponse>`.
///
/// ```
/// fn takes<H: celer::app::StatusHandler<T>, T>(_h: H) {}
/// takes(|res: celer::Response| async move { format!("error {}", res.status()) });
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a status handler",
    label = "not a status handler",
    note = "a status handler is an `async fn(Response) -> R` (or a closure of that shape) where `R: IntoResponse`, whose future is `Send`"
)]
pub trait StatusHandler<T>: Send + Sync + 'static {
    #[doc(hidden)]
    fn into_boxed(self) -> BoxStatusHandler;
}

impl<F, Fut> StatusHandler<(Response,)> for F
where
    F: Fn(Response) -> Fut + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: IntoResponse,
{
    fn into_boxed(self) -> BoxStatusHandler {
        Arc::new(move |res| {
            let fut = self(res);
            Box::pin(async move { fut.await.into_response() })
        })
    }
}

/// One status handler as the app keeps it.
#[derive(Clone)]
pub(crate) struct Entry {
    pub(crate) statuses: StatusMatch,
    pub(crate) handler: BoxStatusHandler,
    /// Replaces bodies that handlers chose too ([`App::status_all`](super::App::status_all)).
    pub(crate) all: bool,
}

/// Headers that describe the original body: not carried over to a
/// rendered page, which has its own (RFC 9110 §8: representation data).
const BODY_HEADERS: [header::HeaderName; 6] = [
    header::CONTENT_TYPE,
    header::CONTENT_LENGTH,
    header::CONTENT_ENCODING,
    header::CONTENT_RANGE,
    header::ETAG,
    header::LAST_MODIFIED,
];

/// Applies the first matching handler of `handlers` to `res`, then the
/// problem+json rendering when `problem` is on.
pub(crate) async fn apply(handlers: &[Entry], problem: bool, res: Response) -> Response {
    let res = render(handlers, res).await;
    if problem {
        crate::error::into_problem(res)
    } else {
        res
    }
}

async fn render(handlers: &[Entry], res: Response) -> Response {
    let status = res.status();
    let Some(entry) = handlers.iter().find(|e| e.statuses.matches(status)) else {
        return res;
    };
    if !entry.all && !crate::error::is_replaceable(&res) {
        return res;
    }
    let mut kept = res.headers().clone();
    for name in &BODY_HEADERS {
        kept.remove(name);
    }
    let mut rendered = (entry.handler)(res).await;
    if rendered.status() == StatusCode::OK {
        *rendered.status_mut() = status;
    }
    // What middleware and handlers set (a request id, `Allow`, `Location`,
    // `WWW-Authenticate`, `Retry-After`, cookies) stays, unless the
    // rendering sets that field itself.
    for name in kept.keys() {
        if !rendered.headers().contains_key(name) {
            for value in kept.get_all(name) {
                rendered.headers_mut().append(name.clone(), value.clone());
            }
        }
    }
    rendered
}

/// Status handlers (and the problem+json rendering) as a middleware, for
/// the app, scopes and mounted apps.
pub(crate) fn middleware(handlers: Vec<Entry>, problem: bool) -> BoxHandler {
    let handlers: Arc<[_]> = handlers.into();
    Arc::new(move |req: Request, next: Next| {
        let handlers = handlers.clone();
        NextFuture::boxed(Box::pin(async move {
            apply(&handlers, problem, next.run(req).await).await
        }))
        .into()
    })
}
