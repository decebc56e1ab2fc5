//! The request type handed to handlers and middleware.

mod spare;

use std::borrow::Cow;
use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Extensions, HeaderMap, Method, Uri, Version, header};
use serde::de::DeserializeOwned;

use crate::app::{AppConn, Shared};
use crate::extract::rejection::{
    BodyAlreadyTaken, BytesRejection, FormDataError, FormRejection, InvalidParam, InvalidUtf8,
    JsonDataError, JsonRejection, JsonSyntaxError, MissingFormContentType, MissingJsonContentType,
    MissingParam, MissingState, ParamRejection, ParamTypeMismatch, QueryDataError, QueryRejection,
    TextRejection,
};
use crate::extract::{FromRequest, read_limited};
use crate::router::{ParamKind, RawParams, UrlError, UrlParams, decode};
use crate::serve::ConnInfo;
use crate::{Body, BoxError};

use self::spare::InnerBox;

/// An HTTP request as seen by a handler: the `http` request plus the route's
/// parameters, the body limit and access to the app's shared state.
///
/// ```
/// use celer::Request;
///
/// async fn show(req: Request) -> String {
///     let id: i64 = req.param("id").unwrap_or(0);
///     format!("{} {} -> {id}", req.method(), req.path())
/// }
/// # let _ = show;
/// ```
pub struct Request {
    /// Everything lives behind one pointer: a request is moved through
    /// dispatch, middleware, `next` and into the handler's future, and each
    /// move is then a word instead of a memcpy of some 400 bytes. The
    /// allocation is recycled per thread (see `spare.rs`).
    inner: InnerBox,
}

struct Inner {
    http: http::Request<Body>,
    /// The app that routes this request (state, `url_for`) and the
    /// connection's addresses.
    conn: Arc<AppConn>,
    /// The parameters of the matched route, resolved against the path as it
    /// was when the route matched; `None` for a rule without any.
    params: Option<PathParams>,
    /// The limit for body extractors, set from the matched route.
    body_limit: usize,
    body_taken: bool,
    /// The id of the matched route, [`NO_ROUTE`] before routing: names
    /// the route in the log lines of a parameter mismatch or a panic.
    route: u32,
    /// The session the session middleware attached. A field rather than
    /// an extension: `http::Extensions` allocates a map (and a box for
    /// the value) on its first insert, which cost about 400 instructions
    /// a request (`bench/runs/2026-11-26-sec-overhead-2/`).
    session: Option<crate::session::Session>,
    /// The `Cookie` fields as the jar reads them (under its limits), kept
    /// by the first extraction that read them (the jar's, the session's)
    /// for the next one: one lookup a request. Cleared by `headers_mut`.
    cookies: Option<crate::cookie::CookieText>,
}

/// [`Inner::route`] before routing.
const NO_ROUTE: u32 = u32::MAX;

/// The facts of a request that came through no server of ours and carries
/// no [`ConnInfo`] extension: all unknown.
static NO_CONN: ConnInfo = ConnInfo::new(None, None);

#[derive(Clone)]
struct PathParams {
    names: Arc<[Box<str>]>,
    raw: RawParams,
}

/// What a FastCGI, SCGI or CGI front end reported of a request (set by
/// `serve` from the engine's meta-variables): the app's mount point
/// (`SCRIPT_NAME`, which `url_for` prefixes) and the client's and server's
/// addresses, which take the place of the front end's connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FrontEnd {
    pub(crate) script_name: String,
    pub(crate) remote: Option<SocketAddr>,
    pub(crate) local: Option<SocketAddr>,
    /// `HTTPS` was on: the client reached the front end over TLS.
    pub(crate) https: bool,
}

/// The client's address, when the transport knows it.
///
/// Celer's own server ([`serve`](mod@crate::serve)) hands addresses to
/// [`Request::remote_addr`] directly; other servers can insert this type into
/// the request extensions instead.
///
/// ```
/// use std::net::SocketAddr;
/// let addr: SocketAddr = "192.0.2.1:4000".parse().unwrap();
/// let mut req = celer::Request::builder().uri("/").body(()).unwrap();
/// req.extensions_mut().insert(celer::RemoteAddr(addr));
/// assert_eq!(req.remote_addr(), Some(addr));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteAddr(pub SocketAddr);

