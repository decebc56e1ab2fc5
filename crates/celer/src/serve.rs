//! Serving an [`App`] over the network with Celer's engine, `celer-server`.
//!
//! Bind first, so that address errors surface before anything runs, then
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

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use celer_server::ConnInfo;

pub use celer_server::{
    Bound, Builder, Incoming, Limits, Listen, Server, Shutdown, Threading, raise_fd_limit,
};

#[cfg(doc)]
use crate::Request;
use crate::app::{AppConn, ResponseFuture, Shared};
use crate::request::{ConnAddrs, FrontEnd};
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
        let shared = self.shared().clone();
        let notice = shared.shutdown.clone();
        // The app hears of shutdown first, so streams it holds open end
        // while the engine drains connections.
        let signal = async move {
            signal.await;
            notice.trigger();
        };
        bound.run_with(
            move |info: &ConnInfo| Connection::new(&shared, info),
            signal,
        )
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
        let notice = shared.shutdown.clone();
        let serving = bound.serve_with(
            move |info: &ConnInfo| Connection::new(&shared, info),
            shutdown.clone(),
        );
        tokio::pin!(serving);
        // The app hears of shutdown as the engine does, so streams it
        // holds open end while connections drain.
        tokio::select! {
            result = &mut serving => return result,
            () = shutdown.started() => notice.trigger(),
        }
        serving.await
    }
}

/// The app's service for one connection: the app plus the connection's
/// addresses, which each request of the connection holds.
struct Connection {
    /// One reference count per connection on the app; each request takes
    /// one on this, which only the connection's thread writes.
    conn: Arc<AppConn>,
}

// ===== impl Connection =====

impl Connection {
    fn new(shared: &Arc<Shared>, info: &ConnInfo) -> Connection {
        let addrs = ConnAddrs {
            remote: info.remote,
            local: info.local,
        };
        Connection {
            conn: Arc::new(AppConn::new(shared.clone(), addrs)),
        }
    }
}

impl<B> tower_service::Service<http::Request<B>> for Connection
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
            });
        }
        self.conn.call(req)
    }
}
