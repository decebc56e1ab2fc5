//! API keys: random bearer tokens stored as their SHA-256, with per-key
//! quotas on what a key may submit; [`TaskKeys`] is the lookup the
//! framework's bearer middleware ([`celer::auth::bearer`]) asks, so any app
//! can share the task API's keys.
//!
//! A token is [`TOKEN_PREFIX`] and 32 random bytes in base64url (256 bits):
//! it is shown once, when created, and only its hash is stored. A request's
//! token is hashed, looked up by its hash and compared with the stored
//! hash in constant time. Why a fast hash is right here, and not Argon2:
//! docs/decisions/112-task-api-keys.md. `auth_layer` puts the check in
//! front of the API's routes.

use std::fmt;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use celer::auth::{ApiKeys, KeyCheck};
use celer::{IntoResponse, Next, Request, Response};
use futures_util::future::BoxFuture;
use http::{StatusCode, header};
use serde::Serialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::api::ApiError;
use crate::model::Millis;
use crate::store::{Store, StoreError};
use crate::tasks::Tasks;

/// An API key's number, unique in its store.
pub type KeyId = i64;

/// What every token starts with, so that secret scanners and people can
/// tell one: `ctk_` ("celer task key").
pub const TOKEN_PREFIX: &str = "ctk_";

/// Random bytes in a token: 32 (256 bits).
pub const TOKEN_BYTES: usize = 32;

/// Characters of a token kept in clear to tell keys apart in `keys list`:
/// the prefix and the first 6 characters of the random part (36 of its 256
/// bits).
pub const HINT_CHARS: usize = TOKEN_PREFIX.len() + 6;

/// Longest key name, in bytes: 100.
pub const MAX_KEY_NAME_BYTES: usize = 100;

/// The window of the per-hour quotas: one hour, sliding.
pub const QUOTA_WINDOW: Duration = Duration::from_secs(3600);

/// The realm of the task API's `WWW-Authenticate: Bearer` challenge.
pub(crate) const REALM: &str = "celer tasks";

/// A SHA-256 digest of a token: what the store keeps.
pub type KeyHash = [u8; 32];

/// The SHA-256 of `token`.
pub fn hash_token(token: &str) -> KeyHash {
    Sha256::digest(token.as_bytes()).into()
}

/// A fresh token, from the operating system's random source.
pub fn new_token() -> Result<String, StoreError> {
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes)
        .map_err(|err| StoreError::new(format!("no random bytes for a key: {err}")))?;
    Ok(format!("{TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes)))
}

/// What a key may submit; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Quotas {
    /// Tasks of the key queued or running at once.
    pub max_concurrent: Option<u64>,
    /// Tasks submitted in the last hour.
    pub per_hour: Option<u64>,
    /// Bytes of input (the JSON text stored) submitted in the last hour.
    pub input_bytes_per_hour: Option<u64>,
    /// Bytes of input of one task.
    pub max_input_bytes: Option<u64>,
}

/// One of the [`Quotas`], as it is named in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quota {
    /// [`Quotas::max_concurrent`].
    MaxConcurrent,
    /// [`Quotas::per_hour`].
    PerHour,
    /// [`Quotas::input_bytes_per_hour`].
    InputBytesPerHour,
    /// [`Quotas::max_input_bytes`].
    MaxInputBytes,
}

impl Quota {
    /// The name, as in [`Quotas`]' fields and in JSON errors.
    pub fn as_str(self) -> &'static str {
        match self {
            Quota::MaxConcurrent => "max_concurrent",
            Quota::PerHour => "per_hour",
            Quota::InputBytesPerHour => "input_bytes_per_hour",
            Quota::MaxInputBytes => "max_input_bytes",
        }
    }
}

impl fmt::Display for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A submission a key's quota refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverQuota {
    /// Which quota.
    pub quota: Quota,
    /// Its limit.
    pub limit: u64,
    /// When the same submission fits again; `None` when it never will (one
    /// input over [`Quotas::max_input_bytes`] or over the hourly bytes).
    pub retry_after: Option<Duration>,
}

impl fmt::Display for OverQuota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.quota {
            Quota::MaxConcurrent => "tasks queued or running at once",
            Quota::PerHour => "tasks per hour",
            Quota::InputBytesPerHour => "bytes of input per hour",
            Quota::MaxInputBytes => "bytes of input per task",
        };
        write!(
            f,
            "over the API key's quota {}: {} {what}",
            self.quota, self.limit
        )
    }
}

/// A key to create.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewKey {
    /// A name for people (who holds it, what for); may be empty.
    pub name: String,
    /// Its quotas.
    pub quotas: Quotas,
}

/// A key as stored (never its token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiKey {
    /// Its number; tasks record it as their `key_id`.
    pub id: KeyId,
    /// Its name.
    pub name: String,
    /// The token's first [`HINT_CHARS`] characters.
    pub hint: String,
    /// Its quotas.
    pub quotas: Quotas,
    /// When it was created.
    pub created_at: Millis,
    /// When it was revoked.
    pub revoked_at: Option<Millis>,
}

