//! Handlers, middleware and the `next` continuation.
//!
//! A handler is an async function of a [`Request`] (and optionally a
//! [`Next`]) returning anything that implements
//! [`IntoResponse`](crate::response::IntoResponse). Middleware has the same
//! shape, `(req, next) -> response`: it may answer by itself or call
//! [`Next::run`] and work on the response.
//!
//! `next` continues with what comes after the current step:
//!
//! - in app-level middleware: the next app-level middleware, then routing;
//! - in a route's chain (scope middleware, route middleware, the handler and
//!   its `.then(...)` handlers): the next step of the chain;
//! - after the last step of a chain: the next route whose rule and method
//!   match (Express and Valum's `next`), or `404 Not Found` if there is none.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use http::StatusCode;

use crate::Request;
use crate::response::{IntoResponse, Response};

/// A type-erased handler or middleware.
pub(crate) type BoxHandler =
    Arc<dyn Fn(Request, Next) -> BoxFuture<'static, Response> + Send + Sync>;

/// An async function usable as a handler or middleware.
///
/// Implemented for `Fn(Request) -> impl Future` and
/// `Fn(Request, Next) -> impl Future` whose output implements
/// [`IntoResponse`]. The type parameter only tells the two shapes apart.
///
/// ```
/// use celer::{Next, Request};
///
/// async fn plain(_req: Request) -> &'static str { "hi" }
/// async fn with_next(req: Request, next: Next) -> celer::Response {
///     next.run(req).await
/// }
///
/// let mut app = celer::App::new();
/// app.get("/", plain);
/// app.get("/", with_next);
/// ```
pub trait Handler<T>: Send + Sync + 'static {
    /// Calls the handler.
    fn call(&self, req: Request, next: Next) -> BoxFuture<'static, Response>;
}

impl<F, Fut> Handler<(Request,)> for F
where
    F: Fn(Request) -> Fut + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: IntoResponse,
{
    fn call(&self, req: Request, _next: Next) -> BoxFuture<'static, Response> {
        // A combinator rather than an `async` block: the block would keep
        // room for the future and its output side by side, doubling the
        // size of the one allocation a handler call makes.
        Box::pin(self(req).map(IntoResponse::into_response))
    }
}

impl<F, Fut> Handler<(Request, Next)> for F
where
    F: Fn(Request, Next) -> Fut + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: IntoResponse,
{
    fn call(&self, req: Request, next: Next) -> BoxFuture<'static, Response> {
        Box::pin(self(req, next).map(IntoResponse::into_response))
    }
}

pub(crate) fn boxed<H: Handler<T>, T>(handler: H) -> BoxHandler {
    Arc::new(move |req, next| handler.call(req, next))
}

/// The continuation given to middleware and handlers: what runs next.
///
/// ```
/// use celer::{Next, Request, Response};
///
/// // Answers only even ids; passes odd ones to the next matching route.
/// async fn even(req: Request, next: Next) -> Response {
///     match req.param::<i64>("id") {
///         Ok(id) if id % 2 == 0 => celer::response::text("even"),
///         _ => next.run(req).await,
///     }
/// }
///
/// let mut app = celer::App::new();
/// app.get("/n/<int:id>", even);
/// app.get("/n/<int:id>", |_req: Request| async { "odd" });
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Next {
    pos: Pos,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Pos {
    /// Before the app-level middleware at this index; routing after the last.
    App(usize),
    /// Before step `step` of route `route`, the `nth` match of the request.
    Route {
        route: usize,
        step: usize,
        nth: usize,
    },
    /// Nothing left: `404 Not Found`.
    End,
}

impl Next {
    pub(crate) fn new(pos: Pos) -> Self {
        Next { pos }
    }

    /// A continuation that skips the rest of the current route's chain and
    /// goes on to the next matching route (`404 Not Found` when there is
    /// none); outside a route's chain (app-level middleware) it is `self`.
    ///
    /// ```
    /// use celer::{Next, Request, Response};
    ///
    /// // Route middleware that hands requests without a token to the next route.
    /// async fn needs_token(req: Request, next: Next) -> Response {
    ///     if req.query_param("token").is_some() {
    ///         next.run(req).await
    ///     } else {
    ///         next.next_route().run(req).await
    ///     }
    /// }
    ///
    /// let mut app = celer::App::new();
    /// app.get("/", |_req: Request| async { "with token" }).middleware(needs_token);
    /// app.get("/", |_req: Request| async { "without" });
    /// ```
    pub fn next_route(self) -> Next {
        match self.pos {
            Pos::Route { route, nth, .. } => Next::new(Pos::Route {
                route,
                step: usize::MAX,
                nth,
            }),
            pos => Next::new(pos),
        }
    }

    /// Runs the rest of the chain with `req`.
    pub fn run(self, req: Request) -> NextFuture {
        let shared = req.shared().clone();
        match self.pos {
            Pos::App(idx) => shared.run_app(idx, req),
            Pos::Route { route, step, nth } => shared.run_route(route, step, nth, req),
            Pos::End => NextFuture::status(http::StatusCode::NOT_FOUND),
        }
    }
}

/// The future returned by [`Next::run`].
#[must_use = "futures do nothing unless polled"]
pub struct NextFuture {
    kind: FutureKind,
}

/// What a [`NextFuture`] yields. Every variant is at most two words, so the
/// future (and the app's `ResponseFuture`, which the server holds and
/// moves) stays small.
enum FutureKind {
    /// A response with an empty body and this status, built when polled.
    Status(Option<StatusCode>),
    /// A response built in advance.
    Ready(Option<Box<Response>>),
    Boxed(BoxFuture<'static, Response>),
}

impl NextFuture {
    pub(crate) fn ready(res: Response) -> Self {
        NextFuture {
            kind: FutureKind::Ready(Some(Box::new(res))),
        }
    }

    /// An empty response with `status`.
    pub(crate) fn status(status: StatusCode) -> Self {
        NextFuture {
            kind: FutureKind::Status(Some(status)),
        }
    }

    pub(crate) fn boxed(fut: BoxFuture<'static, Response>) -> Self {
        NextFuture {
            kind: FutureKind::Boxed(fut),
        }
    }
}

impl Future for NextFuture {
    type Output = Response;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response> {
        match &mut self.get_mut().kind {
            FutureKind::Status(status) => match status.take() {
                Some(status) => Poll::Ready(crate::response::status(status)),
                None => Poll::Pending,
            },
            FutureKind::Ready(res) => match res.take() {
                Some(res) => Poll::Ready(*res),
                None => Poll::Pending,
            },
            FutureKind::Boxed(fut) => fut.as_mut().poll(cx),
        }
    }
}

impl std::fmt::Debug for NextFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NextFuture").finish_non_exhaustive()
    }
}
