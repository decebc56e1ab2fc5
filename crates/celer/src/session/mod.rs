//! Sessions: data kept across a client's requests, in a server store
//! ([`MemoryStore`]; `SqliteStore` with the `sqlite-sessions` feature, kept
//! across restarts; or any [`SessionStore`]) or in an encrypted cookie
//! ([`CookieStore`]).
//!
//! [`Sessions`] is app (or scope) middleware; handlers take the
//! [`Session`] with `req.extract::<Session>()`. The middleware only
//! attaches an empty session to the request: the `Cookie` field is looked
//! up (under the jar's limits, a `431` past them, and once a request for
//! the jar and the session) and the session's pair found when the session
//! is extracted, the store asked the first time it is read, and it is
//! saved, after the handler, only when it changed.
//! A route that never extracts the session does none of this.
//! [`Sessions::csrf`] checks CSRF in the same middleware.
//!
//! - **No fixation:** [`Session::rotate`] (call it at login and at any
//!   change of privilege) gives the session a new id and deletes the old
//!   one from the store; [`Session::destroy`] ends it (logout).
//! - **Expiry:** a session unused for the idle timeout, or older than the
//!   absolute timeout, reads as empty and its old id is deleted. The
//!   last-use time is refreshed (a save) at most every quarter of the idle
//!   timeout, not on every request.
//! - **Size:** the JSON of a session's data is at most
//!   [`DEFAULT_MAX_SESSION_BYTES`] (or [`Sessions::max_bytes`]); an
//!   insert past it fails with a `500` naming the limit.
//!
//! | limit | default |
//! |---|---|
//! | [`DEFAULT_IDLE_TIMEOUT`] | 30 minutes |
//! | [`DEFAULT_ABSOLUTE_TIMEOUT`] | 24 hours |
//! | [`DEFAULT_MAX_SESSION_BYTES`] | 2900 bytes (fits a sealed cookie) |
//! | [`DEFAULT_MAX_SESSIONS`] | 100,000 in a [`MemoryStore`] |
//! | `DEFAULT_MAX_SQLITE_SESSIONS` | 1,000,000 in a `SqliteStore` |
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use celer::session::{MemoryStore, Session, Sessions};
//! use celer::{App, Error, Request};
//!
//! async fn login(mut req: Request) -> Result<&'static str, Error> {
//!     let session = req.extract::<Session>().await?;
//!     session.rotate().await?; // a fresh id for the signed-in session
//!     session.insert("user", "ada").await?;
//!     Ok("welcome")
//! }
//!
//! async fn me(mut req: Request) -> Result<String, Error> {
//!     let session = req.extract::<Session>().await?;
//!     Ok(session.get::<String>("user").await?.unwrap_or_else(|| "nobody".into()))
//! }
//!
//! let mut app = App::new();
//! app.middleware(Sessions::new(MemoryStore::new()).cookie_name("sid").secure(false).layer());
//! app.post("/login", login);
//! app.get("/me", me);
//!
//! let client = celer::test::TestClient::new(app);
//! let res = client.post("/login").send().await;
//! let cookie = res.header("set-cookie").unwrap().split(';').next().unwrap().to_owned();
//! assert!(cookie.starts_with("sid="));
//! let res = client.get("/me").header("cookie", cookie.as_str()).send().await;
//! assert_eq!(res.text(), "ada");
//! assert!(res.header("set-cookie").is_none()); // nothing changed, nothing saved
//! # });
//! ```

mod clock;
#[cfg(feature = "sqlite-sessions")]
mod sqlite;
mod store;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use self::clock::now_ms;

use http::StatusCode;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

#[cfg(feature = "sqlite-sessions")]
pub use self::sqlite::{
    DEFAULT_MAX_SQLITE_SESSIONS, DEFAULT_PURGE_INTERVAL, SQLITE_QUEUE, SQLITE_QUEUE_WAIT,
    SqliteStore,
};
pub use self::store::{
    CookieStore, DEFAULT_MAX_SESSIONS, MemoryStore, SessionStore, StoreError, new_id,
};

use crate::cookie::{Cookie, CookieJar, CookieRejection, CookieText, NameFinder, SameSite};
use crate::extract::FromRequest;
use crate::handler::{Dispatched, NextFuture};
use crate::{Error, Handler, Next, Request, Response};

