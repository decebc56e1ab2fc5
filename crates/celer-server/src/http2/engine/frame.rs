//! HTTP/2 frames on the wire (RFC 9113 §4 and §6): the nine-byte head,
//! the type and flag numbers, and the writers of every frame the server
//! sends. Frames are written straight into the connection's output buffer;
//! nothing here allocates.

use bytes::{BufMut, BytesMut};

use super::Reason;

/// The client connection preface (RFC 9113 §3.4).
pub(super) const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Bytes of a frame head.
pub(super) const HEAD_LEN: usize = 9;

/// The frame size every endpoint must accept (RFC 9113 §4.2), and the
/// default `SETTINGS_MAX_FRAME_SIZE`.
pub(super) const DEFAULT_MAX_FRAME_SIZE: u32 = 1 << 14;

/// The largest frame size a peer may announce.
pub(super) const MAX_MAX_FRAME_SIZE: u32 = (1 << 24) - 1;

/// The largest flow-control window (RFC 9113 §6.9.1).
pub(super) const MAX_WINDOW: i64 = (1 << 31) - 1;

/// The window every stream and the connection start with (RFC 9113 §6.9.2).
pub(super) const DEFAULT_WINDOW: u32 = 65_535;

/// Frame types (RFC 9113 §6).
pub(super) mod kind {
    /// DATA.
    pub(in super::super) const DATA: u8 = 0x0;
    /// HEADERS.
    pub(in super::super) const HEADERS: u8 = 0x1;
    /// PRIORITY (deprecated, still parsed).
    pub(in super::super) const PRIORITY: u8 = 0x2;
    /// RST_STREAM.
    pub(in super::super) const RST_STREAM: u8 = 0x3;
    /// SETTINGS.
    pub(in super::super) const SETTINGS: u8 = 0x4;
    /// PUSH_PROMISE (a client never sends it).
    pub(in super::super) const PUSH_PROMISE: u8 = 0x5;
    /// PING.
    pub(in super::super) const PING: u8 = 0x6;
    /// GOAWAY.
    pub(in super::super) const GOAWAY: u8 = 0x7;
    /// WINDOW_UPDATE.
    pub(in super::super) const WINDOW_UPDATE: u8 = 0x8;
    /// CONTINUATION.
    pub(in super::super) const CONTINUATION: u8 = 0x9;
}

/// Frame flags (RFC 9113 §6).
pub(super) mod flag {
    /// END_STREAM on DATA and HEADERS.
    pub(in super::super) const END_STREAM: u8 = 0x1;
    /// ACK on SETTINGS and PING.
    pub(in super::super) const ACK: u8 = 0x1;
    /// END_HEADERS on HEADERS and CONTINUATION.
    pub(in super::super) const END_HEADERS: u8 = 0x4;
    /// PADDED on DATA and HEADERS.
    pub(in super::super) const PADDED: u8 = 0x8;
    /// PRIORITY on HEADERS.
    pub(in super::super) const PRIORITY: u8 = 0x20;
}

/// Settings identifiers (RFC 9113 §6.5.2, RFC 8441 §3).
pub(super) mod setting {
    /// SETTINGS_HEADER_TABLE_SIZE.
    pub(in super::super) const HEADER_TABLE_SIZE: u16 = 0x1;
    /// SETTINGS_ENABLE_PUSH.
    pub(in super::super) const ENABLE_PUSH: u16 = 0x2;
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub(in super::super) const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    /// SETTINGS_INITIAL_WINDOW_SIZE.
    pub(in super::super) const INITIAL_WINDOW_SIZE: u16 = 0x4;
    /// SETTINGS_MAX_FRAME_SIZE.
    pub(in super::super) const MAX_FRAME_SIZE: u16 = 0x5;
    /// SETTINGS_MAX_HEADER_LIST_SIZE.
    pub(in super::super) const MAX_HEADER_LIST_SIZE: u16 = 0x6;
    /// SETTINGS_ENABLE_CONNECT_PROTOCOL.
    pub(in super::super) const ENABLE_CONNECT_PROTOCOL: u16 = 0x8;
}

/// A frame's head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Head {
    /// Payload length.
    pub(super) len: usize,
    /// Frame type.
    pub(super) kind: u8,
    /// Flags.
    pub(super) flags: u8,
    /// Stream identifier (the reserved bit cleared).
    pub(super) stream: u32,
}

impl Head {
    /// Reads a head from the first nine bytes of `b`.
    pub(super) fn parse(b: &[u8]) -> Head {
        Head {
            len: (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]),
            kind: b[3],
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
        }
    }

    /// True when `flag` is set.
    pub(super) fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// Appends a frame head.
pub(super) fn put_head(out: &mut BytesMut, len: usize, kind: u8, flags: u8, stream: u32) {
    debug_assert!(len <= MAX_MAX_FRAME_SIZE as usize);
    let len = len as u32;
    out.put_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.put_u32(stream);
}

