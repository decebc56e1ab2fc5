//! The TLS record layer once the handshake is over (RFC 8446 §5, RFC 5246
//! §6.2): opens the client's records in place and seals the server's into
//! one buffer, with the keys rustls agreed. No IO.
//!
//! rustls does the handshake and derives the keys: its `KernelConnection`
//! hands over the traffic secrets and derives the next ones on a key
//! update. Each record's AEAD (nonce, additional data, TLS 1.3's inner
//! content type and padding) is ring's, through `aead::RecordKey`, which
//! reproduces rustls's ring provider byte for byte but seals in place: a
//! write's plaintext is copied once, from the caller's slices to the end of
//! the output buffer right after its record's header, and encrypted there
//! (see [`RecordLayer::seal`]). This module frames records and applies the
//! post-handshake rules rustls would (those of its `ExpectTraffic` states
//! and `CommonState::process_alert`, with the same counters): application
//! data, alerts, TLS 1.3 key updates, refused TLS 1.2 renegotiation, and a
//! fatal alert for anything else.

use std::io::IoSlice;
use std::ops::Range;

use bytes::BytesMut;
use rustls::kernel::KernelConnection;
use rustls::server::ServerConnectionData;
use rustls::{
    AlertDescription, ContentType, Error, ExtractedSecrets, ProtocolVersion, SupportedCipherSuite,
};

use crate::tls::aead::{MAX_OVERHEAD, RecordKey};

/// Bytes of a record header: type, legacy version, length.
pub(crate) const HEADER_LEN: usize = 5;

/// Most plaintext bytes in one record (RFC 8446 §5.1, RFC 5246 §6.2.1).
pub(crate) const MAX_FRAGMENT: usize = 16 * 1024;

/// Longest record the client may send: 2^14 + 256 bytes of ciphertext in
/// TLS 1.3 (RFC 8446 §5.2), 2^14 + 2048 in TLS 1.2 (RFC 5246 §6.2.3).
pub(crate) const MAX_RECORD: usize = HEADER_LEN + MAX_FRAGMENT + 2048;

/// Consecutive empty application data records accepted (rustls's limit).
const EMPTY_RECORDS_MAX: u8 = 32;

