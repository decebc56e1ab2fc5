//! Server-sent events: `text/event-stream` responses ([`EventStream`]), the
//! events they carry ([`Event`]) and a broadcast [`Hub`] with
//! `Last-Event-ID` resume.
//!
//! Server-sent events (HTML Living Standard §9.2) push text events from
//! server to browser over one long HTTP response; the browser's
//! `EventSource` reconnects by itself when the response ends, telling the
//! server the id of the last event it got. They run over HTTP/1.1 and
//! HTTP/2 alike (over HTTP/2 many streams share one connection, so the
//! browser's limit of six connections per host does not bite).
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use celer::sse::{Event, Hub};
//! use celer::{App, Request};
//! use http::StatusCode;
//! use tower::ServiceExt;
//!
//! let hub = Hub::builder().history(100).build();
//! let mut app = App::new();
//! app.state(hub.clone());
//! // Browsers subscribe: `new EventSource("/events")`.
//! app.get("/events", |req: Request| async move {
//!     let hub = req.state::<Hub>().unwrap().clone();
//!     hub.subscribe(&req)
//! });
//! // Anything can publish: a handler, a task, another thread.
//! app.post("/say", |mut req: Request| async move {
//!     let text: String = req.text().await?;
//!     let hub = req.state::<Hub>().unwrap();
//!     match hub.publish(Event::new().event("said").data(text)) {
//!         Ok(_) => Ok(StatusCode::NO_CONTENT),
//!         Err(_) => Ok::<_, celer::Error>(StatusCode::PAYLOAD_TOO_LARGE),
//!     }
//! });
//!
//! let req = http::Request::post("/say").body(celer::Body::from("hello")).unwrap();
//! assert_eq!(app.clone().oneshot(req).await.unwrap().status(), StatusCode::NO_CONTENT);
//! assert_eq!(hub.stats().published, 1);
//! # });
//! ```
//!
//! Where to look:
//!
//! - [`Event`]: the fields, and how values are kept from injecting fields.
//! - [`EventStream`]: headers, framing (one body frame per event),
//!   heartbeats, and the end at an event boundary on shutdown.
//! - [`Hub`]: publish once to many, resume from history, slow subscribers
//!   dropped, limits and counters.
//!
//! **Compression.** The [compression
//! middleware](crate::middleware::compression) leaves `text/event-stream`
//! responses alone: compressing each stream on its own needs a
//! compressor per subscriber (32 KiB to 2 MiB of state each, and CPU per
//! event per subscriber instead of once per event), a flush per event
//! that gives back most of the gain on small events, and it mixes every
//! event's secrets with the others' in one compression context. A
//! [`Hub`] can gzip its streams instead ([`HubBuilder::gzip`]): each event
//! is deflated once, on its own, into bytes every subscriber that accepts
//! gzip sends, and each stream carries only its running CRC-32 and length
//! (12 bytes) for the gzip trailer.

mod event;
mod gzip;
mod hub;
mod stream;

pub use self::event::{Event, InvalidEvent};
pub use self::hub::{
    DEFAULT_BUFFER, DEFAULT_BUFFER_BYTES, DEFAULT_HISTORY, DEFAULT_MAX_EVENT_BYTES,
    DEFAULT_MAX_SUBSCRIBERS, Hub, HubBuilder, HubStats, PublishError, SubscribeError,
};
pub use self::stream::{DEFAULT_HEARTBEAT, EventStream};
