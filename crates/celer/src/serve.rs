//! Serving an [`App`] over the network with Celer's engine, `celer-server`.
//!
//! The one-liners, [`celer::serve`](crate::serve()) (blocking) and
//! [`celer::serve_async`](crate::serve_async) (inside a tokio runtime),
//! bind, serve, and shut down gracefully on Ctrl-C or `SIGTERM`:
//!
//! ```no_run
//! let mut app = celer::App::new();
//! app.get("/", |_req: celer::Request| async { "Hello, World!" });
//! celer::serve("tcp://127.0.0.1:8080", app)?;
//! # Ok::<_, std::io::Error>(())
//! ```
//!
//! A server that takes its listeners, workers and TLS certificate from the
//! command line (`--listen`, `--listen-tls`, `--tls-cert`, `--tls-key`,
//! `--workers`, `--threading`) is one line too, with [`serve_from_args`],
//! and [`Options`] for an app with flags of its own:
//!
//! ```no_run
//! fn main() -> std::process::ExitCode {
//!     let mut app = celer::App::new();
//!     app.get("/", |_req: celer::Request| async { "Hello, World!" });
//!     celer::serve_from_args(app) // `--help` lists the flags
//! }
//! ```
//!
//! For control over the listeners, limits, threads or the shutdown
//! signal, bind first, so that address errors surface before anything runs, then
//! hand the [`Bound`] server to [`App::run`] (blocking, on runtimes of the
//! engine's own) or [`App::serve`] (async, on the caller's tokio runtime):
//!
//! ```no_run
//! use celer::{App, Request};
//!
//! let mut app = App::new();
//! app.get("/", |req: Request| async move {
//!     format!("Hello, {}!", req.remote_addr().map(|a| a.ip().to_string()).unwrap_or_default())
//! });
//!
//! let bound = celer::serve::bind("tcp://127.0.0.1:8080")?;
//! eprintln!("listening on {}", bound.local_specs().join(", "));
//! app.run(bound, async {
//!     let _ = tokio::signal::ctrl_c().await;
//! })?;
//! # Ok::<_, std::io::Error>(())
//! ```
//!
//! Every listener kind, limit and threading model of the engine is
//! available through [`Server::builder`]; the types are re-exported here so
//! an app depends on `celer` alone.
//!
//! # One body limit
//!
//! Request bodies have one limit: the app's ([`App::body_limit`], 2 MiB by
//! default, changed per scope and per route), enforced on every way of
//! reading a body (the extractors and [`Request::take_body`]). Every
//! serving function here lifts the engine's own
//! [`Limits::max_body_bytes`], so a body over the limit is answered by the
//! app: its `413` goes through the app's middleware, status handlers,
//! problem+json rendering and logs. A body the handler never reads is
//! discarded by the engine up to [`Limits::max_drain_bytes`], and then the
//! connection is closed.
//!
//! Each connection gets its own copy of the app's service: one record of
//! the app and the connection's client and server addresses, which every
//! [`Request`] of that connection points to. [`Request::remote_addr`] and
//! [`Request::local_addr`] cost no allocation per request, and the
//! reference count a request takes is the connection's, written by its
//! thread only, not the app's, which every worker thread would share.
//!
//! **Architecture Invariant:** this is the only module of `celer` that names
//! `celer_server`; routing, handlers, extractors and middleware only know
//! `http` and `tower`.

mod options;

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;

pub use celer_server::{
    Bound, Builder, ConnInfo, HttpService, Incoming, Limits, Listen, Server, Shutdown, Threading,
    TlsBuilder, TlsConfig, TlsInfo, TlsVersion, raise_fd_limit,
};

pub use self::options::{DEFAULT_LISTEN, Options, UsageError};
#[cfg(doc)]
use crate::Request;
use crate::app::{AppConn, ResponseFuture, Shared};
use crate::request::FrontEnd;
use crate::{App, BoxError};

/// Drops the engine's zero-copy marker from a response whose body a
/// middleware replaces: the marker names the old body's bytes, and the
/// engine would send those instead of the new body.
pub(crate) fn forget_zero_copy(extensions: &mut http::Extensions) {
    extensions.remove::<celer_server::SendFile>();
}

/// Binds one listener spec (`tcp://HOST:PORT`, `unix:PATH`, `fd:N`,
/// `systemd`) with the engine's defaults.
///
/// For several listeners, limits or a threading model, use
/// [`Server::builder`].
///
/// ```
/// let bound = celer::serve::bind("tcp://127.0.0.1:0")?;
/// assert!(bound.tcp_addr().is_some_and(|addr| addr.port() != 0));
/// # Ok::<_, std::io::Error>(())
/// ```
pub fn bind(spec: &str) -> io::Result<Bound> {
    let listen =
        Listen::parse(spec).map_err(|err| io::Error::new(io::ErrorKind::InvalidInput, err))?;
    Server::builder().listen(listen).bind()
}

