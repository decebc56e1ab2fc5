//! Record protection with ring's AEADs (RFC 8446 §5.2, RFC 5246 §6.2.3.3):
//! one record's nonce and additional data, sealed or opened in place, on
//! the traffic keys rustls hands over. No IO.
//!
//! The constructions are those of rustls's ring provider (its `tls13.rs`
//! and `tls12.rs`), byte for byte: a record sealed here is the record
//! rustls would have sealed with the same key and sequence number (the
//! tests compare them). What differs is where the bytes go: rustls seals
//! into a `Vec` it allocates per record, this module into the end of the
//! caller's buffer, where the plaintext was copied once, right after the
//! header it belongs to.
//!
//! The AEADs are ring's even though the handshakes run on aws-lc-rs:
//! aws-lc's AES-GCM sealing key checks that the sequence numbers it seals
//! with start at 0 and only increase (FIPS nonce uniqueness), and the keys
//! handed over after the handshake start past 0 (rustls sealed the session
//! tickets, or the Finished message, with the first ones). ring's records
//! also cost less: about 1,040 instructions to seal a 140-byte response
//! and 860 to open a 45-byte request, against aws-lc's 1,330 and 1,250.
//!
//! - TLS 1.3 (AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305): the nonce is
//!   the IV XOR the sequence number (§5.3), the additional data the record
//!   header, the real content type the last plaintext byte (§5.2).
//! - TLS 1.2 AES-GCM (RFC 5288 §3): the nonce is the 4-byte fixed IV and an
//!   8-byte explicit part carried at the front of each record; rustls (and
//!   so this module) makes that part the key block's 8 extra bytes XOR the
//!   sequence number, which is what its secrets' 12-byte IV holds.
//! - TLS 1.2 ChaCha20-Poly1305 (RFC 7905 §2): the nonce is the IV XOR the
//!   sequence number, nothing carried.
//!
//! The additional data of TLS 1.2 is the sequence number, type, version and
//! plaintext length (RFC 5246 §6.2.3.3).

use std::ops::Range;

use bytes::BytesMut;
use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use rustls::crypto::cipher::AeadKey;
use rustls::{ConnectionTrafficSecrets, ContentType, Error, PeerMisbehaved};

use crate::tls::record::{HEADER_LEN, MAX_FRAGMENT};

/// Bytes of an AEAD nonce, for every suite (RFC 8446 §5.3, RFC 5288 §3).
const NONCE_LEN: usize = 12;

/// Bytes of an authentication tag, for every suite.
const TAG_LEN: usize = 16;

/// Bytes of TLS 1.2 AES-GCM's explicit nonce, carried in each record.
const EXPLICIT_NONCE_LEN: usize = 8;

/// Bytes of TLS 1.2's additional data: sequence number, type, version,
/// length (RFC 5246 §6.2.3.3).
const TLS12_AAD_LEN: usize = 13;

/// The legacy record version every record carries: TLS 1.2's 0x0303, also
/// in TLS 1.3 (RFC 8446 §5.1).
const LEGACY_VERSION: [u8; 2] = [3, 3];

/// Most bytes a record adds to its plaintext, in any suite: the header,
/// TLS 1.2 AES-GCM's explicit nonce and the tag (TLS 1.3 adds the header,
/// one content type byte and the tag).
pub(crate) const MAX_OVERHEAD: usize = HEADER_LEN + EXPLICIT_NONCE_LEN + TAG_LEN;

/// How a suite frames a record around its AEAD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    /// TLS 1.3, any suite.
    Tls13,
    /// TLS 1.2 AES-GCM: an explicit nonce at the front of each record.
    Tls12Gcm,
    /// TLS 1.2 ChaCha20-Poly1305.
    Tls12Chacha,
}