/// Writes the length and flags into the head that starts at `at`, written
/// with placeholders before its payload was known.
pub(super) fn patch_head(out: &mut BytesMut, at: usize, len: usize, flags: u8) {
    let len = len as u32;
    out[at..at + 3].copy_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8]);
    out[at + 4] = flags;
}

/// Appends a SETTINGS frame with `values`.
pub(super) fn put_settings(out: &mut BytesMut, values: &[(u16, u32)]) {
    put_head(out, values.len() * 6, kind::SETTINGS, 0, 0);
    for &(id, value) in values {
        out.put_u16(id);
        out.put_u32(value);
    }
}

/// Appends a SETTINGS acknowledgement.
pub(super) fn put_settings_ack(out: &mut BytesMut) {
    put_head(out, 0, kind::SETTINGS, flag::ACK, 0);
}

/// Appends a PING acknowledgement carrying `payload`.
pub(super) fn put_ping_ack(out: &mut BytesMut, payload: &[u8]) {
    put_head(out, 8, kind::PING, flag::ACK, 0);
    out.put_slice(payload);
}

/// Appends a PING.
pub(super) fn put_ping(out: &mut BytesMut, payload: &[u8; 8]) {
    put_head(out, 8, kind::PING, 0, 0);
    out.put_slice(payload);
}

/// Appends a WINDOW_UPDATE of `increment` for `stream` (0: the connection).
pub(super) fn put_window_update(out: &mut BytesMut, stream: u32, increment: u32) {
    put_head(out, 4, kind::WINDOW_UPDATE, 0, stream);
    out.put_u32(increment & 0x7fff_ffff);
}

/// Appends an RST_STREAM.
pub(super) fn put_reset(out: &mut BytesMut, stream: u32, reason: Reason) {
    put_head(out, 4, kind::RST_STREAM, 0, stream);
    out.put_u32(reason.0);
}

/// Appends a GOAWAY naming the last stream the server may act on.
pub(super) fn put_goaway(out: &mut BytesMut, last_stream: u32, reason: Reason) {
    put_head(out, 8, kind::GOAWAY, 0, 0);
    out.put_u32(last_stream);
    out.put_u32(reason.0);
}

/// Appends a DATA frame.
pub(super) fn put_data(out: &mut BytesMut, stream: u32, data: &[u8], end: bool) {
    let flags = if end { flag::END_STREAM } else { 0 };
    put_head(out, data.len(), kind::DATA, flags, stream);
    out.put_slice(data);
}

/// Frames the header block `block` (already HPACK-encoded) as HEADERS and,
/// past `max_frame` bytes, CONTINUATION frames.
pub(super) fn put_header_block(
    out: &mut BytesMut,
    stream: u32,
    block: &[u8],
    end_stream: bool,
    max_frame: usize,
) {
    let mut rest = block;
    let mut kind = kind::HEADERS;
    let mut flags = if end_stream { flag::END_STREAM } else { 0 };
    loop {
        let n = rest.len().min(max_frame);
        let (piece, tail) = rest.split_at(n);
        let last = tail.is_empty();
        put_head(
            out,
            n,
            kind,
            flags | if last { flag::END_HEADERS } else { 0 },
            stream,
        );
        out.put_slice(piece);
        if last {
            return;
        }
        rest = tail;
        kind = kind::CONTINUATION;
        flags = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_round_trips_and_drops_the_reserved_bit() {
        let mut out = BytesMut::new();
        put_head(&mut out, 0x01_02_03, kind::HEADERS, 0x25, 7);
        assert_eq!(out.len(), HEAD_LEN);
        let head = Head::parse(&out);
        assert_eq!(
            head,
            Head {
                len: 0x01_02_03,
                kind: kind::HEADERS,
                flags: 0x25,
                stream: 7
            }
        );
        out[5] |= 0x80;
        assert_eq!(Head::parse(&out).stream, 7);
    }

    #[test]
    fn a_long_block_goes_on_in_continuation_frames() {
        let block: Vec<u8> = (0..40u8).collect();
        let mut out = BytesMut::new();
        put_header_block(&mut out, 3, &block, true, 16);
        let mut at = 0;
        let mut seen = Vec::new();
        let mut heads = Vec::new();
        while at < out.len() {
            let head = Head::parse(&out[at..]);
            seen.extend_from_slice(&out[at + HEAD_LEN..at + HEAD_LEN + head.len]);
            at += HEAD_LEN + head.len;
            heads.push(head);
        }
        assert_eq!(seen, block);
        assert_eq!(heads.len(), 3);
        assert_eq!(heads[0].kind, kind::HEADERS);
        assert_eq!(heads[0].flags, flag::END_STREAM);
        assert_eq!(heads[1].kind, kind::CONTINUATION);
        assert_eq!(heads[1].flags, 0);
        assert_eq!(heads[2].flags, flag::END_HEADERS);
        let mut short = BytesMut::new();
        put_header_block(&mut short, 1, b"ab", false, 16);
        assert_eq!(Head::parse(&short).flags, flag::END_HEADERS);
    }
}
