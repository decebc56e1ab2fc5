//! CORS (the Fetch standard's "CORS protocol", WHATWG Fetch §3.2): a
//! middleware that answers preflight requests and adds the
//! `Access-Control-*` fields to the responses of simple ones.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use std::time::Duration;
//! use celer::cors::Cors;
//! use celer::http::Method;
//!
//! let mut app = celer::App::new();
//! app.middleware(
//!     Cors::new()
//!         .allow_origins(["https://app.example"])
//!         .allow_methods([Method::GET, Method::POST])
//!         .allow_headers(["content-type"])
//!         .allow_credentials(true)
//!         .max_age(Duration::from_secs(600))
//!         .into_middleware(),
//! );
//! app.get("/api", |_req: celer::Request| async { "data" });
//! let client = celer::test::TestClient::new(app);
//!
//! let res = client.get("/api").header("origin", "https://app.example").await;
//! assert_eq!(res.header("access-control-allow-origin"), Some("https://app.example"));
//! assert_eq!(res.header("access-control-allow-credentials"), Some("true"));
//!
//! let res = client
//!     .request(Method::OPTIONS, "/api")
//!     .header("origin", "https://app.example")
//!     .header("access-control-request-method", "POST")
//!     .await;
//! assert_eq!(res.header("access-control-allow-methods"), Some("GET,POST"));
//! assert_eq!(res.header("access-control-max-age"), Some("600"));
//!
//! // Another origin gets no grant: the browser refuses the response.
//! let res = client.get("/api").header("origin", "https://evil.example").await;
//! assert_eq!(res.header("access-control-allow-origin"), None);
//! # });
//! ```
//!
//! The answers follow tower-http's `CorsLayer` on the same configuration
//! (tests/it/cors.rs compares them over the wire), except that a request
//! from an origin that is not allowed gets no `Access-Control-*` field at
//! all, where tower-http still sends `Access-Control-Allow-Credentials`
//! and, on preflights, the allowed methods and headers.

use std::sync::Arc;
use std::time::Duration;

use http::header::{self, HeaderName, HeaderValue};
use http::{Method, StatusCode};

use crate::handler::Handler;
use crate::response::IntoResponse;
use crate::{Next, Request, Response};

#[derive(Debug, Clone)]
enum Origins {
    Any,
    List(Vec<HeaderValue>),
}

#[derive(Debug, Clone)]
enum Headers {
    Any,
    List(Vec<HeaderName>),
}

/// A CORS configuration; [`Cors::into_middleware`] makes the middleware.
///
/// The default allows no origin, the methods `GET`, `HEAD` and `POST`, no
/// request header beyond the CORS-safelisted ones, no credentials, and sets
/// no `Access-Control-Max-Age`.
#[derive(Debug, Clone)]
pub struct Cors {
    origins: Origins,
    methods: Vec<Method>,
    headers: Headers,
    expose: Vec<HeaderName>,
    credentials: bool,
    max_age: Option<Duration>,
}

impl Default for Cors {
    fn default() -> Self {
        Cors::new()
    }
}

impl Cors {
    /// The default configuration (see [`Cors`]).
    pub fn new() -> Cors {
        Cors {
            origins: Origins::List(Vec::new()),
            methods: vec![Method::GET, Method::HEAD, Method::POST],
            headers: Headers::List(Vec::new()),
            expose: Vec::new(),
            credentials: false,
            max_age: None,
        }
    }

