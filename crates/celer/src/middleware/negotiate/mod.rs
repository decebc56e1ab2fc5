//! Content negotiation middleware (RFC 9110 §12): a route offers
//! representations, the best acceptable one is chosen from the request's
//! `Accept*` fields, and the handler reads the choice.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! use celer::middleware::negotiate::{Negotiate, Negotiated};
//! use celer::{App, Request};
//! use tower::ServiceExt;
//!
//! let mut app = App::new();
//! // Browsers get HTML; the route falls through when HTML is not acceptable.
//! app.get("/", |_req: Request| async { celer::response::html("<p>hi</p>") })
//!     .middleware(Negotiate::new().media_types(["text/html"]));
//! // JSON or plain text, in the client's order of preference; nothing
//! // acceptable is answered `406` listing both.
//! app.get("/", |req: Request| async move {
//!     let chosen = req.extensions().get::<Negotiated>().and_then(|n| n.media_type());
//!     match chosen {
//!         Some("application/json") => celer::response::json(&"hi"),
//!         _ => celer::response::text("hi"),
//!     }
//! })
//! .middleware(Negotiate::new().media_types(["application/json", "text/plain"]).final_route());
//!
//! let req = http::Request::get("/").header("accept", "text/plain, application/json;q=0.9")
//!     .body(celer::Body::empty()).unwrap();
//! let res = app.clone().oneshot(req).await.unwrap();
//! assert_eq!(res.headers()["content-type"], "text/plain; charset=utf-8");
//! assert_eq!(res.headers()["vary"], "Accept");
//!
//! let req = http::Request::get("/").header("accept", "image/png")
//!     .body(celer::Body::empty()).unwrap();
//! let res = app.oneshot(req).await.unwrap();
//! assert_eq!(res.status(), 406);
//! # });
//! ```
//!
//! The parser is [`Accept`]; it is public for handlers that negotiate by
//! themselves.

mod accept;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use http::header::{CONTENT_LANGUAGE, CONTENT_TYPE, HeaderValue};
use http::{HeaderMap, StatusCode};

use crate::middleware::append_vary;
use crate::{Handler, Next, Request, Response};

pub use self::accept::{Accept, Field, MAX_ACCEPT_ELEMENTS, MAX_ACCEPT_PARAMS, Quality};

/// Content negotiation middleware: offers representations along up to four
/// dimensions and picks the best for each request.
///
/// When every dimension has an acceptable offer, the choice goes into the
/// request's extensions as [`Negotiated`], the rest of the chain runs, and
/// the response gets `Content-Type` (with the chosen charset) and
/// `Content-Language` when it has none. When some dimension has none, the
/// request goes on to the next matching route ([`Next::next_route`]), or,
/// after [`final_route`](Negotiate::final_route), is answered
/// `406 Not Acceptable` with the offers listed in a plain-text body. Either
/// way the response's `Vary` names every field that was consulted
/// (RFC 9110 §12.5.5).
#[derive(Clone)]
pub struct Negotiate {
    config: Arc<Config>,
}

#[derive(Clone, Default)]
struct Config {
    /// Offers per field, in [`Field::ALL`] order; the server's preference
    /// is the order within each list.
    offers: [Vec<Box<str>>; 4],
    final_route: bool,
}

/// The representation chosen by [`Negotiate`], a request extension.
///
/// A dimension that the route did not offer is `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Negotiated {
    chosen: [Option<Box<str>>; 4],
}

// ===== impl Negotiate =====

impl Negotiate {
    /// Negotiation that offers nothing yet (and so accepts every request).
    pub fn new() -> Negotiate {
        Negotiate {
            config: Arc::new(Config::default()),
        }
    }

    fn offer<I, S>(mut self, field: Field, offers: I) -> Negotiate
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let config = Arc::make_mut(&mut self.config);
        config.offers[field_idx(field)].extend(offers.into_iter().map(|s| s.into().into()));
        self
    }

    /// Offers media types (`text/html`, `application/json`), most
    /// preferred first; matched against `Accept`.
    pub fn media_types<I: IntoIterator<Item = S>, S: Into<String>>(self, offers: I) -> Self {
        self.offer(Field::MediaType, offers)
    }

    /// Offers charsets (`utf-8`), matched against `Accept-Charset`.
    pub fn charsets<I: IntoIterator<Item = S>, S: Into<String>>(self, offers: I) -> Self {
        self.offer(Field::Charset, offers)
    }

    /// Offers languages (`en-US`, `fr`), matched against `Accept-Language`
    /// by basic filtering (a range `en` matches `en-US`).
    pub fn languages<I: IntoIterator<Item = S>, S: Into<String>>(self, offers: I) -> Self {
        self.offer(Field::Language, offers)
    }

    /// Offers content codings (`br`, `gzip`, `identity`), for handlers that
    /// hold precompressed variants; matched against `Accept-Encoding`.
    /// For compression on the fly use
    /// [`Compression`](crate::middleware::compression::Compression).
    pub fn encodings<I: IntoIterator<Item = S>, S: Into<String>>(self, offers: I) -> Self {
        self.offer(Field::Encoding, offers)
    }

    /// Answers `406 Not Acceptable` when nothing offered is acceptable,
    /// instead of going on to the next matching route.
    ///
    /// Default is to go on to the next route.
    pub fn final_route(mut self) -> Self {
        Arc::make_mut(&mut self.config).final_route = true;
        self
    }

    /// Chooses for `headers`: `Ok` with the choice, or `Err` with the first
    /// field that has no acceptable offer.
    fn choose(&self, headers: &HeaderMap) -> Result<Negotiated, Field> {
        let mut chosen = Negotiated::default();
        for field in self.offered() {
            let offers = &self.config.offers[field_idx(field)];
            let accept = Accept::from_headers(field, headers);
            match accept.best(offers) {
                Some(idx) => chosen.chosen[field_idx(field)] = Some(offers[idx].clone()),
                None => return Err(field),
            }
        }
        Ok(chosen)
    }

    /// The fields with offers: every one of them can change the outcome,
    /// so every one goes into `Vary`, whichever decided this request.
    fn offered(&self) -> impl Iterator<Item = Field> + '_ {
        Field::ALL
            .into_iter()
            .filter(|field| !self.config.offers[field_idx(*field)].is_empty())
    }

    fn not_acceptable(&self) -> Response {
        let mut text = String::from("not acceptable; available:\n");
        for field in Field::ALL {
            let offers = &self.config.offers[field_idx(field)];
            if !offers.is_empty() {
                let list: Vec<&str> = offers.iter().map(|s| &**s).collect();
                text.push_str(&format!("{}: {}\n", field.vary_name(), list.join(", ")));
            }
        }
        let mut res = crate::response::text(text);
        *res.status_mut() = StatusCode::NOT_ACCEPTABLE;
        res
    }

    async fn run(self, mut req: Request, next: Next) -> Response {
        let mut res = match self.choose(req.headers()) {
            Ok(chosen) => {
                req.extensions_mut().insert(chosen.clone());
                let mut res = next.run(req).await;
                chosen.describe(res.headers_mut());
                res
            }
            Err(_) if self.config.final_route => self.not_acceptable(),
            Err(_) => next.next_route().run(req).await,
        };
        for field in self.offered() {
            append_vary(res.headers_mut(), field.vary_name());
        }
        res
    }
}