/// Where [`celer::serve`](crate::serve()) listens: a [`Listen`], a spec
/// string parsed as one (`"tcp://127.0.0.1:8080"`, `"unix:/run/app.sock"`,
/// and every other scheme [`Listen`] knows), or several of them, as a
/// `Vec<Listen>` from a command line.
pub trait ToListen {
    /// The listeners, or the error of a spec that does not parse.
    fn to_listen(self) -> io::Result<Vec<Listen>>;
}

impl ToListen for Listen {
    fn to_listen(self) -> io::Result<Vec<Listen>> {
        Ok(vec![self])
    }
}

impl ToListen for Vec<Listen> {
    fn to_listen(self) -> io::Result<Vec<Listen>> {
        Ok(self)
    }
}

impl<const N: usize> ToListen for [Listen; N] {
    fn to_listen(self) -> io::Result<Vec<Listen>> {
        Ok(self.into())
    }
}

impl ToListen for &str {
    fn to_listen(self) -> io::Result<Vec<Listen>> {
        match self.parse::<Listen>() {
            Ok(listen) => Ok(vec![listen]),
            Err(err) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("cannot listen on {self:?}: {err}"),
            )),
        }
    }
}

impl ToListen for &String {
    fn to_listen(self) -> io::Result<Vec<Listen>> {
        self.as_str().to_listen()
    }
}

impl ToListen for String {
    fn to_listen(self) -> io::Result<Vec<Listen>> {
        self.as_str().to_listen()
    }
}

fn bind_all(listen: impl ToListen) -> io::Result<Bound> {
    let listens = listen.to_listen()?;
    if listens.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "nothing to listen on: give at least one listener",
        ));
    }
    let mut builder = Server::builder();
    for listen in listens {
        builder = builder.listen(listen);
    }
    let bound = builder.bind()?;
    log_listening(&bound);
    Ok(bound)
}

/// Says where `bound` serves: a log line, and a line on stderr when no
/// tracing subscriber is installed, so that a server started from a
/// terminal tells where to point the browser.
fn log_listening(bound: &Bound) {
    let specs = bound.local_specs().join(", ");
    if tracing::dispatcher::has_been_set() {
        tracing::info!(target: "celer::serve", "listening on {specs}");
    } else {
        eprintln!("listening on {specs}");
    }
}

/// Resolves on Ctrl-C (`SIGINT`) or, on Unix, `SIGTERM`: what a terminal
/// and a service manager send to stop a server. A signal that cannot be
/// watched is logged and ignored.
pub async fn shutdown_signal() {
    let interrupt = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::warn!(target: "celer::serve", "cannot watch Ctrl-C: {err}");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut sigterm) => {
                sigterm.recv().await;
            }
            Err(err) => {
                tracing::warn!(target: "celer::serve", "cannot watch SIGTERM: {err}");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
    tracing::info!(target: "celer::serve", "shutting down");
}

/// The error of a blocking call made from inside a tokio runtime, instead
/// of tokio's "Cannot start a runtime from within a runtime" panic.
fn inside_runtime(what: &str, instead: &str) -> io::Result<()> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(io::Error::other(format!(
            "{what} blocks and runs the engine's own runtimes, so it cannot be called \
             inside a tokio runtime (such as #[tokio::main]); there, use `{instead}`"
        )));
    }
    Ok(())
}

/// Serves `app` on `listen` until Ctrl-C or `SIGTERM`, then shuts down
/// gracefully: the app's [`ShutdownNotice`](crate::ShutdownNotice) fires,
/// and open requests finish (up to the shutdown timeout of the engine's
/// [`Limits`]). Blocks the calling thread on runtimes of the engine's own,
/// one worker per CPU; inside a tokio runtime it returns an error that
/// points to [`serve_async`].
///
/// ```no_run
/// let mut app = celer::App::new();
/// app.get("/", |_req: celer::Request| async { "Hello, World!" });
/// celer::serve("tcp://127.0.0.1:8080", app)?;
/// # Ok::<_, std::io::Error>(())
/// ```
pub fn serve(listen: impl ToListen, app: App) -> io::Result<()> {
    inside_runtime("celer::serve", "celer::serve_async(listen, app).await")?;
    let bound = bind_all(listen)?;
    app.run(bound, shutdown_signal())
}

/// Serves `app` on `listen` on the current tokio runtime until Ctrl-C or
/// `SIGTERM`, then shuts down gracefully like [`serve()`].
///
/// ```no_run
/// #[tokio::main]
/// async fn main() -> std::io::Result<()> {
///     let mut app = celer::App::new();
///     app.get("/", |_req: celer::Request| async { "Hello, World!" });
///     celer::serve_async("tcp://127.0.0.1:8080", app).await
/// }
/// ```
pub async fn serve_async(listen: impl ToListen, app: App) -> io::Result<()> {
    let bound = bind_all(listen)?;
    serve_bound_async(bound, app).await
}

