//! Signed (HMAC) and encrypted (AES-256-GCM) cookie values, with key
//! rotation: the first key signs or encrypts, every listed key verifies or
//! decrypts.

use std::fmt;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, Mac};
use sha2::{Sha256, Sha512};
use subtle::ConstantTimeEq;

use super::MAX_KEYS;

/// The hash of a signing key's HMAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Algorithm {
    /// HMAC-SHA-256 (RFC 2104, FIPS 180-4): a 32-byte tag, 43 characters
    /// in the cookie.
    #[default]
    Sha256,
    /// HMAC-SHA-512: a 64-byte tag, 86 characters in the cookie.
    Sha512,
}

/// The shortest signing or encryption key accepted: 32 bytes.
pub const MIN_KEY_BYTES: usize = 32;

/// A key refused by [`SigningKeys`] or [`EncryptionKeys`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyError(&'static str);

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for KeyError {}

#[derive(Clone)]
enum Keyed {
    Sha256(Hmac<Sha256>),
    Sha512(Hmac<Sha512>),
}

impl Keyed {
    /// The tag over `name`, `=` and `value`: the name is a token, so it
    /// cannot hold `=` and the input names both unambiguously.
    fn tag(&self, name: &str, value: &str) -> Vec<u8> {
        fn run<M: Mac + Clone>(mac: &M, name: &str, value: &str) -> Vec<u8> {
            let mut mac = mac.clone();
            mac.update(name.as_bytes());
            mac.update(b"=");
            mac.update(value.as_bytes());
            mac.finalize().into_bytes().to_vec()
        }
        match self {
            Keyed::Sha256(mac) => run(mac, name, value),
            Keyed::Sha512(mac) => run(mac, name, value),
        }
    }

    /// The length of the tag in base64url without padding.
    fn encoded_len(&self) -> usize {
        match self {
            Keyed::Sha256(_) => 43,
            Keyed::Sha512(_) => 86,
        }
    }
}

/// Keys for signed cookies: Valum's scheme, an HMAC over the cookie's name
/// and value, the tag (base64url) put before the value.
///
/// The first key signs; each key verifies, so a new key is put first and
/// the old one kept after it until the cookies it signed have expired.
/// A signed value is readable by the client: use [`EncryptionKeys`] to
/// hide it.
///
/// ```
/// use celer::cookie::{Algorithm, SigningKeys};
///
/// let old = SigningKeys::new(Algorithm::Sha256, [[1u8; 32]]).unwrap();
/// let signed = old.sign("theme", "dark");
/// assert_eq!(old.verify("theme", &signed).as_deref(), Some("dark"));
/// assert_eq!(old.verify("font", &signed), None); // renamed
///
/// // Rotation: a SHA-512 key first, the old key still verifies.
/// let new = SigningKeys::new(Algorithm::Sha512, [[2u8; 32]])
///     .unwrap()
///     .and(Algorithm::Sha256, [1u8; 32])
///     .unwrap();
/// assert_eq!(new.verify("theme", &signed).as_deref(), Some("dark"));
/// assert_eq!(old.verify("theme", &new.sign("theme", "dark")), None);
/// ```
#[derive(Clone)]
pub struct SigningKeys {
    keys: Vec<Keyed>,
}

impl SigningKeys {
    /// The keys, the first one signing; each at least [`MIN_KEY_BYTES`]
    /// long, at most [`MAX_KEYS`] of them.
    pub fn new<K: AsRef<[u8]>>(
        algorithm: Algorithm,
        keys: impl IntoIterator<Item = K>,
    ) -> Result<SigningKeys, KeyError> {
        let mut out = SigningKeys { keys: Vec::new() };
        for key in keys {
            out = out.and(algorithm, key)?;
        }
        if out.keys.is_empty() {
            return Err(KeyError("no signing key given"));
        }
        Ok(out)
    }