/// The default idle timeout: 30 minutes without a request that reads the
/// session end it (OWASP's session management guidance for most apps).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The default absolute timeout: a session ends 24 hours after it began,
/// in use or not.
pub const DEFAULT_ABSOLUTE_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// The default limit on a session's data, as JSON: 2900 bytes, which
/// sealed and base64url-encoded still fits a 4096-byte cookie.
pub const DEFAULT_MAX_SESSION_BYTES: usize = 2900;

/// A session as stored: its data and its times (milliseconds since the
/// Unix epoch).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// When the session began.
    pub created: u64,
    /// When a request last read it (refreshed at most every quarter of the
    /// idle timeout).
    pub seen: u64,
    /// The data, by key.
    pub data: serde_json::Map<String, serde_json::Value>,
}

impl Record {
    /// An empty record begun now.
    pub fn new() -> Record {
        let now = now_ms();
        Record {
            created: now,
            seen: now,
            data: serde_json::Map::new(),
        }
    }
}

impl Default for Record {
    fn default() -> Self {
        Record::new()
    }
}

/// Session middleware and its settings.
#[derive(Clone)]
pub struct Sessions {
    config: Arc<Config>,
}

struct Config {
    store: Arc<dyn SessionStore>,
    cookie_name: String,
    /// Finds `cookie_name`'s pair in a `Cookie` field.
    finder: NameFinder,
    secure: bool,
    same_site: SameSite,
    idle: Duration,
    absolute: Duration,
    /// `idle` and `absolute` in milliseconds, as a record's times are
    /// checked against them on every load.
    idle_ms: u64,
    absolute_ms: u64,
    max_bytes: usize,
    /// CSRF checked in this middleware ([`Sessions::csrf`]).
    csrf: Option<crate::csrf::Csrf>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("cookie_name", &self.config.cookie_name)
            .field("idle", &self.config.idle)
            .field("absolute", &self.config.absolute)
            .finish_non_exhaustive()
    }
}

impl Sessions {
    /// Sessions kept in `store`, in a cookie named `__Host-session`
    /// (`Secure`, `HttpOnly`, `SameSite=Lax`, `Path=/`, no `Max-Age`: it
    /// ends with the browser; the store's timeouts end it on the server).
    pub fn new(store: impl SessionStore) -> Sessions {
        Sessions {
            config: Arc::new(Config {
                store: Arc::new(store),
                cookie_name: "__Host-session".into(),
                finder: NameFinder::new("__Host-session"),
                secure: true,
                same_site: SameSite::Lax,
                idle: DEFAULT_IDLE_TIMEOUT,
                absolute: DEFAULT_ABSOLUTE_TIMEOUT,
                idle_ms: millis(DEFAULT_IDLE_TIMEOUT),
                absolute_ms: millis(DEFAULT_ABSOLUTE_TIMEOUT),
                max_bytes: DEFAULT_MAX_SESSION_BYTES,
                csrf: None,
            }),
        }
    }

    fn config_mut(&mut self) -> &mut Config {
        Arc::get_mut(&mut self.config).expect("Sessions is configured before layer()")
    }

    /// The cookie's name. A `__Host-` name needs [`secure`](Self::secure).
    pub fn cookie_name(mut self, name: impl Into<String>) -> Sessions {
        let config = self.config_mut();
        config.cookie_name = name.into();
        config.finder = NameFinder::new(&config.cookie_name);
        self
    }

    /// Whether the cookie is `Secure` (default `true`); `false` for plain
    /// HTTP in development, with a name without the `__Host-` prefix.
    pub fn secure(mut self, secure: bool) -> Sessions {
        self.config_mut().secure = secure;
        self
    }

    /// The cookie's `SameSite` (default `Lax`).
    pub fn same_site(mut self, same_site: SameSite) -> Sessions {
        self.config_mut().same_site = same_site;
        self
    }

    /// The idle timeout (default [`DEFAULT_IDLE_TIMEOUT`]).
    pub fn idle_timeout(mut self, idle: Duration) -> Sessions {
        let config = self.config_mut();
        config.idle = idle;
        config.idle_ms = millis(idle);
        self
    }

    /// The absolute timeout (default [`DEFAULT_ABSOLUTE_TIMEOUT`]).
    pub fn absolute_timeout(mut self, absolute: Duration) -> Sessions {
        let config = self.config_mut();
        config.absolute = absolute;
        config.absolute_ms = millis(absolute);
        self
    }

