//! The [`Server`]: binding, runtimes, accept loops, the connection limit and
//! graceful shutdown.
//!
//! At the connection limit each accept loop holds at most one accepted
//! client waiting for a slot and accepts no more, so excess clients wait in
//! the kernel's backlog instead of exhausting descriptors; the slot is taken
//! after `accept`, which keeps the limit exact with one listener per worker.
//!
//! Each listener has a role: plain HTTP ([`Builder::listen`]), TLS
//! ([`Builder::listen_tls`], with the certificates of [`Builder::tls`]), or
//! a plain-HTTP redirect to the first TLS listener
//! ([`Builder::redirect_http`]). A TLS listener never pauses for pending
//! handshakes: past `Limits::max_tls_handshakes` the least advanced one is
//! shed.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::HeaderValue;
use http::{Request, Response};
use http_body::Body;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};
use tower_service::Service;

use crate::body::Incoming;
use crate::common::ConnConfig;
use crate::error::BoxError;
use crate::gateway::Gateway;
use crate::limits::Limits;
use crate::listen::{BindOptions, Listen, Listener, options_paths};
use crate::proto;
use crate::redirect::Redirect;
use crate::shutdown::Shutdown;
use crate::tls::{self, TlsConfig, TlsInfo, TlsVersion};
use crate::transport::Transport;

/// How connections are spread over threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threading {
    /// One current-thread runtime per worker, each with its own
    /// SO_REUSEPORT listener: the kernel spreads connections, a connection
    /// never changes thread.
    PerCore,
    /// One multi-thread runtime whose workers steal tasks from each other.
    WorkStealing,
}

/// What the engine serves: a `tower::Service` from `http::Request<Incoming>`
/// to `http::Response` with a body of `Bytes`, whose errors and futures can
/// cross threads. Implemented for every such service.
pub trait HttpService:
    Service<
        Request<Incoming>,
        Response = Response<Self::ResBody>,
        Error: Into<BoxError> + Send,
        Future: Send,
    > + Send
    + 'static
{
    /// The response body type.
    type ResBody: Body<Data = Bytes, Error: Into<BoxError> + Send> + Send + 'static;
}

impl<S, B> HttpService for S
where
    S: Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Error: Into<BoxError> + Send,
    S::Future: Send,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError> + Send,
{
    type ResBody = B;
}

/// Facts about one connection, given to the per-connection service
/// factory once the connection is established: on a TLS listener after
/// the handshake, so they include what it agreed.
///
/// Cloning is cheap (the TLS facts are shared), so a framework can keep
/// one per connection and hand it to every request. The HTTP protocol of
/// each request is its [`version`](http::Request::version) (`HTTP/2.0`
/// over h2, by ALPN or prior knowledge).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnInfo {
    /// The client's address; `None` on UNIX sockets.
    pub remote: Option<SocketAddr>,
    /// The server's address; `None` on UNIX sockets.
    pub local: Option<SocketAddr>,
    /// What the TLS handshake agreed; `None` in the clear.
    pub tls: Option<Arc<TlsInfo>>,
}

impl ConnInfo {
    /// A connection in the clear between these addresses (the engine makes
    /// them; tests and other servers can too).
    pub const fn new(remote: Option<SocketAddr>, local: Option<SocketAddr>) -> ConnInfo {
        ConnInfo {
            remote,
            local,
            tls: None,
        }
    }

    /// The same connection over TLS with these facts.
    ///
    /// ```
    /// use celer_server::{ConnInfo, TlsInfo, TlsVersion};
    /// let info = ConnInfo::new(None, None).with_tls(TlsInfo::new(TlsVersion::Tls13, Some(b"h2"), None));
    /// assert!(info.is_tls());
    /// assert_eq!(info.alpn(), Some(&b"h2"[..]));
    /// ```
    pub fn with_tls(mut self, tls: TlsInfo) -> ConnInfo {
        self.tls = Some(Arc::new(tls));
        self
    }

    /// The client's address; `None` on UNIX sockets.
    pub fn remote_addr(&self) -> Option<SocketAddr> {
        self.remote
    }

