//! The TLS record layer once the handshake is over (RFC 8446 §5, RFC 5246
//! §6.2): opens the client's records in place and seals the server's, with
//! the keys rustls agreed. No IO.
//!
//! rustls does the handshake and the cryptography: the AEAD of each record
//! (nonce, additional data, TLS 1.3's inner content type and padding) is a
//! rustls `MessageDecrypter` or `MessageEncrypter` (from its ring provider,
//! see [`encrypter`]), and its `KernelConnection` derives the next traffic
//! secret on a key update. This module frames records and applies the
//! post-handshake rules rustls would (those of its `ExpectTraffic` states
//! and `CommonState::process_alert`, with the same counters): application
//! data, alerts, TLS 1.3 key updates, refused TLS 1.2 renegotiation, and a
//! fatal alert for anything else.

use std::ops::Range;

use rustls::crypto::cipher::{
    AeadKey, InboundOpaqueMessage, Iv, MessageDecrypter, MessageEncrypter, OutboundChunks,
    OutboundPlainMessage,
};
use rustls::kernel::KernelConnection;
use rustls::server::ServerConnectionData;
use rustls::{
    AlertDescription, ConnectionTrafficSecrets, ContentType, Error, ExtractedSecrets,
    ProtocolVersion, SupportedCipherSuite,
};

/// Bytes of a record header: type, legacy version, length.
pub(crate) const HEADER_LEN: usize = 5;

/// Most plaintext bytes in one record (RFC 8446 §5.1, RFC 5246 §6.2.1).
pub(crate) const MAX_FRAGMENT: usize = 16 * 1024;

/// Longest record the client may send: 2^14 + 256 bytes of ciphertext in
/// TLS 1.3 (RFC 8446 §5.2), 2^14 + 2048 in TLS 1.2 (RFC 5246 §6.2.3).
pub(crate) const MAX_RECORD: usize = HEADER_LEN + MAX_FRAGMENT + 2048;

/// Consecutive empty application data records accepted (rustls's limit).
const EMPTY_RECORDS_MAX: u8 = 32;

/// Key update requests accepted between two application data records
/// (rustls's and BoringSSL's limit).
const KEY_UPDATE_REQUESTS_MAX: u8 = 32;

/// Warning alerts accepted on a connection (rustls's and BoringSSL's limit).
const WARNING_ALERTS_MAX: u8 = 4;

/// Sequence numbers rustls stops short of (its `SEQ_SOFT_LIMIT`).
const SEQ_LIMIT: u64 = 0xffff_ffff_ffff_0000;

/// TLS 1.3 handshake message type of a KeyUpdate (RFC 8446 §4).
const KEY_UPDATE: u8 = 24;

/// TLS 1.2 handshake message type of a ClientHello (RFC 5246 §7.4).
const CLIENT_HELLO: u8 = 1;

/// What one record held.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Opened {
    /// Application data at this range of the record.
    Data(Range<usize>),
    /// A record for the TLS layer itself, handled (a warning alert, a key
    /// update, a refused renegotiation); nothing for the reader.
    Control,
    /// The client's `close_notify`: no more data comes (RFC 8446 §6.1).
    Closed,
}

/// A failure that ends the connection, with the alert to send (if any).
#[derive(Debug)]
pub(crate) struct Fatal {
    /// The alert owed to the client; none when the client sent a fatal one.
    pub(crate) alert: Option<AlertDescription>,
    /// What went wrong.
    pub(crate) error: Error,
}

impl Fatal {
    fn new(alert: AlertDescription, error: impl Into<Error>) -> Fatal {
        Fatal {
            alert: Some(alert),
            error: error.into(),
        }
    }

    fn message(alert: AlertDescription, what: &str) -> Fatal {
        Fatal::new(alert, Error::General(what.to_owned()))
    }
}

