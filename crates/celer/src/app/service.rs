//! `App` as a `tower::Service`: dispatch, automatic HEAD, OPTIONS and 405.

use std::convert::Infallible;
use std::future::Future;
use std::ops::ControlFlow;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode, header};
use http_body::Body as _;

use super::{App, AppConn, Shared, StaticRoutes, TrailingSlash, status};
use crate::handler::{Dispatched, Next, NextFuture, Pos};
use crate::response::Response;
use crate::router::{MethodSet, RawParams, standard_index};
use crate::{Body, BoxError, Request};

impl<B> tower_service::Service<http::Request<B>> for App
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> ResponseFuture {
        self.conn().call(req)
    }
}

/// What a request dropped during its handler's unwind leaves for the
/// catch: its route, for the log line, and its app, for the status
/// handlers and problem+json rendering of the 500.
type Panicked = (String, Arc<Shared>);

thread_local! {
    /// Written when the request is dropped during the unwind, read by the
    /// catch.
    static PANICKED: std::cell::RefCell<Option<Panicked>> = const { std::cell::RefCell::new(None) };
}

/// Records the route and app of a request dropped while its handler
/// panics.
pub(crate) fn note_panicked_route(route: String, shared: Arc<Shared>) {
    PANICKED.with(|slot| {
        // The latest wins: a value left by a panic some handler caught
        // itself is replaced by the next one's.
        if let Ok(mut slot) = slot.try_borrow_mut() {
            *slot = Some((route, shared));
        }
    });
}

/// The answer to a request whose handler panicked: the panic is logged
/// (target `celer::panic`) with its message and route, and the client gets
/// a `500`; the connection and the worker go on.
///
/// The app's own status handlers and problem+json rendering, when it has
/// them, render that 500 (the future returned does): the middleware and
/// scopes the panic unwound through are gone.
#[cold]
#[inline(never)]
fn panicked(payload: &(dyn std::any::Any + Send)) -> Dispatched {
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a non-string payload");
    let (route, shared) = match PANICKED.with(|slot| slot.try_borrow_mut().ok()?.take()) {
        Some((route, shared)) => (route, Some(shared)),
        None => ("unknown (the request had been dropped)".to_owned(), None),
    };
    tracing::error!(target: "celer::panic", route = %route, panic = %message, "handler panicked; answered 500");
    let res = crate::error::generated(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal server error",
        "",
    );
    match shared {
        Some(shared) if shared.has_finish() => NextFuture::boxed(Box::pin(async move {
            status::apply(&shared.status, shared.problem, res).await
        }))
        .into(),
        _ => NextFuture::ready(res).into(),
    }
}

/// A plain 500, when rendering a panic's 500 panicked too.
#[cold]
fn panicked_again() -> Response {
    tracing::error!(target: "celer::panic", "rendering a panic's 500 panicked; answered a plain 500");
    crate::response::status(StatusCode::INTERNAL_SERVER_ERROR)
}

pin_project_lite::pin_project! {
    /// The future of [`App`]'s `Service::call`; it never fails.
    ///
    /// It is not `Unpin`: a small handler future is stored in it rather than
    /// boxed, so it is polled pinned (`Box::pin` or `std::pin::pin!` when a
    /// combinator asks for `Unpin`).
    #[must_use = "futures do nothing unless polled"]
    #[derive(Debug)]
    pub struct ResponseFuture {
        #[pin]
        inner: Dispatched,
        // `HANDLER`, then `RENDERING` once the handler panicked and `inner`
        // renders its 500, then `DONE`.
        stage: u8,
    }
}

impl Future for ResponseFuture {
    type Output = Result<Response, Infallible>;

    #[inline(never)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut inner = this.inner;
        if *this.stage != HANDLER {
            return poll_rendering(inner, this.stage, cx);
        }
        // A panicking handler is answered 500; the engine never sees the
        // panic, so the connection and its worker go on.
        match std::panic::catch_unwind(AssertUnwindSafe(|| inner.as_mut().poll_output(cx))) {
            Ok(poll) => poll,
            Err(payload) => {
                *this.stage = RENDERING;
                inner.set(panicked(&*payload));
                poll_rendering(inner, this.stage, cx)
            }
        }
    }
}