    /// The server's address the client connected to; `None` on UNIX
    /// sockets.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local
    }

    /// True when the connection is TLS (a [`Builder::listen_tls`]
    /// listener).
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The TLS facts (version, suite, ALPN, SNI); `None` in the clear.
    pub fn tls(&self) -> Option<&TlsInfo> {
        self.tls.as_deref()
    }

    /// The protocol agreed through ALPN (RFC 7301), `b"h2"` or
    /// `b"http/1.1"`; `None` in the clear or when the client offered none.
    pub fn alpn(&self) -> Option<&[u8]> {
        self.tls.as_deref()?.alpn()
    }

    /// The negotiated TLS version; `None` in the clear.
    pub fn tls_version(&self) -> Option<TlsVersion> {
        self.tls.as_deref().map(TlsInfo::version)
    }

    /// The host name of the client's SNI (RFC 6066 §3); `None` in the
    /// clear or when it sent none.
    pub fn server_name(&self) -> Option<&str> {
        self.tls.as_deref()?.server_name()
    }
}

/// Entry point: `Server::builder()`.
#[derive(Debug)]
pub struct Server;

impl Server {
    /// A builder with the defaults documented on each setter.
    pub fn builder() -> Builder {
        Builder::default()
    }
}

/// What a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// HTTP in the clear.
    Plain,
    /// HTTP over TLS.
    Tls,
    /// A 308 redirect to the first TLS listener, in the clear.
    Redirect,
    /// A gateway protocol from a front-end web server (`fastcgi+…`,
    /// `scgi+…` specs).
    Gateway(Gateway),
}

/// Configures and binds a server.
#[derive(Debug, Clone)]
pub struct Builder {
    listens: Vec<(Role, Listen)>,
    limits: Limits,
    server_header: Option<HeaderValue>,
    tls: Option<TlsConfig>,
    hsts: Option<Duration>,
    workers: usize,
    threading: Threading,
    bind: BindOptions,
    http2: bool,
    extended_connect: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            listens: Vec::new(),
            limits: Limits::default(),
            server_header: Some(HeaderValue::from_static("celer")),
            tls: None,
            hsts: None,
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            threading: Threading::PerCore,
            bind: BindOptions::default(),
            http2: true,
            extended_connect: false,
        }
    }
}

impl Builder {
    /// Adds a plain-HTTP listener, or a gateway listener for a
    /// `fastcgi+…` or `scgi+…` spec ([`Listen::Gateway`]). Default is none;
    /// binding with no listener is an error.
    pub fn listen(mut self, listen: Listen) -> Self {
        match listen {
            Listen::Gateway(gateway, inner) => self.listens.push((Role::Gateway(gateway), *inner)),
            listen => self.listens.push((Role::Plain, listen)),
        }
        self
    }

    /// Adds a TLS listener, served with the certificates of
    /// [`Builder::tls`] (binding fails without them).
    pub fn listen_tls(mut self, listen: Listen) -> Self {
        self.listens.push((Role::Tls, listen));
        self
    }

    /// Adds a plain-HTTP listener that answers every request with
    /// `308 Permanent Redirect` to `https://` on the same host and target,
    /// at the port of the first TCP TLS listener (binding fails without
    /// one). Default is none.
    pub fn redirect_http(mut self, listen: Listen) -> Self {
        self.listens.push((Role::Redirect, listen));
        self
    }

    /// Sets the TLS configuration used by [`Builder::listen_tls`]
    /// listeners. Default is none.
    pub fn tls(mut self, config: TlsConfig) -> Self {
        self.tls = Some(config);
        self
    }

    /// Adds `Strict-Transport-Security: max-age=SECS` to every response on
    /// a TLS listener (not on plain ones, where browsers ignore it,
    /// RFC 6797 §8.1), unless the service set the field itself. Default is
    /// none.
    pub fn hsts(mut self, max_age: Option<Duration>) -> Self {
        self.hsts = max_age;
        self
    }