/// The length of the first record of `buf`, header included, once it has
/// all arrived; `Ok(None)` while it is partial. Fails on a header no TLS
/// peer sends (rustls's `read_opaque_message_header` checks).
pub(crate) fn record_len(buf: &[u8], tls13: bool) -> Result<Option<usize>, Fatal> {
    let Some(header) = buf.get(..HEADER_LEN) else {
        return Ok(None);
    };
    let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
    // Only 0x03XX versions, and only non-empty records besides
    // application data (RFC 8446 §5.1, RFC 5246 §6.2.1).
    if header[1] != 3 || (len == 0 && header[0] != u8::from(ContentType::ApplicationData)) {
        return Err(Fatal::message(
            AlertDescription::DecodeError,
            "invalid record header",
        ));
    }
    let max = if tls13 {
        MAX_FRAGMENT + 256
    } else {
        MAX_FRAGMENT + 2048
    };
    if len > max {
        return Err(Fatal::message(
            AlertDescription::RecordOverflow,
            "record too long",
        ));
    }
    Ok((buf.len() >= HEADER_LEN + len).then_some(HEADER_LEN + len))
}

/// The keys and counters of an established connection.
pub(crate) struct RecordLayer {
    tls13: bool,
    suite: SupportedCipherSuite,
    decrypter: Box<dyn MessageDecrypter>,
    encrypter: Box<dyn MessageEncrypter>,
    read_seq: u64,
    write_seq: u64,
    /// Records sealed with one key at most: the suite's confidentiality
    /// limit; past it TLS 1.3 updates its key and TLS 1.2 stops.
    write_limit: u64,
    /// Derives the next traffic secrets (TLS 1.3 key updates).
    kernel: KernelConnection<ServerConnectionData>,
    /// The client asked for a key update: ours goes before our next record
    /// (RFC 8446 §4.6.3).
    key_update_owed: bool,
    /// A warning alert owed to the client (`no_renegotiation`).
    alert_owed: Option<AlertDescription>,
    empty_records_left: u8,
    key_update_requests_left: u8,
    warning_alerts_left: u8,
    renegotiations_left: u8,
}

impl std::fmt::Debug for RecordLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print keys.
        f.debug_struct("RecordLayer")
            .field("suite", &self.suite.suite())
            .field("read_seq", &self.read_seq)
            .field("write_seq", &self.write_seq)
            .finish_non_exhaustive()
    }
}

impl RecordLayer {
    /// Takes over from rustls after the handshake: its traffic keys and
    /// sequence numbers, and the connection that derives the next keys.
    pub(crate) fn new(
        secrets: ExtractedSecrets,
        kernel: KernelConnection<ServerConnectionData>,
    ) -> Result<RecordLayer, Error> {
        let suite = kernel.negotiated_cipher_suite();
        let tls13 = kernel.protocol_version() == ProtocolVersion::TLSv1_3;
        let (write_seq, tx) = secrets.tx;
        let (read_seq, rx) = secrets.rx;
        let limit = match suite {
            SupportedCipherSuite::Tls13(s) => s.common.confidentiality_limit,
            SupportedCipherSuite::Tls12(s) => s.common.confidentiality_limit,
        };
        Ok(RecordLayer {
            tls13,
            suite,
            decrypter: decrypter(suite, rx)?,
            encrypter: encrypter(suite, tx)?,
            read_seq,
            write_seq,
            write_limit: limit.min(SEQ_LIMIT),
            kernel,
            key_update_owed: false,
            alert_owed: None,
            empty_records_left: EMPTY_RECORDS_MAX,
            key_update_requests_left: KEY_UPDATE_REQUESTS_MAX,
            warning_alerts_left: WARNING_ALERTS_MAX,
            renegotiations_left: 1,
        })
    }

    /// Lowers the number of records sealed with one key (tests reach it).
    #[cfg(test)]
    pub(crate) fn set_write_limit(&mut self, records: u64) {
        self.write_limit = records;
    }

    /// True for TLS 1.3, false for TLS 1.2.
    pub(crate) fn is_tls13(&self) -> bool {
        self.tls13
    }