    /// The most bytes of a session's data as JSON (default
    /// [`DEFAULT_MAX_SESSION_BYTES`]).
    pub fn max_bytes(mut self, max_bytes: usize) -> Sessions {
        self.config_mut().max_bytes = max_bytes;
        self
    }

    /// Checks CSRF in this middleware with `csrf`'s settings: the same
    /// checks, refusals and order as [`Csrf::layer`](crate::csrf::Csrf::layer)
    /// installed right after it, in one step of the chain instead of two
    /// (each step is a dynamic call and a future of its own). By default
    /// the session middleware checks no CSRF.
    ///
    /// ```
    /// use celer::csrf::Csrf;
    /// use celer::session::{MemoryStore, Sessions};
    /// let mut app = celer::App::new();
    /// app.middleware(Sessions::new(MemoryStore::new()).csrf(&Csrf::new()).layer());
    /// ```
    pub fn csrf(mut self, csrf: &crate::csrf::Csrf) -> Sessions {
        self.config_mut().csrf = Some(csrf.clone());
        self
    }

    /// The middleware, for [`App::middleware`](crate::App::middleware).
    /// A request whose cookies are over the jar's limits is answered
    /// `431` where the session is first extracted (by the handler, or by
    /// the CSRF check of an unsafe method); a route that never extracts
    /// it does not look at the cookies.
    pub fn layer(&self) -> impl Handler<(Request, Next)> + Clone {
        let config = self.config.clone();
        move |req, next| start(&config, req, next)
    }
}

/// `d` in milliseconds (`u64::MAX` past it).
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Attaches an empty session to the request and runs the rest of the
/// chain. The `Cookie` field is read when the session is extracted
/// ([`Session::attach`]).
fn start(config: &Arc<Config>, mut req: Request, next: Next) -> SessionFuture {
    let session = Session {
        inner: spare_for(config).unwrap_or_else(|| {
            Arc::new(Inner {
                config: config.clone(),
                state: Mutex::new(State::default()),
            })
        }),
    };
    req.set_session(session.clone());
    let fut = match &config.csrf {
        Some(csrf) => csrf.check_in_place(req, next),
        None => next.run_in_place(req),
    };
    SessionFuture {
        session: Some(session),
        fut,
    }
}

pin_project_lite::pin_project! {
    /// The session middleware's future: the rest of the chain, then the
    /// save when the session changed. It holds the chain's future itself
    /// (a handler's small future in place, not boxed): the app boxes this
    /// future when middleware comes before it, and a box for each of the
    /// two would cost an allocation more per request.
    struct SessionFuture {
        // Taken when the chain has answered.
        session: Option<Session>,
        // The rest of the chain; then, if a save is due, the save.
        #[pin]
        fut: Dispatched,
    }
}

impl Future for SessionFuture {
    type Output = Response;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response> {
        use crate::IntoResponse as _;
        let mut this = self.project();
        loop {
            let res = match std::task::ready!(this.fut.as_mut().poll_output(cx)) {
                Ok(res) => res,
                Err(never) => match never {},
            };
            let Some(session) = this.session.take().and_then(Session::unless_done) else {
                return Poll::Ready(res);
            };
            this.fut.set(
                NextFuture::boxed(Box::pin(async move {
                    let mut res = res;
                    match session.finish(&mut res).await {
                        Ok(()) => res,
                        Err(err) => err.into_response(),
                    }
                }))
                .into(),
            );
        }
    }
}

/// The session of the request (see the [module](self) docs).
#[derive(Clone)]
pub struct Session {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").finish_non_exhaustive()
    }
}

struct Inner {
    config: Arc<Config>,
    state: Mutex<State>,
}

thread_local! {
    /// The session state of the last request on this thread that ended
    /// with nothing to save: its only handle, its state reset to the
    /// default (no record, no handle, no flags), not poisoned. The next
    /// request under the same [`Sessions`] takes it instead of
    /// allocating (an allocation, a free and the reference counts' first
    /// and last steps, about 75 instructions a request: decision 157).
    static SPARE: std::cell::Cell<Option<Arc<Inner>>> = const { std::cell::Cell::new(None) };
}