    /// Sets the limits. Default is [`Limits::default`].
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets the `Server` header, or `None` to send none. Default is `celer`.
    pub fn server_header(mut self, value: Option<HeaderValue>) -> Self {
        self.server_header = value;
        self
    }

    /// Sets the number of worker threads. Default is the number of CPUs.
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n.max(1);
        self
    }

    /// Sets the threading model. Default is [`Threading::PerCore`]
    /// (docs/decisions/001 records the measurement behind it).
    pub fn threading(mut self, threading: Threading) -> Self {
        self.threading = threading;
        self
    }

    /// Serves HTTP/2 (RFC 9113) on plain listeners to a connection that
    /// opens with the HTTP/2 preface (prior knowledge, RFC 9113 §3.3).
    /// Default is true. On TLS listeners the [`TlsConfig`]'s ALPN list
    /// decides instead ([`TlsBuilder::alpn_protocols`](crate::TlsBuilder::alpn_protocols);
    /// it offers `h2` by default).
    pub fn http2(mut self, enabled: bool) -> Self {
        self.http2 = enabled;
        self
    }

    /// Serves WebSocket over HTTP/2 (RFC 8441): HTTP/2 connections
    /// advertise `SETTINGS_ENABLE_CONNECT_PROTOCOL` and pass extended
    /// CONNECT requests to the service (see [`crate::upgrade`]). Default is
    /// false; turn it on only when the service has WebSocket endpoints,
    /// since browsers take the setting as a promise. `celer::App` sets it
    /// itself when it has a WebSocket route ([`Bound::extended_connect`]).
    pub fn extended_connect(mut self, enabled: bool) -> Self {
        self.extended_connect = enabled;
        self
    }

    /// Sets socket options for binding. Default is [`BindOptions::default`].
    pub fn bind_options(mut self, opts: BindOptions) -> Self {
        self.bind = opts;
        self
    }

    /// Binds every listener now, so address errors surface before serving.
    ///
    /// In a process started as a CGI script (`GATEWAY_INTERFACE` set to
    /// `CGI/1.1`, RFC 3875), nothing is bound: the server answers the one
    /// request of its environment and standard input instead.
    pub fn bind(self) -> io::Result<Bound> {
        if crate::gateway::is_cgi() {
            return Ok(Bound {
                config: Arc::new(self.conn_config(None)),
                tls_config: Arc::new(self.conn_config(None)),
                tls: None,
                https_port: 443,
                per_worker: Vec::new(),
                workers: 1,
                threading: Threading::WorkStealing,
                cgi: true,
            });
        }
        if let Some((_, listen)) = self
            .listens
            .iter()
            .find(|(role, l)| *role != Role::Plain && matches!(l, Listen::Gateway(..)))
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{listen}: a gateway listener speaks FastCGI or SCGI in the clear, not TLS or a redirect"
                ),
            ));
        }
        if self.listens.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no listen address given",
            ));
        }
        let has = |role| self.listens.iter().any(|(r, _)| *r == role);
        if has(Role::Tls) && self.tls.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a TLS listener needs a certificate",
            ));
        }
        if has(Role::Redirect) && !has(Role::Tls) {
            return Err(no_redirect_target());
        }
        let copies = match self.threading {
            Threading::PerCore => self.workers,
            Threading::WorkStealing => 1,
        };
        let mut sets = Vec::new();
        for (role, listen) in &self.listens {
            sets.extend(
                listen
                    .bind(&self.bind, copies)?
                    .into_iter()
                    .map(|set| (*role, set)),
            );
        }
        let https_port = sets
            .iter()
            .filter(|(role, _)| *role == Role::Tls)
            .find_map(|(_, set)| set.first()?.tcp_addr())
            .map(|addr| addr.port());
        if has(Role::Redirect) && https_port.is_none() {
            return Err(no_redirect_target());
        }
        let mut per_worker: Vec<Vec<(Role, Listener)>> = (0..copies).map(|_| Vec::new()).collect();
        for (role, set) in sets {
            for (worker, l) in set.into_iter().enumerate() {
                per_worker[worker].push((role, l));
            }
        }
        let hsts = self.hsts.map(|age| {
            HeaderValue::from_str(&format!("max-age={}", age.as_secs()))
                .expect("digits are a valid header value")
        });
        let config = self.conn_config(None);
        let tls_config = self.conn_config(hsts);
        Ok(Bound {
            config: Arc::new(config),
            tls_config: Arc::new(tls_config),
            tls: self.tls,
            https_port: https_port.unwrap_or(443),
            per_worker,
            workers: self.workers,
            threading: self.threading,
            cgi: false,
        })
    }

    fn conn_config(&self, hsts: Option<HeaderValue>) -> ConnConfig {
        ConnConfig {
            limits: self.limits.clone(),
            server_header: self.server_header.clone(),
            hsts,
            http2: self.http2,
            extended_connect: self.extended_connect,
        }
    }
}