    /// One more key that verifies (after those already listed).
    pub fn and(mut self, algorithm: Algorithm, key: impl AsRef<[u8]>) -> Result<Self, KeyError> {
        let key = key.as_ref();
        if key.len() < MIN_KEY_BYTES {
            return Err(KeyError("a signing key must be at least 32 bytes"));
        }
        if self.keys.len() >= MAX_KEYS {
            return Err(KeyError("too many signing keys (MAX_KEYS)"));
        }
        // HMAC takes keys of any length: these cannot fail.
        let keyed = match algorithm {
            Algorithm::Sha256 => Keyed::Sha256(
                <Hmac<_> as Mac>::new_from_slice(key)
                    .map_err(|_| KeyError("invalid key length"))?,
            ),
            Algorithm::Sha512 => Keyed::Sha512(
                <Hmac<_> as Mac>::new_from_slice(key)
                    .map_err(|_| KeyError("invalid key length"))?,
            ),
        };
        self.keys.push(keyed);
        Ok(self)
    }

    /// The signed value of cookie `name`: the tag, then `value`.
    pub fn sign(&self, name: &str, value: &str) -> String {
        let key = &self.keys[0];
        let mut out = B64.encode(key.tag(name, value));
        out.push_str(value);
        out
    }

    /// The value of cookie `name` if `signed` carries a tag one of the
    /// keys made over this name and value; `None` for a tampered,
    /// truncated or renamed cookie. Tags are compared in constant time.
    pub fn verify(&self, name: &str, signed: &str) -> Option<String> {
        let mut found = None;
        for key in &self.keys {
            let len = key.encoded_len();
            let (Some(tag), Some(value)) = (signed.get(..len), signed.get(len..)) else {
                continue;
            };
            let Ok(tag) = B64.decode(tag) else {
                continue;
            };
            let expected = key.tag(name, value);
            if bool::from(expected.ct_eq(&tag)) && found.is_none() {
                found = Some(value.to_owned());
            }
        }
        found
    }
}

impl fmt::Debug for SigningKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKeys")
            .field("keys", &self.keys.len())
            .finish_non_exhaustive()
    }
}

/// Bytes of a nonce, before the ciphertext (AES-GCM's 96 bits).
const NONCE_BYTES: usize = 12;
/// Bytes of the GCM tag, after the ciphertext.
const TAG_BYTES: usize = 16;

/// Keys for encrypted cookies: AES-256-GCM (NIST SP 800-38D) with a fresh
/// random 96-bit nonce per value and the cookie's name as associated data,
/// so a value moved to another name does not open. The cookie holds
/// base64url(nonce ‖ ciphertext ‖ tag).
///
/// The first key encrypts; each key decrypts (rotation as for
/// [`SigningKeys`]). Random nonces keep a key safe for about 2³² values
/// (SP 800-38D §8.3): rotate long before.
///
/// ```
/// use celer::cookie::EncryptionKeys;
///
/// let keys = EncryptionKeys::new([[7u8; 32]]).unwrap();
/// let sealed = keys.encrypt("cart", "3 apples").unwrap();
/// assert!(!sealed.contains("apples"));
/// assert_eq!(keys.decrypt("cart", &sealed).as_deref(), Some("3 apples"));
/// assert_eq!(keys.decrypt("basket", &sealed), None); // renamed
/// ```
#[derive(Clone)]
pub struct EncryptionKeys {
    keys: Vec<Aes256Gcm>,
}

impl EncryptionKeys {
    /// The keys, 32 bytes each (AES-256), the first one encrypting; at most
    /// [`MAX_KEYS`].
    pub fn new<K: AsRef<[u8]>>(keys: impl IntoIterator<Item = K>) -> Result<Self, KeyError> {
        let mut out = Vec::new();
        for key in keys {
            let key = key.as_ref();
            if key.len() != 32 {
                return Err(KeyError("an encryption key must be exactly 32 bytes"));
            }
            if out.len() >= MAX_KEYS {
                return Err(KeyError("too many encryption keys (MAX_KEYS)"));
            }
            out.push(Aes256Gcm::new_from_slice(key).map_err(|_| KeyError("invalid key length"))?);
        }
        if out.is_empty() {
            return Err(KeyError("no encryption key given"));
        }
        Ok(EncryptionKeys { keys: out })
    }