/// The address the request was received on, when the transport knows it.
///
/// Celer's own server ([`serve`](mod@crate::serve)) hands addresses to
/// [`Request::local_addr`] directly; other servers can insert this type into
/// the request extensions instead.
///
/// ```
/// use std::net::SocketAddr;
/// let addr: SocketAddr = "127.0.0.1:8080".parse().unwrap();
/// let mut req = celer::Request::builder().uri("/").body(()).unwrap();
/// req.extensions_mut().insert(celer::LocalAddr(addr));
/// assert_eq!(req.local_addr(), Some(addr));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalAddr(pub SocketAddr);

// ===== impl Request =====

impl Request {
    /// Wraps a server's request; its body becomes a [`Body`].
    #[inline]
    pub(crate) fn from_http<B>(req: http::Request<B>, conn: Arc<AppConn>) -> Self
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let (parts, body) = req.into_parts();
        let body_limit = conn.shared.body_limit;
        // Written straight into the allocation: building `Inner` on the stack
        // and moving it into a `Box` costs a copy of the whole request.
        let inner = InnerBox::alloc();
        let inner = Box::write(
            inner,
            Inner {
                http: http::Request::from_parts(parts, Body::new(body)),
                conn,
                params: None,
                body_limit,
                body_taken: false,
                route: NO_ROUTE,
                session: None,
                cookies: None,
            },
        );
        Request {
            inner: InnerBox::new(inner),
        }
    }

    /// Where the request's state lives, for tests of its allocation.
    #[cfg(test)]
    fn inner_addr(&self) -> *const Inner {
        &*self.inner
    }

    pub(crate) fn app_conn(&self) -> &Arc<AppConn> {
        &self.inner.conn
    }

    pub(crate) fn set_route(
        &mut self,
        route: usize,
        names: &Arc<[Box<str>]>,
        raw: RawParams,
        limit: usize,
    ) {
        if raw.len() > 0 {
            self.inner.params = Some(PathParams {
                names: names.clone(),
                raw,
            });
            self.inner.body_limit = limit;
            self.inner.route = route as u32;
        } else {
            self.set_static_route(route, limit);
        }
    }

    /// [`set_route`](Request::set_route) for a rule without parameters.
    #[inline]
    pub(crate) fn set_static_route(&mut self, route: usize, limit: usize) {
        // Nothing to replace after no route with parameters (the common
        // case of a static route).
        if self.inner.params.is_some() {
            self.inner.params = None;
        }
        self.inner.body_limit = limit;
        self.inner.route = route as u32;
    }

    /// The matched route as log lines name it: its methods and rule.
    fn route_desc(&self) -> String {
        self.inner.route_desc()
    }

    /// The notice that the server has begun a graceful shutdown (the
    /// app's [`ShutdownNotice`](crate::ShutdownNotice)): a handler that
    /// keeps its response open watches it and ends the response at a clean
    /// boundary. [`EventStream`](crate::sse::EventStream)s do so by
    /// themselves.
    ///
    /// ```
    /// async fn long_poll(req: celer::Request) -> &'static str {
    ///     let notice = req.shutdown_notice().clone();
    ///     tokio::select! {
    ///         () = notice.started() => "shutting down",
    ///         () = tokio::time::sleep(std::time::Duration::from_secs(30)) => "nothing new",
    ///     }
    /// }
    /// # let _ = long_poll;
    /// ```
    pub fn shutdown_notice(&self) -> &crate::ShutdownNotice {
        &self.inner.conn.shared.shutdown
    }

    /// The request method.
    pub fn method(&self) -> &Method {
        self.inner.http.method()
    }

    /// Mutable access to the method, e.g. for a middleware that asks the
    /// rest of the chain for GET to answer a HEAD.
    pub fn method_mut(&mut self) -> &mut Method {
        self.inner.http.method_mut()
    }

    /// The request target.
    pub fn uri(&self) -> &Uri {
        self.inner.http.uri()
    }

    /// Mutable access to the request target, e.g. to rewrite it in an
    /// app-level middleware before routing.
    pub fn uri_mut(&mut self) -> &mut Uri {
        self.inner.http.uri_mut()
    }

    /// The path of the request target, still percent-encoded.
    pub fn path(&self) -> &str {
        self.inner.http.uri().path()
    }

    /// The HTTP version.
    pub fn version(&self) -> Version {
        self.inner.http.version()
    }

    /// The request headers.
    pub fn headers(&self) -> &HeaderMap {
        self.inner.http.headers()
    }

    /// Mutable access to the request headers.
    pub fn headers_mut(&mut self) -> &mut HeaderMap {
        self.inner.cookies = None;
        self.inner.http.headers_mut()
    }

    /// Request-scoped values, shared by middleware and handlers.
    ///
    /// ```
    /// # let mut req = celer::Request::builder().uri("/").body(()).unwrap();
    /// req.extensions_mut().insert(42u32);
    /// assert_eq!(req.extensions().get::<u32>(), Some(&42));
    /// ```
    pub fn extensions(&self) -> &Extensions {
        self.inner.http.extensions()
    }

    /// Mutable access to the request-scoped values.
    pub fn extensions_mut(&mut self) -> &mut Extensions {
        self.inner.http.extensions_mut()
    }

    /// The client's address, if the server provided it: from
    /// [`serve`](mod@crate::serve), else from a [`RemoteAddr`] extension.
    ///
    /// `None` on UNIX sockets and for requests built by hand.
    ///
    /// ```
    /// async fn whoami(req: celer::Request) -> String {
    ///     match req.remote_addr() {
    ///         Some(addr) => addr.ip().to_string(),
    ///         None => "unknown".into(),
    ///     }
    /// }
    /// # let _ = whoami;
    /// ```
    pub fn remote_addr(&self) -> Option<SocketAddr> {
        // Behind a gateway front end, the client is the one it reports.
        if let Some(remote) = self.extensions().get::<FrontEnd>().and_then(|f| f.remote) {
            return Some(remote);
        }
        self.inner
            .conn
            .info
            .as_ref()
            .and_then(|info| info.remote)
            .or_else(|| self.extensions().get::<RemoteAddr>().map(|addr| addr.0))
            .or_else(|| self.extensions().get::<ConnInfo>()?.remote)
    }

    /// The local address the request came in on, if the server provided it:
    /// from [`serve`](mod@crate::serve), else from a [`LocalAddr`] extension.
    ///
    /// ```
    /// let req = celer::Request::builder().uri("/").body(()).unwrap();
    /// assert_eq!(req.local_addr(), None);
    /// ```
    pub fn local_addr(&self) -> Option<SocketAddr> {
        if let Some(local) = self.extensions().get::<FrontEnd>().and_then(|f| f.local) {
            return Some(local);
        }
        self.inner
            .conn
            .info
            .as_ref()
            .and_then(|info| info.local)
            .or_else(|| self.extensions().get::<LocalAddr>().map(|addr| addr.0))
            .or_else(|| self.extensions().get::<ConnInfo>()?.local)
    }

    /// The facts of the connection the request arrived on: addresses,
    /// whether it is TLS, and what the TLS handshake agreed (version, ALPN
    /// protocol, SNI). The HTTP protocol is [`version`](Request::version).
    ///
    /// Under [`serve`](mod@crate::serve) they come from the engine, once
    /// per connection (no cost per request); requests that came another way
    /// take them from a [`ConnInfo`] in the extensions, else every fact is
    /// unknown (`None`, not TLS). Behind a FastCGI or SCGI front end they
    /// describe the connection from the front end; [`remote_addr`](Request::remote_addr)
    /// gives the client it reported.
    ///
    /// ```
    /// async fn how(req: celer::Request) -> String {
    ///     let conn = req.conn();
    ///     match conn.alpn() {
    ///         Some(alpn) => format!("TLS, ALPN {}", String::from_utf8_lossy(alpn)),
    ///         None if conn.is_tls() => "TLS without ALPN".to_owned(),
    ///         None => format!("cleartext {:?}", req.version()),
    ///     }
    /// }
    /// # let _ = how;
    /// let req = celer::Request::builder().uri("/").body(()).unwrap();
    /// assert!(!req.conn().is_tls());
    /// assert_eq!(req.conn().remote_addr(), None);
    /// ```
    pub fn conn(&self) -> &ConnInfo {
        match &self.inner.conn.info {
            Some(info) => info,
            None => self.extensions().get::<ConnInfo>().unwrap_or(&NO_CONN),
        }
    }

    /// True when the request reached this server over TLS, or, behind a
    /// FastCGI or SCGI front end, when the front end reported `HTTPS`.
    /// (A reverse proxy's `X-Forwarded-Proto` is not believed here: see
    /// [`SecurityHeaders::trust_forwarded_proto`](crate::security::SecurityHeaders::trust_forwarded_proto).)
    pub fn is_tls(&self) -> bool {
        if let Some(front) = self.extensions().get::<FrontEnd>() {
            return front.https;
        }
        self.conn().is_tls()
    }

    /// Shared application state installed with [`App::state`](crate::App::state),
    /// by the type it was installed as.
    ///
    /// A type that was never installed is a [`MissingState`] rejection,
    /// answered `500` with a log line that names the type; `?` passes it on
    /// (into [`Error`](crate::Error) as well).
    ///
    /// ```
    /// struct Store { name: &'static str }
    /// # let mut app = celer::App::new();
    /// app.state(Store { name: "db" });
    /// # let req = celer::Request::builder().uri("/").app(&app).body(()).unwrap();
    /// assert_eq!(req.state::<Store>().unwrap().name, "db");
    /// let err = req.state::<u32>().unwrap_err();
    /// assert!(err.detail().contains("u32"));
    /// ```
    pub fn state<T: Send + Sync + 'static>(&self) -> Result<&T, MissingState> {
        let shared = &self.inner.conn.shared;
        // A scope's state first, then the app's.
        let scoped = shared
            .routes
            .get(self.inner.route as usize)
            .and_then(|route| route.state.as_ref()?.get::<Arc<T>>());
        match scoped.or_else(|| shared.state.get::<Arc<T>>()) {
            Some(value) => Ok(value),
            None => Err(MissingState::with_source(format!(
                "no state of type `{}` was installed with App::state (route {})",
                std::any::type_name::<T>(),
                self.route_desc(),
            ))),
        }
    }

    /// The raw query string, if any.
    pub fn query_str(&self) -> Option<&str> {
        self.inner.http.uri().query()
    }

    /// Deserializes the query string (parsed only when asked for).
    ///
    /// ```
    /// #[derive(serde::Deserialize)]
    /// struct Page { n: u32 }
    /// let req = celer::Request::builder().uri("/list?n=3").body(()).unwrap();
    /// assert_eq!(req.query::<Page>().unwrap().n, 3);
    /// ```
    pub fn query<T: DeserializeOwned>(&self) -> Result<T, QueryRejection> {
        serde_urlencoded::from_str(self.query_str().unwrap_or(""))
            .map_err(|err| QueryDataError::with_source(err).into())
    }

    /// One decoded query parameter, without deserializing the others.
    ///
    /// ```
    /// let req = celer::Request::builder().uri("/s?q=a%20b&x=1").body(()).unwrap();
    /// assert_eq!(req.query_param("q").as_deref(), Some("a b"));
    /// ```
    pub fn query_param(&self, name: &str) -> Option<Cow<'_, str>> {
        form_pairs(self.query_str()?)
            .find(|(key, _)| key == name)
            .map(|(_, value)| value)
    }

    /// The value of a cookie, from the `Cookie` headers (RFC 6265 §5.4).
    ///
    /// ```
    /// let req = celer::Request::builder()
    ///     .uri("/")
    ///     .header("cookie", "a=1; session=xyz")
    ///     .body(())
    ///     .unwrap();
    /// assert_eq!(req.cookie("session"), Some("xyz"));
    /// ```
    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.headers()
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.trim_matches('"'))
    }

    /// A path parameter, converted with `FromStr` from its decoded value.
    ///
    /// The rule and the handler must agree; where they do not, the answer
    /// is a `500` whose log line (target `celer::error`) names the
    /// parameter, the rule and the route:
    ///
    /// - a name the rule does not have;
    /// - a number type (`u64`, `i32`, ...) read from a `string` parameter
    ///   (write `<uint:id>` or `<int:id>` in the rule, so that a
    ///   non-number is a `404`);
    /// - a value the rule's type accepted that `T` does not parse (`<int:n>`
    ///   read as `u8`, say).
    ///
    /// A `string` or `path` parameter that `T` does not parse is the
    /// client's error: `400`.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use tower::ServiceExt;
    /// let mut app = celer::App::new();
    /// app.get("/users/<int:id>", |req: celer::Request| async move {
    ///     let id: i64 = req.param("id")?;
    ///     Ok::<_, celer::extract::rejection::ParamRejection>(format!("user {id}"))
    /// });
    /// let req = http::Request::get("/users/7").body(celer::Body::empty()).unwrap();
    /// let res = app.oneshot(req).await.unwrap();
    /// assert_eq!(res.status(), 200);
    /// # });
    /// ```
    pub fn param<T: FromStr>(&self, name: &str) -> Result<T, ParamRejection> {
        let Some(value) = self.param_str(name) else {
            return Err(self.missing_param(name));
        };
        let kind = self.param_kind(name);
        let target = std::any::type_name::<T>();
        if matches!(kind, Some(ParamKind::Str)) && is_number_type(target) {
            return Err(self.param_mismatch(name, target, None));
        }
        match value.parse() {
            Ok(value) => Ok(value),
            Err(_) => match kind {
                Some(ParamKind::Str | ParamKind::Path) | None => Err(InvalidParam::new().into()),
                Some(_) => Err(self.param_mismatch(name, target, Some(&value))),
            },
        }
    }

    /// The type the matched rule gives parameter `name`.
    fn param_kind(&self, name: &str) -> Option<ParamKind> {
        let route = self.inner.route as usize;
        let route = self.inner.conn.shared.routes.get(route)?;
        route.rule.kind_of(name).cloned()
    }

    fn missing_param(&self, name: &str) -> ParamRejection {
        let names: Vec<&str> = match &self.inner.params {
            Some(params) => params.names.iter().map(|n| &**n).collect(),
            None => Vec::new(),
        };
        let has = if names.is_empty() {
            "no parameters".to_owned()
        } else {
            format!("parameters {}", names.join(", "))
        };
        MissingParam::with_source(format!(
            "the handler asked for parameter {name:?}, but the rule of route {} has {has}",
            self.route_desc(),
        ))
        .into()
    }

    fn param_mismatch(&self, name: &str, target: &str, value: Option<&str>) -> ParamRejection {
        let kind = self
            .param_kind(name)
            .map_or_else(|| "string".to_owned(), |k| k.name().to_owned());
        let detail = match value {
            None => format!(
                "parameter {name:?} of route {} is a `{kind}` in the rule but is read as \
                 `{target}`: declare it `<{}:{name}>` in the rule (a value of another \
                 shape then gets 404), or read it as a String",
                self.route_desc(),
                if target.starts_with('u') {
                    "uint"
                } else {
                    "int"
                },
            ),
            Some(value) => format!(
                "parameter {name:?} of route {}: the rule's type `{kind}` accepted {value:?} \
                 but `{target}` does not parse it; make the rule and the type agree \
                 (int: i64, uint: u64, or a type added with register_type)",
                self.route_desc(),
            ),
        };
        ParamTypeMismatch::with_source(detail).into()
    }

    /// A path parameter as a decoded string.
    pub fn param_str(&self, name: &str) -> Option<Cow<'_, str>> {
        let names = &self.inner.params.as_ref()?.names;
        let idx = names.iter().position(|n| &**n == name)?;
        self.raw_param(idx).map(decode)
    }

    /// The path parameters as `(name, decoded value)` pairs, in rule order.
    pub fn params(&self) -> impl Iterator<Item = (&str, Cow<'_, str>)> + '_ {
        let names = match &self.inner.params {
            Some(params) => &params.names[..],
            None => &[],
        };
        names
            .iter()
            .enumerate()
            .filter_map(|(idx, name)| Some((&**name, decode(self.raw_param(idx)?))))
    }

    fn raw_param(&self, idx: usize) -> Option<&str> {
        let (start, end) = self.inner.params.as_ref()?.raw.range(idx)?;
        self.path().get(start..end)
    }

    /// Builds the URL of a named route; see [`App::url_for`](crate::App::url_for).
    ///
    /// Behind a FastCGI, SCGI or CGI front end that mounts the app under a
    /// prefix (`SCRIPT_NAME`), the URL starts with that prefix.
    pub fn url_for(&self, name: &str, params: &UrlParams<'_>) -> Result<String, UrlError> {
        let url = self.inner.conn.shared.url_for(name, params)?;
        match self.extensions().get::<FrontEnd>() {
            Some(front) if !front.script_name.is_empty() => {
                Ok(format!("{}{url}", front.script_name))
            }
            _ => Ok(url),
        }
    }

    /// The limit, in bytes, that body extractors enforce for this request.
    pub fn body_limit(&self) -> usize {
        self.inner.body_limit
    }

    /// Changes the body limit for this request (e.g. from a middleware).
    pub fn set_body_limit(&mut self, limit: usize) {
        self.inner.body_limit = limit;
    }

    /// Takes the body out as a stream, still under the body limit: past
    /// it, the stream ends with a [`BodyTooLarge`](crate::extract::rejection::BodyTooLarge)
    /// error, which [`Error::boxed`](crate::Error::boxed) answers `413` (raise
    /// the limit of the route, or [`set_body_limit`](Request::set_body_limit)
    /// first, for large uploads). Later body extractors fail.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use http_body_util::BodyExt;
    /// let mut req = celer::Request::builder().method("POST").uri("/").body("0123456789").unwrap();
    /// req.set_body_limit(4);
    /// let mut body = req.take_body();
    /// let err = body.frame().await.unwrap().unwrap_err();
    /// assert_eq!(celer::Error::boxed(err).status_code(), 413);
    /// # });
    /// ```
    pub fn take_body(&mut self) -> Body {
        let limit = self.inner.body_limit;
        crate::extract::limited(self.take_raw_body(), limit)
    }

    /// Puts back a body that middleware read (the CSRF check reads a
    /// form's token), for the handler to read again.
    pub(crate) fn restore_body(&mut self, body: Body) {
        *self.inner.http.body_mut() = body;
        self.inner.body_taken = false;
    }

    fn take_raw_body(&mut self) -> Body {
        self.inner.body_taken = true;
        std::mem::take(self.inner.http.body_mut())
    }

    /// Reads the whole body, up to the body limit.
    pub async fn bytes(&mut self) -> Result<Bytes, BytesRejection> {
        if self.inner.body_taken {
            return Err(BodyAlreadyTaken::new().into());
        }
        let limit = self.inner.body_limit;
        read_limited(self.take_raw_body(), limit).await
    }

    /// Reads the whole body as UTF-8 text, up to the body limit.
    pub async fn text(&mut self) -> Result<String, TextRejection> {
        let bytes = self.bytes().await?;
        String::from_utf8(bytes.into()).map_err(|err| InvalidUtf8::with_source(err).into())
    }

    /// Reads and deserializes a JSON body (`Content-Type: application/json`
    /// or `*/*+json`), up to the body limit.
    pub async fn json<T: DeserializeOwned>(&mut self) -> Result<T, JsonRejection> {
        if !self
            .has_content_type(|essence| essence == "application/json" || essence.ends_with("+json"))
        {
            return Err(MissingJsonContentType::new().into());
        }
        let bytes = self.bytes().await?;
        serde_json::from_slice(&bytes).map_err(|err| {
            if err.is_data() {
                JsonDataError::with_source(err).into()
            } else {
                JsonSyntaxError::with_source(err).into()
            }
        })
    }

    /// Reads and deserializes a urlencoded form body, up to the body limit.
    pub async fn form<T: DeserializeOwned>(&mut self) -> Result<T, FormRejection> {
        if !self.has_content_type(|essence| essence == "application/x-www-form-urlencoded") {
            return Err(MissingFormContentType::new().into());
        }
        let bytes = self.bytes().await?;
        serde_urlencoded::from_bytes(&bytes).map_err(|err| FormDataError::with_source(err).into())
    }

    /// Runs an extractor.
    pub async fn extract<T: FromRequest>(&mut self) -> Result<T, T::Rejection> {
        T::from_request(self).await
    }

    fn has_content_type(&self, accept: impl Fn(&str) -> bool) -> bool {
        let Some(value) = self.headers().get(header::CONTENT_TYPE) else {
            return false;
        };
        let Ok(value) = value.to_str() else {
            return false;
        };
        let essence = value
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        accept(&essence)
    }

    /// Gives back the `http` request. A [`Session`](crate::session::Session)
    /// attached by the session middleware goes into its extensions.
    pub fn into_http(self) -> http::Request<Body> {
        let mut inner = self.inner.into_inner();
        let mut http = std::mem::take(&mut inner.http);
        if let Some(session) = inner.session.take() {
            http.extensions_mut().insert(session);
        }
        http
    }

    /// Attaches the request's session (the session middleware does).
    #[inline]
    pub(crate) fn set_session(&mut self, session: crate::session::Session) {
        self.inner.session = Some(session);
    }

    /// The headers and the cookie text kept from them (see
    /// `cookie::request_text`).
    #[inline]
    pub(crate) fn cookie_cache(&mut self) -> (&HeaderMap, &mut Option<crate::cookie::CookieText>) {
        let inner = &mut *self.inner;
        (inner.http.headers(), &mut inner.cookies)
    }

    /// The cookie text kept by an extraction, if one read it.
    #[inline]
    pub(crate) fn cookies_kept(&self) -> Option<&crate::cookie::CookieText> {
        self.inner.cookies.as_ref()
    }

    /// The session the session middleware attached, else one in the
    /// extensions (a request built around an `http::Request` that
    /// carries one).
    #[inline]
    pub(crate) fn session(&self) -> Option<&crate::session::Session> {
        self.inner
            .session
            .as_ref()
            .or_else(|| self.extensions().get::<crate::session::Session>())
    }

    /// A builder for requests outside a server, e.g. in tests and docs.
    ///
    /// ```
    /// let req = celer::Request::builder().method("POST").uri("/x").body("hi").unwrap();
    /// assert_eq!(req.method(), "POST");
    /// ```
    pub fn builder() -> RequestBuilder {
        RequestBuilder {
            inner: http::Request::builder(),
            shared: None,
        }
    }
}

