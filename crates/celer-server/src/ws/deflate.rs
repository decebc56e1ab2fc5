//! permessage-deflate (RFC 7692): negotiating its parameters and
//! compressing and inflating messages, on flate2 with the zlib-rs backend
//! (which, unlike miniz_oxide, takes window sizes below 32 KiB).
//!
//! The server always compresses each message on its own
//! (`server_no_context_takeover`, which RFC 7692 §7.1.1.1 lets a server
//! declare unasked): a message is then compressed once for every receiver
//! with the same window size, a broadcast compresses once, and no
//! connection keeps a compressor between messages. The compressors are
//! per thread and reset after each message.

use std::cell::RefCell;

use bytes::Bytes;
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// The four octets a sync flush ends with, removed by the sender and put
/// back by the receiver (RFC 7692 §7.2.1, §7.2.2).
const TAIL: [u8; 4] = [0x00, 0x00, 0xFF, 0xFF];

/// permessage-deflate parameters agreed with one client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deflate {
    /// LZ77 window of the server's compressor, 9 to 15 bits; `8` means the
    /// client asked for a 256-byte window, which zlib cannot produce raw,
    /// so the server sends its messages uncompressed (allowed: RFC 7692 §6).
    pub server_max_window_bits: u8,
    /// The client resets its context after each message.
    pub client_no_context_takeover: bool,
}

impl Deflate {
    /// Whether the server compresses its messages at all.
    pub fn compresses(&self) -> bool {
        self.server_max_window_bits >= 9
    }
}

/// A `Sec-WebSocket-Extensions` request value's permessage-deflate offers
/// (RFC 7692 §5, §7): accepts the first the server can honour and returns
/// the agreed parameters and the response value.
pub fn negotiate(header_values: &[&str]) -> Option<(Deflate, String)> {
    for value in header_values {
        for offer in value.split(',') {
            if let Some(agreed) = accept_offer(offer) {
                return Some(agreed);
            }
        }
    }
    None
}

/// One offer; `None` declines it (unknown or repeated parameter, bad value).
fn accept_offer(offer: &str) -> Option<(Deflate, String)> {
    let mut parts = offer.split(';').map(str::trim);
    if !parts.next()?.eq_ignore_ascii_case("permessage-deflate") {
        return None;
    }
    let mut server_no_context = false;
    let mut client_no_context = false;
    let mut server_bits: Option<u8> = None;
    let mut client_bits: Option<Option<u8>> = None;
    for param in parts {
        if param.is_empty() {
            return None;
        }
        let (name, value) = match param.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim().trim_matches('"'))),
            None => (param, None),
        };
        let bits = |v: &str| -> Option<u8> {
            // §7.1.2: 1*DIGIT without leading zeros, 8 to 15.
            if v.is_empty() || v.starts_with('0') || !v.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            v.parse::<u8>().ok().filter(|b| (8..=15).contains(b))
        };
        match name.to_ascii_lowercase().as_str() {
            // §7.1.1.1, §7.1.1.2: no value, at most once.
            "server_no_context_takeover" if value.is_none() && !server_no_context => {
                server_no_context = true
            }
            "client_no_context_takeover" if value.is_none() && !client_no_context => {
                client_no_context = true
            }
            // §7.1.2.1: a value is required.
            "server_max_window_bits" if server_bits.is_none() => server_bits = Some(bits(value?)?),
            // §7.1.2.2: the value is optional in an offer.
            "client_max_window_bits" if client_bits.is_none() => {
                client_bits = Some(match value {
                    Some(v) => Some(bits(v)?),
                    None => None,
                })
            }
            _ => return None,
        }
    }
    let server_max_window_bits = server_bits.unwrap_or(15);
    let mut response = String::from("permessage-deflate; server_no_context_takeover");
    if client_no_context {
        response.push_str("; client_no_context_takeover");
    }
    if let Some(bits) = server_bits {
        response.push_str("; server_max_window_bits=");
        response.push_str(&bits.to_string());
    }
    if let Some(Some(bits)) = client_bits {
        // §7.1.2.2: the server may echo it (a value not above the offer's).
        response.push_str("; client_max_window_bits=");
        response.push_str(&bits.to_string());
    }
    Some((
        Deflate {
            server_max_window_bits,
            client_no_context_takeover: client_no_context,
        },
        response,
    ))
}

thread_local! {
    /// Compressors by window bits (index `bits - 9`) and their level.
    static COMPRESSORS: RefCell<[Option<(u32, Compress)>; 7]> = const { RefCell::new([const { None }; 7]) };
}

/// Compresses one message for a client whose window is `bits` (9 to 15)
/// at `level` (0 to 9), without the final four octets (RFC 7692 §7.2.1).
pub fn compress(payload: &[u8], bits: u8, level: u32) -> Bytes {
    debug_assert!((9..=15).contains(&bits));
    COMPRESSORS.with(|cell| {
        let mut all = cell.borrow_mut();
        let slot = &mut all[(bits - 9) as usize];
        if slot.as_ref().is_none_or(|(l, _)| *l != level) {
            *slot = Some((
                level,
                Compress::new_with_window_bits(Compression::new(level), false, bits),
            ));
        }
        let (_, c) = slot.as_mut().expect("just set");
        let mut out = Vec::with_capacity(payload.len() / 2 + 64);
        let start = c.total_in();
        loop {
            if out.capacity() - out.len() < 64 {
                out.reserve(out.capacity().max(256));
            }
            let consumed = (c.total_in() - start) as usize;
            c.compress_vec(&payload[consumed..], &mut out, FlushCompress::Sync)
                .expect("deflate with valid parameters does not fail");
            // A sync flush is complete once it stops short of the buffer's end.
            if (c.total_in() - start) as usize == payload.len() && out.len() < out.capacity() {
                break;
            }
        }
        c.reset();
        // An empty message becomes the single octet 0x00 (§7.2.3.6).
        if out.ends_with(&TAIL) {
            out.truncate(out.len() - 4);
        }
        Bytes::from(out)
    })
}

