//! The graceful-shutdown signal shared by accept loops and connections.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// A cheap handle that tells whether shutdown has started and wakes waiters
/// when it does.
#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    started: AtomicBool,
    notify: Notify,
}

impl Shutdown {
    /// A signal that has not fired.
    pub fn new() -> Shutdown {
        Shutdown::default()
    }

    /// Starts shutdown: accept loops stop, idle connections close, busy ones
    /// close after their current response.
    pub fn trigger(&self) {
        self.inner.started.store(true, Ordering::Release);
        self.inner.notify.notify_waiters();
    }

    /// True once [`Shutdown::trigger`] was called.
    pub fn is_started(&self) -> bool {
        self.inner.started.load(Ordering::Acquire)
    }

    /// Resolves once shutdown has started.
    pub async fn started(&self) {
        let notified = self.inner.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.is_started() {
            return;
        }
        notified.await;
    }
}
