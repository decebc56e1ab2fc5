//! FastCGI 1.0 (the Open Market specification, 1996), sans IO: the record
//! codec, name-value pairs, and [`Session`], the responder's connection
//! state machine. The driver that runs handlers on it is `responder`.
//!
//! A record (spec §3.3) is an 8-byte header (version 1, type, request id,
//! content length, padding length), the content, and the padding. Records
//! of request id 0 are management records (§4); the others belong to the
//! request their id names (§5).

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// `FCGI_VERSION_1` (§8).
pub const VERSION_1: u8 = 1;
/// Bytes in a record header (`FCGI_HEADER_LEN`, §8).
pub const HEADER_LEN: usize = 8;
/// Largest record content the format can carry (a 16-bit length).
pub const MAX_CONTENT: usize = 0xffff;
/// Content put in one outgoing record: the largest multiple of 8 that fits,
/// so full records need no padding.
pub const OUT_CONTENT: usize = MAX_CONTENT & !7;

/// Record types (§8).
pub mod kind {
    /// `FCGI_BEGIN_REQUEST` (§5.1).
    pub const BEGIN_REQUEST: u8 = 1;
    /// `FCGI_ABORT_REQUEST` (§5.4).
    pub const ABORT_REQUEST: u8 = 2;
    /// `FCGI_END_REQUEST` (§5.5).
    pub const END_REQUEST: u8 = 3;
    /// `FCGI_PARAMS` (§5.2).
    pub const PARAMS: u8 = 4;
    /// `FCGI_STDIN` (§5.3).
    pub const STDIN: u8 = 5;
    /// `FCGI_STDOUT` (§5.3).
    pub const STDOUT: u8 = 6;
    /// `FCGI_STDERR` (§5.3).
    pub const STDERR: u8 = 7;
    /// `FCGI_DATA` (§5.3, filter role).
    pub const DATA: u8 = 8;
    /// `FCGI_GET_VALUES` (§4.1).
    pub const GET_VALUES: u8 = 9;
    /// `FCGI_GET_VALUES_RESULT` (§4.1).
    pub const GET_VALUES_RESULT: u8 = 10;
    /// `FCGI_UNKNOWN_TYPE` (§4.2).
    pub const UNKNOWN_TYPE: u8 = 11;
}

/// `FCGI_RESPONDER` (§6.2).
pub const ROLE_RESPONDER: u16 = 1;
/// `FCGI_KEEP_CONN`: the flag bit of `FCGI_BeginRequestBody` (§5.1).
pub const KEEP_CONN: u8 = 1;

/// `protocolStatus` of `FCGI_EndRequestBody` (§5.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolStatus {
    /// `FCGI_REQUEST_COMPLETE`: normal end.
    RequestComplete = 0,
    /// `FCGI_CANT_MPX_CONN`: a second request on a connection that serves one.
    CantMpxConn = 1,
    /// `FCGI_OVERLOADED`: out of a resource (the in-flight limit, shutdown).
    Overloaded = 2,
    /// `FCGI_UNKNOWN_ROLE`: a role other than responder.
    UnknownRole = 3,
}

/// A record as decoded: its type, request id and content (padding dropped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The record type (see [`kind`]).
    pub kind: u8,
    /// The request id; 0 for management records.
    pub id: u16,
    /// The content, without padding.
    pub content: Bytes,
}

