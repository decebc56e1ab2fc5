//! The cache's memory: entries by key, their recency for LRU eviction, the
//! `Vary` fields learned per URL, and the misses in flight.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use http::StatusCode;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::sync::watch;
use tokio::time::Instant;

/// What identifies a cached response: the URL (path and query) and the
/// values of the request fields the response varies on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Key {
    pub(super) url: Box<str>,
    pub(super) varied: Vec<Option<HeaderValue>>,
}

/// A cached response.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) status: StatusCode,
    pub(super) headers: HeaderMap,
    pub(super) body: Bytes,
    pub(super) stored: Instant,
    /// The request fields this response varies on, and their values in the
    /// request that produced it.
    pub(super) vary: Arc<[HeaderName]>,
    pub(super) varied: Vec<Option<HeaderValue>>,
    /// Bytes charged against the store's bound.
    pub(super) size: usize,
}

/// What a miss in flight ends with, for the requests that wait on it.
#[derive(Debug, Clone)]
pub(super) enum Outcome {
    Cached(Arc<Entry>),
    /// The response could not be shared; each waiter asks for its own.
    Uncacheable,
}

/// Counters, for observability and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Requests answered from a fresh entry.
    pub hits: u64,
    /// Requests answered from a stale entry while it is refreshed.
    pub stale_hits: u64,
    /// Requests that called the handler because nothing was cached.
    pub misses: u64,
    /// Requests that waited for another request's miss instead of calling
    /// the handler.
    pub coalesced: u64,
    /// Background refreshes started.
    pub refreshes: u64,
    /// Entries evicted to stay under the byte bound.
    pub evictions: u64,
    /// Entries held now.
    pub entries: u64,
    /// Bytes held now (bodies, headers and keys).
    pub bytes: u64,
}

struct Slot {
    entry: Arc<Entry>,
    /// Position in `Store::recency`.
    tick: u64,
}

/// The shared state of a cache (behind one mutex, never held across an
/// await).
pub(super) struct Store {
    pub(super) max_bytes: usize,
    bytes: usize,
    slots: HashMap<Key, Slot>,
    /// Least recently used first.
    recency: BTreeMap<u64, Key>,
    next_tick: u64,
    /// The fields each URL's responses vary on, with how many entries
    /// hold them (the record goes with the last entry).
    vary: HashMap<Box<str>, (Arc<[HeaderName]>, usize)>,
    /// Misses in flight: the receiver waiters clone, and the leader's id.
    pub(super) inflight: HashMap<Key, (watch::Receiver<Option<Outcome>>, u64)>,
    next_leader: u64,
    pub(super) stats: CacheStats,
}

impl Store {
    pub(super) fn new(max_bytes: usize) -> Store {
        Store {
            max_bytes,
            bytes: 0,
            slots: HashMap::new(),
            recency: BTreeMap::new(),
            next_tick: 0,
            vary: HashMap::new(),
            inflight: HashMap::new(),
            next_leader: 0,
            stats: CacheStats::default(),
        }
    }

    /// The key for a request to `url`, by the fields its responses were
    /// last seen to vary on.
    pub(super) fn key(&self, url: &str, headers: &HeaderMap) -> Key {
        let varied = match self.vary.get(url) {
            Some((names, _)) => varied_values(names, headers),
            None => Vec::new(),
        };
        Key {
            url: url.into(),
            varied,
        }
    }

    /// The entry for `key`, marked as used.
    pub(super) fn get(&mut self, key: &Key) -> Option<Arc<Entry>> {
        let tick = self.next_tick;
        let slot = self.slots.get_mut(key)?;
        self.next_tick += 1;
        if let Some(key) = self.recency.remove(&slot.tick) {
            self.recency.insert(tick, key);
        }
        slot.tick = tick;
        Some(slot.entry.clone())
    }

    /// Stores `entry` for `url`, evicting the least recently used entries
    /// to stay under the bound; an entry larger than the bound is not kept.
    pub(super) fn insert(&mut self, url: &str, entry: Arc<Entry>) {
        let key = Key {
            url: url.into(),
            varied: entry.varied.clone(),
        };
        self.remove(&key);
        if entry.size > self.max_bytes {
            return;
        }
        while self.bytes + entry.size > self.max_bytes {
            let Some((_, oldest)) = self.recency.pop_first() else {
                break;
            };
            self.remove_slot(&oldest);
            self.stats.evictions += 1;
        }
        let record = self
            .vary
            .entry(url.into())
            .or_insert_with(|| (entry.vary.clone(), 0));
        // The latest response decides what the URL varies on.
        record.0 = entry.vary.clone();
        record.1 += 1;
        let tick = self.next_tick;
        self.next_tick += 1;
        self.bytes += entry.size;
        self.recency.insert(tick, key.clone());
        self.slots.insert(key, Slot { entry, tick });
        self.refresh_stats();
    }

    pub(super) fn remove(&mut self, key: &Key) {
        if let Some(slot) = self.slots.get(key) {
            let tick = slot.tick;
            self.recency.remove(&tick);
            self.remove_slot(key);
        }
    }

    fn remove_slot(&mut self, key: &Key) {
        let Some(slot) = self.slots.remove(key) else {
            return;
        };
        self.bytes -= slot.entry.size;
        if let Some(record) = self.vary.get_mut(&key.url) {
            record.1 -= 1;
            if record.1 == 0 {
                self.vary.remove(&key.url);
            }
        }
        self.refresh_stats();
    }

    fn refresh_stats(&mut self) {
        self.stats.entries = self.slots.len() as u64;
        self.stats.bytes = self.bytes as u64;
    }

    /// Registers a miss in flight for `key`; returns the sender and the
    /// leader's id.
    pub(super) fn lead(&mut self, key: Key) -> (watch::Sender<Option<Outcome>>, u64) {
        let (tx, rx) = watch::channel(None);
        let id = self.next_leader;
        self.next_leader += 1;
        self.inflight.insert(key, (rx, id));
        (tx, id)
    }

    /// Ends leader `id`'s miss for `key`, if it still owns it.
    pub(super) fn end_lead(&mut self, key: &Key, id: u64) {
        if self
            .inflight
            .get(key)
            .is_some_and(|(_, owner)| *owner == id)
        {
            self.inflight.remove(key);
        }
    }
}

/// The values of `names` in `headers`, joined per name.
pub(super) fn varied_values(names: &[HeaderName], headers: &HeaderMap) -> Vec<Option<HeaderValue>> {
    names
        .iter()
        .map(|name| {
            let mut values = headers.get_all(name).iter();
            let first = values.next()?.clone();
            let mut joined = first.as_bytes().to_vec();
            for value in values {
                joined.extend_from_slice(b", ");
                joined.extend_from_slice(value.as_bytes());
            }
            HeaderValue::from_bytes(&joined).ok()
        })
        .collect()
}
