//! The responses both sites send, so they answer alike.
//!
//! A successful answer is built from a [`Representation`]: the metadata of
//! what would be sent plus its body. Conditional requests, ranges and ETags
//! (a later step) slot in at [`representation`], which is the one place that
//! sees both the request method and that metadata.

use std::time::SystemTime;

use http::header::{self, HeaderValue};
use http::{Method, Response, StatusCode};

use crate::body::Body;
use crate::common::path::Refusal;

/// The methods the sites answer, named in `Allow` on a 405.
const ALLOW: &str = "GET, HEAD";

/// The content type of status answers.
const TEXT: &str = "text/plain; charset=utf-8";

/// A method the sites serve. RFC 9110 §9.3.2: HEAD is GET without the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Read {
    Get,
    Head,
}

impl Read {
    /// GET or HEAD; anything else is answered 405 (RFC 9110 §15.5.6).
    pub(crate) fn from_method(method: &Method) -> Result<Read, Answer> {
        match *method {
            Method::GET => Ok(Read::Get),
            Method::HEAD => Ok(Read::Head),
            _ => Err(Answer::MethodNotAllowed),
        }
    }
}

/// An answer other than 200, decided before or instead of reading a file.
/// Small, so it can travel in `Err` cheaply; [`Answer::into_response`]
/// builds the response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// A short plain-text answer: "404 Not Found".
    Status(StatusCode),
    /// 405 with `Allow: GET, HEAD`.
    MethodNotAllowed,
    /// 301 to the directory form of a path (`/docs` → `/docs/`), so
    /// relative links inside its index resolve against the directory.
    ToDirectory(String),
}

impl Answer {
    pub(crate) const NOT_FOUND: Answer = Answer::Status(StatusCode::NOT_FOUND);
    pub(crate) const FORBIDDEN: Answer = Answer::Status(StatusCode::FORBIDDEN);

    pub(crate) fn into_response(self) -> Response<Body> {
        match self {
            Answer::Status(code) => status(code),
            Answer::MethodNotAllowed => {
                let mut res = status(StatusCode::METHOD_NOT_ALLOWED);
                res.headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static(ALLOW));
                res
            }
            Answer::ToDirectory(href) => {
                let mut res = status(StatusCode::MOVED_PERMANENTLY);
                if let Ok(location) = HeaderValue::try_from(href) {
                    res.headers_mut().insert(header::LOCATION, location);
                }
                res
            }
        }
    }
}

impl From<Refusal> for Answer {
    fn from(refusal: Refusal) -> Answer {
        match refusal {
            Refusal::Malformed => Answer::Status(StatusCode::BAD_REQUEST),
            Refusal::Hidden => Answer::FORBIDDEN,
        }
    }
}

/// What a successful GET would send.
#[derive(Debug)]
pub(crate) struct Representation {
    pub(crate) content_type: &'static str,
    pub(crate) len: u64,
    pub(crate) modified: Option<SystemTime>,
    pub(crate) body: Body,
}

/// 200 with the representation; for HEAD the same headers and no body.
pub(crate) fn representation(read: Read, rep: Representation) -> Response<Body> {
    let body = match read {
        Read::Get => rep.body,
        // The engine sends no body for HEAD; dropping ours here also closes
        // the file at once.
        Read::Head => Body::empty(),
    };
    let mut res = Response::new(body);
    let headers = res.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(rep.content_type),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(rep.len));
    if let Some(modified) = rep.modified {
        let date = httpdate::fmt_http_date(modified);
        if let Ok(value) = HeaderValue::try_from(date) {
            headers.insert(header::LAST_MODIFIED, value);
        }
    }
    res
}

/// A short plain-text answer with `status`: "404 Not Found".
fn status(status: StatusCode) -> Response<Body> {
    let text = format!(
        "{} {}\n",
        status.as_str(),
        status.canonical_reason().unwrap_or("")
    );
    let len = text.len() as u64;
    let mut res = Response::new(Body::full(text));
    *res.status_mut() = status;
    res.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(TEXT));
    res.headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    res
}