/// Why the byte stream is not FastCGI; the connection is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolError {
    /// A record header names a version other than 1 (§3.3).
    Version(u8),
    /// A record's content is longer than `Limits::fastcgi_max_record_bytes`.
    RecordTooLarge(usize),
    /// `FCGI_BEGIN_REQUEST` content is not 8 bytes (§5.1).
    BadBegin,
    /// `FCGI_BEGIN_REQUEST` for an id already in flight (§3.3).
    DuplicateId(u16),
    /// `FCGI_STDIN` before the request's params ended (§5.3: the streams
    /// of a request come in order).
    StdinBeforeParams(u16),
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProtocolError::Version(v) => write!(f, "record version {v}, expected 1"),
            ProtocolError::RecordTooLarge(n) => {
                write!(f, "record of {n} content bytes over the limit")
            }
            ProtocolError::BadBegin => f.write_str("malformed FCGI_BEGIN_REQUEST"),
            ProtocolError::DuplicateId(id) => {
                write!(f, "FCGI_BEGIN_REQUEST for request {id} already in flight")
            }
            ProtocolError::StdinBeforeParams(id) => {
                write!(f, "FCGI_STDIN for request {id} before its params ended")
            }
        }
    }
}

/// Takes one whole record off the front of `buf`, or `None` when `buf` holds
/// less than one record. The content is split off without copying.
pub fn decode(buf: &mut BytesMut, max_content: usize) -> Result<Option<Record>, ProtocolError> {
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    let version = buf[0];
    if version != VERSION_1 {
        return Err(ProtocolError::Version(version));
    }
    let kind = buf[1];
    let id = u16::from_be_bytes([buf[2], buf[3]]);
    let len = usize::from(u16::from_be_bytes([buf[4], buf[5]]));
    let pad = usize::from(buf[6]);
    if len > max_content {
        return Err(ProtocolError::RecordTooLarge(len));
    }
    if buf.len() < HEADER_LEN + len + pad {
        buf.reserve(HEADER_LEN + len + pad - buf.len());
        return Ok(None);
    }
    buf.advance(HEADER_LEN);
    let content = buf.split_to(len).freeze();
    buf.advance(pad);
    Ok(Some(Record { kind, id, content }))
}

/// True when `buf` starts with a whole record.
pub fn has_record(buf: &[u8]) -> bool {
    buf.len() >= HEADER_LEN
        && buf.len()
            >= HEADER_LEN + usize::from(u16::from_be_bytes([buf[4], buf[5]])) + usize::from(buf[6])
}

/// Appends one record with `content` (at most [`MAX_CONTENT`] bytes),
/// padded to a multiple of 8 bytes as the spec recommends (§3.3).
pub fn encode(out: &mut BytesMut, kind: u8, id: u16, content: &[u8]) {
    debug_assert!(content.len() <= MAX_CONTENT);
    let len = content.len().min(MAX_CONTENT);
    let pad = (8 - len % 8) % 8;
    out.reserve(HEADER_LEN + len + pad);
    out.put_u8(VERSION_1);
    out.put_u8(kind);
    out.put_u16(id);
    out.put_u16(len as u16);
    out.put_u8(pad as u8);
    out.put_u8(0);
    out.put_slice(&content[..len]);
    out.put_bytes(0, pad);
}

/// Appends `data` as records of `kind`, split at [`OUT_CONTENT`] bytes.
/// Empty `data` appends nothing (an empty record ends a stream).
pub fn encode_stream(out: &mut BytesMut, kind: u8, id: u16, data: &[u8]) {
    for chunk in data.chunks(OUT_CONTENT) {
        encode(out, kind, id, chunk);
    }
}

/// Appends `FCGI_END_REQUEST` (§5.5).
pub fn encode_end(out: &mut BytesMut, id: u16, app_status: u32, status: ProtocolStatus) {
    let mut body = [0u8; 8];
    body[..4].copy_from_slice(&app_status.to_be_bytes());
    body[4] = status as u8;
    encode(out, kind::END_REQUEST, id, &body);
}

/// Appends one name-value pair (§3.4): lengths under 128 in one byte,
/// others in four with the top bit set.
pub fn encode_pair(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    for len in [name.len(), value.len()] {
        if len < 0x80 {
            out.push(len as u8);
        } else {
            out.extend_from_slice(&((len as u32) | 0x8000_0000).to_be_bytes());
        }
    }
    out.extend_from_slice(name);
    out.extend_from_slice(value);
}