    /// A fresh 32-byte key from the operating system's generator.
    pub fn generate_key() -> Result<[u8; 32], KeyError> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|_| KeyError("the system's random generator failed"))?;
        Ok(key)
    }

    /// `value` sealed for cookie `name`. Fails only when the system's
    /// random generator does.
    pub fn encrypt(&self, name: &str, value: &str) -> Result<String, KeyError> {
        let mut nonce = [0u8; NONCE_BYTES];
        getrandom::fill(&mut nonce)
            .map_err(|_| KeyError("the system's random generator failed"))?;
        let sealed = self.keys[0]
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: value.as_bytes(),
                    aad: name.as_bytes(),
                },
            )
            .map_err(|_| KeyError("value too long to encrypt"))?;
        let mut all = Vec::with_capacity(NONCE_BYTES + sealed.len());
        all.extend_from_slice(&nonce);
        all.extend_from_slice(&sealed);
        Ok(B64.encode(all))
    }

    /// The value sealed for cookie `name`, or `None` when it is not one
    /// any key sealed for this name (tampered, truncated, renamed, or not
    /// UTF-8 inside).
    pub fn decrypt(&self, name: &str, sealed: &str) -> Option<String> {
        let all = B64.decode(sealed).ok()?;
        if all.len() < NONCE_BYTES + TAG_BYTES {
            return None;
        }
        let (nonce, body) = all.split_at(NONCE_BYTES);
        let plain = self.keys.iter().find_map(|key| {
            key.decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: body,
                    aad: name.as_bytes(),
                },
            )
            .ok()
        })?;
        String::from_utf8(plain).ok()
    }
}

impl fmt::Debug for EncryptionKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EncryptionKeys")
            .field("keys", &self.keys.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signing() -> SigningKeys {
        SigningKeys::new(Algorithm::Sha256, [[9u8; 32]]).unwrap()
    }

    #[test]
    fn tampered_and_truncated_signed_values_are_absent() {
        let keys = signing();
        let signed = keys.sign("a", "hello");
        assert_eq!(keys.verify("a", &signed).as_deref(), Some("hello"));
        let mut tampered = signed.clone();
        tampered.push('!');
        assert_eq!(keys.verify("a", &tampered), None);
        let flipped = signed.replacen('h', "H", 1);
        assert_eq!(keys.verify("a", &flipped), None);
        for cut in 0..signed.len() {
            assert_eq!(keys.verify("a", &signed[..cut]), None, "cut at {cut}");
        }
        // A tag of one value does not verify another.
        let other = keys.sign("a", "bye");
        let spliced = format!("{}hello", &other[..43]);
        assert_eq!(keys.verify("a", &spliced), None);
    }

    #[test]
    fn empty_value_signs() {
        let keys = signing();
        assert_eq!(keys.verify("a", &keys.sign("a", "")).as_deref(), Some(""));
    }

    #[test]
    fn short_keys_and_too_many_keys_refused() {
        assert!(SigningKeys::new(Algorithm::Sha256, [[0u8; 31]]).is_err());
        assert!(SigningKeys::new(Algorithm::Sha256, Vec::<[u8; 32]>::new()).is_err());
        assert!(SigningKeys::new(Algorithm::Sha512, vec![[0u8; 32]; MAX_KEYS + 1]).is_err());
        assert!(EncryptionKeys::new([[0u8; 16]]).is_err());
        assert!(EncryptionKeys::new(vec![[0u8; 32]; MAX_KEYS + 1]).is_err());
    }

    #[test]
    fn encrypted_rotation_tamper_truncation() {
        let old = EncryptionKeys::new([[1u8; 32]]).unwrap();
        let new = EncryptionKeys::new([[2u8; 32], [1u8; 32]]).unwrap();
        let sealed = old.encrypt("s", "v").unwrap();
        assert_eq!(new.decrypt("s", &sealed).as_deref(), Some("v"));
        assert_eq!(old.decrypt("s", &new.encrypt("s", "v").unwrap()), None);
        for cut in 0..sealed.len() {
            assert_eq!(old.decrypt("s", &sealed[..cut]), None);
        }
        let mut bytes = B64.decode(&sealed).unwrap();
        for i in 0..bytes.len() {
            bytes[i] ^= 1;
            assert_eq!(old.decrypt("s", &B64.encode(&bytes)), None, "byte {i}");
            bytes[i] ^= 1;
        }
        // Two encryptions of one value differ (fresh nonces).
        assert_ne!(
            old.encrypt("s", "v").unwrap(),
            old.encrypt("s", "v").unwrap()
        );
    }
}