/// Serves `app` on `bound` on the current runtime until Ctrl-C or
/// `SIGTERM`.
async fn serve_bound_async(bound: Bound, app: App) -> io::Result<()> {
    let shutdown = Shutdown::new();
    let trigger = shutdown.clone();
    let watcher = tokio::spawn(async move {
        shutdown_signal().await;
        trigger.trigger();
    });
    let result = app.serve(bound, shutdown).await;
    watcher.abort();
    result
}

/// Serves `app` as [`serve()`] does, on the listeners, workers, threading
/// and TLS certificate of the command line's standard flags ([`Options`]):
///
/// ```text
#[doc = include_str!("serve/options.txt")]
/// ```
///
/// `--help` prints them and exits; a usage error (an unknown flag, a value
/// that does not parse, `--listen-tls` without a certificate) is printed
/// with the flag it is about, and the process exits with status 2. An
/// error while serving (an address in use, a certificate that does not
/// load) is printed after the program's name, and the exit code is 1. An
/// app with flags of its own uses [`Options::from_env_with_rest`].
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     let mut app = celer::App::new();
///     app.get("/", |_req: celer::Request| async { "Hello, World!" });
///     celer::serve_from_args(app)
/// }
/// ```
pub fn serve_from_args(app: App) -> std::process::ExitCode {
    match Options::from_env().serve(app) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{}: {err}", options::program_name());
            std::process::ExitCode::FAILURE
        }
    }
}

// ===== impl App =====

impl App {
    /// Serves the app on `bound` until `signal` resolves, then shuts down
    /// gracefully: the app's [`ShutdownNotice`](crate::ShutdownNotice)
    /// fires, so event streams end, and open connections finish (up to the
    /// shutdown timeout of the engine's [`Limits`]). Blocks the calling
    /// thread; the engine builds its own runtimes, so call it outside any
    /// async context.
    ///
    /// ```no_run
    /// let mut app = celer::App::new();
    /// app.get("/plaintext", |_req: celer::Request| async { "Hello, World!" });
    /// let bound = celer::serve::Server::builder()
    ///     .listen("tcp://127.0.0.1:8080".parse().unwrap())
    ///     .workers(2)
    ///     .bind()?;
    /// app.run(bound, std::future::pending())?;
    /// # Ok::<_, std::io::Error>(())
    /// ```
    pub fn run(
        self,
        bound: Bound,
        signal: impl Future<Output = ()> + Send + 'static,
    ) -> io::Result<()> {
        inside_runtime("App::run", "app.serve(bound, shutdown).await")?;
        let shared = self.shared().clone();
        run_app(bound, shared, signal, AppService::new)
    }

    /// Serves the app on `bound` on the current tokio runtime until
    /// `shutdown` is triggered, then fires the app's
    /// [`ShutdownNotice`](crate::ShutdownNotice) and waits for open
    /// connections to finish (up to the shutdown timeout of the engine's
    /// [`Limits`]).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use celer::serve::Shutdown;
    ///
    /// let mut app = celer::App::new();
    /// app.get("/", |_req: celer::Request| async { "hi" });
    /// let bound = celer::serve::bind("tcp://127.0.0.1:0")?;
    /// let addr = bound.tcp_addr().unwrap();
    /// let shutdown = Shutdown::new();
    /// let server = tokio::spawn(app.serve(bound, shutdown.clone()));
    /// // ... talk to `addr` ...
    /// # let _ = addr;
    /// shutdown.trigger();
    /// server.await.unwrap()?;
    /// # Ok::<_, std::io::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn serve(self, bound: Bound, shutdown: Shutdown) -> io::Result<()> {
        let shared = self.shared().clone();
        serve_app(bound, shared, shutdown, AppService::new).await
    }
}

impl App {
    /// [`run`](App::run) with a tower `layer` around the app, on each
    /// connection: the layer sees every request first, and handlers still
    /// see the connection's addresses. The layer also finds them in the
    /// request extensions as a [`ConnInfo`].
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// let mut app = celer::App::new();
    /// app.get("/", |_req: celer::Request| async { "hi" });
    /// let bound = celer::serve::bind("tcp://127.0.0.1:8080")?;
    /// let layer = tower_http::timeout::TimeoutLayer::new(Duration::from_secs(10));
    /// app.run_layered(bound, layer, celer::serve::shutdown_signal())?;
    /// # Ok::<_, std::io::Error>(())
    /// ```
    pub fn run_layered<L>(
        self,
        bound: Bound,
        layer: L,
        signal: impl Future<Output = ()> + Send + 'static,
    ) -> io::Result<()>
    where
        L: tower_layer::Layer<AppService> + Send + Sync + 'static,
        L::Service: HttpService,
    {
        inside_runtime(
            "App::run_layered",
            "app.serve_layered(bound, layer, shutdown).await",
        )?;
        let shared = self.shared().clone();
        run_app(bound, shared, signal, move |shared, info| WithConnInfo {
            info: info.clone(),
            inner: layer.layer(AppService::new(shared, info)),
        })
    }

