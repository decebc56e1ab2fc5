//! A chat on the Celer framework: rooms by URL, WebSocket with a
//! server-sent-events fallback, a REST endpoint that posts into a room,
//! and an echo WebSocket.
//!
//! Run with `cargo run -p example-chat`, then open <http://127.0.0.1:8080/>.
//!
//! | method and path               | answer                                                  |
//! |-------------------------------|---------------------------------------------------------|
//! | `GET /`                       | the lobby: a form that names a room                     |
//! | `GET /rooms?name=NAME`        | `303` to `/rooms/NAME` (what the lobby's form asks)     |
//! | `GET /rooms/<room>`           | the chat page of the room                               |
//! | `GET /rooms/<room>/ws`        | WebSocket: send `{"from","text"}`, get the room's messages |
//! | `GET /rooms/<room>/events`    | the room's messages as server-sent events               |
//! | `POST /rooms/<room>/messages` | `202`, posts `{"from","text"}` into the room            |
//! | `GET /rooms/<room>/members`   | who is connected: each WebSocket's id and HTTP version, the SSE count |
//! | `GET /echo`                   | a WebSocket that sends every message back as it came    |
//!
//! A message reaches everyone in the room, whatever way they came: it is
//! broadcast to the room's WebSocket group through the [`Registry`] and
//! published to the room's SSE [`Hub`]. Room names are 1 to
//! [`MAX_ROOM_NAME`] characters of `a-z`, `0-9` and `-`; any other name is
//! a `404`. Every message is JSON, `{"from": NAME, "text": TEXT}`, checked
//! by [`Said::check`]; what a client sends wrong gets a reason back (a
//! JSON `{"error": ...}`: the WebSocket's next message, or the body of a
//! `4xx`).
//!
//! What a client can hold is bounded: messages ([`MAX_WS_MESSAGE_BYTES`],
//! [`BODY_LIMIT`], [`MAX_TEXT_CHARS`]), rooms with SSE subscribers
//! ([`DEFAULT_MAX_ROOMS`]), subscribers per room ([`DEFAULT_MAX_SSE_PER_ROOM`]),
//! and, from the framework, WebSocket connections per route and each
//! connection's outgoing queue (a reader too slow for the room is closed
//! with 1008). The pages load nothing but what this server serves (a
//! `Content-Security-Policy` says so), put every text they receive in the
//! page with `textContent`, and a WebSocket handshake from a page of
//! another site (its `Origin`) is refused with `403`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use celer::response::{IntoResponse, Json};
use celer::sse::{Event, Hub};
use celer::ws::{Accept, CloseCode, Config, Message, Registry, WebSocket, WebSocketRoute};
use celer::{App, Request, Response};
use http::StatusCode;
use http::header::{self, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Longest room name, in characters (of `a-z`, `0-9` and `-`).
pub const MAX_ROOM_NAME: usize = 32;

/// Longest sender name, in characters.
pub const MAX_FROM_CHARS: usize = 32;

/// Longest message text, in characters.
pub const MAX_TEXT_CHARS: usize = 2000;

/// Largest WebSocket message a chat connection takes, in bytes: past it the
/// connection is closed with 1009 (RFC 6455 §7.4.1). Room for
/// [`MAX_TEXT_CHARS`] characters of four bytes with their JSON around them.
pub const MAX_WS_MESSAGE_BYTES: usize = 16 * 1024;

/// Largest body of `POST /rooms/<room>/messages`, in bytes; past it `413`.
pub const BODY_LIMIT: usize = 16 * 1024;

/// Rooms with an SSE hub at once, by default. A room gets a hub when its
/// first SSE subscriber comes; when there are this many, the hubs without
/// subscribers are dropped, and if none is, a new room's subscriber gets
/// `503`. (WebSocket rooms cost nothing of their own: they are groups of
/// the registry, bounded by the route's connections.)
pub const DEFAULT_MAX_ROOMS: usize = 1024;

/// SSE subscribers of one room at once, by default; more get `503` with
/// `Retry-After`.
pub const DEFAULT_MAX_SSE_PER_ROOM: usize = 1000;

/// Messages a room's hub keeps so that an `EventSource` that reconnects
/// (with `Last-Event-ID`) gets what it missed.
pub const SSE_HISTORY: usize = 64;

/// Largest message the echo WebSocket takes, by default: 16 MiB, the
/// largest the Autobahn conformance suite sends.
pub const DEFAULT_ECHO_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// How the app is set up; [`Settings::default`] is what `example-chat`
/// runs with unless told otherwise.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Rooms with an SSE hub at once (see [`DEFAULT_MAX_ROOMS`]).
    pub max_rooms: usize,
    /// SSE subscribers of one room at once (see
    /// [`DEFAULT_MAX_SSE_PER_ROOM`]).
    pub max_sse_per_room: usize,
    /// Largest message `/echo` takes, in bytes.
    pub echo_max_message_bytes: usize,
    /// Whether `/echo` offers permessage-deflate (RFC 7692).
    pub echo_compression: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_rooms: DEFAULT_MAX_ROOMS,
            max_sse_per_room: DEFAULT_MAX_SSE_PER_ROOM,
            echo_max_message_bytes: DEFAULT_ECHO_MAX_MESSAGE_BYTES,
            echo_compression: true,
        }
    }
}

