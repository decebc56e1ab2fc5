//! The WebSocket route: the handshake, the validate step, the `101` (or,
//! over HTTP/2, the `200` to an extended CONNECT, RFC 8441), and the
//! connection's task.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use celer_server::upgrade::{ConnectProtocol, OnUpgrade};
use celer_server::ws::{deflate, handshake};
use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Version, header};

use super::{CloseCode, CloseFrame, Config, Message, Registry, SendError, Sender, SlowConsumer};
use crate::response::{IntoResponse, Response};
use crate::{Body, Request};

type Validate =
    Arc<dyn Fn(Request) -> BoxFuture<'static, Result<Accept, Box<Response>>> + Send + Sync>;
type Handle = Arc<dyn Fn(WebSocket) -> BoxFuture<'static, ()> + Send + Sync>;

/// What the validate step decides for an accepted handshake.
#[derive(Debug, Clone, Default)]
pub struct Accept {
    id: Option<String>,
    groups: Vec<String>,
    protocol: Option<String>,
    headers: HeaderMap,
    slow_consumer: Option<SlowConsumer>,
}

impl Accept {
    /// Accepts with a generated id, no group, no subprotocol.
    pub fn new() -> Accept {
        Accept::default()
    }

    /// The id the connection is known by in the registry; a connection
    /// already under that id is closed (1008) and replaced.
    pub fn id(mut self, id: impl Into<String>) -> Accept {
        self.id = Some(id.into());
        self
    }

    /// Adds the connection to a group (room, topic).
    pub fn group(mut self, group: impl Into<String>) -> Accept {
        self.groups.push(group.into());
        self
    }

    /// The subprotocol answered in `Sec-WebSocket-Protocol`; it must be
    /// one the client offered (a `500` otherwise, RFC 6455 §4.2.2).
    pub fn protocol(mut self, protocol: impl Into<String>) -> Accept {
        self.protocol = Some(protocol.into());
        self
    }

    /// Adds a header to the `101` response.
    pub fn header(mut self, name: HeaderName, value: HeaderValue) -> Accept {
        self.headers.append(name, value);
        self
    }

    /// Adds a `Set-Cookie` to the `101` response.
    ///
    /// # Panics
    ///
    /// Panics if the cookie is not a valid header value.
    pub fn cookie(self, cookie: &str) -> Accept {
        let value = HeaderValue::from_str(cookie).expect("a cookie is a valid header value");
        self.header(header::SET_COOKIE, value)
    }

    /// This connection's slow-consumer policy, instead of the route's.
    pub fn slow_consumer(mut self, policy: SlowConsumer) -> Accept {
        self.slow_consumer = Some(policy);
        self
    }
}

/// The subprotocols a handshake request offers, in the client's order.
pub fn offered_protocols(req: &Request) -> Vec<String> {
    req.headers()
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .collect()
}

/// A WebSocket route: a handler, an optional validate step, the registry
/// its connections join, and their settings and limits.
#[derive(Clone)]
pub struct WebSocketRoute {
    validate: Validate,
    handler: Handle,
    registry: Registry,
    config: Arc<Config>,
    max_connections: usize,
    open: Arc<AtomicUsize>,
}

impl fmt::Debug for WebSocketRoute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebSocketRoute")
            .field("config", &self.config)
            .field("max_connections", &self.max_connections)
            .finish_non_exhaustive()
    }
}