fn no_redirect_target() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "an HTTP-to-HTTPS redirect needs a TCP TLS listener to point to",
    )
}

/// A server with its listeners bound, ready to run a service.
#[derive(Debug)]
pub struct Bound {
    /// Settings of plain-HTTP connections.
    config: Arc<ConnConfig>,
    /// Settings of HTTP over TLS (adds HSTS when configured).
    tls_config: Arc<ConnConfig>,
    tls: Option<TlsConfig>,
    /// Where redirect listeners send clients.
    https_port: u16,
    per_worker: Vec<Vec<(Role, Listener)>>,
    workers: usize,
    threading: Threading,
    /// Started as a CGI script: answer the one request, bind nothing.
    cgi: bool,
}

impl Bound {
    fn listeners(&self, roles: &[Role]) -> impl Iterator<Item = &Listener> {
        self.per_worker
            .first()
            .into_iter()
            .flatten()
            .filter(|(role, _)| roles.contains(role))
            .map(|(_, l)| l)
    }

    /// Turns WebSocket over HTTP/2 (RFC 8441) on or off after binding, as
    /// [`Builder::extended_connect`] does before: a service that knows
    /// whether it has WebSocket endpoints only once it runs sets it here.
    pub fn extended_connect(mut self, enabled: bool) -> Bound {
        Arc::make_mut(&mut self.config).extended_connect = enabled;
        Arc::make_mut(&mut self.tls_config).extended_connect = enabled;
        self
    }

    /// The addresses serving the service (plain, TLS and gateway) as
    /// `--listen` specs, real ports filled in (`cgi` for a CGI process).
    pub fn local_specs(&self) -> Vec<String> {
        if self.cgi {
            return vec!["cgi".to_owned()];
        }
        self.per_worker
            .first()
            .into_iter()
            .flatten()
            .filter(|(role, _)| *role != Role::Redirect)
            .map(|(role, l)| match role {
                Role::Gateway(gateway) => format!("{gateway}+{}", l.local_spec()),
                _ => l.local_spec(),
            })
            .collect()
    }

    /// True when this process answers one CGI request rather than
    /// listening (see [`Builder::bind`]).
    pub fn is_cgi(&self) -> bool {
        self.cgi
    }

    /// The addresses of the HTTP-to-HTTPS redirect listeners, as specs.
    pub fn redirect_specs(&self) -> Vec<String> {
        self.listeners(&[Role::Redirect])
            .map(Listener::local_spec)
            .collect()
    }

    /// Replaces [`Limits::max_body_bytes`] on every listener after binding:
    /// a framework that enforces body limits of its own, per route, lifts
    /// the engine's with `None` so that its answers (and logs) are the ones
    /// clients get.
    pub fn set_max_body_bytes(&mut self, max: Option<u64>) {
        Arc::make_mut(&mut self.config).limits.max_body_bytes = max;
        Arc::make_mut(&mut self.tls_config).limits.max_body_bytes = max;
    }