/// Polls the rendering of a panic's 500; a panic there is answered with a
/// plain 500.
#[cold]
#[inline(never)]
fn poll_rendering(
    inner: Pin<&mut Dispatched>,
    stage: &mut u8,
    cx: &mut Context<'_>,
) -> Poll<Result<Response, Infallible>> {
    if *stage == DONE {
        return Poll::Pending;
    }
    match std::panic::catch_unwind(AssertUnwindSafe(move || inner.poll_output(cx))) {
        Ok(poll) => poll,
        Err(_) => {
            *stage = DONE;
            Poll::Ready(Ok(panicked_again()))
        }
    }
}

/// [`ResponseFuture`]'s stages.
const HANDLER: u8 = 0;
const RENDERING: u8 = 1;
const DONE: u8 = 2;

impl ResponseFuture {
    fn new(inner: Dispatched) -> Self {
        ResponseFuture {
            inner,
            stage: HANDLER,
        }
    }
}

/// A route chosen for a request.
struct Found {
    route: usize,
    params: RawParams,
    /// A `HEAD` request answered by a `GET` route: drop the body.
    head_via_get: bool,
}

// ===== impl AppConn =====

impl AppConn {
    /// Answers one request from a server: the body of `App`'s
    /// `Service::call`.
    #[inline]
    pub(crate) fn call<B>(self: &Arc<Self>, req: http::Request<B>) -> ResponseFuture
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let req = Request::from_http(req, self.clone());
        // A handler or middleware that panics before returning its future
        // is answered like one whose future panics.
        match std::panic::catch_unwind(AssertUnwindSafe(move || self.dispatch(req))) {
            Ok(inner) => ResponseFuture::new(inner),
            Err(payload) => ResponseFuture {
                inner: panicked(&*payload),
                stage: RENDERING,
            },
        }
    }

    #[inline]
    fn dispatch(&self, req: Request) -> Dispatched {
        let shared = &*self.shared;
        // The common case, a fully static rule whose chain answers, in
        // line: it is what `run_app` and `dispatch` would choose.
        if shared.middleware.is_empty() && !shared.has_finish() {
            if let Some(route) = shared.static_route(req.method(), req.path()) {
                return shared.run_static_route(route, req);
            }
        }
        shared.run_app(0, req)
    }
}

// ===== impl Shared =====

impl Shared {
    pub(crate) fn run_app(&self, idx: usize, req: Request) -> Dispatched {
        match self.middleware.get(idx) {
            Some(middleware) => middleware(req, Next::new(Pos::App(idx + 1))),
            None if self.has_finish() => self.dispatch_and_finish(req),
            None => self.dispatch(req, 0),
        }
    }

    /// Whether responses go through status handlers or problem+json
    /// rendering after routing.
    #[inline]
    fn has_finish(&self) -> bool {
        !self.status.is_empty() || self.problem
    }

    /// Routing, then the status handlers and problem+json rendering: the
    /// innermost step of the app middleware.
    #[inline(never)]
    fn dispatch_and_finish(&self, req: Request) -> Dispatched {
        let conn = req.app_conn().clone();
        let fut = self.dispatch(req, 0).into_next();
        NextFuture::boxed(Box::pin(async move {
            let shared = &conn.shared;
            status::apply(&shared.status, shared.problem, fut.await).await
        }))
        .into()
    }

    #[inline]
    pub(crate) fn run_route(
        &self,
        route: usize,
        step: usize,
        nth: usize,
        req: Request,
    ) -> Dispatched {
        match self.routes[route].chain.get(step) {
            Some(handler) => {
                let next = Next::new(Pos::Route {
                    route,
                    step: step + 1,
                    nth,
                });
                handler(req, next)
            }
            // Past the end of the chain: on to the next matching route.
            None => self.dispatch(req, nth + 1),
        }
    }

    /// Runs the chain of `route`, the best match of a fully static rule.
    #[inline]
    fn run_static_route(&self, route: usize, mut req: Request) -> Dispatched {
        let Some(found) = self.routes.get(route) else {
            return NextFuture::status(StatusCode::NOT_FOUND).into();
        };
        req.set_static_route(route, found.body_limit.unwrap_or(self.body_limit));
        match found.chain.first() {
            Some(handler) => handler(
                req,
                Next::new(Pos::Route {
                    route,
                    step: 1,
                    nth: 0,
                }),
            ),
            None => self.dispatch(req, 1),
        }
    }

