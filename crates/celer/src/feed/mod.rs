//! Live feeds: one JSON document, replaced every second or so, served to
//! many clients with validators and precompressed variants, and pushed
//! over SSE and WebSocket.
//!
//! A [`Feed`] holds the current [`Version`] of its document. Anything may
//! [`update`](Feed::update) it — a [`Source`] task ([`poll_fn`] for a
//! closure called every interval, [`from_stream`] for a stream of
//! documents, or one of the app's own), a handler, another thread. An
//! update that is not JSON, fails the [`FeedBuilder::validator`] or is over
//! [`FeedBuilder::max_document_bytes`] is refused, logged and counted, and
//! the last good version keeps being served.
//!
//! [`Feed::mount`] serves it:
//!
//! - `GET /NAME`: the document. Its strong ETag is the content hash
//!   (instances serving the same bytes agree), `If-None-Match` gets `304`,
//!   `Cache-Control: max-age` is the interval, `Last-Modified` (on `200`s:
//!   a `304` has the ETag) is when the version came, `Vary:
//!   accept-encoding`; the br, zstd and gzip variants
//!   are made once per version and chosen by `Accept-Encoding`.
//! - `GET /NAME/events`: server-sent events, one per version, the
//!   version's id (its content hash) as the event id: a client that
//!   reconnects with an older `Last-Event-ID` gets the current version at
//!   once, one with the current id gets the next. Subscribers that fall
//!   behind are dropped, never buffered for (see [`sse::Hub`](crate::sse::Hub)).
//!   A client that accepts gzip (browsers do) gets a gzip-coded stream:
//!   each version deflated once for all of them
//!   ([`HubBuilder::gzip`](crate::sse::HubBuilder::gzip)).
//! - `GET /NAME/ws`: the same as WebSocket text messages.
//! - `GET /NAME/status`: [`FeedStatus`] as JSON: version, when, source
//!   health, refusals, subscribers.
//!
//! [`Feeds`] mounts several under one prefix with a list of them.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use celer::feed::{Feed, poll_fn};
//!
//! let feed = Feed::new("time");
//! let task = feed.spawn(poll_fn("the clock", || async {
//!     let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
//!     Ok::<_, std::io::Error>(format!("{{\"now\": {}}}", now.as_secs()))
//! }));
//! let mut app = celer::App::new();
//! feed.mount(&mut app, "/time");
//! # while feed.current().is_none() { tokio::task::yield_now().await; }
//! let client = celer::test::TestClient::new(app);
//! let res = client.get("/time").header("accept-encoding", "gzip").await;
//! assert_eq!(res.status(), 200);
//! assert_eq!(res.header("cache-control"), Some("max-age=1"));
//! # task.abort();
//! # });
//! ```

mod background;
pub mod limits;
mod respond;
mod set;
mod source;
mod state;
mod version;

pub use self::set::{Feeds, InvalidName, MAX_FEED_NAME_BYTES, is_valid_name};
pub use self::source::{FromStream, PollFn, Source, SourceFuture, from_stream, offer, poll_fn};
pub use self::state::{Feed, FeedBuilder, FeedStatus, UpdateError, Updated, Validator, content_id};
pub use self::version::Version;
