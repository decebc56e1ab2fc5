//! Session stores: the [`SessionStore`] trait, the bounded in-memory
//! server store and the encrypted-cookie store.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::clock::monotonic_ms;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use futures_util::future::BoxFuture;

use super::Record;
use crate::BoxError;
use crate::cookie::EncryptionKeys;

/// The default number of sessions a [`MemoryStore`] holds: 100,000. A new
/// session past it evicts the oldest one saved.
pub const DEFAULT_MAX_SESSIONS: usize = 100_000;

/// A store failed (a database is down, a value did not fit): the request
/// is answered `500` and the cause logged; a store too busy to answer in
/// time ([`StoreError::busy`]) is answered `503`.
#[derive(Debug)]
pub struct StoreError {
    cause: BoxError,
    busy: bool,
}

impl StoreError {
    /// A store error from any cause.
    pub fn new(cause: impl Into<BoxError>) -> StoreError {
        StoreError {
            cause: cause.into(),
            busy: false,
        }
    }

    /// The store is up but could not take the call in time (its queue is
    /// full): the client may try again.
    pub fn busy(cause: impl Into<BoxError>) -> StoreError {
        StoreError {
            cause: cause.into(),
            busy: true,
        }
    }

    /// Whether this is [`StoreError::busy`].
    pub fn is_busy(&self) -> bool {
        self.busy
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "session store: {}", self.cause)
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.cause)
    }
}

/// Where sessions live. The cookie carries a *handle* the store gave: an
/// id for a server store, the sealed session itself for a cookie store.
///
/// A server store (in memory, SQLite, Redis) keeps records by a random id
/// and forgets them after `ttl`; the framework asks it to delete the old
/// id when a session is rotated or destroyed, so no id outlives a login.
pub trait SessionStore: Send + Sync + 'static {
    /// The record `handle` names, or `None` when unknown or expired. The
    /// record is shared (a store in memory hands out its own); a session
    /// copies it only when it changes it.
    fn load<'a>(
        &'a self,
        handle: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<Record>>, StoreError>>;

    /// What [`load`](Self::load) would answer, for a store that can answer
    /// without waiting (one in memory): it spares the boxed future. `None`
    /// (the default) means "ask `load`".
    fn load_now(&self, handle: &str) -> Option<Result<Option<Arc<Record>>, StoreError>> {
        let _ = handle;
        None
    }

    /// Stores `record` under `handle`, or under a fresh handle when `None`
    /// (a new or rotated session), kept at least `ttl`; returns the
    /// handle the cookie is to carry.
    fn save<'a>(
        &'a self,
        handle: Option<&'a str>,
        record: &'a Record,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<String, StoreError>>;

    /// Forgets `handle` (logout, rotation).
    fn delete<'a>(&'a self, handle: &'a str) -> BoxFuture<'a, Result<(), StoreError>>;
}

/// A fresh session id: 256 bits from the operating system, base64url.
pub fn new_id() -> Result<String, StoreError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| StoreError::new(e.to_string()))?;
    Ok(B64.encode(bytes))
}

/// Sessions in this process's memory, at most a set number of them
/// ([`DEFAULT_MAX_SESSIONS`] unless [`MemoryStore::with_capacity`]); the
/// oldest saved is evicted first. Lost on restart; one process only.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use celer::session::{MemoryStore, Record, SessionStore};
/// use std::time::Duration;
///
/// let store = MemoryStore::with_capacity(2);
/// let record = Record::new();
/// let a = store.save(None, &record, Duration::from_secs(60)).await.unwrap();
/// let b = store.save(None, &record, Duration::from_secs(60)).await.unwrap();
/// let _c = store.save(None, &record, Duration::from_secs(60)).await.unwrap();
/// assert!(store.load(&a).await.unwrap().is_none()); // evicted
/// assert!(store.load(&b).await.unwrap().is_some());
/// assert_eq!(store.len(), 2);
/// # });
/// ```
#[derive(Debug)]
pub struct MemoryStore {
    capacity: usize,
    inner: Mutex<Memory>,
}