    /// Routes `req` to its `nth` matching route (0 is the best match).
    fn dispatch(&self, req: Request, nth: usize) -> Dispatched {
        if nth == 0 {
            if let Some(route) = self.exact_route(req.method(), req.path()) {
                return self.run_static_route(route, req);
            }
        }
        let mut req = req;
        let Some(found) = self.lookup(req.method(), req.path(), nth) else {
            // No rule matches `*` (rules start with `/`), so it is only
            // looked at when routing found nothing.
            if req.path() == "*" {
                return self.asterisk(req);
            }
            return if nth == 0 {
                self.no_route(req)
            } else {
                NextFuture::status(StatusCode::NOT_FOUND).into()
            };
        };
        let route = &self.routes[found.route];
        let limit = route.body_limit.unwrap_or(self.body_limit);
        req.set_route(found.route, &route.rule.names, found.params, limit);
        let fut = self.run_route(found.route, 0, nth, req);
        if found.head_via_get {
            // RFC 9110 §9.3.2: HEAD is GET without the content.
            let fut = fut.into_next();
            NextFuture::boxed(Box::pin(async move { strip_body(fut.await) })).into()
        } else {
            fut
        }
    }

    /// The route of a fully static rule that answers a standard method
    /// but HEAD: the best match, as [`exact_route`](Shared::exact_route)
    /// finds it, from a table.
    #[inline]
    fn static_route(&self, method: &Method, path: &str) -> Option<usize> {
        let method = standard_index(method)?;
        let statics = self.statics.get(self.exact.index(path)?)?;
        match statics.0.get(method) {
            Some(&route) if route != StaticRoutes::NONE => Some(route as usize),
            _ => None,
        }
    }

    /// The best match among the fully static rules, for any method but
    /// HEAD: when one takes the method, it is the route the walk would
    /// visit first.
    #[inline]
    fn exact_route(&self, method: &Method, path: &str) -> Option<usize> {
        if *method == Method::HEAD {
            return None;
        }
        self.exact
            .get(path)
            .iter()
            .copied()
            .find(|&route| self.routes[route].methods.contains(method))
    }

    /// Finds the `nth` matching route; for `nth == 0` after
    /// [`exact_route`](Shared::exact_route) found none.
    fn lookup(&self, method: &Method, path: &str, nth: usize) -> Option<Found> {
        if *method != Method::HEAD {
            if nth == 0 {
                let found = self
                    .router
                    .find(path, |id| self.routes[*id].methods.contains(method))?;
                let (route, params) = found.into_raw();
                return Some(Found {
                    route: *route,
                    params,
                    head_via_get: false,
                });
            }
            return self.nth(path, nth, |m| m.contains(method), false);
        }
        // HEAD: routes for HEAD itself first, then GET routes.
        let explicit = self.count(path, |m| m.contains(&Method::HEAD));
        if nth < explicit {
            return self.nth(path, nth, |m| m.contains(&Method::HEAD), false);
        }
        let via_get = |m: &MethodSet| m.contains(&Method::GET) && !m.contains(&Method::HEAD);
        self.nth(path, nth - explicit, via_get, true)
    }

    fn nth(
        &self,
        path: &str,
        mut nth: usize,
        accept: impl Fn(&MethodSet) -> bool,
        head_via_get: bool,
    ) -> Option<Found> {
        let mut found = None;
        self.router.for_each_match(path, |m| {
            if !accept(&self.routes[*m.value()].methods) {
                return ControlFlow::Continue(());
            }
            if nth > 0 {
                nth -= 1;
                return ControlFlow::Continue(());
            }
            let (route, params) = m.into_raw();
            found = Some(Found {
                route: *route,
                params,
                head_via_get,
            });
            ControlFlow::Break(())
        });
        found
    }

    fn count(&self, path: &str, accept: impl Fn(&MethodSet) -> bool) -> usize {
        let mut count = 0;
        self.router.for_each_match(path, |m| {
            count += usize::from(accept(&self.routes[*m.value()].methods));
            ControlFlow::Continue(())
        });
        count
    }

