//! Testing an app: [`TestClient`] calls it in memory, without a socket;
//! [`TestServer`] serves it on a loopback port and talks HTTP/1.1 to it.
//! Both give a [`TestResponse`] whose body is already read.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use celer::test::TestClient;
//! use celer::{App, Request};
//!
//! let mut app = App::new();
//! app.get("/hello/<name>", |req: Request| async move {
//!     format!("Hello, {}!", req.param_str("name").unwrap_or_default())
//! });
//!
//! let client = TestClient::new(app);
//! let res = client.get("/hello/world").send().await;
//! assert_eq!(res.status(), 200);
//! assert_eq!(res.text(), "Hello, world!");
//! # });
//! ```
//!
//! Every wait is bounded by [`TIMEOUT`]; reaching it panics with what was
//! awaited, so a test fails instead of hanging. The clients need a tokio
//! runtime with its timer (`#[tokio::test]` has one).

use std::fmt;
use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::serve::Shutdown;
use crate::{App, Body};

/// The bound on each wait of a test request: 30 seconds.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The most bytes [`TestServer`] reads of one response: 64 MiB.
pub const MAX_RESPONSE: usize = 64 * 1024 * 1024;

/// Calls an app in memory, as a server would, without a socket.
///
/// Requests have no client address; use [`TestServer`] for what needs the
/// wire (addresses, HTTP/1.1 framing, the engine's limits).
#[derive(Debug, Clone)]
pub struct TestClient {
    target: Target,
}

/// Serves an app on `127.0.0.1` on a free port, on the current tokio
/// runtime, and sends requests to it over TCP.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let mut app = celer::App::new();
/// app.get("/ip", |req: celer::Request| async move {
///     req.remote_addr().map(|a| a.ip().to_string()).unwrap_or_default()
/// });
/// let server = celer::test::TestServer::start(app).await;
/// assert_eq!(server.get("/ip").send().await.text(), "127.0.0.1");
/// server.stop().await;
/// # });
/// ```
#[derive(Debug)]
pub struct TestServer {
    addr: SocketAddr,
    /// The server this started; `None` for [`TestServer::at`].
    running: Option<(Shutdown, tokio::task::JoinHandle<std::io::Result<()>>)>,
}

#[derive(Debug, Clone)]
enum Target {
    App(App),
    Socket(SocketAddr),
}

/// A request being built; `.send().await` (or just `.await`) sends it.
#[must_use = "a request does nothing until it is sent"]
pub struct TestRequest {
    target: Target,
    builder: http::request::Builder,
    body: Bytes,
}