/// The thread's spare session state when it was made for `config` (else
/// it is dropped and `None` answered: a new one is allocated).
#[inline]
fn spare_for(config: &Arc<Config>) -> Option<Arc<Inner>> {
    let spare = SPARE.try_with(std::cell::Cell::take).ok().flatten()?;
    Arc::ptr_eq(&spare.config, config).then_some(spare)
}

#[derive(Default)]
struct State {
    /// `None` until first read. Shared with the store until changed
    /// (copied on the first write).
    record: Option<Arc<Record>>,
    /// The handle the request's cookie carried (shared with the
    /// request's field, not copied, when that is ASCII), found when the
    /// session is extracted.
    incoming: Option<CookieText>,
    /// Whether the request's `Cookie` field was read into `incoming`
    /// ([`Session::attach`], at the session's extraction).
    attached: bool,
    /// Whether the incoming handle named a live session.
    live: bool,
    changed: bool,
    rotate: bool,
    destroyed: bool,
}

impl Session {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The handle the request's cookie carried.
    fn incoming(state: &State) -> Option<&str> {
        state.incoming.as_ref().map(CookieText::as_str)
    }

    /// The handle the request's cookie carried, as a value of its own.
    fn incoming_text(&self) -> Option<CookieText> {
        self.lock().incoming.clone()
    }

    /// Reads the request's cookies into the session, once: `read` gives
    /// the request's cookie text under the jar's limits (an error, a
    /// `431`, past them), and the session's pair is found in it (every
    /// use of a session reads its handle, so it is found at once).
    pub(crate) fn attach(
        &self,
        read: impl FnOnce() -> Result<CookieText, CookieRejection>,
    ) -> Result<(), CookieRejection> {
        let mut state = self.lock();
        if !state.attached {
            state.incoming = crate::cookie::find_value(read()?, &self.inner.config.finder);
            state.attached = true;
        }
        Ok(())
    }

    /// Loads the record on first use.
    async fn ensure(&self) -> Result<(), Error> {
        if self.lock_loaded_now()?.is_some() {
            return Ok(());
        }
        self.load_waiting().await
    }

    /// Loads the record from a store that has to be waited for (what
    /// [`ensure`](Self::ensure) does when
    /// [`lock_loaded_now`](Self::lock_loaded_now) answered `None`).
    async fn load_waiting(&self) -> Result<(), Error> {
        let config = &self.inner.config;
        let incoming = self.incoming_text();
        let loaded = match incoming.as_ref().map(CookieText::as_str) {
            Some(handle) => config.store.load(handle).await?,
            None => None,
        };
        let mut state = self.lock();
        if state.record.is_none() {
            self.install(&mut state, loaded);
        }
        Ok(())
    }

