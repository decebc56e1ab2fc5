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
//! - [`serve`] runs an app on Celer's engine: `app.run(bound, signal)`
//!   blocks, `app.serve(bound, shutdown).await` runs on your runtime, and
//!   handlers see the client's address in [`Request::remote_addr`]. When
//!   shutdown starts, the app's [`ShutdownNotice`] fires, so what holds a
//!   response open ends it cleanly.
//! - [`dispatch`] runs blocking or CPU-heavy work on a bounded pool of
//!   threads: a full queue answers `503` with `Retry-After`, a panic `500`.
//! - [`sse`] pushes server-sent events: [`sse::EventStream`] responses and
//!   a broadcast [`sse::Hub`] with `Last-Event-ID` resume and bounded
//!   memory.
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
//!   thread; these two are the framework's only `unsafe` code.
//!   `response/`: [`IntoResponse`] and helpers; `extract/`: extractors and
//!   rejections; `body.rs`: [`Body`]; `error.rs`: [`Error`].
//! - `middleware/`: `negotiate/` (the `Accept*` parser, `accept.rs`, sans-IO),
//!   `compression/` (encoders and the streaming body), `cache/` (the store
//!   and the coalescing of misses).
//! - `serve.rs`: [`App::run`] and [`App::serve`] on Celer's engine; they
//!   fire the [`ShutdownNotice`] (`app/shutdown.rs`).
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
mod body;
pub mod dispatch;
mod error;
pub mod extract;
pub mod files;
pub mod handler;
pub mod middleware;
mod request;
pub mod response;
pub mod router;
pub mod serve;
pub mod sse;
pub mod ws;

pub use app::{App, ShutdownNotice};
pub use body::Body;
pub use error::Error;
pub use handler::{Handler, Next};
pub use request::{LocalAddr, RemoteAddr, Request, RequestBuilder};
pub use response::{IntoResponse, Response};
pub use router::MethodSet;

/// A boxed error, the error type of [`Body`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
