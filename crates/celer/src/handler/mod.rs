//! Handlers, middleware and the `next` continuation.
//!
//! A handler is an async function of a [`Request`] (and optionally a
//! [`Next`]) returning anything that implements [`IntoResponse`].
//! Middleware has the same shape, `(req, next) -> response`: it may answer
//! by itself or call [`Next::run`] and work on the response.
//!
//! `next` continues with what comes after the current step:
//!
//! - in app-level middleware: the next app-level middleware, then routing;
//! - in a route's chain (scope middleware, route middleware, the handler and
//!   its `.then(...)` handlers): the next step of the chain;
//! - after the last step of a chain: the next route whose rule and method
//!   match (Express and Valum's `next`), or `404 Not Found` if there is none.

mod inline;

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use http::StatusCode;

use self::inline::InlineFuture;
use crate::Request;
use crate::response::{IntoResponse, Response};

/// A type-erased handler or middleware.
pub(crate) type BoxHandler = Arc<dyn Fn(Request, Next) -> Dispatched + Send + Sync>;

/// The boxed future of a handler function too large to keep in place. Its
/// output is already the output of the app's `Service` future, which polls
/// it without converting what it yields.
pub(crate) type HandlerFuture =
    Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send + 'static>>;

/// An async function usable as a handler or middleware.
///
/// Implemented for `Fn(Request) -> impl Future` and
/// `Fn(Request, Next) -> impl Future` whose output implements
/// [`IntoResponse`] and whose future is `Send`, and for the framework's
/// middleware types ([`Compression`](crate::middleware::compression::Compression), ...).
/// The type parameter only tells the two shapes apart. The trait is
/// sealed: middleware of your own is a function of that shape (a closure
/// captures its configuration).
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
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a celer handler",
    label = "not a handler",
    note = "a handler is an `async fn(Request) -> R` or `async fn(Request, Next) -> R` (or a closure of that shape) where `R: IntoResponse` (`String`, `StatusCode`, `Json<T>`, `Result<T, celer::Error>`, ...), and whose future is `Send` (no `MutexGuard` or `Rc` held across an `.await`)",
    note = "wrap it in `celer::debug_handler(..)` (or `celer::debug_middleware(..)` for the `(Request, Next)` shape) to be told which of these fails"
)]
pub trait Handler<T>: sealed::Dispatch<T> + Send + Sync + 'static {
    /// Calls the handler.
    fn call(&self, req: Request, next: Next) -> BoxFuture<'static, Response>;
}

/// The app's way of calling a handler, out of the public API.
pub(crate) mod sealed {
    use super::{Dispatched, Handler, Next, NextFuture};
    use crate::Request;

