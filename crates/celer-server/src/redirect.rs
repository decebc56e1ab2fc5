//! The plain-HTTP listener that sends every request to `https`: a
//! `308 Permanent Redirect` to the same host and target (RFC 9110 §15.4.9;
//! 308 keeps the method and body, unlike 301).

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::task::{Context, Poll};

use http::header::{self, HeaderValue};
use http::uri::Authority;
use http::{Request, Response, StatusCode};
use tower_service::Service;

use crate::body::Incoming;
use crate::common::Reject;

/// Answers every request with a 308 to `https://HOST[:PORT]/TARGET`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Redirect {
    /// The HTTPS port named in `Location`; 443 is left out.
    pub(crate) https_port: u16,
}

impl Service<Request<Incoming>> for Redirect {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = Ready<Result<Response<String>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Incoming>) -> Self::Future {
        let Some(location) = self.location(&req) else {
            return ready(Ok(Reject::new(
                StatusCode::BAD_REQUEST,
                "missing or invalid host",
            )
            .response()));
        };
        let mut res = Response::new(format!("{}\n", location.to_str().unwrap_or_default()));
        *res.status_mut() = StatusCode::PERMANENT_REDIRECT;
        let headers = res.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        headers.insert(header::LOCATION, location);
        ready(Ok(res))
    }
}

impl Redirect {
    /// `https://` + the request's host (its port replaced) + its target.
    fn location(&self, req: &Request<Incoming>) -> Option<HeaderValue> {
        // The Host field, or the authority of an absolute-form target
        // (RFC 9112 §3.2.2: the target's authority wins when both exist).
        let authority = match req.uri().authority() {
            Some(authority) => authority.clone(),
            None => req
                .headers()
                .get(header::HOST)?
                .to_str()
                .ok()?
                .parse::<Authority>()
                .ok()?,
        };
        let host = authority.host();
        if host.is_empty() {
            return None;
        }
        let target = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str())
            .filter(|p| p.starts_with('/'))
            .unwrap_or("/");
        let location = match self.https_port {
            443 => format!("https://{host}{target}"),
            port => format!("https://{host}:{port}{target}"),
        };
        HeaderValue::try_from(location).ok()
    }
}
