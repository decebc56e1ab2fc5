//! WebSocket routes and the registry of live connections.
//!
//! [`App::websocket`](crate::App::websocket) adds a route whose
//! [`WebSocketRoute::validate`] step sees the whole request and either
//! refuses it with any response or accepts it with an [`Accept`]: the id
//! the connection is known by in a [`Registry`], its groups (rooms,
//! topics), the subprotocol, and headers and cookies for the `101`. The
//! handler then gets a [`WebSocket`].
//!
//! The registry is callable from any handler, task or thread:
//! [`Registry::send`], [`Registry::broadcast`] (the message is framed and
//! compressed once for every receiver with the same settings),
//! [`Registry::close`], counts and lists. Every connection has a bounded
//! outgoing queue with a [`SlowConsumer`] policy.
//!
//! ```no_run
//! use celer::ws::{Accept, Message, Registry, WebSocket, WebSocketRoute};
//! use celer::{App, Request};
//!
//! let rooms = Registry::new();
//! let mut app = App::new();
//! app.websocket(
//!     "/rooms/<id>",
//!     WebSocketRoute::new(|mut ws: WebSocket| async move {
//!         let room = ws.groups()[0].clone();
//!         while let Some(msg) = ws.recv().await {
//!             ws.registry().broadcast(&room, msg);
//!         }
//!     })
//!     .registry(rooms.clone())
//!     .validate(|req: Request| async move {
//!         let room = req.param_str("id").unwrap_or_default().into_owned();
//!         Ok::<_, http::StatusCode>(Accept::new().group(room))
//!     }),
//! );
//! ```

mod registry;
mod route;

pub use celer_server::ws::{
    CloseCode, CloseFrame, Config, Deflate, Message, Prepared, SendError, Sender, SlowConsumer,
};

pub use self::registry::Registry;
pub use self::route::{Accept, WebSocket, WebSocketRoute, offered_protocols};