impl WebSocketRoute {
    /// A route whose connections run `handler`. The connection lives while
    /// the handler runs; when it returns the connection is closed (1000).
    /// Every handshake is accepted until [`WebSocketRoute::validate`] says
    /// otherwise.
    pub fn new<H, F>(handler: H) -> WebSocketRoute
    where
        H: Fn(WebSocket) -> F + Send + Sync + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        WebSocketRoute {
            validate: Arc::new(|_req| async { Ok(Accept::new()) }.boxed()),
            handler: Arc::new(move |ws| handler(ws).boxed()),
            registry: Registry::new(),
            config: Arc::new(Config::default()),
            max_connections: celer_server::limits::WS_MAX_CONNECTIONS,
            open: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The validate step: sees the whole request (after the handshake
    /// fields were checked) and accepts it or answers with any response.
    pub fn validate<V, F, R>(mut self, validate: V) -> WebSocketRoute
    where
        V: Fn(Request) -> F + Send + Sync + 'static,
        F: Future<Output = Result<Accept, R>> + Send + 'static,
        R: IntoResponse,
    {
        self.validate = Arc::new(move |req| {
            validate(req)
                .map(|r| r.map_err(|e| Box::new(e.into_response())))
                .boxed()
        });
        self
    }

    /// The registry the route's connections join (default: one of the
    /// route's own).
    pub fn registry(mut self, registry: Registry) -> WebSocketRoute {
        self.registry = registry;
        self
    }

    /// Per-connection settings and limits.
    pub fn config(mut self, config: Config) -> WebSocketRoute {
        self.config = Arc::new(config);
        self
    }

    /// Turns permessage-deflate off (or on again) for this route.
    pub fn compression(mut self, on: bool) -> WebSocketRoute {
        Arc::make_mut(&mut self.config).compression = on;
        self
    }

    /// Most connections open at once on this route; past it handshakes are
    /// answered `503`. Default [`celer_server::limits::WS_MAX_CONNECTIONS`].
    pub fn max_connections(mut self, max: usize) -> WebSocketRoute {
        self.max_connections = max;
        self
    }

    /// The route's registry.
    pub fn registry_handle(&self) -> &Registry {
        &self.registry
    }

    /// The route as a handler of GET requests.
    pub(crate) fn into_handler(
        self,
    ) -> impl Fn(Request) -> BoxFuture<'static, Response> + Send + Sync + 'static {
        let route = Arc::new(self);
        move |req| {
            let route = route.clone();
            async move { route.handshake(req).await }.boxed()
        }
    }

    async fn handshake(self: Arc<Self>, mut req: Request) -> Response {
        let version = req.version();
        // HTTP/2 (RFC 8441): an extended CONNECT; HTTP/1.1 (RFC 6455
        // §4.2.1): a GET asking for an upgrade.
        let checked = if version == Version::HTTP_2 {
            let protocol = req
                .extensions()
                .get::<ConnectProtocol>()
                .map(ConnectProtocol::as_str);
            handshake::check_extended_connect(req.method(), protocol, req.headers())
        } else {
            handshake::check(req.method(), version, req.headers())
        };
        let hs = match checked {
            Ok(hs) => hs,
            Err(e) => {
                let mut res = plain(e.status, e.reason);
                // RFC 6455 §4.4: the version the server speaks, with a
                // wrong version and with a 426.
                let upgrade = e.status == StatusCode::UPGRADE_REQUIRED;
                if e.is_version() || upgrade {
                    res.headers_mut().insert(
                        header::SEC_WEBSOCKET_VERSION,
                        HeaderValue::from_static("13"),
                    );
                }
                if upgrade {
                    res.headers_mut()
                        .insert(header::UPGRADE, HeaderValue::from_static("websocket"));
                }
                return res;
            }
        };
        let Some(on_upgrade) = req.extensions_mut().remove::<OnUpgrade>() else {
            return plain(
                StatusCode::BAD_REQUEST,
                "this connection cannot be upgraded",
            );
        };
        // The slot is taken before the 101, so racing handshakes cannot pass the limit.
        let slot = match Slot::take(&self.open, self.max_connections) {
            Some(slot) => slot,
            None => {
                return plain(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "too many WebSocket connections on this route",
                );
            }
        };
        let accept = match (self.validate)(req).await {
            Ok(accept) => accept,
            Err(res) => return *res,
        };
        if let Some(p) = &accept.protocol {
            if !hs.protocols.iter().any(|o| o == p) {
                tracing::error!(target: "celer::ws", protocol = %p, "validate chose a subprotocol the client did not offer");
                return plain(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "subprotocol not offered by the client",
                );
            }
        }
        let exts: Vec<&str> = hs.extensions.iter().map(String::as_str).collect();
        let deflate = if self.config.compression {
            deflate::negotiate(&exts)
        } else {
            None
        };
        let mut res = http::Response::new(Body::empty());
        *res.headers_mut() = accept.headers.clone();
        if let Some(key) = hs.accept {
            *res.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
            let h = res.headers_mut();
            h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
            h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
            h.insert(header::SEC_WEBSOCKET_ACCEPT, key);
        } else {
            // RFC 8441 §5: a 200 opens the stream's tunnel.
            *res.status_mut() = StatusCode::OK;
        }
        let h = res.headers_mut();
        if let Some(p) = &accept.protocol {
            h.insert(
                header::SEC_WEBSOCKET_PROTOCOL,
                HeaderValue::from_str(p).expect("an offered token"),
            );
        }
        if let Some((_, value)) = &deflate {
            h.insert(
                header::SEC_WEBSOCKET_EXTENSIONS,
                HeaderValue::from_str(value).expect("ASCII"),
            );
        }
        let config = match accept.slow_consumer {
            Some(policy) if policy != self.config.slow_consumer => {
                let mut c = (*self.config).clone();
                c.slow_consumer = policy;
                Arc::new(c)
            }
            _ => self.config.clone(),
        };
        let route = self.clone();
        tokio::spawn(async move {
            let io = match on_upgrade.await {
                Ok(io) => io,
                Err(_) => return,
            };
            let deflate = deflate.map(|(d, _)| d);
            let inner = celer_server::ws::WebSocket::new(io, deflate, config);
            let id = accept.id.unwrap_or_else(next_id);
            tracing::debug!(target: "celer::ws", %id, http = ?version, deflate = deflate.is_some(), "WebSocket opened");
            let serial = route.registry.insert(&id, &accept.groups, inner.sender());
            let ws = WebSocket {
                live: Some(Live { inner, _slot: slot }),
                id,
                groups: accept.groups,
                protocol: accept.protocol,
                http_version: version,
                registry: route.registry.clone(),
                serial,
            };
            // The handler gets a task of its own, so the state this one
            // held for the handshake is freed for the connection's life.
            tokio::spawn((route.handler)(ws));
        });
        res
    }
}

fn next_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("ws-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

fn plain(status: StatusCode, reason: &'static str) -> Response {
    let mut res = http::Response::new(Body::from(reason));
    *res.status_mut() = status;
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    res
}

/// One of a route's connection slots.
#[derive(Debug)]
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(open: &Arc<AtomicUsize>, max: usize) -> Option<Slot> {
        open.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < max).then_some(n + 1)
        })
        .ok()
        .map(|_| Slot(open.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[derive(Debug)]
struct Live {
    inner: celer_server::ws::WebSocket,
    _slot: Slot,
}

/// An accepted WebSocket connection, as the route's handler gets it.
///
/// The connection makes progress (reads, pongs, pings, writes of what the
/// registry queued, the close handshake, the 1001 close at shutdown) while
/// the handler awaits [`WebSocket::recv`]; a handler that only pushes
/// loops on `recv` until it returns `None`.
#[derive(Debug)]
pub struct WebSocket {
    live: Option<Live>,
    id: String,
    groups: Vec<String>,
    protocol: Option<String>,
    http_version: Version,
    registry: Registry,
    serial: u64,
}

impl WebSocket {
    fn inner(&mut self) -> &mut celer_server::ws::WebSocket {
        &mut self.live.as_mut().expect("live until dropped").inner
    }

    /// The next message, or `None` once the connection is over.
    pub async fn recv(&mut self) -> Option<Message> {
        self.inner().recv().await
    }

    /// Queues a message and writes what the socket takes now.
    pub async fn send(&mut self, message: Message) -> Result<(), SendError> {
        self.inner().send(message).await
    }

    /// Closes with this code and reason and waits for the handshake to end.
    pub async fn close(&mut self, code: CloseCode, reason: &str) {
        self.inner().close(code, reason).await;
    }

    /// The client's close frame, once received.
    pub fn peer_close(&self) -> Option<&CloseFrame> {
        self.live.as_ref().and_then(|l| l.inner.peer_close())
    }

    /// A handle to queue messages for this connection from anywhere.
    pub fn sender(&self) -> Sender {
        self.live
            .as_ref()
            .expect("live until dropped")
            .inner
            .sender()
    }

    /// The id in the registry.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The groups it joined when accepted.
    pub fn groups(&self) -> &[String] {
        &self.groups
    }

    /// The subprotocol agreed, if any.
    pub fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }

    /// The HTTP version the connection was opened on: `HTTP/1.1` (an
    /// upgraded connection) or `HTTP/2` (a stream of a connection that
    /// also carries other requests, RFC 8441).
    pub fn http_version(&self) -> Version {
        self.http_version
    }

    /// The registry it is in.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}

impl Drop for WebSocket {
    fn drop(&mut self) {
        self.registry.remove(&self.id, self.serial);
        if let Some(mut live) = self.live.take() {
            if !live.inner.is_over() {
                // The handler returned with the connection open: it is
                // closed normally, in a task of its own.
                tokio::spawn(async move {
                    live.inner.close(CloseCode::NORMAL, "").await;
                });
            }
        }
    }
}