/// A response with its body read.
#[derive(Debug, Clone)]
pub struct TestResponse {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

macro_rules! method_shortcuts {
    ($($(#[$meta:meta])* $fn:ident => $method:ident),+ $(,)?) => {
        $(
            $(#[$meta])*
            pub fn $fn(&self, uri: &str) -> TestRequest {
                self.request(Method::$method, uri)
            }
        )+
    };
}

// ===== impl TestClient =====

impl TestClient {
    /// A client of `app`.
    pub fn new(app: App) -> TestClient {
        TestClient {
            target: Target::App(app),
        }
    }

    /// A request with any method.
    pub fn request(&self, method: Method, uri: &str) -> TestRequest {
        TestRequest::new(self.target.clone(), method, uri)
    }

    method_shortcuts! {
        /// A `GET` request.
        get => GET,
        /// A `POST` request.
        post => POST,
        /// A `PUT` request.
        put => PUT,
        /// A `PATCH` request.
        patch => PATCH,
        /// A `DELETE` request.
        delete => DELETE,
        /// A `HEAD` request.
        head => HEAD,
    }
}

// ===== impl TestServer =====

impl TestServer {
    /// Serves `app` on a free loopback port.
    ///
    /// # Panics
    ///
    /// Panics outside a tokio runtime, or if no port can be bound.
    pub async fn start(app: App) -> TestServer {
        let bound = crate::serve::bind("tcp://127.0.0.1:0").expect("bind a loopback port");
        let addr = bound.tcp_addr().expect("a TCP address");
        let shutdown = Shutdown::new();
        let task = tokio::spawn(app.serve(bound, shutdown.clone()));
        TestServer {
            addr,
            running: Some((shutdown, task)),
        }
    }

    /// A client of a server started elsewhere (by
    /// [`celer::serve_async`](crate::serve_async), another process), at
    /// `addr`; [`stop`](TestServer::stop) then does nothing.
    pub fn at(addr: SocketAddr) -> TestServer {
        TestServer {
            addr,
            running: None,
        }
    }

    /// The address served.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` followed by `path`, for other clients
    /// (curl, a browser driver).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// A request with any method, on a connection of its own.
    pub fn request(&self, method: Method, uri: &str) -> TestRequest {
        TestRequest::new(Target::Socket(self.addr), method, uri)
    }

    method_shortcuts! {
        /// A `GET` request.
        get => GET,
        /// A `POST` request.
        post => POST,
        /// A `PUT` request.
        put => PUT,
        /// A `PATCH` request.
        patch => PATCH,
        /// A `DELETE` request.
        delete => DELETE,
        /// A `HEAD` request.
        head => HEAD,
    }

    /// Shuts the server down gracefully and waits for it.
    ///
    /// # Panics
    ///
    /// Panics if the server failed or does not stop within [`TIMEOUT`].
    pub async fn stop(self) {
        let Some((shutdown, task)) = self.running else {
            return;
        };
        shutdown.trigger();
        let result = bounded("the server to stop", task).await;
        result
            .expect("the server task")
            .expect("the server ended cleanly");
    }
}

// ===== impl TestRequest =====

impl TestRequest {
    fn new(target: Target, method: Method, uri: &str) -> TestRequest {
        TestRequest {
            target,
            builder: http::Request::builder().method(method).uri(uri),
            body: Bytes::new(),
        }
    }

    /// Adds a header.
    pub fn header<K, V>(mut self, name: K, value: V) -> Self
    where
        K: TryInto<HeaderName>,
        K::Error: Into<http::Error>,
        V: TryInto<HeaderValue>,
        V::Error: Into<http::Error>,
    {
        self.builder = self.builder.header(name, value);
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// Sets a JSON body and `Content-Type: application/json`.
    ///
    /// # Panics
    ///
    /// Panics if `value` does not serialize.
    pub fn json<T: Serialize + ?Sized>(self, value: &T) -> Self {
        let body = serde_json::to_vec(value).expect("a value that serializes to JSON");
        self.header(header::CONTENT_TYPE, "application/json")
            .body(body)
    }

    /// Sends the request and reads the whole response.
    ///
    /// # Panics
    ///
    /// Panics if the request is invalid, the connection fails, or a wait
    /// exceeds [`TIMEOUT`].
    pub async fn send(self) -> TestResponse {
        let req = self
            .builder
            .body(self.body)
            .expect("a valid request (method, URI and headers)");
        match self.target {
            Target::App(app) => in_memory(app, req).await,
            Target::Socket(addr) => over_tcp(addr, req).await,
        }
    }
}

impl IntoFuture for TestRequest {
    type Output = TestResponse;
    type IntoFuture = Pin<Box<dyn Future<Output = TestResponse> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.send())
    }
}

impl fmt::Debug for TestRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestRequest")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

// ===== impl TestResponse =====

impl TestResponse {
    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The header fields.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The first value of header `name` as text, if present and visible
    /// ASCII.
    pub fn header(&self, name: impl header::AsHeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body.
    pub fn bytes(&self) -> &Bytes {
        &self.body
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body deserialized from JSON.
    ///
    /// # Panics
    ///
    /// Panics, showing the body, if it is not JSON of type `T`.
    pub fn json<T: DeserializeOwned>(&self) -> T {
        match serde_json::from_slice(&self.body) {
            Ok(value) => value,
            Err(err) => panic!(
                "the body is not JSON of type {}: {err}; body: {}",
                std::any::type_name::<T>(),
                self.text()
            ),
        }
    }
}

async fn bounded<F: Future>(what: &str, fut: F) -> F::Output {
    match tokio::time::timeout(TIMEOUT, fut).await {
        Ok(output) => output,
        Err(_) => panic!("waited more than {TIMEOUT:?} for {what}"),
    }
}

async fn in_memory(app: App, req: http::Request<Bytes>) -> TestResponse {
    use tower_service::Service as _;
    let req = req.map(Body::from);
    let mut app = app;
    let res = bounded("the app's response", Box::pin(app.call(req)))
        .await
        .unwrap_or_else(|never| match never {});
    let (parts, body) = res.into_parts();
    let body = bounded("the response body", body.collect_bytes())
        .await
        .expect("a response body that reads to its end");
    TestResponse {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

async fn over_tcp(addr: SocketAddr, req: http::Request<Bytes>) -> TestResponse {
    let (parts, body) = req.into_parts();
    let is_head = parts.method == Method::HEAD;
    let target = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let mut head = format!("{} {target} HTTP/1.1\r\n", parts.method);
    if !parts.headers.contains_key(header::HOST) {
        head.push_str(&format!("host: {addr}\r\n"));
    }
    for (name, value) in &parts.headers {
        head.push_str(name.as_str());
        head.push_str(": ");
        head.push_str(&String::from_utf8_lossy(value.as_bytes()));
        head.push_str("\r\n");
    }
    if !body.is_empty() || !matches!(parts.method, Method::GET | Method::HEAD) {
        head.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    head.push_str("connection: close\r\n\r\n");

    let mut stream = bounded("a connection", tokio::net::TcpStream::connect(addr))
        .await
        .expect("connect to the test server");
    let mut out = head.into_bytes();
    out.extend_from_slice(&body);
    bounded("the request to be written", stream.write_all(&out))
        .await
        .expect("write the request");
    let mut raw = Vec::new();
    let read = async {
        let mut buf = [0u8; 16 * 1024];
        loop {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                return Ok::<_, std::io::Error>(());
            }
            raw.extend_from_slice(&buf[..n]);
            assert!(
                raw.len() <= MAX_RESPONSE,
                "a response over {MAX_RESPONSE} bytes"
            );
        }
    };
    bounded("the response (the server closes the connection)", read)
        .await
        .expect("read the response");
    parse_response(&raw, is_head)
}

/// Parses one HTTP/1.1 response (RFC 9112 §6: the body is chunked, of a
/// `Content-Length`, or up to the close).
fn parse_response(raw: &[u8], is_head: bool) -> TestResponse {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Response::new(&mut fields);
    let head_len = match parsed.parse(raw) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => panic!(
            "the connection closed inside the response head: {:?}",
            String::from_utf8_lossy(raw)
        ),
        Err(err) => panic!(
            "a malformed response head ({err}): {:?}",
            String::from_utf8_lossy(raw)
        ),
    };
    let status = StatusCode::from_u16(parsed.code.unwrap_or(0)).expect("a valid status code");
    let mut headers = HeaderMap::new();
    for field in parsed.headers.iter() {
        let name = HeaderName::from_bytes(field.name.as_bytes()).expect("a valid header name");
        let value = HeaderValue::from_bytes(field.value).expect("a valid header value");
        headers.append(name, value);
    }
    let rest = &raw[head_len..];
    let body = if is_head
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        Bytes::new()
    } else if headers
        .get(header::TRANSFER_ENCODING)
        .is_some_and(|te| te.as_bytes().eq_ignore_ascii_case(b"chunked"))
    {
        dechunk(rest)
    } else if let Some(len) = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
    {
        assert!(
            rest.len() >= len,
            "the connection closed {} bytes into a {len}-byte body",
            rest.len()
        );
        Bytes::copy_from_slice(&rest[..len])
    } else {
        Bytes::copy_from_slice(rest)
    };
    TestResponse {
        status,
        headers,
        body,
    }
}

/// Decodes a chunked body (RFC 9112 §7.1); trailers are dropped.
fn dechunk(mut rest: &[u8]) -> Bytes {
    let mut body = Vec::new();
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a complete chunk size line");
        let line = std::str::from_utf8(&rest[..line_end]).expect("an ASCII chunk size");
        let size = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size, 16).expect("a hexadecimal chunk size");
        rest = &rest[line_end + 2..];
        if size == 0 {
            return body.into();
        }
        assert!(
            rest.len() >= size + 2,
            "the connection closed inside a chunk"
        );
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}