/// Hashes a session id by its first 8 bytes. Ids are 256 random bits
/// the store minted, so they spread evenly without a keyed hash; a forged
/// id only costs its own lookup (lookups never insert), so it cannot
/// crowd a bucket.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut word = [0u8; 8];
        let n = bytes.len().min(8);
        word[..n].copy_from_slice(&bytes[..n]);
        self.0 =
            (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    /// Only `str`'s terminator (`0xff`) is written as a `u8`: the same
    /// for every id, it is left out.
    #[inline]
    fn write_u8(&mut self, _: u8) {}

    fn finish(&self) -> u64 {
        self.0
    }
}

#[derive(Debug, Default)]
struct Memory {
    /// Each record with the end of its life, in [`monotonic_ms`].
    map: HashMap<String, (Arc<Record>, u64), BuildHasherDefault<IdHasher>>,
    /// Ids in the order they were first saved; ids already gone are
    /// skipped when evicting.
    order: VecDeque<String>,
}

impl MemoryStore {
    /// A store of at most [`DEFAULT_MAX_SESSIONS`] sessions.
    pub fn new() -> MemoryStore {
        MemoryStore::with_capacity(DEFAULT_MAX_SESSIONS)
    }

    /// A store of at most `capacity` sessions (at least 1).
    pub fn with_capacity(capacity: usize) -> MemoryStore {
        MemoryStore {
            capacity: capacity.max(1),
            inner: Mutex::new(Memory::default()),
        }
    }

    /// How many sessions are held (expired ones included until touched or
    /// evicted).
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// Whether no session is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl MemoryStore {
    fn find(&self, handle: &str) -> Option<Arc<Record>> {
        let mut memory = self.lock();
        match memory.map.get(handle) {
            Some((record, until)) if *until > monotonic_ms() => Some(record.clone()),
            Some(_) => {
                memory.map.remove(handle);
                None
            }
            None => None,
        }
    }
}

impl SessionStore for MemoryStore {
    fn load<'a>(
        &'a self,
        handle: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<Record>>, StoreError>> {
        Box::pin(std::future::ready(Ok(self.find(handle))))
    }

    fn load_now(&self, handle: &str) -> Option<Result<Option<Arc<Record>>, StoreError>> {
        Some(Ok(self.find(handle)))
    }

    fn save<'a>(
        &'a self,
        handle: Option<&'a str>,
        record: &'a Record,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        let result = (|| {
            let until =
                monotonic_ms().saturating_add(ttl.as_millis().try_into().unwrap_or(u64::MAX));
            let mut memory = self.lock();
            let id = match handle {
                Some(id) if memory.map.contains_key(id) => id.to_owned(),
                _ => {
                    let id = new_id()?;
                    while memory.map.len() >= self.capacity {
                        let Some(oldest) = memory.order.pop_front() else {
                            break;
                        };
                        memory.map.remove(&oldest);
                    }
                    memory.order.push_back(id.clone());
                    id
                }
            };
            memory
                .map
                .insert(id.clone(), (Arc::new(record.clone()), until));
            // Ids deleted since keep their place in `order` until
            // evicted; keep it from growing past twice the capacity.
            if memory.order.len() > 2 * self.capacity {
                let Memory { map, order } = &mut *memory;
                order.retain(|id| map.contains_key(id));
            }
            Ok(id)
        })();
        Box::pin(std::future::ready(result))
    }

    fn delete<'a>(&'a self, handle: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        self.lock().map.remove(handle);
        Box::pin(std::future::ready(Ok(())))
    }
}

/// Associated data of a sealed session: a session cookie cannot be read
/// as any other encrypted cookie of the app, nor the reverse.
const COOKIE_STORE_AAD: &str = "celer-session";

/// Sessions kept in the cookie itself, sealed with AES-256-GCM
/// ([`EncryptionKeys`], rotation included). Nothing on the server; a
/// session cannot be revoked before it expires, and it must fit a cookie
/// (the session's size limit is checked against the sealed size too).
#[derive(Debug, Clone)]
pub struct CookieStore {
    keys: EncryptionKeys,
}

