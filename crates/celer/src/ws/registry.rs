//! The registry of live WebSocket connections: by id, by group.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{CloseCode, Message, Prepared, SendError, Sender};

/// Live connections, addressable by the id the app chose when it accepted
/// them, optionally in groups. Cloning is one reference count; every method
/// may be called from any thread.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    state: Mutex<State>,
    serial: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    conns: HashMap<String, Entry>,
    groups: HashMap<String, HashSet<String>>,
}

#[derive(Debug)]
struct Entry {
    sender: Sender,
    groups: Vec<String>,
    serial: u64,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the maps consistent.
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a connection; a connection already under `id` is closed with
    /// 1008 and replaced. Returns the entry's serial for [`Self::remove`].
    pub(crate) fn insert(&self, id: &str, groups: &[String], sender: Sender) -> u64 {
        let serial = self.inner.serial.fetch_add(1, Ordering::Relaxed);
        let mut state = self.state();
        for g in groups {
            state
                .groups
                .entry(g.clone())
                .or_default()
                .insert(id.to_owned());
        }
        let old = state.conns.insert(
            id.to_owned(),
            Entry {
                sender,
                groups: groups.to_vec(),
                serial,
            },
        );
        if let Some(old) = old {
            for g in old.groups.iter().filter(|g| !groups.contains(g)) {
                remove_member(&mut state, g, id);
            }
            drop(state);
            old.sender
                .close(CloseCode::POLICY, "replaced by a new connection");
        }
        serial
    }

    /// Removes the connection `id` if it is still the one of `serial`.
    pub(crate) fn remove(&self, id: &str, serial: u64) {
        let mut state = self.state();
        if state.conns.get(id).is_some_and(|e| e.serial == serial) {
            let entry = state.conns.remove(id).expect("just seen");
            for g in &entry.groups {
                remove_member(&mut state, g, id);
            }
        }
    }

    /// Queues a message for the connection `id`; `Err(Closed)` when there
    /// is none.
    pub fn send(&self, id: &str, message: Message) -> Result<(), SendError> {
        let sender = self.sender(id).ok_or(SendError::Closed)?;
        sender.send(message)
    }

    /// Queues a message for every connection of `group`, framed (and
    /// compressed) once; returns how many took it.
    pub fn broadcast(&self, group: &str, message: Message) -> usize {
        let senders: Vec<Sender> = {
            let state = self.state();
            match state.groups.get(group) {
                Some(ids) => ids
                    .iter()
                    .filter_map(|id| state.conns.get(id))
                    .map(|e| e.sender.clone())
                    .collect(),
                None => return 0,
            }
        };
        send_all(&senders, message)
    }

    /// Queues a message for every connection, framed once; returns how many
    /// took it.
    pub fn broadcast_all(&self, message: Message) -> usize {
        let senders: Vec<Sender> = self
            .state()
            .conns
            .values()
            .map(|e| e.sender.clone())
            .collect();
        send_all(&senders, message)
    }

    /// Starts closing the connection `id` with this code and reason;
    /// false when there is none.
    pub fn close(&self, id: &str, code: CloseCode, reason: &str) -> bool {
        match self.sender(id) {
            Some(s) => {
                s.close(code, reason);
                true
            }
            None => false,
        }
    }

    /// The sending handle of the connection `id`.
    pub fn sender(&self, id: &str) -> Option<Sender> {
        self.state().conns.get(id).map(|e| e.sender.clone())
    }

    /// Adds the connection `id` to a group; false when there is no such
    /// connection.
    pub fn join(&self, id: &str, group: &str) -> bool {
        let mut state = self.state();
        let Some(entry) = state.conns.get_mut(id) else {
            return false;
        };
        if !entry.groups.iter().any(|g| g == group) {
            entry.groups.push(group.to_owned());
            state
                .groups
                .entry(group.to_owned())
                .or_default()
                .insert(id.to_owned());
        }
        true
    }

    /// Takes the connection `id` out of a group.
    pub fn leave(&self, id: &str, group: &str) {
        let mut state = self.state();
        if let Some(entry) = state.conns.get_mut(id) {
            entry.groups.retain(|g| g != group);
            remove_member(&mut state, group, id);
        }
    }

    /// How many connections are registered.
    pub fn count(&self) -> usize {
        self.state().conns.len()
    }

    /// How many connections are in `group`.
    pub fn count_in(&self, group: &str) -> usize {
        self.state().groups.get(group).map_or(0, HashSet::len)
    }

    /// The ids of all connections (in no particular order).
    pub fn ids(&self) -> Vec<String> {
        self.state().conns.keys().cloned().collect()
    }

    /// The ids of the connections in `group`.
    pub fn ids_in(&self, group: &str) -> Vec<String> {
        self.state()
            .groups
            .get(group)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The groups that have at least one connection.
    pub fn groups(&self) -> Vec<String> {
        self.state().groups.keys().cloned().collect()
    }
}

fn remove_member(state: &mut State, group: &str, id: &str) {
    if let Some(members) = state.groups.get_mut(group) {
        members.remove(id);
        if members.is_empty() {
            state.groups.remove(group);
        }
    }
}

fn send_all(senders: &[Sender], message: Message) -> usize {
    let prepared = Prepared::new(message);
    senders
        .iter()
        .filter(|s| s.send_prepared(&prepared).is_ok())
        .count()
}