    /// No route takes this method: 404 (or what the trailing-slash policy
    /// says), or 405 / automatic OPTIONS when the path matches routes for
    /// other methods.
    fn no_route(&self, req: Request) -> Dispatched {
        let (method, path) = (req.method(), req.path());
        let mut allowed = MethodSet::NONE;
        self.router.for_each_match(path, |m| {
            allowed |= self.routes[*m.value()].methods.clone();
            ControlFlow::Continue(())
        });
        if allowed.is_empty() {
            return self.trailing_slash(req);
        }
        let status = if *method == Method::OPTIONS {
            // RFC 9110 §9.3.7: describe the resource's communication options.
            StatusCode::OK
        } else {
            // RFC 9110 §15.5.6: 405 must list the allowed methods.
            StatusCode::METHOD_NOT_ALLOWED
        };
        NextFuture::ready(with_allow(status, allowed)).into()
    }

    /// A path that matches no route: when the same path with or without a
    /// trailing slash matches one, that route's policy decides.
    #[inline(never)]
    fn trailing_slash(&self, mut req: Request) -> Dispatched {
        let path = req.path();
        let alt = if path.is_empty() || path == "/" {
            None
        } else if let Some(trimmed) = path.strip_suffix('/') {
            Some(trimmed.to_owned())
        } else {
            Some(format!("{path}/"))
        };
        let Some(alt) = alt else {
            return NextFuture::status(StatusCode::NOT_FOUND).into();
        };
        let Some(found) = self.router.at(&alt) else {
            return NextFuture::status(StatusCode::NOT_FOUND).into();
        };
        let route = &self.routes[*found.value()];
        let target = match req.uri().query() {
            Some(query) => format!("{alt}?{query}"),
            None => alt,
        };
        match route.trailing_slash.unwrap_or(self.trailing_slash) {
            TrailingSlash::Strict => NextFuture::status(StatusCode::NOT_FOUND).into(),
            TrailingSlash::Redirect => {
                // RFC 9110 §15.4.9: 308 keeps the method and the body.
                let mut res = crate::response::status(StatusCode::PERMANENT_REDIRECT);
                if let Ok(location) = HeaderValue::try_from(target) {
                    res.headers_mut().insert(header::LOCATION, location);
                }
                NextFuture::ready(res).into()
            }
            TrailingSlash::Ignore => {
                let mut parts = req.uri().clone().into_parts();
                match http::uri::PathAndQuery::try_from(target) {
                    Ok(target) => parts.path_and_query = Some(target),
                    Err(_) => return NextFuture::status(StatusCode::NOT_FOUND).into(),
                }
                match http::Uri::from_parts(parts) {
                    Ok(uri) => *req.uri_mut() = uri,
                    Err(_) => return NextFuture::status(StatusCode::NOT_FOUND).into(),
                }
                self.dispatch(req, 0)
            }
        }
    }

    /// `OPTIONS *` (RFC 9110 §9.3.7): the server as a whole.
    fn asterisk(&self, req: Request) -> Dispatched {
        if *req.method() != Method::OPTIONS {
            return NextFuture::status(StatusCode::BAD_REQUEST).into();
        }
        if let Some(handler) = &self.asterisk {
            return handler(req, Next::new(Pos::End));
        }
        let mut allowed = MethodSet::NONE;
        for route in &self.routes {
            allowed |= route.methods.clone();
        }
        NextFuture::ready(with_allow(StatusCode::OK, allowed)).into()
    }
}

fn with_allow(status: StatusCode, mut allowed: MethodSet) -> Response {
    if allowed.is_any() {
        allowed = MethodSet::ALL;
    }
    if allowed.contains(&Method::GET) {
        allowed |= MethodSet::HEAD;
    }
    allowed |= MethodSet::OPTIONS;
    let mut res = crate::response::status(status);
    if let Ok(value) = HeaderValue::try_from(allowed.to_allow()) {
        res.headers_mut().insert(header::ALLOW, value);
    }
    res
}

/// Drops the body of a response to HEAD, keeping its length when known.
fn strip_body(mut res: Response) -> Response {
    if !res.headers().contains_key(header::CONTENT_LENGTH) {
        if let Some(len) = res.body().size_hint().exact() {
            res.headers_mut()
                .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        }
    }
    *res.body_mut() = Body::empty();
    res
}