    /// Allows these origins (`scheme://host[:port]`, compared byte for
    /// byte with the request's `Origin`). Panics on a value that is not a
    /// valid field value.
    pub fn allow_origins<I, S>(mut self, origins: I) -> Cors
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let list = origins
            .into_iter()
            .map(|o| HeaderValue::from_str(o.as_ref()).expect("an origin is a valid field value"))
            .collect();
        self.origins = Origins::List(list);
        self
    }

    /// Allows every origin: `Access-Control-Allow-Origin: *`. Cannot be
    /// combined with credentials (Fetch §3.2.5).
    pub fn allow_any_origin(mut self) -> Cors {
        self.origins = Origins::Any;
        self
    }

    /// The methods a preflight grants (`Access-Control-Allow-Methods`).
    pub fn allow_methods(mut self, methods: impl IntoIterator<Item = Method>) -> Cors {
        self.methods = methods.into_iter().collect();
        self
    }

    /// The request headers a preflight grants
    /// (`Access-Control-Allow-Headers`). Panics on an invalid name.
    pub fn allow_headers<I, S>(mut self, headers: I) -> Cors
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.headers = Headers::List(names(headers));
        self
    }

    /// Grants every request header: `Access-Control-Allow-Headers: *`.
    /// Cannot be combined with credentials.
    pub fn allow_any_header(mut self) -> Cors {
        self.headers = Headers::Any;
        self
    }

    /// The response headers scripts may read
    /// (`Access-Control-Expose-Headers`). Panics on an invalid name.
    pub fn expose_headers<I, S>(mut self, headers: I) -> Cors
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.expose = names(headers);
        self
    }

    /// Whether requests with credentials (cookies, HTTP authentication)
    /// may read responses: `Access-Control-Allow-Credentials: true`.
    pub fn allow_credentials(mut self, allow: bool) -> Cors {
        self.credentials = allow;
        self
    }

    /// How long a browser may cache a preflight's answer
    /// (`Access-Control-Max-Age`, whole seconds).
    pub fn max_age(mut self, max_age: Duration) -> Cors {
        self.max_age = Some(max_age);
        self
    }

    /// The middleware. Panics when credentials are allowed together with
    /// any origin or any header: browsers refuse `*` with credentials
    /// (Fetch §3.2.5), so the configuration could only fail at run time.
    ///
    /// ```should_panic
    /// celer::cors::Cors::new().allow_any_origin().allow_credentials(true).into_middleware();
    /// ```
    pub fn into_middleware(self) -> impl Handler<(Request, Next)> + Clone {
        if self.credentials {
            assert!(
                !matches!(self.origins, Origins::Any),
                "CORS: credentials cannot be allowed with any origin (`*`); list the origins"
            );
            assert!(
                !matches!(self.headers, Headers::Any),
                "CORS: credentials cannot be allowed with any header (`*`); list the headers"
            );
        }
        let cors = Arc::new(Compiled::new(self));
        move |req: Request, next: Next| {
            let cors = cors.clone();
            async move { cors.handle(req, next).await }
        }
    }
}

fn names<I, S>(headers: I) -> Vec<HeaderName>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    headers
        .into_iter()
        .map(|h| HeaderName::from_bytes(h.as_ref().as_bytes()).expect("a valid header name"))
        .collect()
}

fn join<T: AsRef<str>>(items: impl IntoIterator<Item = T>) -> Option<HeaderValue> {
    let joined = items
        .into_iter()
        .map(|i| i.as_ref().to_owned())
        .collect::<Vec<_>>()
        .join(",");
    (!joined.is_empty()).then(|| HeaderValue::from_str(&joined).expect("tokens joined by commas"))
}

/// The configuration with its field values made once.
struct Compiled {
    origins: Origins,
    methods: Option<HeaderValue>,
    headers: Option<HeaderValue>,
    expose: Option<HeaderValue>,
    credentials: bool,
    max_age: Option<HeaderValue>,
}

/// `Vary` on every answer: whether and how it is granted depends on these
/// request fields (Fetch §3.2.5, "CORS protocol and HTTP caches").
const VARY: &str = "origin, access-control-request-method, access-control-request-headers";

impl Compiled {
    fn new(cors: Cors) -> Compiled {
        Compiled {
            methods: join(cors.methods.iter().map(Method::as_str)),
            headers: match &cors.headers {
                Headers::Any => Some(HeaderValue::from_static("*")),
                Headers::List(list) => join(list.iter().map(HeaderName::as_str)),
            },
            expose: join(cors.expose.iter().map(HeaderName::as_str)),
            max_age: cors.max_age.map(|d| HeaderValue::from(d.as_secs())),
            credentials: cors.credentials,
            origins: cors.origins,
        }
    }

    /// The `Access-Control-Allow-Origin` value for this request's
    /// `Origin`, or `None` when the origin is not allowed.
    fn allow_origin(&self, origin: Option<&HeaderValue>) -> Option<HeaderValue> {
        match &self.origins {
            Origins::Any => Some(HeaderValue::from_static("*")),
            Origins::List(list) => {
                let origin = origin?;
                list.iter().any(|o| o == origin).then(|| origin.clone())
            }
        }
    }

    async fn handle(&self, req: Request, next: Next) -> Response {
        let origin = req.headers().get(header::ORIGIN).cloned();
        let allow = self.allow_origin(origin.as_ref());
        // Fetch §3.2.2: a preflight is an OPTIONS request with
        // `Access-Control-Request-Method`.
        let preflight = req.method() == Method::OPTIONS
            && req
                .headers()
                .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
        let mut res = if preflight {
            StatusCode::OK.into_response()
        } else {
            next.run(req).await
        };
        let fields = res.headers_mut();
        fields.append(header::VARY, HeaderValue::from_static(VARY));
        let Some(allow) = allow else {
            return res;
        };
        fields.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, allow);
        if self.credentials {
            fields.insert(
                header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
        }
        if preflight {
            if let Some(methods) = &self.methods {
                fields.insert(header::ACCESS_CONTROL_ALLOW_METHODS, methods.clone());
            }
            if let Some(headers) = &self.headers {
                fields.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, headers.clone());
            }
            if let Some(max_age) = &self.max_age {
                fields.insert(header::ACCESS_CONTROL_MAX_AGE, max_age.clone());
            }
        } else if let Some(expose) = &self.expose {
            fields.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, expose.clone());
        }
        res
    }
}
