//! [`Hello`]: the engines' unit tests' service.

use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use tower_service::Service;

use crate::body::Incoming;

/// Answers every request at once: `200`, body `hi`.
#[derive(Clone)]
pub(crate) struct Hello;

impl Service<Request<Incoming>> for Hello {
    type Response = Response<http_body_util::Full<Bytes>>;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<Incoming>) -> Self::Future {
        std::future::ready(Ok(Response::new(http_body_util::Full::new(
            Bytes::from_static(b"hi"),
        ))))
    }
}