    /// Decrypts `record` (one whole record, header first, as
    /// [`record_len`] measured it) in place and applies it.
    pub(crate) fn open(&mut self, record: &mut [u8]) -> Result<Opened, Fatal> {
        let typ = ContentType::from(record[0]);
        let version = ProtocolVersion::from(u16::from_be_bytes([record[1], record[2]]));
        match typ {
            ContentType::ApplicationData | ContentType::Alert | ContentType::Handshake => {}
            // RFC 8446 §5: after the handshake a change_cipher_spec is
            // unexpected; so are heartbeats, which rustls never offers.
            ContentType::Unknown(_) => {
                return Err(Fatal::message(
                    AlertDescription::DecodeError,
                    "unknown record type",
                ));
            }
            _ => {
                return Err(Fatal::message(
                    AlertDescription::UnexpectedMessage,
                    "unexpected record type",
                ));
            }
        }
        if self.read_seq >= SEQ_LIMIT {
            return Err(Fatal::message(
                AlertDescription::InternalError,
                "read sequence exhausted",
            ));
        }
        let start = record.as_ptr() as usize;
        let message = InboundOpaqueMessage::new(typ, version, &mut record[HEADER_LEN..]);
        let plain = self
            .decrypter
            .decrypt(message, self.read_seq)
            .map_err(|err| {
                let alert = match err {
                    Error::PeerSentOversizedRecord => AlertDescription::RecordOverflow,
                    Error::DecryptError => AlertDescription::BadRecordMac,
                    _ => AlertDescription::UnexpectedMessage,
                };
                Fatal::new(alert, err)
            })?;
        self.read_seq += 1;
        let offset = plain.payload.as_ptr() as usize - start;
        let range = offset..offset + plain.payload.len();
        match plain.typ {
            ContentType::ApplicationData => self.data(range),
            ContentType::Alert => self.alert(plain.payload),
            ContentType::Handshake => self.handshake(plain.payload),
            _ => Err(Fatal::message(
                AlertDescription::UnexpectedMessage,
                "unexpected record type",
            )),
        }
    }

    fn data(&mut self, range: Range<usize>) -> Result<Opened, Fatal> {
        if range.is_empty() {
            if self.empty_records_left == 0 {
                return Err(Fatal::message(
                    AlertDescription::UnexpectedMessage,
                    "too many empty records",
                ));
            }
            self.empty_records_left -= 1;
            return Ok(Opened::Control);
        }
        self.empty_records_left = EMPTY_RECORDS_MAX;
        self.key_update_requests_left = KEY_UPDATE_REQUESTS_MAX;
        Ok(Opened::Data(range))
    }

    /// RFC 8446 §6 and RFC 5246 §7.2, as rustls's `process_alert`.
    fn alert(&mut self, payload: &[u8]) -> Result<Opened, Fatal> {
        let &[level, description] = payload else {
            return Err(Fatal::message(
                AlertDescription::DecodeError,
                "malformed alert",
            ));
        };
        let description = AlertDescription::from(description);
        if level != 1 && level != 2 {
            return Err(Fatal::new(
                AlertDescription::IllegalParameter,
                Error::AlertReceived(description),
            ));
        }
        if description == AlertDescription::CloseNotify {
            return Ok(Opened::Closed);
        }
        if level == 1 {
            if self.warning_alerts_left == 0 {
                return Err(Fatal::message(
                    AlertDescription::DecodeError,
                    "too many warning alerts",
                ));
            }
            self.warning_alerts_left -= 1;
            // TLS 1.3 has no warnings, except user_canceled.
            if self.tls13 && description != AlertDescription::UserCanceled {
                return Err(Fatal::new(
                    AlertDescription::DecodeError,
                    Error::AlertReceived(description),
                ));
            }
            return Ok(Opened::Control);
        }
        Err(Fatal {
            alert: None,
            error: Error::AlertReceived(description),
        })
    }