/// A chat message, as clients send it and as everyone in the room gets it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Said {
    /// Who says it.
    pub from: String,
    /// What they say.
    pub text: String,
}

impl Said {
    /// Checks a message and trims its name: the name is 1 to
    /// [`MAX_FROM_CHARS`] characters, the text 1 to [`MAX_TEXT_CHARS`] and
    /// not only blanks, and neither holds control characters (but the text
    /// may hold line breaks and tabs). The error is the reason, for the
    /// client.
    ///
    /// ```
    /// use example_chat::Said;
    /// let said = Said { from: " ann ".into(), text: "hi".into() }.check().unwrap();
    /// assert_eq!(said.from, "ann");
    /// let empty = Said { from: "ann".into(), text: "  ".into() };
    /// assert_eq!(empty.check().unwrap_err(), "text is empty");
    /// ```
    pub fn check(mut self) -> Result<Said, &'static str> {
        self.from = self.from.trim().to_owned();
        if self.from.is_empty() {
            return Err("from is empty");
        }
        if self.from.chars().count() > MAX_FROM_CHARS {
            return Err("from is longer than 32 characters");
        }
        if self.from.chars().any(char::is_control) {
            return Err("from holds control characters");
        }
        if self.text.trim().is_empty() {
            return Err("text is empty");
        }
        if self.text.chars().count() > MAX_TEXT_CHARS {
            return Err("text is longer than 2000 characters");
        }
        if self
            .text
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t')
        {
            return Err("text holds control characters");
        }
        Ok(self)
    }
}

