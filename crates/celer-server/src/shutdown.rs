//! The graceful-shutdown signal shared by accept loops and connections.
//!
//! Accept loops wait on a `Notify`. Connections register one waker each for
//! their whole life, so an idle connection learns of shutdown at once
//! without a lock or allocation per request; an HTTP/1.1 connection puts
//! its waker there once per task, not once per wait
//! (`Watch::poll_started_mut`, decision 155).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use futures_util::task::AtomicWaker;
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
    conns: Mutex<Registry>,
    /// Connections handed over after a 101 that are still open: the drain
    /// waits for them as for the engine's own.
    upgraded: AtomicUsize,
    upgraded_closed: Notify,
}

/// Wakers of live connections, in reusable slots.
#[derive(Debug, Default)]
struct Registry {
    slots: Vec<Option<Arc<AtomicWaker>>>,
    free: Vec<u32>,
}

impl Inner {
    fn conns(&self) -> MutexGuard<'_, Registry> {
        // The registry stays consistent across a panic: every critical
        // section is a single push, pop or slot write.
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }
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
        for waker in self.inner.conns().slots.iter().flatten() {
            waker.wake();
        }
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

    /// Resolves once no upgraded connection (see [`crate::upgrade`]) is
    /// open any more.
    pub(crate) async fn upgraded_closed(&self) {
        loop {
            let notified = self.inner.upgraded_closed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.inner.upgraded.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }

    /// A per-connection watch on this signal.
    pub(crate) fn watch(&self) -> Watch {
        let waker = Arc::new(AtomicWaker::new());
        let mut conns = self.inner.conns();
        let slot: u32 = match conns.free.pop() {
            Some(slot) => {
                conns.slots[slot as usize] = Some(waker.clone());
                slot
            }
            None => {
                conns.slots.push(Some(waker.clone()));
                // More than 4 billion live connections do not fit in memory.
                u32::try_from(conns.slots.len() - 1).expect("connection slots fit in u32")
            }
        };
        drop(conns);
        Watch {
            shutdown: self.clone(),
            waker,
            registered: 0,
            slot,
            upgraded: false,
        }
    }
}

/// One connection's registration with a [`Shutdown`].
#[derive(Debug)]
pub(crate) struct Watch {
    shutdown: Shutdown,
    waker: Arc<AtomicWaker>,
    /// The data pointer of the waker [`Watch::poll_started_mut`] last put
    /// in `waker` (0: none), kept with the connection's own state. The cell
    /// holds that waker, so no other waker shares the pointer while the
    /// watch lives. A pointer, not a clone: the connection's task stays
    /// within its allocator size class.
    registered: usize,
    slot: u32,
    /// Counted in `Inner::upgraded` until dropped.
    upgraded: bool,
}

impl Watch {
    /// Marks the connection as handed over after a 101: the server's drain
    /// waits until this watch is dropped.
    pub(crate) fn into_upgraded(mut self) -> Watch {
        self.shutdown.inner.upgraded.fetch_add(1, Ordering::AcqRel);
        self.upgraded = true;
        self
    }

    /// A new watch on the same signal (for a stream handed over while its
    /// connection goes on).
    pub(crate) fn fork(&self) -> Watch {
        self.shutdown.watch()
    }

    /// True once shutdown has started.
    pub(crate) fn is_started(&self) -> bool {
        self.shutdown.is_started()
    }

    /// Ready once shutdown has started; otherwise wakes `cx` when it does.
    pub(crate) fn poll_started(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.waker.register(cx.waker());
        if self.is_started() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// [`Watch::poll_started`] for a connection that waits again and again
    /// in the same task (an HTTP/1.1 connection between requests): the
    /// waker is put in the shared cell once per task, not once per wait,
    /// so a keep-alive request leaves the cell (its own allocation, two
    /// atomic swaps) alone. Until [`Shutdown::trigger`] wakes it the cell
    /// keeps the waker put there last, and `trigger` marks the start
    /// before it wakes, so a waker it took is seen here as a started
    /// shutdown.
    ///
    /// A watch polled here is not polled with [`Watch::poll_started`] too:
    /// a waker put in the cell there would not be seen here.
    pub(crate) fn poll_started_mut(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let data = cx.waker().data() as usize;
        if self.registered != data {
            self.waker.register(cx.waker());
            self.registered = data;
        }
        if self.is_started() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut conns = self.shutdown.inner.conns();
        conns.slots[self.slot as usize] = None;
        conns.free.push(self.slot);
        drop(conns);
        if self.upgraded && self.shutdown.inner.upgraded.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shutdown.inner.upgraded_closed.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watches_are_woken_and_slots_reused() {
        let shutdown = Shutdown::new();
        let a = shutdown.watch();
        let b = shutdown.watch();
        assert_eq!((a.slot, b.slot), (0, 1));
        drop(a);
        let c = shutdown.watch();
        assert_eq!(c.slot, 0, "a freed slot is reused");
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(c.poll_started(&mut cx).is_pending());
        shutdown.trigger();
        assert!(c.poll_started(&mut cx).is_ready());
        assert!(b.is_started());
    }

    /// Counts its wakes.
    struct Count(std::sync::atomic::AtomicUsize);

    impl futures_util::task::ArcWake for Count {
        fn wake_by_ref(arc_self: &Arc<Self>) {
            arc_self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counter() -> (Arc<Count>, std::task::Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = futures_util::task::waker(count.clone());
        (count, waker)
    }

    #[test]
    fn a_watch_polled_again_by_its_task_is_still_woken() {
        let shutdown = Shutdown::new();
        let mut watch = shutdown.watch();
        let (first, first_waker) = counter();
        let mut cx = Context::from_waker(&first_waker);
        for _ in 0..3 {
            assert!(watch.poll_started_mut(&mut cx).is_pending());
        }
        // Another task's waker replaces the first: only it is woken.
        let (second, second_waker) = counter();
        assert!(
            watch
                .poll_started_mut(&mut Context::from_waker(&second_waker))
                .is_pending()
        );
        assert!(watch.poll_started_mut(&mut cx).is_pending());
        shutdown.trigger();
        assert_eq!(first.0.load(Ordering::SeqCst), 1, "the last waker is woken");
        assert_eq!(second.0.load(Ordering::SeqCst), 0);
        // The cell gave its waker up; the watch reads the start instead.
        assert!(watch.poll_started_mut(&mut cx).is_ready());
        assert!(
            watch
                .poll_started_mut(&mut Context::from_waker(&second_waker))
                .is_ready()
        );
    }
}