/// Key updates accepted between two application data records, requested
/// or not: each costs an HKDF derivation, so a client may not send them
/// without end (rustls counts every KeyUpdate against this limit, as
/// BoringSSL does).
pub(crate) const KEY_UPDATES_MAX: u8 = 32;

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
    /// Opens the client's records.
    read_key: RecordKey,
    /// Seals ours.
    write_key: RecordKey,
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
    key_updates_left: u8,
    warning_alerts_left: u8,
    renegotiations_left: u8,
    /// Our `close_notify` or a fatal alert is sealed: no record follows it
    /// (RFC 8446 §6.1: nothing is sent after a closure alert).
    write_closed: bool,
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
            read_key: RecordKey::new(tls13, rx)?,
            write_key: RecordKey::new(tls13, tx)?,
            read_seq,
            write_seq,
            write_limit: limit.min(SEQ_LIMIT),
            kernel,
            key_update_owed: false,
            alert_owed: None,
            empty_records_left: EMPTY_RECORDS_MAX,
            key_updates_left: KEY_UPDATES_MAX,
            warning_alerts_left: WARNING_ALERTS_MAX,
            renegotiations_left: 1,
            write_closed: false,
        })
    }

    /// Drops both directions' expanded keys while the connection waits
    /// ([`RecordKey::release`]); the next record expands its own again.
    pub(crate) fn release_keys(&mut self) {
        self.read_key.release();
        self.write_key.release();
    }

    /// Whether the two directions' keys are expanded (tests).
    #[cfg(test)]
    pub(crate) fn keys_expanded(&self) -> (bool, bool) {
        (self.read_key.is_expanded(), self.write_key.is_expanded())
    }

    /// Lowers the number of records sealed with one key (tests and the
    /// differential fuzz target reach it).
    #[cfg(any(test, feature = "fuzzing"))]
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
        match ContentType::from(record[0]) {
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
        let (inner, range) = self.read_key.open(self.read_seq, record).map_err(|err| {
            let alert = match err {
                Error::PeerSentOversizedRecord => AlertDescription::RecordOverflow,
                Error::DecryptError => AlertDescription::BadRecordMac,
                _ => AlertDescription::UnexpectedMessage,
            };
            Fatal::new(alert, err)
        })?;
        self.read_seq += 1;
        match inner {
            ContentType::ApplicationData => self.data(range),
            ContentType::Alert => self.alert(&record[range]),
            ContentType::Handshake => self.handshake(&record[range]),
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
        self.key_updates_left = KEY_UPDATES_MAX;
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
                // §4.6.3: a request_update other than 0 or 1 is an
                // illegal_parameter.
                [KEY_UPDATE, 0, 0, 1, _] => Err(Fatal::message(
                    AlertDescription::IllegalParameter,
                    "unknown key update request",
                )),
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
        // Every key update counts, requested or not: each one costs an
        // HKDF derivation.
        if self.key_updates_left == 0 {
            return Err(Fatal::message(
                AlertDescription::UnexpectedMessage,
                "too many key updates",
            ));
        }
        self.key_updates_left -= 1;
        if requested {
            self.key_update_owed = true;
        }
        let (seq, secrets) = self.kernel.update_rx_secret().map_err(internal)?;
        self.read_key = RecordKey::new(self.tls13, secrets).map_err(internal)?;
        self.read_seq = seq;
        Ok(Opened::Control)
    }

    /// True when the TLS layer owes the client an alert it waits for (a
    /// refused renegotiation's warning): sealed at once (see
    /// [`RecordLayer::seal_pending`]). An owed key update is not: it goes
    /// before our next application data record, so that any number of
    /// requests while we are silent get one update (RFC 8446 §4.6.3), and a
    /// client cannot make us seal key update after key update (rustls as a
    /// client refuses more than 32 of them without data between).
    pub(crate) fn owes_alert(&self) -> bool {
        !self.write_closed && self.alert_owed.is_some()
    }

    /// True when [`RecordLayer::seal_pending`] has a record to seal: one
    /// owed to the client, or our key update before the key wears out.
    fn owes_record(&self) -> bool {
        self.alert_owed.is_some()
            || (self.tls13 && (self.key_update_owed || self.write_seq >= self.write_limit))
    }

    /// Seals what the TLS layer owes before more data, at the end of
    /// `out`: a `no_renegotiation` warning; our key update, when the client
    /// asked for one or our key is worn out (TLS 1.3).
    pub(crate) fn seal_pending(&mut self, out: &mut BytesMut) -> Result<(), Fatal> {
        if self.write_closed {
            // Nothing follows our closure alert; what was owed is moot.
            return Ok(());
        }
        if let Some(description) = self.alert_owed.take() {
            self.seal_alert(description, false, out)?;
        }
        if self.tls13 && (self.key_update_owed || self.write_seq >= self.write_limit) {
            // KeyUpdate(update_not_requested), under the old key; the
            // records after it use the new one (RFC 8446 §4.6.3).
            let message = [KEY_UPDATE, 0, 0, 1, 0];
            self.seal_one(ContentType::Handshake, out, |out| {
                out.extend_from_slice(&message);
            })?;
            let (seq, secrets) = self.kernel.update_tx_secret().map_err(internal)?;
            self.write_key = RecordKey::new(self.tls13, secrets).map_err(internal)?;
            self.write_seq = seq;
            self.key_update_owed = false;
        }
        Ok(())
    }

    /// Seals the first `len` bytes of `data` (which holds at least that
    /// many) as application data records of up to [`MAX_FRAGMENT`] bytes
    /// each, after what [`RecordLayer::seal_pending`] owes, at the end of
    /// `out`; returns how many bytes it sealed: all of them unless a TLS
    /// 1.2 key wore out on the way.
    ///
    /// Each record is written in place: its header, then its plaintext
    /// copied from `data` (from as many slices as it spans), then sealed
    /// where it lies with its tag appended, so the records of one write lie
    /// back to back, ready for one `write`. On an error the records sealed
    /// before it stay in `out` (their sequence numbers are spent).
    ///
    /// A TLS 1.2 key that has sealed its limit of records cannot be
    /// replaced: the bytes sealed before the limit are reported, and the
    /// next call fails with `close_notify` as the alert to send, the way
    /// rustls closes then (its `PreEncryptAction::RefreshOrClose`).
    pub(crate) fn seal(
        &mut self,
        data: &[IoSlice<'_>],
        len: usize,
        out: &mut BytesMut,
    ) -> Result<usize, Fatal> {
        // Room for every record at once, so the buffer grows once at most.
        out.reserve(len + len.div_ceil(MAX_FRAGMENT) * MAX_OVERHEAD);
        let mut plaintext = Plaintext::new(data);
        let mut left = len;
        while left > 0 {
            if self.owes_record() {
                self.seal_pending(out)?;
            }
            if !self.tls13 && self.write_seq >= self.write_limit {
                if left < len {
                    return Ok(len - left);
                }
                return Err(Fatal::message(
                    AlertDescription::CloseNotify,
                    "TLS 1.2 traffic key exhausted",
                ));
            }
            let fragment = left.min(MAX_FRAGMENT);
            self.seal_one(ContentType::ApplicationData, out, |out| {
                plaintext.copy_to(fragment, out);
            })?;
            left -= fragment;
        }
        Ok(len)
    }

    /// Seals an alert at the end of `out`: a warning (`close_notify`,
    /// `no_renegotiation`) or the fatal one of a [`Fatal`]. After
    /// `close_notify` or a fatal alert nothing more is sealed, this
    /// included.
    pub(crate) fn seal_alert(
        &mut self,
        description: AlertDescription,
        fatal: bool,
        out: &mut BytesMut,
    ) -> Result<(), Fatal> {
        let level = if fatal { 2 } else { 1 };
        let alert = [level, u8::from(description)];
        self.seal_one(ContentType::Alert, out, |out| out.extend_from_slice(&alert))?;
        if fatal || description == AlertDescription::CloseNotify {
            self.write_closed = true;
        }
        Ok(())
    }

    /// Seals one record of type `typ` at the end of `out`, whose plaintext
    /// `fill` appends.
    fn seal_one(
        &mut self,
        typ: ContentType,
        out: &mut BytesMut,
        fill: impl FnOnce(&mut BytesMut),
    ) -> Result<(), Fatal> {
        // RFC 8446 §6.1: nothing is sent after a closure alert.
        if self.write_closed {
            return Err(Fatal {
                alert: None,
                error: Error::General("record after the closure alert".to_owned()),
            });
        }
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
        self.write_key
            .seal(self.write_seq, typ, out, fill)
            .map_err(internal)?;
        self.write_seq += 1;
        Ok(())
    }
}

/// The plaintext of a write: the caller's slices, taken front to back, a
/// record's worth at a time.
#[derive(Debug)]
pub(crate) struct Plaintext<'a> {
    /// The slices not yet taken, whole.
    rest: std::slice::Iter<'a, IoSlice<'a>>,
    /// What is left of the slice being taken.
    current: &'a [u8],
}

impl<'a> Plaintext<'a> {
    /// The plaintext of `data`, in order.
    pub(crate) fn new(data: &'a [IoSlice<'a>]) -> Plaintext<'a> {
        Plaintext {
            rest: data.iter(),
            current: &[],
        }
    }

    /// Appends the next `n` bytes to `out` (fewer if the slices end first).
    pub(crate) fn copy_to(&mut self, mut n: usize, out: &mut BytesMut) {
        while n > 0 {
            if self.current.is_empty() {
                match self.rest.next() {
                    Some(slice) => self.current = slice,
                    None => return,
                }
                continue;
            }
            let (taken, rest) = self.current.split_at(n.min(self.current.len()));
            out.extend_from_slice(taken);
            self.current = rest;
            n -= taken.len();
        }
    }
}

fn internal(error: Error) -> Fatal {
    Fatal::new(AlertDescription::InternalError, error)
}