/// A key found by its hash, with the hash as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredKey {
    /// The key.
    pub key: ApiKey,
    /// The SHA-256 of its token, as stored.
    pub hash: Vec<u8>,
}

/// Creates a key in `store`: the key and its token, which is shown once
/// and not kept.
pub fn create_key(
    store: &dyn Store,
    new: &NewKey,
    now: Millis,
) -> Result<(ApiKey, String), StoreError> {
    if new.name.len() > MAX_KEY_NAME_BYTES || new.name.chars().any(char::is_control) {
        return Err(StoreError::new(format!(
            "a key name is at most {MAX_KEY_NAME_BYTES} bytes without control characters"
        )));
    }
    let token = new_token()?;
    let hint: String = token.chars().take(HINT_CHARS).collect();
    let key = store.create_key(new, &hash_token(&token), &hint, now)?;
    Ok((key, token))
}

/// Checks `token` against `store`: the key's id when it is live.
pub fn check_token(store: &dyn Store, token: &str) -> Result<KeyCheck, StoreError> {
    let hash = hash_token(token);
    Ok(match store.key_by_hash(&hash)? {
        // The lookup went by the hash; this compare is the one that decides,
        // and it takes the same time wherever the two differ.
        Some(found) if bool::from(found.hash.as_slice().ct_eq(&hash)) => {
            match found.key.revoked_at {
                Some(_) => KeyCheck::Revoked,
                None => KeyCheck::Valid(found.key.id.to_string()),
            }
        }
        _ => KeyCheck::Unknown,
    })
}

/// The task API's keys as a [`celer::auth::ApiKeys`]: the user of a valid
/// key is its id (`"3"`). Lookups run on the store's thread; a busy store
/// answers [`KeyCheck::Unavailable`].
#[derive(Debug, Clone)]
pub struct TaskKeys {
    tasks: Tasks,
}

impl TaskKeys {
    /// The keys of `tasks`' store.
    pub fn new(tasks: &Tasks) -> TaskKeys {
        TaskKeys {
            tasks: tasks.clone(),
        }
    }
}

impl ApiKeys for TaskKeys {
    fn user_for_key<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            match self.check_key(key).await {
                KeyCheck::Valid(user) => Some(user),
                _ => None,
            }
        })
    }

    fn check_key<'a>(&'a self, key: &'a str) -> BoxFuture<'a, KeyCheck> {
        let token = key.to_owned();
        Box::pin(async move {
            match self
                .tasks
                .call(move |store| check_token(store, &token))
                .await
            {
                Ok(check) => check,
                Err(err) => {
                    if let crate::tasks::CallError::Store(err) = &err {
                        tracing::error!(target: "celer::tasks", error = %err, "cannot check an API key");
                    }
                    KeyCheck::Unavailable
                }
            }
        })
    }
}

/// The API key check: the framework's bearer middleware over the store's
/// keys, its plain-text refusals answered as the API's JSON errors.
pub(crate) fn auth_layer(
    tasks: &Tasks,
) -> impl Fn(Request, Next) -> BoxFuture<'static, Response> + Clone + Send + Sync + 'static {
    let bearer = std::sync::Arc::new(celer::auth::bearer(REALM, TaskKeys::new(tasks)));
    move |req: Request, next: Next| {
        let bearer = bearer.clone();
        Box::pin(async move {
            let res = bearer(req, next).await;
            let refused = matches!(
                res.status(),
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN | StatusCode::SERVICE_UNAVAILABLE
            );
            let text = res
                .headers()
                .get(header::CONTENT_TYPE)
                .is_some_and(|v| v.as_bytes().starts_with(b"text/plain"));
            if !refused || !text {
                return res;
            }
            let (parts, body) = res.into_parts();
            let detail = body.collect_bytes().await.unwrap_or_default();
            let message = String::from_utf8_lossy(&detail).trim().to_owned();
            let mut json = ApiError::new(parts.status, message).into_response();
            for name in [header::WWW_AUTHENTICATE, header::RETRY_AFTER] {
                for value in parts.headers.get_all(&name) {
                    json.headers_mut().append(name.clone(), value.clone());
                }
            }
            json
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_prefixed_random_and_hash_to_sha256() {
        let a = new_token().unwrap();
        let b = new_token().unwrap();
        assert!(a.starts_with(TOKEN_PREFIX));
        assert_eq!(a.len(), TOKEN_PREFIX.len() + 43);
        assert_ne!(a, b);
        // FIPS 180-2 test vector: SHA-256("abc").
        assert_eq!(
            hash_token("abc")[..4],
            [0xba, 0x78, 0x16, 0xbf],
            "{:x?}",
            hash_token("abc")
        );
    }
}