impl CookieStore {
    /// A cookie store sealing with `keys`.
    pub fn new(keys: EncryptionKeys) -> CookieStore {
        CookieStore { keys }
    }
}

impl CookieStore {
    fn open(&self, handle: &str) -> Option<Arc<Record>> {
        self.keys
            .decrypt(COOKIE_STORE_AAD, handle)
            .and_then(|json| serde_json::from_str(&json).ok())
            .map(Arc::new)
    }
}

impl SessionStore for CookieStore {
    fn load<'a>(
        &'a self,
        handle: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<Record>>, StoreError>> {
        Box::pin(std::future::ready(Ok(self.open(handle))))
    }

    fn load_now(&self, handle: &str) -> Option<Result<Option<Arc<Record>>, StoreError>> {
        Some(Ok(self.open(handle)))
    }

    fn save<'a>(
        &'a self,
        _handle: Option<&'a str>,
        record: &'a Record,
        _ttl: Duration,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        let result = serde_json::to_string(record)
            .map_err(StoreError::new)
            .and_then(|json| {
                self.keys
                    .encrypt(COOKIE_STORE_AAD, &json)
                    .map_err(StoreError::new)
            });
        Box::pin(std::future::ready(result))
    }

    fn delete<'a>(&'a self, _handle: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(std::future::ready(Ok(())))
    }
}

/// A shared store: the app keeps a handle (to count or inspect sessions)
/// while the middleware uses it.
impl<S: SessionStore> SessionStore for std::sync::Arc<S> {
    fn load<'a>(
        &'a self,
        handle: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<Record>>, StoreError>> {
        (**self).load(handle)
    }

    fn load_now(&self, handle: &str) -> Option<Result<Option<Arc<Record>>, StoreError>> {
        (**self).load_now(handle)
    }

    fn save<'a>(
        &'a self,
        handle: Option<&'a str>,
        record: &'a Record,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        (**self).save(handle, record, ttl)
    }

    fn delete<'a>(&'a self, handle: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        (**self).delete(handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cookie::{Cookie, MAX_NAME_VALUE_BYTES};
    use crate::session::DEFAULT_MAX_SESSION_BYTES;

    #[tokio::test]
    async fn a_session_at_the_size_limit_fits_a_cookie() {
        let mut record = Record::new();
        record.created = u64::MAX;
        record.seen = u64::MAX;
        // `{"k":"…"}` at exactly the limit.
        let filler = "x".repeat(DEFAULT_MAX_SESSION_BYTES - r#"{"k":""}"#.len());
        record.data.insert("k".into(), filler.into());
        assert_eq!(
            serde_json::to_vec(&record.data).unwrap().len(),
            DEFAULT_MAX_SESSION_BYTES
        );
        let store = CookieStore::new(EncryptionKeys::new([[1u8; 32]]).unwrap());
        let sealed = store.save(None, &record, Duration::ZERO).await.unwrap();
        assert!("__Host-session".len() + sealed.len() <= MAX_NAME_VALUE_BYTES);
        let cookie = Cookie::new("__Host-session", sealed.clone())
            .secure(true)
            .path("/");
        assert!(cookie.encode().is_ok());
        assert_eq!(store.load(&sealed).await.unwrap().as_deref(), Some(&record));
    }

    #[tokio::test]
    async fn memory_store_expires_and_deletes() {
        let store = MemoryStore::new();
        let id = store
            .save(None, &Record::new(), Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(store.load(&id).await.unwrap(), None);
        let id = store
            .save(None, &Record::new(), Duration::from_secs(60))
            .await
            .unwrap();
        assert!(store.load(&id).await.unwrap().is_some());
        // Saving under a known id keeps it; under an unknown one mints another.
        assert_eq!(
            store
                .save(Some(&id), &Record::new(), Duration::from_secs(60))
                .await
                .unwrap(),
            id
        );
        assert_ne!(
            store
                .save(Some("forged"), &Record::new(), Duration::from_secs(60))
                .await
                .unwrap(),
            "forged"
        );
        store.delete(&id).await.unwrap();
        assert_eq!(store.load(&id).await.unwrap(), None);
    }
}