    /// How the app's dispatch calls a handler: [`Handler::call`] boxed by
    /// default; handler functions keep a small future in place instead.
    pub trait Dispatch<T> {
        /// Calls the handler from the app's dispatch.
        fn call_next(&self, req: Request, next: Next) -> Dispatched
        where
            Self: Handler<T> + Sized,
        {
            NextFuture::boxed(self.call(req, next)).into()
        }
    }
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

impl<F, Fut> sealed::Dispatch<(Request,)> for F
where
    F: Fn(Request) -> Fut + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: IntoResponse,
{
    #[inline]
    fn call_next(&self, req: Request, _next: Next) -> Dispatched {
        Dispatched::handler(IntoOutput { fut: self(req) })
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

impl<F, Fut> sealed::Dispatch<(Request, Next)> for F
where
    F: Fn(Request, Next) -> Fut + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: IntoResponse,
{
    #[inline]
    fn call_next(&self, req: Request, next: Next) -> Dispatched {
        Dispatched::handler(IntoOutput {
            fut: self(req, next),
        })
    }
}

pin_project_lite::pin_project! {
    /// A handler function's future, answering the output of the app's
    /// `Service` future.
    struct IntoOutput<F> {
        #[pin]
        fut: F,
    }
}

impl<F> Future for IntoOutput<F>
where
    F: Future,
    F::Output: IntoResponse,
{
    type Output = Result<Response, Infallible>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().fut.poll(cx) {
            Poll::Ready(output) => Poll::Ready(into_output(output)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// A handler's output as the output of the app's `Service` future.
#[inline]
fn into_output<T: IntoResponse>(output: T) -> Result<Response, Infallible> {
    Ok(output.into_response())
}

/// Checks that `handler` is a handler of the `(Request)` shape and hands it
/// back unchanged. Where `app.get(.., handler)` only says "not a celer
/// handler", this names the part that fails: the arguments, an output
/// that is not [`IntoResponse`], or a future that is not `Send` (with the
/// value held across an `.await` that makes it so).
///
/// ```
/// use celer::Request;
/// async fn show(req: Request) -> String { req.path().to_owned() }
/// let mut app = celer::App::new();
/// app.get("/", celer::debug_handler(show));
/// ```
pub fn debug_handler<F, Fut>(handler: F) -> F
where
    F: Fn(Request) -> Fut + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: IntoResponse,
{
    handler
}

/// [`debug_handler`] for the `(Request, Next)` shape of middleware and
/// chained handlers.
///
/// ```
/// use celer::{Next, Request, Response};
/// async fn pass(req: Request, next: Next) -> Response { next.run(req).await }
/// let mut app = celer::App::new();
/// app.middleware(celer::debug_middleware(pass));
/// ```
pub fn debug_middleware<F, Fut>(handler: F) -> F
where
    F: Fn(Request, Next) -> Fut + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: IntoResponse,
{
    handler
}

pub(crate) fn boxed<H: Handler<T>, T>(handler: H) -> BoxHandler {
    Arc::new(move |req, next| sealed::Dispatch::call_next(&handler, req, next))
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
        self.run_in_place(req).into_next()
    }

    /// [`run`](Self::run) with a handler's small future kept in place,
    /// for the framework's own middleware whose future holds it (the
    /// session middleware's).
    pub(crate) fn run_in_place(self, req: Request) -> Dispatched {
        let conn = req.app_conn().clone();
        let shared = &conn.shared;
        match self.pos {
            Pos::App(idx) => shared.run_app(idx, req),
            Pos::Route { route, step, nth } => shared.run_route(route, step, nth, req),
            Pos::End => NextFuture::status(http::StatusCode::NOT_FOUND).into(),
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
    /// A handler function's future.
    Handler(HandlerFuture),
    /// A response with an empty body and this status, built when polled.
    Status(Option<StatusCode>),
    /// A response built in advance.
    Ready(Option<Box<Response>>),
    /// Any other future: middleware values, status handlers, HEAD.
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

    pub(crate) fn handler(fut: HandlerFuture) -> Self {
        NextFuture {
            kind: FutureKind::Handler(fut),
        }
    }

    /// Polls for the app's `Service` output; a handler function's future
    /// answers in place.
    #[inline]
    pub(crate) fn poll_output(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Response, Infallible>> {
        match &mut self.kind {
            FutureKind::Handler(fut) => fut.as_mut().poll(cx),
            _ => self.poll_other(cx).map(Ok),
        }
    }

    fn poll_other(&mut self, cx: &mut Context<'_>) -> Poll<Response> {
        match &mut self.kind {
            FutureKind::Handler(fut) => fut.as_mut().poll(cx).map(|Ok(res)| res),
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

impl Future for NextFuture {
    type Output = Response;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response> {
        self.get_mut().poll_other(cx)
    }
}

impl std::fmt::Debug for NextFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NextFuture").finish_non_exhaustive()
    }
}

pin_project_lite::pin_project! {
    /// The response future of a request the app dispatched: a handler
    /// function's future stored in place when it is small, else a
    /// [`NextFuture`]. Not part of the API: only the sealed side of
    /// [`Handler`] names it.
    #[doc(hidden)]
    pub struct Dispatched {
        #[pin]
        kind: DispatchedKind,
    }
}

pin_project_lite::pin_project! {
    #[project = DispatchedProj]
    enum DispatchedKind {
        Inline { #[pin] fut: InlineFuture },
        Next { fut: NextFuture },
    }
}

impl Dispatched {
    /// A handler function's future: in place if it fits, else boxed.
    #[inline]
    fn handler<F>(fut: F) -> Self
    where
        F: Future<Output = Result<Response, Infallible>> + Send + 'static,
    {
        let kind = match InlineFuture::new(fut) {
            Ok(fut) => DispatchedKind::Inline { fut },
            Err(fut) => DispatchedKind::Next {
                fut: NextFuture::handler(Box::pin(fut)),
            },
        };
        Dispatched { kind }
    }

    /// As a [`NextFuture`], which moves a future stored in place to the
    /// heap (it has not been polled yet).
    pub(crate) fn into_next(self) -> NextFuture {
        match self.kind {
            DispatchedKind::Inline { fut } => NextFuture::handler(Box::pin(fut)),
            DispatchedKind::Next { fut } => fut,
        }
    }

    /// Polls for the app's `Service` output.
    #[inline]
    pub(crate) fn poll_output(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Response, Infallible>> {
        match self.project().kind.project() {
            DispatchedProj::Inline { fut } => fut.poll(cx),
            DispatchedProj::Next { fut } => fut.poll_output(cx),
        }
    }
}

impl From<NextFuture> for Dispatched {
    fn from(fut: NextFuture) -> Self {
        Dispatched {
            kind: DispatchedKind::Next { fut },
        }
    }
}

impl fmt::Debug for Dispatched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dispatched").finish_non_exhaustive()
    }
}
