//! The feed's answers: the document under its validators and
//! Accept-Encoding, the status document, and the routes that serve them
//! with the SSE and WebSocket pushes.

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Response, StatusCode};

use super::state::Feed;
use super::version::JSON;
use crate::files::conditional::{self, Outcome};
use crate::files::encoding;
use crate::ws::{CloseCode, Config, Message, SlowConsumer, WebSocket, WebSocketRoute};
use crate::{App, Body, Request};

/// Status answers and the status document are never cached.
const NO_STORE: HeaderValue = HeaderValue::from_static("no-store");

// ===== the document =====

/// The answer to a GET or HEAD of the document: 200 with the
/// representation Accept-Encoding prefers, 304 when If-None-Match (or
/// If-Modified-Since) says the client has it, 412 on a failed If-Match,
/// 503 before the first version.
pub(crate) fn document(feed: &Feed, method: &Method, headers: &HeaderMap) -> Response<Body> {
    let Some(version) = feed.current() else {
        let mut res = text(
            StatusCode::SERVICE_UNAVAILABLE,
            "503 Service Unavailable: the feed has no document yet\n",
        );
        res.headers_mut()
            .insert(header::RETRY_AFTER, max_age_secs(feed).into());
        return res;
    };
    // RFC 9110 §12.5.3: the best coding the client accepts that has a
    // variant, else the document itself.
    let rep = encoding::preferred(headers)
        .find_map(|coding| version.variant(coding))
        .unwrap_or(&version.identity);
    // RFC 9110 §13.2.2: preconditions in their order; a Range header is
    // ignored (§14.2 lets a server do so), the document is small.
    let (status, fields, body) = match conditional::evaluate(headers, &rep.validators) {
        Outcome::PreconditionFailed => {
            return text(StatusCode::PRECONDITION_FAILED, "412 Precondition Failed\n");
        }
        Outcome::NotModified => (
            StatusCode::NOT_MODIFIED,
            &rep.not_modified_fields,
            Body::empty(),
        ),
        // A HEAD gets the same head and no body.
        Outcome::Proceed { .. } if method == Method::HEAD => {
            (StatusCode::OK, &rep.ok_fields, Body::empty())
        }
        Outcome::Proceed { .. } => (StatusCode::OK, &rep.ok_fields, Body::from(rep.body.clone())),
    };
    let mut res = Response::new(body);
    *res.status_mut() = status;
    *res.headers_mut() = fields.clone();
    res
}

/// `Cache-Control: max-age` is the interval in whole seconds, rounded up.
pub(crate) fn max_age_secs(feed: &Feed) -> u64 {
    let interval = feed.interval();
    interval.as_secs() + u64::from(interval.subsec_nanos() > 0)
}

/// A short plain-text answer.
fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    let mut res = Response::new(Body::from(Bytes::from_static(body.as_bytes())));
    *res.status_mut() = status;
    let out = res.headers_mut();
    out.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    out.insert(header::CACHE_CONTROL, NO_STORE);
    res
}

// ===== status =====

/// The status document: [`FeedStatus`](super::FeedStatus) as JSON.
pub(crate) fn status(feed: &Feed) -> Response<Body> {
    let body = serde_json::to_vec(&feed.status()).unwrap_or_default();
    let mut res = Response::new(Body::from(body));
    let out = res.headers_mut();
    out.insert(header::CONTENT_TYPE, JSON);
    out.insert(header::CACHE_CONTROL, NO_STORE);
    res
}

// ===== routes =====

impl Feed {
    /// Adds the feed's routes to `app` under `path` (`/scores`, no trailing
    /// slash):
    ///
    /// - `GET path`: the document (ETag, 304, Cache-Control, Last-Modified,
    ///   br/zstd/gzip by Accept-Encoding, HEAD);
    /// - `GET path/events`: server-sent events, one per version, the
    ///   version's id as the event id, the current version first (none
    ///   when `Last-Event-ID` names it);
    /// - `GET path/ws`: the same over WebSocket, one text message per
    ///   version, the current one first;
    /// - `GET path/status`: [`FeedStatus`](super::FeedStatus) as JSON.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use celer::feed::Feed;
    /// let feed = Feed::new("scores");
    /// feed.update(&br#"{"home": 2}"#[..]).unwrap();
    /// let mut app = celer::App::new();
    /// feed.mount(&mut app, "/scores");
    /// let client = celer::test::TestClient::new(app);
    /// let res = client.get("/scores").await;
    /// assert_eq!(res.text(), r#"{"home": 2}"#);
    /// let etag = res.header("etag").unwrap().to_owned();
    /// let res = client.get("/scores").header("if-none-match", etag).send().await;
    /// assert_eq!(res.status(), 304);
    /// # });
    /// ```
    ///
    /// # Panics
    ///
    /// Panics if `path` is not a valid rule (see [`App::get`]).
    pub fn mount(&self, app: &mut App, path: &str) {
        let feed = self.clone();
        app.get(path, move |req: Request| {
            let res = document(&feed, req.method(), req.headers());
            std::future::ready(res)
        });
        let feed = self.clone();
        app.get(&format!("{path}/events"), move |req: Request| {
            std::future::ready(feed.inner.hub.subscribe(&req))
        });
        let feed = self.clone();
        app.get(&format!("{path}/status"), move |_req: Request| {
            std::future::ready(status(&feed))
        });
        app.websocket(&format!("{path}/ws"), self.websocket_route());
    }

    /// The WebSocket route of the feed: the current version first, then
    /// each new one; what the client sends is read and ignored. A client
    /// with more than [`FeedBuilder::ws_queued_bytes`](super::FeedBuilder::ws_queued_bytes)
    /// waiting is closed with 1008.
    fn websocket_route(&self) -> WebSocketRoute {
        let feed = self.clone();
        let config = Config {
            max_queued_bytes: self.inner.config.ws_queued_bytes,
            slow_consumer: SlowConsumer::Close(CloseCode::POLICY),
            ..Config::default()
        };
        WebSocketRoute::new(move |ws: WebSocket| socket(feed.clone(), ws))
            .registry(self.inner.sockets.clone())
            .config(config)
            .compression(false)
            .max_connections(self.inner.config.max_subscribers)
    }
}

/// One WebSocket subscriber. It joined the registry before this runs, so
/// every version made current after this reads `current` is broadcast to
/// it; sending the current one until it stops changing makes the last
/// message the newest version whatever the interleaving.
async fn socket(feed: Feed, mut ws: WebSocket) {
    let mut sent = 0;
    while let Some(version) = feed.current().filter(|v| v.number() != sent) {
        if ws
            .send(Message::Text(version.bytes().clone()))
            .await
            .is_err()
        {
            return;
        }
        sent = version.number();
    }
    while ws.recv().await.is_some() {}
}