    /// A handshake record after the handshake: a TLS 1.3 key update, or a
    /// TLS 1.2 renegotiation refused; anything else is unexpected.
    fn handshake(&mut self, payload: &[u8]) -> Result<Opened, Fatal> {
        if self.tls13 {
            // RFC 8446 §4.6.3: KeyUpdate { request_update }. It must end its
            // record (§5.1: no handshake message spans a key change), and
            // rustls's messages to a server never need more than one.
            return match payload {
                [KEY_UPDATE, 0, 0, 1, request @ (0 | 1)] => self.key_update(*request == 1),
                [KEY_UPDATE, ..] => Err(Fatal::message(
                    AlertDescription::DecodeError,
                    "malformed key update",
                )),
                _ => Err(Fatal::message(
                    AlertDescription::UnexpectedMessage,
                    "unexpected handshake message",
                )),
            };
        }
        // RFC 5746 §4.4: a server that does not renegotiate answers a
        // ClientHello with a no_renegotiation warning; rustls accepts one.
        if payload.first() == Some(&CLIENT_HELLO) && self.renegotiations_left > 0 {
            self.renegotiations_left -= 1;
            self.alert_owed = Some(AlertDescription::NoRenegotiation);
            return Ok(Opened::Control);
        }
        Err(Fatal::message(
            AlertDescription::UnexpectedMessage,
            "unexpected handshake message",
        ))
    }

    fn key_update(&mut self, requested: bool) -> Result<Opened, Fatal> {
        if requested {
            if self.key_update_requests_left == 0 {
                return Err(Fatal::message(
                    AlertDescription::UnexpectedMessage,
                    "too many key update requests",
                ));
            }
            self.key_update_requests_left -= 1;
            self.key_update_owed = true;
        }
        let (seq, secrets) = self.kernel.update_rx_secret().map_err(internal)?;
        self.decrypter = decrypter(self.suite, secrets).map_err(internal)?;
        self.read_seq = seq;
        Ok(Opened::Control)
    }

    /// True when the TLS layer owes the client a record before more data
    /// (see [`RecordLayer::seal_pending`]).
    pub(crate) fn has_pending(&self) -> bool {
        self.alert_owed.is_some() || (self.tls13 && self.key_update_owed)
    }

    /// Seals what the TLS layer owes before more data, into `out`: a
    /// `no_renegotiation` warning; our key update, when the client asked
    /// for one or our key is worn out (TLS 1.3).
    pub(crate) fn seal_pending(&mut self, out: &mut Vec<Vec<u8>>) -> Result<(), Fatal> {
        if let Some(description) = self.alert_owed.take() {
            out.push(self.seal_alert(description, false)?);
        }
        if self.tls13 && (self.key_update_owed || self.write_seq >= self.write_limit) {
            // KeyUpdate(update_not_requested), under the old key; the
            // records after it use the new one (RFC 8446 §4.6.3).
            let message = [KEY_UPDATE, 0, 0, 1, 0];
            out.push(self.seal_one(ContentType::Handshake, OutboundChunks::Single(&message))?);
            let (seq, secrets) = self.kernel.update_tx_secret().map_err(internal)?;
            self.encrypter = encrypter(self.suite, secrets).map_err(internal)?;
            self.write_seq = seq;
            self.key_update_owed = false;
        }
        Ok(())
    }

    /// Seals `data` as application data records of up to [`MAX_FRAGMENT`]
    /// bytes each, after what [`RecordLayer::seal_pending`] owes.
    pub(crate) fn seal(
        &mut self,
        data: OutboundChunks<'_>,
        out: &mut Vec<Vec<u8>>,
    ) -> Result<(), Fatal> {
        let mut rest = data;
        while !rest.is_empty() {
            self.seal_pending(out)?;
            let (fragment, tail) = rest.split_at(MAX_FRAGMENT);
            out.push(self.seal_one(ContentType::ApplicationData, fragment)?);
            rest = tail;
        }
        Ok(())
    }

    /// Seals an alert: a warning (`close_notify`, `no_renegotiation`) or
    /// the fatal one of a [`Fatal`].
    pub(crate) fn seal_alert(
        &mut self,
        description: AlertDescription,
        fatal: bool,
    ) -> Result<Vec<u8>, Fatal> {
        let level = if fatal { 2 } else { 1 };
        let alert = [level, u8::from(description)];
        self.seal_one(ContentType::Alert, OutboundChunks::Single(&alert))
    }