/// Why a block of name-value pairs was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairsError {
    /// A length or its data runs past the end of the block (§3.4).
    Truncated,
    /// More pairs than the limit.
    TooMany,
}

/// Splits a whole block of name-value pairs (§3.4) into its pairs, each a
/// slice of `block` (no copy), refusing more than `max_pairs`.
pub fn decode_pairs(block: &Bytes, max_pairs: usize) -> Result<Vec<(Bytes, Bytes)>, PairsError> {
    let mut pairs = Vec::new();
    let mut at = 0usize;
    let read_len = |at: &mut usize| -> Result<usize, PairsError> {
        let first = *block.get(*at).ok_or(PairsError::Truncated)?;
        if first < 0x80 {
            *at += 1;
            return Ok(usize::from(first));
        }
        let b = block.get(*at..*at + 4).ok_or(PairsError::Truncated)?;
        *at += 4;
        Ok((u32::from_be_bytes([b[0], b[1], b[2], b[3]]) & 0x7fff_ffff) as usize)
    };
    while at < block.len() {
        let name_len = read_len(&mut at)?;
        let value_len = read_len(&mut at)?;
        let name_end = at.checked_add(name_len).ok_or(PairsError::Truncated)?;
        let value_end = name_end
            .checked_add(value_len)
            .ok_or(PairsError::Truncated)?;
        if value_end > block.len() {
            return Err(PairsError::Truncated);
        }
        if pairs.len() == max_pairs {
            return Err(PairsError::TooMany);
        }
        pairs.push((block.slice(at..name_end), block.slice(name_end..value_end)));
        at = value_end;
    }
    Ok(pairs)
}

/// The limits a [`Session`] enforces, from `Limits`.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    /// Largest record content accepted.
    pub max_record: usize,
    /// Largest params block of one request, in bytes.
    pub max_params_bytes: usize,
    /// Most params of one request.
    pub max_params: usize,
    /// Most requests in flight on the connection.
    pub max_requests: usize,
    /// Most connections the server holds (for `FCGI_MAX_CONNS`).
    pub max_conns: usize,
}

/// What the driver must do after a record; replies to the front end were
/// already appended to the output.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    /// Nothing to do.
    None,
    /// Request `id`'s params are complete: call the service.
    Start {
        /// The request id.
        id: u16,
        /// Its params, in order.
        params: Vec<(Bytes, Bytes)>,
    },
    /// Request `id`'s params were refused: answer it with `reason` (the
    /// `Reject` status 431 for size and count, 400 otherwise).
    BadParams {
        /// The request id.
        id: u16,
        /// The params were too large or too many (431) rather than
        /// malformed (400).
        too_large: bool,
    },
    /// Body bytes for request `id`.
    Stdin {
        /// The request id.
        id: u16,
        /// The bytes (never empty).
        data: Bytes,
    },
    /// Request `id`'s body ended.
    StdinEnd {
        /// The request id.
        id: u16,
    },
    /// The front end aborted request `id` (§5.4): drop its handler and end it.
    Abort {
        /// The request id.
        id: u16,
    },
}

#[derive(Debug)]
enum Stage {
    /// Collecting the params block.
    Params(BytesMut),
    /// Params done; body records flow.
    Stdin,
    /// Body ended (or the request was refused): later input is ignored.
    Done,
}

#[derive(Debug)]
struct Slot {
    id: u16,
    keep_conn: bool,
    stage: Stage,
}

/// A responder connection's protocol state: which requests are in flight and
/// at which stage. Feed it records with [`Session::handle`]; it appends what
/// the protocol itself answers (management replies, refusals) to the output
/// and tells the driver what to do with the rest.
#[derive(Debug)]
pub struct Session {
    limits: SessionLimits,
    slots: Vec<Slot>,
    /// Refuse new requests (graceful shutdown).
    draining: bool,
    /// The last request begun asked to keep the connection.
    keep_conn: bool,
}