impl Default for Negotiate {
    fn default() -> Self {
        Negotiate::new()
    }
}

impl fmt::Debug for Negotiate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Negotiate")
            .field("offers", &self.config.offers)
            .field("final_route", &self.config.final_route)
            .finish()
    }
}

impl crate::handler::sealed::Dispatch<(Request, Next)> for Negotiate {}

impl Handler<(Request, Next)> for Negotiate {
    fn call(&self, req: Request, next: Next) -> BoxFuture<'static, Response> {
        Box::pin(self.clone().run(req, next))
    }
}

// ===== impl Negotiated =====

impl Negotiated {
    /// The chosen media type, as offered.
    pub fn media_type(&self) -> Option<&str> {
        self.get(Field::MediaType)
    }

    /// The chosen charset, as offered.
    pub fn charset(&self) -> Option<&str> {
        self.get(Field::Charset)
    }

    /// The chosen language, as offered.
    pub fn language(&self) -> Option<&str> {
        self.get(Field::Language)
    }

    /// The chosen content coding, as offered.
    pub fn encoding(&self) -> Option<&str> {
        self.get(Field::Encoding)
    }

    /// The choice along `field`.
    pub fn get(&self, field: Field) -> Option<&str> {
        self.chosen[field_idx(field)].as_deref()
    }

    /// Sets `Content-Type` and `Content-Language` from the choice where the
    /// response has none.
    fn describe(&self, headers: &mut HeaderMap) {
        if let (Some(media), false) = (self.media_type(), headers.contains_key(CONTENT_TYPE)) {
            let value = match self.charset() {
                Some(charset) => format!("{media}; charset={charset}"),
                None => media.to_owned(),
            };
            if let Ok(value) = HeaderValue::try_from(value) {
                headers.insert(CONTENT_TYPE, value);
            }
        }
        if let (Some(lang), false) = (self.language(), headers.contains_key(CONTENT_LANGUAGE)) {
            if let Ok(value) = HeaderValue::try_from(lang) {
                headers.insert(CONTENT_LANGUAGE, value);
            }
        }
    }
}

/// The choice as an extractor: `req.extract::<Negotiated>()`. A route
/// without [`Negotiate`] in front of it is a server mistake, answered
/// `500 Internal Server Error` (and logged).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use celer::middleware::negotiate::{Negotiate, Negotiated};
/// use celer::{App, Request};
/// use tower::ServiceExt;
///
/// let mut app = App::new();
/// app.get("/", |mut req: Request| async move {
///     let chosen = req.extract::<Negotiated>().await?;
///     Ok::<_, http::StatusCode>(chosen.language().unwrap_or_default().to_owned())
/// })
/// .middleware(Negotiate::new().languages(["en", "de"]));
///
/// let req = http::Request::get("/").header("accept-language", "de-CH, de;q=0.9")
///     .body(celer::Body::empty()).unwrap();
/// let res = app.oneshot(req).await.unwrap();
/// assert_eq!(&res.into_body().collect_bytes().await.unwrap()[..], b"de");
/// # });
/// ```
impl crate::extract::FromRequest for Negotiated {
    type Rejection = StatusCode;

    async fn from_request(req: &mut Request) -> Result<Self, StatusCode> {
        match req.extensions().get::<Negotiated>() {
            Some(chosen) => Ok(chosen.clone()),
            None => {
                tracing::error!(
                    target: "celer::rejection",
                    path = req.path(),
                    "Negotiated extracted on a route without Negotiate"
                );
                Err(StatusCode::INTERNAL_SERVER_ERROR)
            }
        }
    }
}

fn field_idx(field: Field) -> usize {
    match field {
        Field::MediaType => 0,
        Field::Charset => 1,
        Field::Language => 2,
        Field::Encoding => 3,
    }
}