    fn seal_one(
        &mut self,
        typ: ContentType,
        payload: OutboundChunks<'_>,
    ) -> Result<Vec<u8>, Fatal> {
        // Data stops at the key's limit (TLS 1.3 changes keys before it,
        // TLS 1.2 cannot: rustls closes then too); a key update or an alert
        // may still go out, short of the sequence space's end.
        let limit = match typ {
            ContentType::ApplicationData => self.write_limit,
            _ => SEQ_LIMIT,
        };
        if self.write_seq >= limit {
            return Err(Fatal::message(
                AlertDescription::InternalError,
                "traffic keys exhausted",
            ));
        }
        let message = OutboundPlainMessage {
            typ,
            version: ProtocolVersion::TLSv1_2,
            payload,
        };
        let sealed = self
            .encrypter
            .encrypt(message, self.write_seq)
            .map_err(internal)?;
        self.write_seq += 1;
        Ok(sealed.encode())
    }
}

fn internal(error: Error) -> Fatal {
    Fatal::new(AlertDescription::InternalError, error)
}

/// The decrypter for the client's records under `secrets` (ring's, as
/// [`encrypter`]).
fn decrypter(
    suite: SupportedCipherSuite,
    secrets: ConnectionTrafficSecrets,
) -> Result<Box<dyn MessageDecrypter>, Error> {
    let (key, iv) = key_iv(secrets)?;
    Ok(match ring_twin(suite)? {
        SupportedCipherSuite::Tls13(s) => s.aead_alg.decrypter(key, iv),
        SupportedCipherSuite::Tls12(s) => {
            let shape = s.aead_alg.key_block_shape();
            s.aead_alg
                .decrypter(key, &iv.as_ref()[..shape.fixed_iv_len])
        }
    })
}

/// The encrypter for the server's records under `secrets`.
///
/// It is ring's AEAD for the suite rustls negotiated (rustls's ring
/// provider, compiled in beside aws-lc-rs, which keeps the handshakes):
/// aws-lc's AES-GCM sealing key checks that the sequence numbers it seals
/// with start at 0 and only increase (FIPS nonce-uniqueness), and the keys
/// handed over after the handshake start past 0 (rustls sealed the session
/// tickets, or the Finished message, with the first ones). ring's records
/// also cost less: 1,040 instructions to seal a 140-byte response and 860
/// to open a 45-byte request, against aws-lc's 1,330 and 1,250.
fn encrypter(
    suite: SupportedCipherSuite,
    secrets: ConnectionTrafficSecrets,
) -> Result<Box<dyn MessageEncrypter>, Error> {
    let (key, iv) = key_iv(secrets)?;
    Ok(match ring_twin(suite)? {
        SupportedCipherSuite::Tls13(s) => s.aead_alg.encrypter(key, iv),
        SupportedCipherSuite::Tls12(s) => {
            // rustls's TLS 1.2 secrets hold the fixed IV, then the
            // explicit nonce's starting point.
            let shape = s.aead_alg.key_block_shape();
            let (fixed, explicit) = iv.as_ref().split_at(shape.fixed_iv_len);
            s.aead_alg
                .encrypter(key, fixed, &explicit[..shape.explicit_nonce_len])
        }
    })
}

/// The same suite in rustls's ring provider.
fn ring_twin(suite: SupportedCipherSuite) -> Result<SupportedCipherSuite, Error> {
    rustls::crypto::ring::ALL_CIPHER_SUITES
        .iter()
        .find(|ring| ring.suite() == suite.suite())
        .copied()
        .ok_or_else(|| Error::General(format!("no ring AEAD for {:?}", suite.suite())))
}

fn key_iv(secrets: ConnectionTrafficSecrets) -> Result<(AeadKey, Iv), Error> {
    match secrets {
        ConnectionTrafficSecrets::Aes128Gcm { key, iv }
        | ConnectionTrafficSecrets::Aes256Gcm { key, iv }
        | ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => Ok((key, iv)),
        // `ConnectionTrafficSecrets` is non-exhaustive.
        _ => Err(Error::General("keys of an unknown AEAD".to_owned())),
    }
}