impl Session {
    /// A session with no request in flight.
    pub fn new(limits: SessionLimits) -> Session {
        Session {
            limits,
            slots: Vec::new(),
            draining: false,
            keep_conn: true,
        }
    }

    /// Requests begun and not yet ended.
    pub fn in_flight(&self) -> usize {
        self.slots.len()
    }

    /// True while some request is still collecting its params (the head
    /// timeout applies).
    pub fn awaiting_params(&self) -> bool {
        self.slots
            .iter()
            .any(|s| matches!(s.stage, Stage::Params(_)))
    }

    /// True while some request's body is still arriving (the body timeout
    /// applies).
    pub fn awaiting_stdin(&self) -> bool {
        self.slots.iter().any(|s| matches!(s.stage, Stage::Stdin))
    }

    /// Refuses requests begun from now on with `FCGI_OVERLOADED`.
    pub fn drain(&mut self) {
        self.draining = true;
    }

    /// True when the connection should close once no request is in flight:
    /// the last request did not set `FCGI_KEEP_CONN` (§5.1), or draining.
    pub fn closing(&self) -> bool {
        self.draining || !self.keep_conn
    }

    fn slot(&mut self, id: u16) -> Option<&mut Slot> {
        self.slots.iter_mut().find(|s| s.id == id)
    }

    /// Handles one record, appending the protocol's own replies to `out`.
    pub fn handle(&mut self, record: Record, out: &mut BytesMut) -> Result<Event, ProtocolError> {
        let Record { kind, id, content } = record;
        if id == 0 {
            return Ok(self.management(kind, &content, out));
        }
        match kind {
            kind::BEGIN_REQUEST => self.begin(id, &content, out),
            kind::PARAMS => Ok(self.params(id, &content)),
            kind::STDIN => {
                let Some(slot) = self.slot(id) else {
                    // §3.3: records of a request not in flight (after its
                    // END_REQUEST, or refused) are ignored.
                    return Ok(Event::None);
                };
                match slot.stage {
                    Stage::Params(_) => Err(ProtocolError::StdinBeforeParams(id)),
                    Stage::Done => Ok(Event::None),
                    Stage::Stdin if content.is_empty() => {
                        slot.stage = Stage::Done;
                        Ok(Event::StdinEnd { id })
                    }
                    Stage::Stdin => Ok(Event::Stdin { id, data: content }),
                }
            }
            kind::ABORT_REQUEST => Ok(match self.slot(id) {
                Some(_) => Event::Abort { id },
                None => Event::None,
            }),
            // DATA belongs to the filter role, never begun here; other
            // types on a request id are not defined (§4.2 covers only
            // management records): ignored.
            _ => Ok(Event::None),
        }
    }

    fn management(&mut self, kind: u8, content: &Bytes, out: &mut BytesMut) -> Event {
        if kind == kind::GET_VALUES {
            // §4.1: answer the variables known, ignore the others. A
            // malformed query gets an empty answer.
            let asked = decode_pairs(content, 64).unwrap_or_default();
            let mut reply = Vec::new();
            for (name, _) in asked {
                let value = match &name[..] {
                    b"FCGI_MAX_CONNS" => self.limits.max_conns,
                    b"FCGI_MAX_REQS" => self
                        .limits
                        .max_conns
                        .saturating_mul(self.limits.max_requests),
                    b"FCGI_MPXS_CONNS" => usize::from(self.limits.max_requests > 1),
                    _ => continue,
                };
                encode_pair(&mut reply, &name, value.to_string().as_bytes());
            }
            reply.truncate(MAX_CONTENT);
            encode(out, kind::GET_VALUES_RESULT, 0, &reply);
        } else {
            // §4.2: FCGI_UNKNOWN_TYPE for a management record not understood.
            let mut body = [0u8; 8];
            body[0] = kind;
            encode(out, kind::UNKNOWN_TYPE, 0, &body);
        }
        Event::None
    }