    /// The state locked once, with the record loaded when it already was
    /// or the store answers without waiting (one in memory); `None` when
    /// the store has to be waited for ([`ensure`](Self::ensure) does).
    /// A read of a loaded session is one lock round trip.
    fn lock_loaded_now(&self) -> Result<Option<std::sync::MutexGuard<'_, State>>, Error> {
        let mut state = self.lock();
        if state.record.is_some() {
            return Ok(Some(state));
        }
        let loaded = match Session::incoming(&state) {
            Some(handle) => match self.inner.config.store.load_now(handle) {
                Some(answer) => answer?,
                None => return Ok(None),
            },
            None => None,
        };
        self.install(&mut state, loaded);
        Ok(Some(state))
    }

    /// Makes `loaded` the session's record when it is still within the
    /// idle and absolute timeouts, else starts an empty one.
    fn install(&self, state: &mut State, loaded: Option<Arc<Record>>) {
        let config = &self.inner.config;
        let now = now_ms();
        let (idle, absolute) = (config.idle_ms, config.absolute_ms);
        let fresh = loaded.filter(|r| {
            now.saturating_sub(r.seen) <= idle && now.saturating_sub(r.created) <= absolute
        });
        state.live = fresh.is_some();
        let mut record = fresh.unwrap_or_default();
        // Refresh the last use at most every quarter of the idle
        // timeout: a save, not one per request.
        if state.live && now.saturating_sub(record.seen) > idle / 4 {
            Arc::make_mut(&mut record).seen = now;
            state.changed = true;
        }
        state.record = Some(record);
    }

    /// The value under `key`, if any; a value of another shape is a `500`.
    ///
    /// Awaited as an `async fn` (`session.get::<String>("user").await?`).
    /// The future is five words: a session already loaded, or
    /// a store that answers without waiting (one in memory), is read on
    /// its first poll with no more state; only a store that has to be
    /// waited for (SQLite, a network store) gets a boxed load.
    pub fn get<'a, T: DeserializeOwned>(
        &'a self,
        key: &'a str,
    ) -> impl Future<Output = Result<Option<T>, Error>> + Send + use<'a, T> {
        Get {
            session: self,
            key,
            waiting: None,
            out: std::marker::PhantomData,
        }
    }

    /// The value under `key` in the loaded record.
    fn read<T: DeserializeOwned>(state: &State, key: &str) -> Result<Option<T>, Error> {
        match state.record.as_ref().and_then(|r| r.data.get(key)) {
            Some(value) => Ok(Some(T::deserialize(value).map_err(Error::internal)?)),
            None => Ok(None),
        }
    }

    /// Sets `key` to `value`. Past the size limit the session is left as
    /// it was and the error (a `500`) names the limit.
    pub async fn insert<T: Serialize>(&self, key: &str, value: T) -> Result<(), Error> {
        self.ensure().await?;
        let value = serde_json::to_value(value).map_err(Error::internal)?;
        let max = self.inner.config.max_bytes;
        let mut state = self.lock();
        let record = Arc::make_mut(state.record.get_or_insert_with(Default::default));
        let old = record.data.insert(key.to_owned(), value);
        let size = serde_json::to_vec(&record.data).map_or(usize::MAX, |v| v.len());
        if size > max {
            match old {
                Some(old) => record.data.insert(key.to_owned(), old),
                None => record.data.remove(key),
            };
            return Err(Error::internal(format!(
                "session data would be {size} bytes, over the limit of {max} (Sessions::max_bytes)"
            )));
        }
        state.changed = true;
        state.destroyed = false;
        Ok(())
    }

    /// Removes `key`, returning its value.
    pub async fn remove(&self, key: &str) -> Result<Option<serde_json::Value>, Error> {
        self.ensure().await?;
        let mut state = self.lock();
        let old = match state.record.as_mut() {
            Some(record) if record.data.contains_key(key) => Arc::make_mut(record).data.remove(key),
            _ => None,
        };
        if old.is_some() {
            state.changed = true;
        }
        Ok(old)
    }

    /// Gives the session a new id, keeping its data, and deletes the old
    /// id from the store: call it at login so an id planted before login
    /// (session fixation) is worth nothing after.
    pub async fn rotate(&self) -> Result<(), Error> {
        self.ensure().await?;
        let mut state = self.lock();
        state.rotate = true;
        state.changed = true;
        Ok(())
    }

    /// Ends the session: its data is dropped, the store forgets it and the
    /// client's cookie is removed.
    pub async fn destroy(&self) -> Result<(), Error> {
        self.ensure().await?;
        let mut state = self.lock();
        state.record = Some(Arc::default());
        state.destroyed = true;
        state.changed = false;
        Ok(())
    }

    /// The session back when [`finish`](Self::finish) has anything to
    /// do (it was read and then changed or destroyed), else `None`. Once
    /// the request is gone (the usual case after the chain answered) this
    /// is the last handle: the state is read without locking and, when
    /// there is nothing to finish, reset and kept as the thread's spare
    /// for the next request's session (see [`spare_for`]).
    fn unless_done(mut self) -> Option<Session> {
        let due = |state: &State| state.record.is_some() && (state.changed || state.destroyed);
        let Some(inner) = Arc::get_mut(&mut self.inner) else {
            let due_now = due(&self.lock());
            return due_now.then_some(self);
        };
        match inner.state.get_mut() {
            Ok(state) if !due(state) => *state = State::default(),
            Ok(_) => return Some(self),
            Err(poisoned) => {
                // A poisoned state is not kept for another request.
                let due_now = due(poisoned.into_inner());
                return due_now.then_some(self);
            }
        }
        let _ = SPARE.try_with(move |slot| slot.set(Some(self.inner)));
        None
    }

    /// Saves what changed and sets the cookie.
    async fn finish(&self, res: &mut Response) -> Result<(), Error> {
        let config = &self.inner.config;
        let (record, live, rotate, destroyed) = {
            let state = self.lock();
            let Some(record) = state.record.as_ref() else {
                return Ok(()); // never read: nothing to do
            };
            if !state.changed && !state.destroyed {
                return Ok(());
            }
            (record.clone(), state.live, state.rotate, state.destroyed)
        };
        let incoming = self.incoming_text();
        let incoming = incoming.as_ref().map(CookieText::as_str);
        let mut jar = CookieJar::new();
        let cookie = |value: String| {
            Cookie::new(config.cookie_name.clone(), value)
                .path("/")
                .http_only(true)
                .secure(config.secure)
                .same_site(config.same_site)
        };
        if destroyed {
            if let Some(old) = incoming {
                config.store.delete(old).await?;
            }
            if incoming.is_some() {
                jar.set(cookie(String::new()).max_age(Duration::ZERO))?;
            }
        } else {
            // A new, expired or rotated session gets a fresh handle; the
            // old one is deleted.
            let keep = if live && !rotate { incoming } else { None };
            if keep.is_none()
                && let Some(old) = incoming
            {
                config.store.delete(old).await?;
            }
            let ttl = config.idle.min(config.absolute);
            let handle = config.store.save(keep, &record, ttl).await?;
            if Some(handle.as_str()) != incoming {
                jar.set(cookie(handle))?;
            }
        }
        jar.write_to(res.headers_mut());
        Ok(())
    }
}

