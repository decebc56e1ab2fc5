//! Celer's web framework: an [`App`] of typed routes, handlers, middleware
//! and status handlers, served as a `tower::Service`.
//!
//! # Overview
//!
//! - [`App`] holds the routes. Rules use Valum's syntax with typed
//!   parameters, `/users/<int:id>/posts/<slug>` (see [`router`] for the
//!   types, user-registered types, regex routes and the match priority).
//!   Routes have method sets ([`MethodSet`]); `HEAD` is answered by `GET`
//!   routes, `OPTIONS` and `405 Method Not Allowed` come with `Allow`, and
//!   `OPTIONS *` is answered. Scopes, mounted sub-apps and named routes with
//!   [`App::url_for`] (reverse routing) work together.
//! - Handlers are async functions of a [`Request`] (and optionally a
//!   [`Next`]) returning anything that implements [`IntoResponse`],
//!   `Result`s included. `next` passes a request to the next step of the
//!   chain, or to the next matching route (see [`handler`]).
//! - Middleware has the same `(req, next) -> response` shape, at app, scope
//!   and route level. [`middleware`] brings HTTP semantics as one layer:
//!   content negotiation over the four `Accept*` fields, streaming gzip /
//!   brotli / zstd compression, and a micro-cache that coalesces misses.
//! - Extractors ([`Request::json`], [`Request::form`], [`Request::query`],
//!   [`Request::param`], [`extract::FromRequest`]) fail with typed
//!   rejections ([`extract::rejection`]) that have fixed statuses; bodies are
//!   read under a size limit answered by `413`.
//! - [`App`] implements `tower::Service<http::Request<B>>` for any
//!   `http_body::Body` `B`, answering `http::Response<`[`Body`]`>`, so tower
//!   and tower-http layers wrap it and any server that speaks `tower` runs it.
//! - [`files::Files`] serves a directory or an embedded bundle with HTTP's
//!   semantics for stored files (validators, conditional requests, ranges,
//!   precompressed siblings), as a service or under a route.
//! - [`serve()`] runs an app on Celer's engine in one line, with Ctrl-C and
//!   SIGTERM for a graceful shutdown ([`serve_async`] inside a tokio
//!   runtime; [`serve_from_args`] with the standard `--listen`, `--workers`,
//!   `--threading` and TLS flags from the command line); the [`serve`](mod@serve) module has the finer controls
//!   (`app.run(bound, signal)`, `app.serve(bound, shutdown).await`, tower
//!   layers with `run_layered`). Handlers see the client's address in
//!   [`Request::remote_addr`]. When shutdown starts, the app's
//!   [`ShutdownNotice`] fires, so what holds a response open ends it
//!   cleanly.
//! - [`test`](mod@test) calls an app in memory ([`test::TestClient`]) or over a
//!   loopback socket ([`test::TestServer`]).
//! - [`dispatch`] runs blocking or CPU-heavy work on a bounded pool of
//!   threads: a full queue answers `503` with `Retry-After`, a panic `500`.
//! - [`sse`] pushes server-sent events: [`sse::EventStream`] responses and
//!   a broadcast [`sse::Hub`] with `Last-Event-ID` resume and bounded
//!   memory.
//! - [`feed`] serves live JSON documents: one current version with a
//!   content-hash ETag, 304s and br/zstd/gzip variants made once, pushed
//!   over SSE and WebSocket, fed by a [`feed::Source`].
//! - Uploads and forms: [`multipart`] streams `multipart/form-data` part
//!   by part (files to disk or to the handler, every limit named);
//!   [`form`] reads urlencoded forms under byte and field-count limits.
//! - Security middleware: [`cors`] (simple and preflight requests),
//!   [`ratelimit`] (GCRA per key with `RateLimit` fields and `429`) and
//!   [`security`] (CSP, `nosniff`, `Referrer-Policy`, HSTS over TLS).
//!
//! # Getting started
//!
//! `Cargo.toml`:
//!
//! ```toml
//! [dependencies]
//! celer = { git = "https://example.invalid/celer" }
//! serde = { version = "1", features = ["derive"] }
//! ```
//!
//! `src/main.rs`, complete: `http` is re-exported as [`celer::http`](http);
//! [`Error`] is the JSON error type once [`App::problem_details`] is on.
//!
//! ```no_run
//! use celer::http::StatusCode;
//! use celer::response::Json;
//! use celer::{App, Error, Request};
//!
//! #[derive(serde::Serialize)]
//! struct Note { id: u64, text: String }
//!
//! async fn show(req: Request) -> Result<Json<Note>, Error> {
//!     let id: u64 = req.param("id")?; // the rule says `uint`: "abc" is a 404
//!     if id > 100 {
//!         return Err(Error::status(StatusCode::NOT_FOUND, format!("no note {id}")));
//!     }
//!     Ok(Json(Note { id, text: "hello".into() }))
//! }
//!
//! fn app() -> App {
//!     let mut app = App::new();
//!     app.problem_details(true); // errors as RFC 9457 application/problem+json
//!     app.get("/notes/<uint:id>", show).name("note");
//!     app
//! }
//!
//! fn main() -> std::io::Result<()> {
//!     celer::serve("tcp://127.0.0.1:8080", app())
//! }
//! ```
//!
//! A test of it (`#[tokio::test]` in `tests/`):
//!
//! ```
//! # use celer::{App, Error, Request, response::Json};
//! # fn app() -> App {
//! #     let mut app = App::new();
//! #     app.problem_details(true);
//! #     app.get("/notes/<uint:id>", |req: Request| async move {
//! #         let id: u64 = req.param("id")?;
//! #         Ok::<_, Error>(Json(serde_json::json!({"id": id})))
//! #     });
//! #     app
//! # }
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let client = celer::test::TestClient::new(app());
//! assert_eq!(client.get("/notes/7").await.json::<serde_json::Value>()["id"], 7);
//! let res = client.get("/notes/abc").await;
//! assert_eq!(res.status(), 404);
//! assert_eq!(res.header("content-type"), Some("application/problem+json"));
//! # });
//! ```
//!
//! Middleware and status handlers wrap each other in this order (see
//! [`App::status`]): a middleware's headers stay on a rendered 404, and a
//! status handler replaces only bodies nobody chose.
//!
//! ```text
//! request ─▶ app middleware 1 ─▶ app middleware 2 ─▶ status handlers ─▶ routing
//!         ─▶ scope middleware ─▶ route middleware ─▶ handler ─▶ .then(..) handlers
//! ```
//!
//! `examples/notes` is a complete app to copy, with its tests.
//!
//! # Example
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! use celer::response::{Json, Redirect};
//! use celer::{App, Next, Request, Response};
//! use http::StatusCode;
//! use tower::ServiceExt;
//!
//! #[derive(serde::Deserialize, serde::Serialize)]
//! struct Post {
//!     title: String,
//! }
//!
//! async fn show(req: Request) -> Result<Json<Post>, celer::Error> {
//!     let id: i64 = req.param("id")?;
//!     Ok(Json(Post { title: format!("post {id}") }))
//! }
//!
//! async fn create(mut req: Request) -> Result<Redirect, celer::Error> {
//!     let _post: Post = req.json().await?;
//!     let url = req.url_for("post", &[("id", &1)])?;
//!     Ok(Redirect::with_status(StatusCode::CREATED, url))
//! }
//!
//! async fn server_header(req: Request, next: Next) -> Response {
//!     let mut res = next.run(req).await;
//!     res.headers_mut().insert("server", http::HeaderValue::from_static("celer"));
//!     res
//! }
//!
//! let mut app = App::new();
//! app.middleware(server_header);
//! app.scope("/posts", |posts| {
//!     posts.get("/<int:id>", show).name("post");
//!     posts.post("", create);
//! });
//!
//! let req = http::Request::get("/posts/7").body(celer::Body::empty()).unwrap();
//! let res = app.clone().oneshot(req).await.unwrap();
//! assert_eq!(res.status(), StatusCode::OK);
//! assert_eq!(res.headers()["server"], "celer");
//!
//! let req = http::Request::delete("/posts/7").body(celer::Body::empty()).unwrap();
//! let res = app.oneshot(req).await.unwrap();
//! assert_eq!(res.status(), StatusCode::METHOD_NOT_ALLOWED);
//! assert_eq!(res.headers()["allow"], "GET, HEAD, OPTIONS");
//! # });
//! ```
//!
//! # Code map
//!
//! - `router/`: rules (`rule.rs`), parameter types (`types.rs`), the lookup
//!   tree (`tree.rs`, no IO, no allocation on lookup), method sets and
//!   reverse routing (`url.rs`).
//! - `app/`: the [`App`] builder, dispatch as a `tower::Service`
//!   (`service.rs`: automatic HEAD/OPTIONS/405, `next` fallthrough), route
//!   builder and status handlers.
//! - `handler/`: handler shapes and [`Next`]; `inline.rs` keeps a small
//!   handler future inside the app's response future instead of boxing it.
//!   `request/`: [`Request`], whose state allocation `spare.rs` recycles per
//!   thread; these two, `cookie/ascii.rs` (a `Cookie` field checked to
//!   be ASCII, read as text without a second check) and `dispatch/cell.rs`
//!   (a dispatched job's value and waker) are the framework's only
//!   `unsafe` code.
//!   `response/`: [`IntoResponse`] and helpers; `extract/`: extractors and
//!   rejections; `body.rs`: [`Body`]; `error.rs`: [`Error`].
//! - `middleware/`: `negotiate/` (the `Accept*` parser, `accept.rs`, sans-IO),
//!   `compression/` (encoders and the streaming body), `cache/` (the store
//!   and the coalescing of misses).
//! - `serve.rs`: [`serve()`], [`App::run`] and [`App::serve`] on Celer's
//!   engine; they fire the [`ShutdownNotice`] (`app/shutdown.rs`).
//!   `test.rs`: the test clients.
//! - `sse/`: server-sent events: `event.rs` (encoding, no IO),
//!   `stream.rs` (the response body), `hub.rs` (the broadcast ring).
//! - `files/`: static files ([`files::Files`]: ETags, conditional requests,
//!   ranges, precompressed siblings, listings, embedded bundles) and the
//!   offload headers ([`files::OffloadLayer`]).
//!
//! **Architecture Invariant:** only `serve.rs` and `files/body.rs` name a
//! server crate (`celer_server`): the first to run apps on the engine, the
//! second for the transport-neutral file body (`celer_server::file`) and its
//! `sendfile(2)` marker. Everywhere else requests arrive as
//! `http::Request<B>` through `tower::Service`.

pub mod app;
pub mod auth;
mod body;
pub mod cookie;
pub mod cors;
pub mod csrf;
pub mod dispatch;
mod error;
pub mod extract;
pub mod feed;
pub mod files;
pub mod form;
pub mod handler;
pub mod middleware;
pub mod multipart;
#[cfg(feature = "openapi")]
pub mod openapi;
pub mod ratelimit;
mod request;
pub mod response;
pub mod router;
pub mod security;
pub mod serve;
pub mod session;
pub mod sse;
#[cfg(feature = "templates")]
pub mod template;
pub mod test;
pub mod ws;

/// The `http` crate, whose types (`StatusCode`, `HeaderValue`, `header`,
/// `Method`, ...) handlers use: `celer::http::StatusCode`.
pub use http;

pub use app::{App, ShutdownNotice};
pub use body::Body;
pub use error::Error;
pub use handler::{Handler, Next, debug_handler, debug_middleware};
pub use request::{LocalAddr, RemoteAddr, Request, RequestBuilder};
pub use response::{IntoResponse, Response};
pub use router::MethodSet;
pub use serve::{serve, serve_async, serve_from_args};

/// A boxed error, the error type of [`Body`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