    fn begin(
        &mut self,
        id: u16,
        content: &[u8],
        out: &mut BytesMut,
    ) -> Result<Event, ProtocolError> {
        if content.len() != 8 {
            return Err(ProtocolError::BadBegin);
        }
        if self.slot(id).is_some() {
            return Err(ProtocolError::DuplicateId(id));
        }
        let role = u16::from_be_bytes([content[0], content[1]]);
        let keep_conn = content[2] & KEEP_CONN != 0;
        let refusal = if role != ROLE_RESPONDER {
            Some(ProtocolStatus::UnknownRole)
        } else if self.draining {
            Some(ProtocolStatus::Overloaded)
        } else if self.slots.len() >= self.limits.max_requests {
            Some(if self.limits.max_requests <= 1 {
                ProtocolStatus::CantMpxConn
            } else {
                ProtocolStatus::Overloaded
            })
        } else {
            None
        };
        if let Some(status) = refusal {
            encode_end(out, id, 0, status);
            if !keep_conn && self.slots.is_empty() {
                self.keep_conn = false;
            }
            return Ok(Event::None);
        }
        self.keep_conn = keep_conn;
        self.slots.push(Slot {
            id,
            keep_conn,
            stage: Stage::Params(BytesMut::new()),
        });
        Ok(Event::None)
    }

    fn params(&mut self, id: u16, content: &[u8]) -> Event {
        let limits = self.limits;
        let Some(slot) = self.slot(id) else {
            return Event::None;
        };
        let Stage::Params(block) = &mut slot.stage else {
            return Event::None;
        };
        if !content.is_empty() {
            if block.len() + content.len() > limits.max_params_bytes {
                slot.stage = Stage::Stdin;
                return Event::BadParams {
                    id,
                    too_large: true,
                };
            }
            block.extend_from_slice(content);
            return Event::None;
        }
        let block = std::mem::take(block).freeze();
        slot.stage = Stage::Stdin;
        match decode_pairs(&block, limits.max_params) {
            Ok(params) => Event::Start { id, params },
            Err(PairsError::TooMany) => Event::BadParams {
                id,
                too_large: true,
            },
            Err(PairsError::Truncated) => Event::BadParams {
                id,
                too_large: false,
            },
        }
    }

