//! Admission of TLS handshakes: at most `Limits::max_tls_handshakes` in
//! progress per server, without ever pausing the listener.
//!
//! A handshake costs the server a signature, and one in progress holds a
//! task and buffers, so their number has a cap. Pausing `accept` at the cap
//! (what a semaphore in the accept loop does) lets clients that open
//! connections and send nothing hold every slot for the whole handshake
//! timeout while real clients wait in the kernel's backlog: 103 such
//! connections a second kept 1,024 slots of 10 s full. Here the listener
//! always accepts, and at the cap the new connection takes the slot of the
//! *least advanced* pending handshake: the oldest one still waiting for its
//! ClientHello, else the oldest of all. A client that sends its ClientHello
//! at once is past that stage within a round trip, so under a flood of idle
//! connections it is never the one shed; and every connection must deliver
//! its whole ClientHello within [`TLS_CLIENT_HELLO_TIMEOUT`], so an idle one
//! holds its slot for seconds, not the whole handshake timeout.
//!
//! [`TLS_CLIENT_HELLO_TIMEOUT`]: crate::limits::TLS_CLIENT_HELLO_TIMEOUT

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

/// The handshakes in progress on one server.
#[derive(Debug)]
pub(crate) struct Handshakes {
    /// Most handshakes in progress at once (at least 1).
    max: usize,
    pending: Mutex<Pending>,
}

/// The pending handshakes by stage, each oldest first (ids grow).
#[derive(Debug, Default)]
struct Pending {
    next_id: u64,
    /// Still reading the ClientHello.
    awaiting_hello: BTreeMap<u64, Arc<Notify>>,
    /// Past the ClientHello: the server's flight sent, waiting for the
    /// client's Finished.
    after_hello: BTreeMap<u64, Arc<Notify>>,
    /// Handshakes shed since the server started.
    shed: u64,
}

impl Pending {
    fn len(&self) -> usize {
        self.awaiting_hello.len() + self.after_hello.len()
    }
}

impl Handshakes {
    /// At most `max` handshakes in progress at once (0 counts as 1).
    pub(crate) fn new(max: usize) -> Handshakes {
        Handshakes {
            max: max.max(1),
            pending: Mutex::new(Pending::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        // The map stays consistent whatever panicked while it was held.
        self.pending.lock().unwrap_or_else(|err| err.into_inner())
    }

    /// Admits a new handshake at once; at the cap the least advanced
    /// pending one is shed to make room (see the module docs).
    pub(crate) fn admit(self: &Arc<Self>) -> Slot {
        let evicted = Arc::new(Notify::new());
        let mut pending = self.lock();
        while pending.len() >= self.max {
            let victim = match pending.awaiting_hello.pop_first() {
                Some(victim) => victim,
                None => match pending.after_hello.pop_first() {
                    Some(victim) => victim,
                    None => break,
                },
            };
            // Stored if the victim is not waiting yet: it ends at its next
            // poll either way.
            victim.1.notify_one();
            pending.shed += 1;
        }
        let id = pending.next_id;
        pending.next_id += 1;
        pending.awaiting_hello.insert(id, evicted.clone());
        drop(pending);
        Slot {
            handshakes: self.clone(),
            id,
            evicted,
        }
    }

    /// Handshakes in progress now.
    #[cfg(test)]
    pub(crate) fn in_progress(&self) -> usize {
        self.lock().len()
    }

    /// Handshakes shed at the cap since the server started.
    #[cfg(test)]
    pub(crate) fn shed(&self) -> u64 {
        self.lock().shed
    }
}

/// One admitted handshake's place; given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    handshakes: Arc<Handshakes>,
    id: u64,
    /// Notified when a newer connection takes this slot.
    evicted: Arc<Notify>,
}

impl Slot {
    /// The ClientHello is in: this handshake is past the stage shed first.
    pub(crate) fn hello_received(&self) {
        let mut pending = self.handshakes.lock();
        // Absent when already shed.
        if let Some(notify) = pending.awaiting_hello.remove(&self.id) {
            pending.after_hello.insert(self.id, notify);
        }
    }

    /// Runs `handshake` until it ends, or until the slot is shed (`None`).
    pub(crate) async fn run<F: Future>(&self, handshake: F) -> Option<F::Output> {
        tokio::select! {
            biased;
            () = self.evicted.notified() => None,
            out = handshake => Some(out),
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut pending = self.handshakes.lock();
        if pending.awaiting_hello.remove(&self.id).is_none() {
            pending.after_hello.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn at_the_cap_the_oldest_waiting_for_its_hello_is_shed() {
        let handshakes = Arc::new(Handshakes::new(3));
        let oldest = handshakes.admit();
        let advanced = handshakes.admit();
        advanced.hello_received();
        let young = handshakes.admit();
        assert_eq!(handshakes.in_progress(), 3);
        // A fourth: the oldest still waiting for its ClientHello goes, not
        // the older one past it.
        let fourth = handshakes.admit();
        assert_eq!(handshakes.in_progress(), 3);
        assert_eq!(handshakes.shed(), 1);
        assert_eq!(oldest.run(std::future::pending::<()>()).await, None);
        // The others still run.
        assert_eq!(advanced.run(async { 1 }).await, Some(1));
        assert_eq!(young.run(async { 2 }).await, Some(2));
        // Shed, its drop frees nothing of another's.
        drop(oldest);
        assert_eq!(handshakes.in_progress(), 3);
        // When every pending one is past its ClientHello, the oldest goes.
        young.hello_received();
        fourth.hello_received();
        let _fifth = handshakes.admit();
        assert_eq!(advanced.run(std::future::pending::<()>()).await, None);
        assert_eq!(handshakes.shed(), 2);
        drop((advanced, young, fourth));
        assert_eq!(handshakes.in_progress(), 1);
    }
}