/// The future of [`Session::get`]: the read on the first poll when the
/// record is loaded or the store answers at once; else the store's load,
/// boxed (only then), and the read after it.
struct Get<'a, T> {
    session: &'a Session,
    key: &'a str,
    /// The load from a store that has to be waited for.
    waiting: Option<futures_util::future::BoxFuture<'a, Result<(), Error>>>,
    /// The value is made at the end, never held: the future is `Send`
    /// and `Unpin` whatever `T` is.
    out: std::marker::PhantomData<fn() -> T>,
}

impl<T: DeserializeOwned> Future for Get<'_, T> {
    type Output = Result<Option<T>, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let (session, key) = (this.session, this.key);
        let waiting = match &mut this.waiting {
            Some(waiting) => waiting,
            None => match session.lock_loaded_now() {
                Ok(Some(state)) => return Poll::Ready(Session::read(&state, key)),
                Ok(None) => this.waiting.insert(Box::pin(session.load_waiting())),
                Err(err) => return Poll::Ready(Err(err)),
            },
        };
        std::task::ready!(waiting.as_mut().poll(cx))?;
        Poll::Ready(Session::read(&session.lock(), key))
    }
}

impl FromRequest for Session {
    type Rejection = Error;

    /// The request's session, its `Cookie` field read (a `431` when the
    /// cookies are over the jar's limits).
    async fn from_request(req: &mut Request) -> Result<Self, Self::Rejection> {
        let session = req.session().cloned().ok_or_else(|| {
            Error::internal(
                "no Session on this request: install Sessions::layer() with App::middleware",
            )
        })?;
        session.attach(|| crate::cookie::request_text(req))?;
        Ok(session)
    }
}