    /// The first TCP address serving the service, if any (handy in tests).
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.listeners(&[
            Role::Plain,
            Role::Tls,
            Role::Gateway(Gateway::FastCgi),
            Role::Gateway(Gateway::Scgi),
        ])
        .find_map(Listener::tcp_addr)
    }

    /// The first TCP address of a redirect listener, if any.
    pub fn redirect_addr(&self) -> Option<SocketAddr> {
        self.listeners(&[Role::Redirect])
            .find_map(Listener::tcp_addr)
    }

    /// Runs `service` on runtimes of its own until `signal` resolves, then
    /// shuts down gracefully. Blocks the calling thread.
    pub fn run<S>(
        self,
        service: S,
        signal: impl Future<Output = ()> + Send + 'static,
    ) -> io::Result<()>
    where
        S: HttpService + Clone + Sync,
    {
        self.run_with(move |_: &ConnInfo| service.clone(), signal)
    }

    /// Like [`Bound::run`], building a service per connection with `make`.
    pub fn run_with<F, S>(
        self,
        make: F,
        signal: impl Future<Output = ()> + Send + 'static,
    ) -> io::Result<()>
    where
        F: Fn(&ConnInfo) -> S + Send + Sync + 'static,
        S: HttpService,
    {
        if self.cgi {
            let none = ConnInfo::default();
            return crate::gateway::cgi::serve(make(&none), &self.config);
        }
        let make = Arc::new(make);
        let shutdown = Shutdown::new();
        let state = Arc::new(State::new(&self));
        let unix_paths: Vec<PathBuf> = self
            .per_worker
            .first()
            .map(|l| options_paths(l.iter().map(|(_, l)| l)))
            .unwrap_or_default();
        let result = match self.threading {
            Threading::WorkStealing => {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(self.workers)
                    .enable_all()
                    .build()?;
                let listeners = self.per_worker.into_iter().flatten().collect::<Vec<_>>();
                rt.block_on(async {
                    for (role, l) in listeners {
                        start_accept(role, l, make.clone(), state.clone(), shutdown.clone())?;
                    }
                    signal.await;
                    shutdown.trigger();
                    state.drained(&shutdown).await;
                    Ok(())
                })
            }
            Threading::PerCore => {
                let mut threads = Vec::new();
                for (i, listeners) in self.per_worker.into_iter().enumerate() {
                    let (make, state, shutdown) = (make.clone(), state.clone(), shutdown.clone());
                    let thread = std::thread::Builder::new()
                        .name(format!("celer-worker-{i}"))
                        .spawn(move || worker(listeners, &make, &state, &shutdown))?;
                    threads.push(thread);
                }
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                rt.block_on(async {
                    signal.await;
                    shutdown.trigger();
                });
                let mut result = Ok(());
                for t in threads {
                    match t.join() {
                        Ok(Ok(())) => {}
                        Ok(Err(err)) => result = Err(err),
                        Err(_) => result = Err(io::Error::other("worker thread panicked")),
                    }
                }
                result
            }
        };
        for path in unix_paths {
            let _ = std::fs::remove_file(path);
        }
        result
    }

    /// Serves on the current tokio runtime until `shutdown` fires, then
    /// waits for connections to finish (up to the shutdown timeout).
    pub async fn serve<S>(self, service: S, shutdown: Shutdown) -> io::Result<()>
    where
        S: HttpService + Clone + Sync,
    {
        self.serve_with(move |_: &ConnInfo| service.clone(), shutdown)
            .await
    }

    /// Like [`Bound::serve`], building a service per connection with `make`.
    pub async fn serve_with<F, S>(self, make: F, shutdown: Shutdown) -> io::Result<()>
    where
        F: Fn(&ConnInfo) -> S + Send + Sync + 'static,
        S: HttpService,
    {
        if self.cgi {
            let none = ConnInfo::default();
            let (service, config) = (make(&none), self.config.clone());
            return tokio::task::spawn_blocking(move || {
                crate::gateway::cgi::serve(service, &config)
            })
            .await
            .map_err(io::Error::other)?;
        }
        let make = Arc::new(make);
        let state = Arc::new(State::new(&self));
        let unix_paths: Vec<PathBuf> = self
            .per_worker
            .first()
            .map(|l| options_paths(l.iter().map(|(_, l)| l)))
            .unwrap_or_default();
        for (role, l) in self.per_worker.into_iter().flatten() {
            start_accept(role, l, make.clone(), state.clone(), shutdown.clone())?;
        }
        shutdown.started().await;
        state.drained(&shutdown).await;
        for path in unix_paths {
            let _ = std::fs::remove_file(path);
        }
        Ok(())
    }
}