impl fmt::Debug for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("method", self.method())
            .field("uri", self.uri())
            .field("params", &self.params().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// Whether `name` (from `std::any::type_name`) is a primitive number type.
fn is_number_type(name: &str) -> bool {
    matches!(
        name,
        "i8" | "i16"
            | "i32"
            | "i64"
            | "i128"
            | "isize"
            | "u8"
            | "u16"
            | "u32"
            | "u64"
            | "u128"
            | "usize"
            | "f32"
            | "f64"
    )
}

// ===== impl Inner =====

impl Inner {
    fn route_desc(&self) -> String {
        let method = self.http.method();
        let path = self.http.uri().path();
        match self.conn.shared.routes.get(self.route as usize) {
            Some(route) => format!(
                "{} {} (for {method} {path})",
                route.methods.to_allow(),
                route.rule
            ),
            None => format!("none yet (for {method} {path})"),
        }
    }
}

impl Drop for Inner {
    #[inline]
    fn drop(&mut self) {
        // A request dropped while its handler unwinds names the route for
        // the log line of the panic (see `app/service.rs`).
        if std::thread::panicking() {
            crate::app::note_panicked_route(self.route_desc(), self.conn.shared.clone());
        }
    }
}

fn form_pairs(query: &str) -> impl Iterator<Item = (Cow<'_, str>, Cow<'_, str>)> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode_form(key), decode_form(value))
        })
}