/// Why a compressed message could not be inflated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InflateError {
    /// It inflates past the message limit.
    TooBig,
    /// It is not valid DEFLATE data.
    Corrupt,
}

/// The decompressor of one connection's messages.
#[derive(Debug)]
pub struct Inflater {
    d: Decompress,
}

impl Default for Inflater {
    fn default() -> Self {
        Inflater::new()
    }
}

impl Inflater {
    /// An inflater with a 32 KiB window, which decodes every window size.
    pub fn new() -> Inflater {
        Inflater {
            d: Decompress::new(false),
        }
    }

    /// Inflates one message (the four octets put back), stopping with
    /// `TooBig` as soon as the output passes `max` bytes.
    pub fn inflate(&mut self, data: &[u8], max: usize) -> Result<Bytes, InflateError> {
        let mut out: Vec<u8> = Vec::with_capacity(
            data.len()
                .saturating_mul(3)
                .clamp(64, max.saturating_add(1)),
        );
        for input in [data, &TAIL[..]] {
            let start = self.d.total_in();
            loop {
                if out.len() == out.capacity() {
                    if out.len() > max {
                        return Err(InflateError::TooBig);
                    }
                    out.reserve(out.len().max(256).min(max + 1 - out.len()));
                }
                let consumed = (self.d.total_in() - start) as usize;
                let before = (self.d.total_in(), self.d.total_out());
                let status = self
                    .d
                    .decompress_vec(&input[consumed..], &mut out, FlushDecompress::Sync)
                    .map_err(|_| InflateError::Corrupt)?;
                if out.len() > max {
                    return Err(InflateError::TooBig);
                }
                if status == Status::StreamEnd {
                    // A final block (BFINAL) ends the stream: the next
                    // message starts a new one.
                    self.d.reset(false);
                    break;
                }
                let consumed = (self.d.total_in() - start) as usize;
                if consumed == input.len() && out.len() < out.capacity() {
                    break;
                }
                if before == (self.d.total_in(), self.d.total_out()) && out.len() < out.capacity() {
                    return Err(InflateError::Corrupt);
                }
            }
        }
        Ok(Bytes::from(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offers_are_negotiated_per_rfc_7692() {
        let (d, r) = negotiate(&["permessage-deflate; client_max_window_bits"]).unwrap();
        assert_eq!(d.server_max_window_bits, 15);
        assert_eq!(r, "permessage-deflate; server_no_context_takeover");
        let (d, r) = negotiate(&[
            "permessage-deflate; server_max_window_bits=10; client_no_context_takeover",
        ])
        .unwrap();
        assert_eq!(
            (d.server_max_window_bits, d.client_no_context_takeover),
            (10, true)
        );
        assert_eq!(
            r,
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10"
        );
        assert!(negotiate(&["permessage-deflate; server_max_window_bits"]).is_none());
        assert!(negotiate(&["permessage-deflate; server_max_window_bits=7"]).is_none());
        assert!(negotiate(&["permessage-deflate; server_max_window_bits=010"]).is_none());
        assert!(negotiate(&["permessage-deflate; foo"]).is_none());
        assert!(
            negotiate(&[
                "permessage-deflate; client_no_context_takeover; client_no_context_takeover"
            ])
            .is_none()
        );
        let (d, _) =
            negotiate(&["permessage-deflate; foo, permessage-deflate; server_max_window_bits=8"])
                .unwrap();
        assert!(
            !d.compresses(),
            "the second offer is taken; 8 bits means uncompressed"
        );
        assert!(negotiate(&["x-webkit-deflate-frame"]).is_none());
    }

    #[test]
    fn compress_then_inflate_round_trips_at_every_window() {
        let text: Vec<u8> = (0..20_000u32)
            .flat_map(|i| format!("{{\"n\":{}}}", i % 977).into_bytes())
            .collect();
        for bits in 9..=15 {
            for payload in [&text[..], b"", b"a"] {
                let z = compress(payload, bits, 6);
                let mut inf = Inflater::new();
                assert_eq!(&inf.inflate(&z, 1 << 20).unwrap()[..], payload);
                // Context taken over: a second message inflates too.
                let z = compress(payload, bits, 1);
                assert_eq!(&inf.inflate(&z, 1 << 20).unwrap()[..], payload);
            }
        }
    }

    #[test]
    fn inflating_stops_at_the_limit() {
        let zeros = vec![0u8; 1 << 20];
        let z = compress(&zeros, 15, 6);
        assert!(z.len() < 2048);
        let mut inf = Inflater::new();
        assert_eq!(inf.inflate(&z, (1 << 20) - 1), Err(InflateError::TooBig));
        let mut inf = Inflater::new();
        assert_eq!(inf.inflate(&z, 1 << 20).unwrap().len(), 1 << 20);
        assert_eq!(
            Inflater::new().inflate(b"\xff\xff\xff", 100),
            Err(InflateError::Corrupt)
        );
    }
}