/// What every accept loop and connection of one server shares.
struct State {
    config: Arc<ConnConfig>,
    tls_config: Arc<ConnConfig>,
    tls: Option<TlsConfig>,
    https_port: u16,
    /// One permit per open connection.
    permits: Arc<Semaphore>,
    max: u32,
    /// The TLS handshakes in progress.
    handshakes: Arc<tls::Handshakes>,
}

impl State {
    fn new(bound: &Bound) -> State {
        let limits = &bound.config.limits;
        let max = limits.max_connections.clamp(1, Semaphore::MAX_PERMITS) as u32;
        State {
            config: bound.config.clone(),
            tls_config: bound.tls_config.clone(),
            tls: bound.tls.clone(),
            https_port: bound.https_port,
            permits: Arc::new(Semaphore::new(max as usize)),
            max,
            handshakes: Arc::new(tls::Handshakes::new(limits.max_tls_handshakes)),
        }
    }

    /// Waits until every connection has ended, or the shutdown timeout.
    /// Upgraded connections (WebSockets) count as open until dropped.
    async fn drained(&self, shutdown: &Shutdown) {
        let limit = self.config.limits.shutdown_timeout;
        let all_closed = async {
            let _all = self.permits.acquire_many(self.max).await;
            shutdown.upgraded_closed().await;
        };
        if tokio::time::timeout(limit, all_closed).await.is_err() {
            tracing::warn!(target: "celer::serve", "shutdown timeout: closing connections still in flight");
        }
    }
}

fn worker<F, S>(
    listeners: Vec<(Role, Listener)>,
    make: &Arc<F>,
    state: &Arc<State>,
    shutdown: &Shutdown,
) -> io::Result<()>
where
    F: Fn(&ConnInfo) -> S + Send + Sync + 'static,
    S: HttpService,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        for (role, l) in listeners {
            start_accept(role, l, make.clone(), state.clone(), shutdown.clone())?;
        }
        shutdown.started().await;
        state.drained(shutdown).await;
        Ok(())
    })
}

fn start_accept<F, S>(
    role: Role,
    listener: Listener,
    make: Arc<F>,
    state: Arc<State>,
    shutdown: Shutdown,
) -> io::Result<()>
where
    F: Fn(&ConnInfo) -> S + Send + Sync + 'static,
    S: HttpService,
{
    if role == Role::Redirect {
        let redirect = Redirect {
            https_port: state.https_port,
        };
        let make = Arc::new(move |_: &ConnInfo| redirect);
        return spawn_accept(listener, make, state, shutdown, Role::Plain);
    }
    spawn_accept(listener, make, state, shutdown, role)
}

fn spawn_accept<F, S>(
    listener: Listener,
    make: Arc<F>,
    state: Arc<State>,
    shutdown: Shutdown,
    role: Role,
) -> io::Result<()>
where
    F: Fn(&ConnInfo) -> S + Send + Sync + 'static,
    S: HttpService,
{
    match listener {
        Listener::Tcp(l) => {
            let local = l.local_addr().ok();
            let l = tokio::net::TcpListener::from_std(l)?;
            tokio::spawn(accept_loop(
                TcpAcceptor(l, local),
                make,
                state,
                shutdown,
                role,
            ));
        }
        Listener::Unix(l, _) => {
            let l = tokio::net::UnixListener::from_std(l)?;
            tokio::spawn(accept_loop(l, make, state, shutdown, role));
        }
    }
    Ok(())
}

/// A listener the accept loop can take connections from.
trait Accept: Send + 'static {
    type Io: Transport;

    fn accept(&self) -> impl Future<Output = io::Result<(Self::Io, ConnInfo)>> + Send;
}

