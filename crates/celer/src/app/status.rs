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

/// Headers that a rendered error page must keep from the original response
/// (RFC 9110: 405 needs `Allow`, 3xx `Location`, 401 `WWW-Authenticate`).
const KEPT_HEADERS: [header::HeaderName; 4] = [
    header::ALLOW,
    header::LOCATION,
    header::WWW_AUTHENTICATE,
    header::RETRY_AFTER,
];

/// Applies the first matching handler of `handlers` to `res`.
pub(crate) async fn apply(handlers: &[(StatusMatch, BoxStatusHandler)], res: Response) -> Response {
    let status = res.status();
    let Some((_, handler)) = handlers.iter().find(|(m, _)| m.matches(status)) else {
        return res;
    };
    let kept: Vec<_> = KEPT_HEADERS
        .iter()
        .filter_map(|name| Some((name.clone(), res.headers().get(name)?.clone())))
        .collect();
    let mut rendered = handler(res).await;
    if rendered.status() == StatusCode::OK {
        *rendered.status_mut() = status;
    }
    for (name, value) in kept {
        rendered.headers_mut().entry(name).or_insert(value);
    }
    rendered
}

/// Status handlers as a middleware, for scopes and mounted apps.
pub(crate) fn middleware(handlers: Vec<(StatusMatch, BoxStatusHandler)>) -> BoxHandler {
    let handlers: Arc<[_]> = handlers.into();
    Arc::new(move |req: Request, next: Next| {
        let handlers = handlers.clone();
        NextFuture::boxed(Box::pin(async move {
            apply(&handlers, next.run(req).await).await
        }))
        .into()
    })
}