/// Whether `name` is a room name: 1 to [`MAX_ROOM_NAME`] characters of
/// `a-z`, `0-9` and `-`.
///
/// ```
/// assert!(example_chat::is_room_name("tea-break"));
/// assert!(!example_chat::is_room_name("Tea Break"));
/// assert!(!example_chat::is_room_name(""));
/// ```
pub fn is_room_name(name: &str) -> bool {
    (1..=MAX_ROOM_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// How many received a posted message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Delivered {
    /// WebSocket connections of the room that took it.
    pub websocket: usize,
    /// SSE subscribers of the room when it was published.
    pub sse: usize,
}

/// The chat's state: the registry of WebSocket connections (grouped by
/// room) and the SSE hub of each room. Cloning is one reference count.
#[derive(Debug, Clone)]
pub struct Chat {
    inner: Arc<ChatInner>,
}

#[derive(Debug)]
struct ChatInner {
    registry: Registry,
    /// Each open WebSocket by id: its room and the HTTP version it came on.
    members: Mutex<HashMap<String, (String, &'static str)>>,
    hubs: Mutex<HashMap<String, Hub>>,
    max_rooms: usize,
    max_sse_per_room: usize,
}

impl Chat {
    /// A chat with no one in it, with at most `max_rooms` SSE hubs of at
    /// most `max_sse_per_room` subscribers each.
    pub fn new(max_rooms: usize, max_sse_per_room: usize) -> Chat {
        Chat {
            inner: Arc::new(ChatInner {
                registry: Registry::new(),
                members: Mutex::new(HashMap::new()),
                hubs: Mutex::new(HashMap::new()),
                max_rooms,
                max_sse_per_room,
            }),
        }
    }

    /// The registry of the WebSocket connections; each is in the group of
    /// its room.
    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    fn hubs(&self) -> MutexGuard<'_, HashMap<String, Hub>> {
        // No critical section can leave the map half-changed.
        self.inner
            .hubs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends `said` to everyone in `room`: its WebSocket group and its SSE
    /// subscribers. The message is encoded once for each.
    pub fn post(&self, room: &str, said: &Said) -> Delivered {
        let json = serde_json::to_string(said).expect("two strings serialise");
        let hub = self.hubs().get(room).cloned();
        let sse = match hub {
            // An event of two checked strings is far under the hub's limit.
            Some(hub) if hub.publish(Event::new().data(json.clone())).is_ok() => {
                hub.stats().subscribers
            }
            _ => 0,
        };
        let websocket = self.inner.registry.broadcast(room, Message::text(json));
        Delivered { websocket, sse }
    }

    /// Subscribes the request to the SSE hub of `room`, made on demand;
    /// under the lock, so that the hub cannot be dropped for having no
    /// subscribers between its making and the subscription.
    fn subscribe(&self, room: &str, req: &Request) -> Response {
        let mut hubs = self.hubs();
        if !hubs.contains_key(room) && hubs.len() >= self.inner.max_rooms {
            hubs.retain(|_, hub| hub.stats().subscribers > 0);
            if hubs.len() >= self.inner.max_rooms {
                let mut res = error(StatusCode::SERVICE_UNAVAILABLE, "too many rooms");
                res.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("10"));
                return res;
            }
        }
        let hub = hubs.entry(room.to_owned()).or_insert_with(|| {
            Hub::builder()
                .history(SSE_HISTORY)
                .max_subscribers(self.inner.max_sse_per_room)
                .build()
        });
        hub.subscribe(req).into_response()
    }

    /// Rooms with an SSE hub now.
    pub fn sse_rooms(&self) -> usize {
        self.hubs().len()
    }

    fn members(&self) -> MutexGuard<'_, HashMap<String, (String, &'static str)>> {
        // Every critical section is one insert, remove or read.
        self.inner
            .members
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Who is in `room`: its WebSockets (id and HTTP version, ordered by
    /// id) and how many SSE subscribers it has.
    pub fn who(&self, room: &str) -> serde_json::Value {
        let mut websocket: Vec<_> = self
            .members()
            .iter()
            .filter(|(_, (r, _))| r == room)
            .map(|(id, (_, http))| json!({ "id": id, "http": http }))
            .collect();
        websocket.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
        let sse = self
            .hubs()
            .get(room)
            .map_or(0, |hub| hub.stats().subscribers);
        json!({ "room": room, "websocket": websocket, "sse": sse })
    }
}

/// A WebSocket listed in [`Chat::who`] while it lives.
struct Member {
    chat: Chat,
    id: String,
}

impl Member {
    fn join(chat: &Chat, ws: &WebSocket, room: &str) -> Member {
        let http = match ws.http_version() {
            http::Version::HTTP_2 => "HTTP/2",
            _ => "HTTP/1.1",
        };
        chat.members()
            .insert(ws.id().to_owned(), (room.to_owned(), http));
        Member {
            chat: chat.clone(),
            id: ws.id().to_owned(),
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.chat.members().remove(&self.id);
    }
}

/// Builds the app.
///
/// ```
/// let app = example_chat::app(&example_chat::Settings::default());
/// # let _ = app;
/// ```
pub fn app(settings: &Settings) -> App {
    let chat = Chat::new(settings.max_rooms, settings.max_sse_per_room);
    let mut app = App::new();
    app.state(chat.clone());
    app.body_limit(BODY_LIMIT);
    app.get("/", |_req: Request| async { page(LOBBY_HTML, HTML) });
    app.get("/rooms", enter);
    app.get("/rooms/<room>", |req: Request| async move {
        match room_of(&req) {
            Some(_) => page(CHAT_HTML, HTML),
            None => no_such_room(),
        }
    });
    app.get("/rooms/<room>/events", |req: Request| async move {
        match room_of(&req) {
            Some(room) => chat_of(&req).subscribe(&room, &req),
            None => no_such_room(),
        }
    });
    app.post("/rooms/<room>/messages", post_message);
    app.get("/rooms/<room>/members", |req: Request| async move {
        match room_of(&req) {
            Some(room) => Json(chat_of(&req).who(&room)).into_response(),
            None => no_such_room(),
        }
    });
    app.websocket("/rooms/<room>/ws", chat_route(&chat));
    app.websocket("/echo", echo_route(settings));
    app.get("/static/chat.js", |_req: Request| async {
        page(CHAT_JS, "text/javascript; charset=utf-8")
    });
    app.get("/static/chat.css", |_req: Request| async {
        page(CHAT_CSS, "text/css; charset=utf-8")
    });
    app.get("/static/icon.svg", |_req: Request| async {
        page(ICON_SVG, "image/svg+xml")
    });
    app
}

const LOBBY_HTML: &str = include_str!("../assets/lobby.html");
const CHAT_HTML: &str = include_str!("../assets/chat.html");
const CHAT_JS: &str = include_str!("../assets/chat.js");
const CHAT_CSS: &str = include_str!("../assets/chat.css");
const ICON_SVG: &str = include_str!("../assets/icon.svg");
const HTML: &str = "text/html; charset=utf-8";

/// What every page may load and run: only what this server serves, no
/// inline script, no plugin, no framing.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; object-src 'none'; base-uri 'none'; \
                   form-action 'self'; frame-ancestors 'none'";

/// One of the embedded files, with its type and the page headers.
fn page(body: &'static str, content_type: &'static str) -> Response {
    let mut res = Response::new(body.into());
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    res
}

/// A JSON error: `{"error": reason}` with `status`.
fn error(status: StatusCode, reason: &str) -> Response {
    (status, Json(json!({ "error": reason }))).into_response()
}

fn chat_of(req: &Request) -> &Chat {
    req.state::<Chat>().expect("app() installs the chat")
}

/// The room the path names, if it is a room name.
fn room_of(req: &Request) -> Option<String> {
    req.param_str("room")
        .filter(|room| is_room_name(room))
        .map(|room| room.into_owned())
}

/// The answer to a path that names no room.
fn no_such_room() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "no such room: a room name is 1 to 32 of a-z, 0-9 and -",
    )
}

/// `GET /rooms?name=NAME`: the lobby's form. The name is trimmed and
/// lowercased, blanks become `-`.
async fn enter(req: Request) -> Response {
    let name = req.query_param("name").unwrap_or_default();
    let room: String = name
        .trim()
        .chars()
        .map(|c| {
            if c.is_whitespace() {
                '-'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect();
    if !is_room_name(&room) {
        return error(
            StatusCode::BAD_REQUEST,
            "a room name is 1 to 32 of a-z, 0-9 and -",
        );
    }
    let mut res = celer::response::status(StatusCode::SEE_OTHER);
    let location = HeaderValue::try_from(format!("/rooms/{room}")).expect("a checked name");
    res.headers_mut().insert(header::LOCATION, location);
    res
}

/// `POST /rooms/<room>/messages`: a JSON `{"from","text"}` posted into the
/// room; `202` with how many got it.
async fn post_message(mut req: Request) -> Response {
    let Some(room) = room_of(&req) else {
        return no_such_room();
    };
    let said = match req.json::<Said>().await {
        Ok(said) => said,
        Err(rejection) => return error(rejection.status(), &rejection.to_string()),
    };
    let said = match said.check() {
        Ok(said) => said,
        Err(reason) => return error(StatusCode::UNPROCESSABLE_ENTITY, reason),
    };
    let delivered = chat_of(&req).post(&room, &said);
    (
        StatusCode::ACCEPTED,
        Json(json!({ "room": room, "delivered": delivered })),
    )
        .into_response()
}

/// The WebSocket route of the rooms: a connection joins the group of its
/// room; what it sends is checked and posted to the room.
fn chat_route(chat: &Chat) -> WebSocketRoute {
    let config = Config {
        max_message_bytes: MAX_WS_MESSAGE_BYTES,
        max_frame_bytes: MAX_WS_MESSAGE_BYTES as u64,
        ..Config::default()
    };
    let handler_chat = chat.clone();
    WebSocketRoute::new(move |ws| talk(handler_chat.clone(), ws))
        .registry(chat.registry().clone())
        .config(config)
        .validate(|req: Request| async move {
            if !same_origin(&req) {
                return Err(error(
                    StatusCode::FORBIDDEN,
                    "a page of another site cannot join a room",
                ));
            }
            // Each connection gets an id of its own (the route's); its
            // group is its room.
            room_of(&req)
                .map(|room| Accept::new().group(room))
                .ok_or_else(no_such_room)
        })
}

/// Whether a handshake comes from one of this server's pages, or from a
/// client that is not a browser (which sends no `Origin`). Browsers let any
/// page open a WebSocket to any server and say whose page it is in
/// `Origin` (RFC 6455 §10.2); a page of another site is refused.
fn same_origin(req: &Request) -> bool {
    let Some(origin) = req.headers().get(header::ORIGIN) else {
        return true;
    };
    let host = req.headers().get(header::HOST).map(HeaderValue::as_bytes);
    let authority = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, authority)| authority.as_bytes());
    authority.is_some() && authority == host
}

/// One chat connection: every text message is a [`Said`] for the room; a
/// wrong one is answered `{"error": ...}` to this connection alone.
async fn talk(chat: Chat, mut ws: WebSocket) {
    let room = ws.groups()[0].clone();
    let _member = Member::join(&chat, &ws, &room);
    while let Some(msg) = ws.recv().await {
        let Some(text) = msg.as_text() else {
            // RFC 6455 §7.4.1: 1003, a type of data it cannot accept.
            ws.close(CloseCode::UNSUPPORTED, "text messages only").await;
            return;
        };
        let checked = serde_json::from_str::<Said>(text)
            .map_err(|_| "a message is JSON: {\"from\": NAME, \"text\": TEXT}")
            .and_then(Said::check);
        match checked {
            Ok(said) => {
                chat.post(&room, &said);
            }
            Err(reason) => {
                let answer = json!({ "error": reason }).to_string();
                if ws.send(Message::text(answer)).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// The echo route: every message back as it came, permessage-deflate
/// offered (unless [`Settings::echo_compression`] is off) and applied to
/// every message, as the conformance suite's compression cases expect.
fn echo_route(settings: &Settings) -> WebSocketRoute {
    let max = settings.echo_max_message_bytes;
    let config = Config {
        compression: settings.echo_compression,
        compress_min_bytes: 0,
        max_message_bytes: max,
        max_frame_bytes: max as u64,
        max_queued_bytes: max.saturating_mul(2),
        ..Config::default()
    };
    WebSocketRoute::new(echo).config(config)
}

async fn echo(mut ws: WebSocket) {
    while let Some(msg) = ws.recv().await {
        if ws.send(msg).await.is_err() {
            break;
        }
    }
}
