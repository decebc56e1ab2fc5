//! The notice that a graceful shutdown has started, for app code that holds
//! something open: event streams, WebSockets, background tasks.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

/// Tells app code that the server has begun a graceful shutdown.
///
/// Every [`App`](crate::App) has one ([`App::shutdown_notice`](crate::App::shutdown_notice),
/// [`Request::shutdown_notice`](crate::Request::shutdown_notice)).
/// [`App::run`](crate::App::run) fires it when its signal resolves and
/// [`App::serve`](crate::App::serve) when its
/// [`Shutdown`](crate::serve::Shutdown) is triggered, before connections
/// are drained. Whatever keeps a response open (an
/// [`EventStream`](crate::sse::EventStream), a WebSocket, a long poll)
/// watches it and ends at a clean boundary, so the server exits within its
/// shutdown timeout instead of cutting connections when it runs out.
///
/// An app served by another server fires it itself with
/// [`trigger`](ShutdownNotice::trigger). Cloning is one `Arc` clone; all
/// clones are the same notice.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let app = celer::App::new();
/// let notice = app.shutdown_notice();
/// let worker = tokio::spawn({
///     let notice = notice.clone();
///     async move {
///         notice.started().await;
///         "stopped"
///     }
/// });
/// assert!(!notice.is_started());
/// notice.trigger();
/// assert_eq!(worker.await.unwrap(), "stopped");
/// # });
/// ```
#[derive(Clone, Default)]
pub struct ShutdownNotice {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Set once by `trigger`, never cleared.
    started: AtomicBool,
    /// Wakes every `started` future when `trigger` runs.
    notify: Notify,
    /// Notices of apps mounted into this one, fired with it.
    linked: Mutex<Vec<ShutdownNotice>>,
}

// ===== impl ShutdownNotice =====

impl ShutdownNotice {
    /// A notice that has not fired.
    ///
    /// ```
    /// assert!(!celer::ShutdownNotice::new().is_started());
    /// ```
    pub fn new() -> ShutdownNotice {
        ShutdownNotice::default()
    }

    /// Fires the notice: [`is_started`](ShutdownNotice::is_started) turns
    /// true and every [`started`](ShutdownNotice::started) future resolves.
    /// Firing again does nothing.
    ///
    /// ```
    /// let notice = celer::ShutdownNotice::new();
    /// notice.trigger();
    /// notice.trigger();
    /// assert!(notice.is_started());
    /// ```
    pub fn trigger(&self) {
        if self.inner.started.swap(true, Ordering::AcqRel) {
            return;
        }
        self.inner.notify.notify_waiters();
        let linked = std::mem::take(
            &mut *self
                .inner
                .linked
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for notice in linked {
            notice.trigger();
        }
    }

    /// Makes `other` fire with this notice (a mounted app's notice with
    /// the notice of the app it is mounted in).
    pub(crate) fn link(&self, other: ShutdownNotice) {
        if Arc::ptr_eq(&self.inner, &other.inner) {
            return;
        }
        let mut linked = self
            .inner
            .linked
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // `trigger` sets the flag before it takes the list: unset here,
        // under the lock, the pushed notice is taken and fired with it.
        if self.is_started() {
            drop(linked);
            other.trigger();
        } else {
            linked.push(other);
        }
    }

    /// True once the notice has fired.
    ///
    /// ```
    /// let notice = celer::ShutdownNotice::new();
    /// assert!(!notice.is_started());
    /// ```
    pub fn is_started(&self) -> bool {
        self.inner.started.load(Ordering::Acquire)
    }

    /// A future that resolves once the notice has fired (at once if it
    /// has). It owns a handle on the notice, so it can be stored or moved
    /// into a task.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let notice = celer::ShutdownNotice::new();
    /// let started = notice.started();
    /// notice.trigger();
    /// started.await;
    /// # });
    /// ```
    pub fn started(&self) -> impl Future<Output = ()> + Send + 'static {
        let inner = self.inner.clone();
        async move {
            let notified = inner.notify.notified();
            tokio::pin!(notified);
            // Registered before the flag is read, so a trigger between the
            // two is not missed.
            notified.as_mut().enable();
            if inner.started.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }
}

impl fmt::Debug for ShutdownNotice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShutdownNotice")
            .field("started", &self.is_started())
            .finish()
    }
}
