//! `App` as a `tower::Service`: dispatch, automatic HEAD, OPTIONS and 405.

use std::convert::Infallible;
use std::future::Future;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode, header};
use http_body::Body as _;

use super::{App, Shared, status};
use crate::handler::{Next, NextFuture, Pos};
use crate::request::ConnAddrs;
use crate::response::Response;
use crate::router::{MethodSet, RawParams};
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
        self.shared.call(req, ConnAddrs::default())
    }
}

/// The future of [`App`]'s `Service::call`; it never fails.
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct ResponseFuture {
    inner: NextFuture,
}

impl Future for ResponseFuture {
    type Output = Result<Response, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.inner).poll(cx).map(Ok)
    }
}

/// A route chosen for a request.
struct Found {
    route: usize,
    params: RawParams,
    /// A `HEAD` request answered by a `GET` route: drop the body.
    head_via_get: bool,
}

// ===== impl Shared =====

impl Shared {
    /// Answers one request from a server: the body of `App`'s
    /// `Service::call`, with the connection's addresses.
    pub(crate) fn call<B>(
        self: &Arc<Self>,
        req: http::Request<B>,
        addrs: ConnAddrs,
    ) -> ResponseFuture
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let req = Request::from_http(req, self.clone(), addrs);
        let inner = if self.status.is_empty() {
            self.run_app(0, req)
        } else {
            let shared = self.clone();
            NextFuture::boxed(Box::pin(async move {
                let res = shared.run_app(0, req).await;
                status::apply(&shared.status, res).await
            }))
        };
        ResponseFuture { inner }
    }

    pub(crate) fn run_app(self: &Arc<Self>, idx: usize, req: Request) -> NextFuture {
        match self.middleware.get(idx) {
            Some(middleware) => NextFuture::boxed(middleware(req, Next::new(Pos::App(idx + 1)))),
            None => self.dispatch(req, 0),
        }
    }

    pub(crate) fn run_route(
        self: &Arc<Self>,
        route: usize,
        step: usize,
        nth: usize,
        req: Request,
    ) -> NextFuture {
        match self.routes[route].chain.get(step) {
            Some(handler) => {
                let next = Next::new(Pos::Route {
                    route,
                    step: step + 1,
                    nth,
                });
                NextFuture::boxed(handler(req, next))
            }
            // Past the end of the chain: on to the next matching route.
            None => self.dispatch(req, nth + 1),
        }
    }

    /// Routes `req` to its `nth` matching route (0 is the best match).
    fn dispatch(self: &Arc<Self>, mut req: Request, nth: usize) -> NextFuture {
        let Some(found) = self.lookup(req.method(), req.path(), nth) else {
            // No rule matches `*` (rules start with `/`), so it is only
            // looked at when routing found nothing.
            if req.path() == "*" {
                return self.asterisk(req);
            }
            return if nth == 0 {
                self.no_route(req.method(), req.path())
            } else {
                NextFuture::status(StatusCode::NOT_FOUND)
            };
        };
        let route = &self.routes[found.route];
        let limit = route.body_limit.unwrap_or(self.body_limit);
        req.set_route(&route.rule.names, found.params, limit);
        let fut = self.run_route(found.route, 0, nth, req);
        if found.head_via_get {
            // RFC 9110 §9.3.2: HEAD is GET without the content.
            NextFuture::boxed(Box::pin(async move { strip_body(fut.await) }))
        } else {
            fut
        }
    }

    fn lookup(&self, method: &Method, path: &str, nth: usize) -> Option<Found> {
        if *method != Method::HEAD {
            if nth == 0 {
                // A fully static rule is the best match when it takes the
                // method; the walk would visit it first.
                for &route in self.exact.get(path) {
                    if self.routes[route].methods.contains(method) {
                        return Some(Found {
                            route,
                            params: RawParams::EMPTY,
                            head_via_get: false,
                        });
                    }
                }
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

    /// No route takes this method: 404, or 405 / automatic OPTIONS when
    /// the path matches routes for other methods.
    fn no_route(&self, method: &Method, path: &str) -> NextFuture {
        let mut allowed = MethodSet::NONE;
        self.router.for_each_match(path, |m| {
            allowed |= self.routes[*m.value()].methods.clone();
            ControlFlow::Continue(())
        });
        if allowed.is_empty() {
            return NextFuture::status(StatusCode::NOT_FOUND);
        }
        let status = if *method == Method::OPTIONS {
            // RFC 9110 §9.3.7: describe the resource's communication options.
            StatusCode::OK
        } else {
            // RFC 9110 §15.5.6: 405 must list the allowed methods.
            StatusCode::METHOD_NOT_ALLOWED
        };
        NextFuture::ready(with_allow(status, allowed))
    }

    /// `OPTIONS *` (RFC 9110 §9.3.7): the server as a whole.
    fn asterisk(self: &Arc<Self>, req: Request) -> NextFuture {
        if *req.method() != Method::OPTIONS {
            return NextFuture::status(StatusCode::BAD_REQUEST);
        }
        if let Some(handler) = &self.asterisk {
            return NextFuture::boxed(handler(req, Next::new(Pos::End)));
        }
        let mut allowed = MethodSet::NONE;
        for route in &self.routes {
            allowed |= route.methods.clone();
        }
        NextFuture::ready(with_allow(StatusCode::OK, allowed))
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