/// The status of a session store's failure.
impl StoreError {
    /// `503` when the store is busy (RFC 9110 §15.6.4: a temporary
    /// overload), else `500`: a store failing is the server's problem.
    pub fn status(&self) -> StatusCode {
        if self.is_busy() {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session with nothing to save is reset and kept for the thread's
    /// next session of the same `Sessions`; one due a save, or with
    /// another handle alive, is not kept.
    #[test]
    fn a_done_session_is_reset_and_kept_for_the_next_request() {
        let sessions = Sessions::new(MemoryStore::new());
        let new = || Session {
            inner: Arc::new(Inner {
                config: sessions.config.clone(),
                state: Mutex::new(State::default()),
            }),
        };
        let _ = SPARE.with(std::cell::Cell::take);

        // Read, not changed: nothing to finish; kept, reset.
        let read = new();
        {
            let mut state = read.lock();
            state.record = Some(Arc::new(Record::new()));
            state.incoming = Some(CookieText::Owned("handle".into()));
            state.attached = true;
            state.live = true;
        }
        assert!(read.unless_done().is_none());
        let other = Sessions::new(MemoryStore::new());
        assert!(
            spare_for(&other.config).is_none(),
            "another config's spare is dropped"
        );

        let read = new();
        let ptr = Arc::as_ptr(&read.inner);
        {
            let mut state = read.lock();
            state.record = Some(Arc::new(Record::new()));
            state.incoming = Some(CookieText::Owned("handle".into()));
            state.attached = true;
        }
        assert!(read.unless_done().is_none());
        let spare = spare_for(&sessions.config).expect("kept");
        assert_eq!(Arc::as_ptr(&spare), ptr, "the same allocation");
        let state = spare.state.lock().unwrap();
        assert!(state.record.is_none() && state.incoming.is_none());
        assert!(!state.attached && !state.live && !state.changed && !state.rotate);
        assert!(!state.destroyed);
        drop(state);

        // Changed: the session comes back to be finished; nothing kept.
        let changed = new();
        {
            let mut state = changed.lock();
            state.record = Some(Arc::new(Record::new()));
            state.changed = true;
        }
        assert!(changed.unless_done().is_some());
        assert!(spare_for(&sessions.config).is_none());

        // Another handle alive (a clone kept by the handler): not kept.
        let shared = new();
        let clone = shared.clone();
        assert!(shared.unless_done().is_none());
        assert!(spare_for(&sessions.config).is_none());
        drop(clone);
    }

    /// A session of `sessions` whose cookie carried `handle`.
    fn attached(sessions: &Sessions, handle: Option<&str>) -> Session {
        let session = Session {
            inner: Arc::new(Inner {
                config: sessions.config.clone(),
                state: Mutex::new(State::default()),
            }),
        };
        session
            .attach(|| {
                Ok(CookieText::Owned(handle.map_or("".into(), |h| {
                    format!("__Host-session={h}").into()
                })))
            })
            .unwrap();
        session
    }

    /// `get`'s small future reads at once from a store in memory, and
    /// from a store that answers later (SQLite, on its own thread) after
    /// the boxed load; a loaded session is then read without the store,
    /// and an unknown or missing handle reads as empty.
    #[tokio::test]
    async fn get_reads_from_stores_that_answer_now_and_later() {
        let dir = tempfile::tempdir().unwrap();
        let sqlite = Arc::new(SqliteStore::open(dir.path().join("s.sqlite3")).unwrap());
        assert!(sqlite.load_now("x").is_none(), "SQLite is waited for");
        check_get(sqlite).await;
        check_get(Arc::new(MemoryStore::new())).await;
    }

    async fn check_get<S: SessionStore>(store: Arc<S>) {
        let mut record = Record::new();
        record.data.insert("user".into(), "ada".into());
        let id = store
            .save(None, &record, Duration::from_secs(60))
            .await
            .unwrap();
        let sessions = Sessions::new(store.clone());
        let session = attached(&sessions, Some(&id));
        let user: Option<String> = session.get("user").await.unwrap();
        assert_eq!(user.as_deref(), Some("ada"));
        assert!(session.lock().live);
        // Loaded: read again (and a key not there) without the store.
        store.delete(&id).await.unwrap();
        let again = session.get::<String>("user").await.unwrap();
        assert_eq!(again.as_deref(), Some("ada"));
        assert_eq!(session.get::<String>("none").await.unwrap(), None);
        // A value of another shape is an error, not a panic.
        assert!(session.get::<u32>("user").await.is_err());
        let unknown = attached(&sessions, Some(&new_id().unwrap()));
        assert_eq!(unknown.get::<String>("user").await.unwrap(), None);
        assert!(!unknown.lock().live);
        let missing = attached(&sessions, None);
        assert_eq!(missing.get::<String>("user").await.unwrap(), None);
    }

    /// `Request::into_http` hands the session on in the extensions.
    #[test]
    fn into_http_keeps_the_session() {
        let sessions = Sessions::new(MemoryStore::new());
        let session = Session {
            inner: Arc::new(Inner {
                config: sessions.config.clone(),
                state: Mutex::new(State::default()),
            }),
        };
        let mut req = Request::builder().uri("/").body(()).unwrap();
        req.set_session(session.clone());
        assert!(req.session().is_some());
        let http = req.into_http();
        let carried = http.extensions().get::<Session>().expect("the session");
        assert!(Arc::ptr_eq(&carried.inner, &session.inner));
    }
}