struct TcpAcceptor(tokio::net::TcpListener, Option<SocketAddr>);

impl Accept for TcpAcceptor {
    type Io = tokio::net::TcpStream;

    async fn accept(&self) -> io::Result<(Self::Io, ConnInfo)> {
        let (io, remote) = self.0.accept().await?;
        Ok((io, ConnInfo::new(Some(remote), self.1)))
    }
}

impl Accept for tokio::net::UnixListener {
    type Io = tokio::net::UnixStream;

    async fn accept(&self) -> io::Result<(Self::Io, ConnInfo)> {
        let (io, _) = tokio::net::UnixListener::accept(self).await?;
        Ok((io, ConnInfo::default()))
    }
}

pin_project_lite::pin_project! {
    /// A connection's future holding its connection-limit permit until it
    /// ends. A struct rather than an `async` block, which would keep the
    /// connection's future twice (as a capture and as the awaited value).
    struct Holding<F> {
        #[pin]
        fut: F,
        _permit: OwnedSemaphorePermit,
    }
}

impl<F: Future> Future for Holding<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.project().fut.poll(cx)
    }
}

async fn accept_loop<A, F, S>(
    acceptor: A,
    make: Arc<F>,
    state: Arc<State>,
    shutdown: Shutdown,
    role: Role,
) where
    A: Accept,
    F: Fn(&ConnInfo) -> S + Send + Sync + 'static,
    S: HttpService,
{
    // One shutdown future for the loop's life: made per accept, it would
    // register and unregister a waiter (two lock round trips) every time.
    let started = shutdown.started();
    tokio::pin!(started);
    loop {
        if shutdown.is_started() {
            return;
        }
        let (io, info) = match tokio::select! {
            biased;
            () = &mut started => return,
            res = acceptor.accept() => res,
        } {
            Ok(accepted) => accepted,
            Err(err) if is_per_connection(&err) => continue,
            Err(err) => {
                // Out of descriptors or memory: back off instead of spinning,
                // the process stays up and retries.
                tracing::error!(target: "celer::serve", error = %err, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // The connection slot is taken after `accept`, never before: a loop
        // waiting for a slot then holds one accepted client, not a slot that
        // a client queued on another worker's listener needs, so the limit
        // is exact whatever the number of listeners (issue 20). At the limit
        // this client waits, accepted, until a connection ends; later ones
        // wait in the backlog, as this loop accepts no more meanwhile.
        let permit = match state.permits.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(TryAcquireError::Closed) => return,
            Err(TryAcquireError::NoPermits) => tokio::select! {
                biased;
                () = &mut started => return,
                permit = state.permits.clone().acquire_owned() => match permit {
                    Ok(p) => p,
                    Err(_) => return,
                },
            },
        };
        // A TLS handshake slot never waits: at the cap the least advanced
        // pending handshake is shed (`tls::Handshakes`), so the listener
        // keeps accepting (issue 20).
        let handshake = (role == Role::Tls).then(|| state.handshakes.admit());
        let shutdown = shutdown.clone();
        match (handshake, &state.tls) {
            (Some(handshake), Some(tls)) => {
                // The service is made after the handshake, so that its
                // `ConnInfo` holds what the handshake agreed.
                let (tls, config, make) = (tls.clone(), state.tls_config.clone(), make.clone());
                tokio::spawn(Holding {
                    fut: proto::tls(io, tls, handshake, info, make, config, shutdown),
                    _permit: permit,
                });
            }
            _ if let Role::Gateway(gateway) = role => {
                let service = make(&info);
                let config = state.config.clone();
                let conn = proto::gateway(gateway, io, service, config, shutdown.watch());
                tokio::spawn(Holding {
                    fut: conn,
                    _permit: permit,
                });
            }
            _ => {
                let service = make(&info);
                let config = state.config.clone();
                let conn = proto::plain(io, service, config, &shutdown);
                tokio::spawn(Holding {
                    fut: conn,
                    _permit: permit,
                });
            }
        }
    }
}

/// Errors that concern only the connection being accepted.
fn is_per_connection(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
    )
}