/// One direction's traffic key: the AEAD key, its IV and the record
/// framing of the protocol version agreed. Sequence numbers are the
/// caller's (`record::RecordLayer`).
pub(crate) struct RecordKey {
    /// ring's key, used with the nonces built here: expanded from `secret`
    /// when a record needs it and dropped by [`RecordKey::release`], so a
    /// connection that waits (an event stream between events) does not
    /// hold its 560 bytes of key schedule and GHASH table.
    key: Option<Box<LessSafeKey>>,
    /// The traffic key's bytes as rustls handed them over (zeroed when
    /// dropped), to expand again.
    secret: AeadKey,
    algorithm: &'static aead::Algorithm,
    /// The IV rustls hands over: the whole nonce XORed with the sequence
    /// number (for TLS 1.2 AES-GCM, the fixed IV then the explicit nonce's
    /// starting point).
    iv: [u8; NONCE_LEN],
    /// The version's and suite's record framing.
    framing: Framing,
}

impl std::fmt::Debug for RecordKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print keys.
        f.debug_struct("RecordKey")
            .field("algorithm", self.algorithm)
            .field("framing", &self.framing)
            .finish_non_exhaustive()
    }
}

impl RecordKey {
    /// The key for `secrets`, one direction's traffic secrets as rustls
    /// hands them over, for TLS 1.3 or (`tls13` false) TLS 1.2.
    pub(crate) fn new(tls13: bool, secrets: ConnectionTrafficSecrets) -> Result<RecordKey, Error> {
        let (algorithm, key, iv, framing) = match secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => {
                (&aead::AES_128_GCM, key, iv, Framing::Tls12Gcm)
            }
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => {
                (&aead::AES_256_GCM, key, iv, Framing::Tls12Gcm)
            }
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
                (&aead::CHACHA20_POLY1305, key, iv, Framing::Tls12Chacha)
            }
            // `ConnectionTrafficSecrets` is non-exhaustive.
            _ => return Err(Error::General("keys of an unknown AEAD".to_owned())),
        };
        let framing = if tls13 { Framing::Tls13 } else { framing };
        // Expanded now: a key of the wrong length fails here, not at the
        // first record, and the connection's first records need it anyway.
        let expanded = UnboundKey::new(algorithm, key.as_ref())
            .map_err(|_| Error::General("traffic key of the wrong length".to_owned()))?;
        let iv = iv
            .as_ref()
            .try_into()
            .map_err(|_| Error::General("traffic IV of the wrong length".to_owned()))?;
        Ok(RecordKey {
            key: Some(Box::new(LessSafeKey::new(expanded))),
            secret: key,
            algorithm,
            iv,
            framing,
        })
    }

    /// Drops the expanded key; the next record expands it again from the
    /// traffic key's bytes (about a microsecond's work).
    pub(crate) fn release(&mut self) {
        self.key = None;
    }

    /// The expanded key, expanded again if it was released.
    fn expanded(&mut self) -> &LessSafeKey {
        let (algorithm, secret) = (self.algorithm, &self.secret);
        self.key.get_or_insert_with(|| {
            // `new` expanded these bytes once for this algorithm: the
            // length is right.
            let key = UnboundKey::new(algorithm, secret.as_ref())
                .unwrap_or_else(|_| unreachable!("the traffic key was expanded once"));
            Box::new(LessSafeKey::new(key))
        })
    }

    /// Whether the expanded key is held (tests).
    #[cfg(test)]
    pub(crate) fn is_expanded(&self) -> bool {
        self.key.is_some()
    }

    /// The nonce of record `seq`: the IV XOR the sequence number, as a
    /// 96-bit big-endian number (RFC 8446 §5.3; rustls's `Nonce::new`).
    fn nonce(&self, seq: u64) -> [u8; NONCE_LEN] {
        let mut nonce = self.iv;
        let (_, low) = nonce.split_at_mut(NONCE_LEN - 8);
        let mixed = u64::from_be_bytes([
            low[0], low[1], low[2], low[3], low[4], low[5], low[6], low[7],
        ]) ^ seq;
        low.copy_from_slice(&mixed.to_be_bytes());
        nonce
    }

    /// Appends record number `seq` of type `typ` to `out`: the header, then
    /// the plaintext `fill` appends (at most [`MAX_FRAGMENT`] bytes),
    /// encrypted where it lies, then the tag. On failure `out` is as it was.
    pub(crate) fn seal(
        &mut self,
        seq: u64,
        typ: ContentType,
        out: &mut BytesMut,
        fill: impl FnOnce(&mut BytesMut),
    ) -> Result<(), Error> {
        let start = out.len();
        let nonce = self.nonce(seq);
        // RFC 8446 §5.2: a TLS 1.3 record says application data outside and
        // carries its real type inside.
        let outer = match self.framing {
            Framing::Tls13 => ContentType::ApplicationData,
            Framing::Tls12Gcm | Framing::Tls12Chacha => typ,
        };
        let [v0, v1] = LEGACY_VERSION;
        out.extend_from_slice(&[u8::from(outer), v0, v1, 0, 0]);
        if self.framing == Framing::Tls12Gcm {
            // RFC 5288 §3: the nonce's explicit part goes out in the clear.
            out.extend_from_slice(&nonce[NONCE_LEN - EXPLICIT_NONCE_LEN..]);
        }
        let body = out.len();
        fill(out);
        let plain_len = out.len() - body;
        if self.framing == Framing::Tls13 {
            out.extend_from_slice(&[u8::from(typ)]);
        }
        let record_len = out.len() + TAG_LEN - start - HEADER_LEN;
        if plain_len > MAX_FRAGMENT {
            out.truncate(start);
            return Err(Error::EncryptError);
        }
        // At most 2^14 + 8 + 16 bytes: fits the header's two bytes.
        let len_bytes = (record_len as u16).to_be_bytes();
        out[start + 3..start + HEADER_LEN].copy_from_slice(&len_bytes);
        let mut aad = [0; TLS12_AAD_LEN];
        let aad = match self.framing {
            // RFC 8446 §5.2: the additional data is the record header.
            Framing::Tls13 => {
                aad[..HEADER_LEN].copy_from_slice(&out[start..start + HEADER_LEN]);
                &aad[..HEADER_LEN]
            }
            Framing::Tls12Gcm | Framing::Tls12Chacha => {
                tls12_aad(&mut aad, seq, u8::from(typ), LEGACY_VERSION, plain_len);
                &aad[..]
            }
        };
        let nonce = Nonce::assume_unique_for_key(nonce);
        match self
            .expanded()
            .seal_in_place_separate_tag(nonce, Aad::from(aad), &mut out[body..])
        {
            Ok(tag) => {
                out.extend_from_slice(tag.as_ref());
                Ok(())
            }
            Err(_) => {
                out.truncate(start);
                Err(Error::EncryptError)
            }
        }
    }

    /// Opens `record` (one whole record, header first) in place as record
    /// number `seq`: returns its content type and where its plaintext now
    /// lies in `record`. Refuses what rustls's decrypters refuse, with the
    /// same errors.
    pub(crate) fn open(
        &mut self,
        seq: u64,
        record: &mut [u8],
    ) -> Result<(ContentType, Range<usize>), Error> {
        if record.len() < HEADER_LEN {
            return Err(Error::DecryptError);
        }
        let (header, payload) = record.split_at_mut(HEADER_LEN);
        let typ = header[0];
        let version = [header[1], header[2]];
        match self.framing {
            Framing::Tls13 => {
                if payload.len() < TAG_LEN {
                    return Err(Error::DecryptError);
                }
                // As rustls's `Tls13MessageDecrypter`: the header of an
                // application data record at TLS 1.2, which is what a
                // TLS 1.3 peer sends (RFC 8446 §5.1, §5.2).
                let len = (payload.len() as u16).to_be_bytes();
                let [v0, v1] = LEGACY_VERSION;
                let aad = [
                    u8::from(ContentType::ApplicationData),
                    v0,
                    v1,
                    len[0],
                    len[1],
                ];
                let nonce = Nonce::assume_unique_for_key(self.nonce(seq));
                let plain = self
                    .expanded()
                    .open_in_place(nonce, Aad::from(aad), payload)
                    .map_err(|_| Error::DecryptError)?;
                if plain.len() > MAX_FRAGMENT + 1 {
                    return Err(Error::PeerSentOversizedRecord);
                }
                // RFC 8446 §5.4: the content type is the last byte that is
                // not zero padding; a plaintext of zeros has none.
                let Some(type_at) = plain.iter().rposition(|byte| *byte != 0) else {
                    return Err(PeerMisbehaved::IllegalTlsInnerPlaintext.into());
                };
                let inner = ContentType::from(plain[type_at]);
                // RFC 8446 §5: a change_cipher_spec is never protected.
                if inner == ContentType::ChangeCipherSpec {
                    return Err(PeerMisbehaved::IllegalMiddleboxChangeCipherSpec.into());
                }
                if type_at > MAX_FRAGMENT {
                    return Err(Error::PeerSentOversizedRecord);
                }
                Ok((inner, HEADER_LEN..HEADER_LEN + type_at))
            }
            Framing::Tls12Gcm => {
                if payload.len() < EXPLICIT_NONCE_LEN + TAG_LEN {
                    return Err(Error::DecryptError);
                }
                // RFC 5288 §3: the fixed IV, then the explicit part the
                // record carries.
                let mut nonce = [0; NONCE_LEN];
                let fixed = NONCE_LEN - EXPLICIT_NONCE_LEN;
                nonce[..fixed].copy_from_slice(&self.iv[..fixed]);
                nonce[fixed..].copy_from_slice(&payload[..EXPLICIT_NONCE_LEN]);
                let plain_len = payload.len() - EXPLICIT_NONCE_LEN - TAG_LEN;
                let mut aad = [0; TLS12_AAD_LEN];
                tls12_aad(&mut aad, seq, typ, version, plain_len);
                let nonce = Nonce::assume_unique_for_key(nonce);
                // Opened where it lies, after the explicit nonce (rustls
                // moves it to the front; the bytes are the same).
                let plain = self
                    .expanded()
                    .open_in_place(nonce, Aad::from(aad), &mut payload[EXPLICIT_NONCE_LEN..])
                    .map_err(|_| Error::DecryptError)?;
                if plain.len() > MAX_FRAGMENT {
                    return Err(Error::PeerSentOversizedRecord);
                }
                let start = HEADER_LEN + EXPLICIT_NONCE_LEN;
                Ok((ContentType::from(typ), start..start + plain.len()))
            }
            Framing::Tls12Chacha => {
                if payload.len() < TAG_LEN {
                    return Err(Error::DecryptError);
                }
                let mut aad = [0; TLS12_AAD_LEN];
                tls12_aad(&mut aad, seq, typ, version, payload.len() - TAG_LEN);
                let nonce = Nonce::assume_unique_for_key(self.nonce(seq));
                let plain = self
                    .expanded()
                    .open_in_place(nonce, Aad::from(aad), payload)
                    .map_err(|_| Error::DecryptError)?;
                if plain.len() > MAX_FRAGMENT {
                    return Err(Error::PeerSentOversizedRecord);
                }
                Ok((ContentType::from(typ), HEADER_LEN..HEADER_LEN + plain.len()))
            }
        }
    }
}

/// Writes TLS 1.2's additional data into `aad`: `seq_num`, `type`,
/// `version` and `length` (RFC 5246 §6.2.3.3; rustls's `make_tls12_aad`).
fn tls12_aad(aad: &mut [u8; TLS12_AAD_LEN], seq: u64, typ: u8, version: [u8; 2], len: usize) {
    aad[..8].copy_from_slice(&seq.to_be_bytes());
    aad[8] = typ;
    aad[9..11].copy_from_slice(&version);
    // A record's plaintext is at most 2^14 bytes (checked by the callers).
    aad[11..].copy_from_slice(&(len as u16).to_be_bytes());
}

#[cfg(test)]
mod tests;