    /// Ends request `id` (its `FCGI_END_REQUEST` is the driver's to send):
    /// later records of that id are ignored. Returns whether it asked to
    /// keep the connection.
    pub fn end(&mut self, id: u16) -> bool {
        match self.slots.iter().position(|s| s.id == id) {
            Some(i) => self.slots.swap_remove(i).keep_conn,
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> SessionLimits {
        SessionLimits {
            max_record: MAX_CONTENT,
            max_params_bytes: 1024,
            max_params: 8,
            max_requests: 2,
            max_conns: 10,
        }
    }

    fn rec(kind: u8, id: u16, content: &[u8]) -> BytesMut {
        let mut out = BytesMut::new();
        encode(&mut out, kind, id, content);
        out
    }

    fn begin(id: u16, role: u16, flags: u8) -> BytesMut {
        let r = role.to_be_bytes();
        rec(kind::BEGIN_REQUEST, id, &[r[0], r[1], flags, 0, 0, 0, 0, 0])
    }

    #[test]
    fn records_are_padded_to_eight_bytes_and_decode_back() {
        for len in [0usize, 1, 7, 8, 9, 100, OUT_CONTENT, MAX_CONTENT] {
            let content = vec![0xab; len];
            let mut buf = rec(kind::STDOUT, 7, &content);
            assert_eq!(buf.len() % 8, 0, "len {len}");
            // Fed one byte at a time, the record appears only when whole.
            let whole = buf.split();
            let mut partial = BytesMut::new();
            for (i, b) in whole.iter().enumerate() {
                partial.put_u8(*b);
                let got = decode(&mut partial, MAX_CONTENT).unwrap();
                if i + 1 < whole.len() {
                    assert_eq!(got, None);
                } else {
                    let got = got.unwrap();
                    assert_eq!(
                        (got.kind, got.id, &got.content[..]),
                        (kind::STDOUT, 7, &content[..])
                    );
                }
            }
            assert!(partial.is_empty());
        }
    }

    #[test]
    fn a_bad_version_or_a_record_over_the_limit_is_an_error() {
        let mut buf = rec(kind::STDIN, 1, b"x");
        buf[0] = 2;
        assert_eq!(decode(&mut buf, 100), Err(ProtocolError::Version(2)));
        let mut buf = rec(kind::STDIN, 1, &[0; 101]);
        assert_eq!(
            decode(&mut buf, 100),
            Err(ProtocolError::RecordTooLarge(101))
        );
    }

    #[test]
    fn pairs_use_one_and_four_byte_lengths() {
        let long = vec![b'v'; 300];
        let mut block = Vec::new();
        encode_pair(&mut block, b"A", b"1");
        encode_pair(&mut block, b"LONG", &long);
        encode_pair(&mut block, b"EMPTY", b"");
        let pairs = decode_pairs(&Bytes::from(block.clone()), 8).unwrap();
        assert_eq!(pairs.len(), 3);
        assert_eq!(&pairs[1].1[..], &long[..]);
        for cut in 1..block.len() {
            assert_eq!(
                decode_pairs(&Bytes::copy_from_slice(&block[..cut]), 8).err(),
                if cut == 4 || cut == 4 + 9 + 300 {
                    None
                } else {
                    Some(PairsError::Truncated)
                },
                "cut at {cut}"
            );
        }
        assert_eq!(
            decode_pairs(&Bytes::from(block), 2),
            Err(PairsError::TooMany)
        );
    }

    fn feed(session: &mut Session, bytes: &[u8], out: &mut BytesMut) -> Vec<Event> {
        let mut buf = BytesMut::from(bytes);
        let mut events = Vec::new();
        while let Some(r) = decode(&mut buf, MAX_CONTENT).unwrap() {
            events.push(session.handle(r, out).unwrap());
        }
        events
    }

    #[test]
    fn params_split_anywhere_across_records_start_the_request() {
        let mut block = Vec::new();
        encode_pair(&mut block, b"REQUEST_METHOD", b"GET");
        encode_pair(&mut block, b"LONG", &[b'x'; 200]);
        for cut in 0..=block.len() {
            let mut s = Session::new(limits());
            let mut out = BytesMut::new();
            let mut wire = begin(1, ROLE_RESPONDER, KEEP_CONN);
            wire.extend_from_slice(&rec(kind::PARAMS, 1, &block[..cut]));
            wire.extend_from_slice(&rec(kind::PARAMS, 1, &block[cut..]));
            wire.extend_from_slice(&rec(kind::PARAMS, 1, b""));
            let events = feed(&mut s, &wire, &mut out);
            let started: Vec<_> = events
                .iter()
                .filter_map(|e| match e {
                    Event::Start { id, params } => Some((*id, params.len())),
                    _ => None,
                })
                .collect();
            // An empty PARAMS record in the middle (cut 0 or at the end)
            // ends the block early: at cut 0 it is the first record.
            if cut == 0 {
                assert_eq!(started, [(1, 0)]);
            } else {
                assert_eq!(started, [(1, 2)], "cut at {cut}");
            }
            assert!(out.is_empty());
        }
    }

    #[test]
    fn other_roles_the_in_flight_limit_and_unknown_types_are_answered() {
        let mut s = Session::new(limits());
        let mut out = BytesMut::new();
        feed(&mut s, &begin(1, 2, KEEP_CONN), &mut out);
        let end = decode(&mut out, MAX_CONTENT).unwrap().unwrap();
        assert_eq!(
            (end.kind, end.id, end.content[4]),
            (kind::END_REQUEST, 1, ProtocolStatus::UnknownRole as u8)
        );
        feed(
            &mut s,
            &[
                begin(1, 1, KEEP_CONN),
                begin(2, 1, KEEP_CONN),
                begin(3, 1, KEEP_CONN),
            ]
            .concat(),
            &mut out,
        );
        assert_eq!(s.in_flight(), 2);
        let end = decode(&mut out, MAX_CONTENT).unwrap().unwrap();
        assert_eq!(
            (end.id, end.content[4]),
            (3, ProtocolStatus::Overloaded as u8)
        );
        feed(&mut s, &rec(200, 0, b""), &mut out);
        let unknown = decode(&mut out, MAX_CONTENT).unwrap().unwrap();
        assert_eq!(
            (unknown.kind, &unknown.content[..]),
            (kind::UNKNOWN_TYPE, &[200, 0, 0, 0, 0, 0, 0, 0][..])
        );
        // Request id 0 is management's (§3.3): BEGIN_REQUEST there is an
        // unknown management type.
        let mut s = Session::new(limits());
        let mut out = BytesMut::new();
        assert_eq!(
            s.handle(
                decode(&mut begin(0, 1, 0), MAX_CONTENT).unwrap().unwrap(),
                &mut out
            ),
            Ok(Event::None)
        );
        assert_eq!(
            decode(&mut out, MAX_CONTENT).unwrap().unwrap().kind,
            kind::UNKNOWN_TYPE
        );
        assert_eq!(s.in_flight(), 0);
        assert_eq!(
            s.handle(
                decode(&mut rec(kind::BEGIN_REQUEST, 5, b"short"), MAX_CONTENT)
                    .unwrap()
                    .unwrap(),
                &mut out
            ),
            Err(ProtocolError::BadBegin)
        );
    }

    #[test]
    fn get_values_reports_the_limits() {
        let mut s = Session::new(limits());
        let mut out = BytesMut::new();
        let mut q = Vec::new();
        for name in [
            "FCGI_MAX_CONNS",
            "FCGI_MAX_REQS",
            "FCGI_MPXS_CONNS",
            "OTHER",
        ] {
            encode_pair(&mut q, name.as_bytes(), b"");
        }
        feed(&mut s, &rec(kind::GET_VALUES, 0, &q), &mut out);
        let reply = decode(&mut out, MAX_CONTENT).unwrap().unwrap();
        assert_eq!(reply.kind, kind::GET_VALUES_RESULT);
        let pairs = decode_pairs(&reply.content, 8).unwrap();
        let pairs: Vec<(&[u8], &[u8])> = pairs.iter().map(|(n, v)| (&n[..], &v[..])).collect();
        assert_eq!(
            pairs,
            [
                (&b"FCGI_MAX_CONNS"[..], &b"10"[..]),
                (b"FCGI_MAX_REQS", b"20"),
                (b"FCGI_MPXS_CONNS", b"1")
            ]
        );
    }

    #[test]
    fn records_after_the_end_and_stdin_flow_are_handled_in_order() {
        let mut s = Session::new(limits());
        let mut out = BytesMut::new();
        let wire = [
            begin(1, 1, 0),
            rec(kind::PARAMS, 1, b""),
            rec(kind::STDIN, 1, b"ab"),
            rec(kind::STDIN, 1, b""),
            rec(kind::STDIN, 1, b"late"),
        ]
        .concat();
        let events = feed(&mut s, &wire, &mut out);
        assert_eq!(
            events,
            [
                Event::None,
                Event::Start {
                    id: 1,
                    params: vec![]
                },
                Event::Stdin {
                    id: 1,
                    data: Bytes::from_static(b"ab")
                },
                Event::StdinEnd { id: 1 },
                Event::None,
            ]
        );
        assert!(s.closing(), "no FCGI_KEEP_CONN");
        assert!(!s.end(1));
        assert_eq!(
            feed(&mut s, &rec(kind::STDIN, 1, b"after end"), &mut out),
            [Event::None]
        );
        assert_eq!(
            feed(&mut s, &rec(kind::ABORT_REQUEST, 1, b""), &mut out),
            [Event::None]
        );
    }
}