    /// [`serve`](App::serve) with a tower `layer` around the app; see
    /// [`run_layered`](App::run_layered).
    pub async fn serve_layered<L>(
        self,
        bound: Bound,
        layer: L,
        shutdown: Shutdown,
    ) -> io::Result<()>
    where
        L: tower_layer::Layer<AppService> + Send + Sync + 'static,
        L::Service: HttpService,
    {
        let shared = self.shared().clone();
        serve_app(bound, shared, shutdown, move |shared, info| WithConnInfo {
            info: info.clone(),
            inner: layer.layer(AppService::new(shared, info)),
        })
        .await
    }
}

/// `bound` as an app needs it: the framework's per-route body limits
/// replace the engine's, and WebSocket over HTTP/2 is offered when the app
/// has a WebSocket route.
fn prepare(mut bound: Bound, shared: &Shared) -> Bound {
    bound.set_max_body_bytes(None);
    bound.extended_connect(shared.websocket)
}

/// Runs the services `make` builds for the app on `bound` (blocking) until
/// `signal`; the app hears of shutdown first, so streams it holds open end
/// while the engine drains connections.
fn run_app<S: HttpService>(
    bound: Bound,
    shared: Arc<Shared>,
    signal: impl Future<Output = ()> + Send + 'static,
    make: impl Fn(&Arc<Shared>, &ConnInfo) -> S + Send + Sync + 'static,
) -> io::Result<()> {
    let bound = prepare(bound, &shared);
    let notice = shared.shutdown.clone();
    let signal = async move {
        signal.await;
        notice.trigger();
    };
    bound.run_with(move |info: &ConnInfo| make(&shared, info), signal)
}

/// [`run_app`] on the current runtime until `shutdown`; the app hears of
/// shutdown as the engine does.
async fn serve_app<S: HttpService>(
    bound: Bound,
    shared: Arc<Shared>,
    shutdown: Shutdown,
    make: impl Fn(&Arc<Shared>, &ConnInfo) -> S + Send + Sync + 'static,
) -> io::Result<()> {
    let bound = prepare(bound, &shared);
    let notice = shared.shutdown.clone();
    let serving = bound.serve_with(move |info: &ConnInfo| make(&shared, info), shutdown.clone());
    tokio::pin!(serving);
    tokio::select! {
        result = &mut serving => return result,
        () = shutdown.started() => notice.trigger(),
    }
    serving.await
}

/// A layered service that puts the connection's [`ConnInfo`] into each
/// request's extensions before the layers see it.
struct WithConnInfo<S> {
    info: ConnInfo,
    inner: S,
}

impl<S, B> tower_service::Service<http::Request<B>> for WithConnInfo<S>
where
    S: tower_service::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> S::Future {
        req.extensions_mut().insert(self.info.clone());
        self.inner.call(req)
    }
}

/// The app's service for one connection: the app plus the connection's
/// addresses, which each request of the connection holds. Tower layers
/// given to [`App::run_layered`] wrap it; cloning it is one `Arc` clone.
#[derive(Clone)]
pub struct AppService {
    /// One reference count per connection on the app; each request takes
    /// one on this, which only the connection's thread writes.
    conn: Arc<AppConn>,
}

impl std::fmt::Debug for AppService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppService")
            .field("conn", &self.conn.info)
            .finish_non_exhaustive()
    }
}

// ===== impl AppService =====

impl AppService {
    fn new(shared: &Arc<Shared>, info: &ConnInfo) -> AppService {
        AppService {
            conn: Arc::new(AppConn::new(shared.clone(), Some(info.clone()))),
        }
    }
}

impl<B> tower_service::Service<http::Request<B>> for AppService
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = crate::Response;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: http::Request<B>) -> ResponseFuture {
        // Behind a FastCGI, SCGI or CGI front end, the engine passes on what
        // the front end reported; `Request` reads it as `FrontEnd`.
        if let Some(env) = req.extensions_mut().remove::<celer_server::CgiEnv>() {
            req.extensions_mut().insert(FrontEnd {
                script_name: env.script_name,
                remote: env.remote,
                local: env.local,
                https: env.https,
            });
        }
        self.conn.call(req)
    }
}
