//! The future the sites' services return: [`ResponseFuture`].

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Response;

use crate::body::Body;

/// Resolves to a site's response. Answers decided without IO (405, 400,
/// embedded files) are ready at once and allocate nothing.
pub struct ResponseFuture {
    inner: Inner,
}

#[expect(
    clippy::large_enum_variant,
    reason = "a ready response is kept inline so answers without IO allocate nothing"
)]
enum Inner {
    Ready(Option<Response<Body>>),
    Boxed(Pin<Box<dyn Future<Output = Response<Body>> + Send>>),
}

impl ResponseFuture {
    pub(crate) fn ready(res: Response<Body>) -> ResponseFuture {
        ResponseFuture {
            inner: Inner::Ready(Some(res)),
        }
    }

    pub(crate) fn boxed(
        fut: impl Future<Output = Response<Body>> + Send + 'static,
    ) -> ResponseFuture {
        ResponseFuture {
            inner: Inner::Boxed(Box::pin(fut)),
        }
    }
}

impl fmt::Debug for ResponseFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.inner {
            Inner::Ready(_) => "ready",
            Inner::Boxed(_) => "pending",
        };
        f.debug_tuple("ResponseFuture").field(&state).finish()
    }
}

impl Future for ResponseFuture {
    type Output = Result<Response<Body>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.get_mut().inner {
            Inner::Ready(res) => Poll::Ready(Ok(res
                .take()
                .expect("ResponseFuture polled after completion"))),
            Inner::Boxed(fut) => fut.as_mut().poll(cx).map(Ok),
        }
    }
}