fn decode_form(raw: &str) -> Cow<'_, str> {
    if raw.contains('+') {
        Cow::Owned(decode(&raw.replace('+', " ")).into_owned())
    } else {
        decode(raw)
    }
}

/// Builds a [`Request`] outside a server (tests, docs).
pub struct RequestBuilder {
    inner: http::request::Builder,
    shared: Option<Arc<Shared>>,
}

impl fmt::Debug for RequestBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestBuilder").finish_non_exhaustive()
    }
}

impl RequestBuilder {
    /// Sets the method.
    pub fn method(mut self, method: &str) -> Self {
        self.inner = self.inner.method(method);
        self
    }

    /// Sets the target.
    pub fn uri(mut self, uri: &str) -> Self {
        self.inner = self.inner.uri(uri);
        self
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.inner = self.inner.header(name, value);
        self
    }

    /// Uses the state and named routes of `app`.
    pub fn app(mut self, app: &crate::App) -> Self {
        self.shared = Some(app.shared().clone());
        self
    }

    /// Finishes the request with a body.
    pub fn body(self, body: impl Into<Body>) -> Result<Request, http::Error> {
        let inner = self.inner.body(body.into())?;
        let shared = self
            .shared
            .unwrap_or_else(|| crate::App::new().shared().clone());
        let conn = Arc::new(AppConn::new(shared, None));
        Ok(Request::from_http(inner, conn))
    }
}
