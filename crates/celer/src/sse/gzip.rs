//! The gzip coding of a hub's event streams (RFC 1952 over RFC 1951): each
//! event deflated once, on its own, into bytes every subscriber sends; each
//! stream's CRC-32 combined from its events' own.
//!
//! A stream is the gzip header, then one *segment* per event, heartbeat or
//! preamble, then (when it ends cleanly) a last empty block and the
//! trailer. A segment is deflate blocks from a fresh compressor, none of
//! them final, ended by a sync flush (an empty stored block, RFC 1951
//! §3.2.4), so it starts and ends on a byte boundary and refers to nothing
//! before it: any sequence of segments is a valid deflate stream, and a
//! subscriber that joins at any event gets the same bytes as the others.
//!
//! The trailer needs the CRC-32 and the length of what this subscriber
//! got. Each segment carries its plain bytes' CRC and `x^(8·len)` modulo
//! the CRC polynomial; appending a segment to a stream's CRC is then one
//! carry-less multiplication modulo the polynomial (the algebra of zlib's
//! `crc32_combine`), not a pass over the event's bytes per subscriber.

use bytes::{BufMut, Bytes, BytesMut};
use flate2::{Compress, Compression, FlushCompress};

/// The gzip member header (RFC 1952 §2.3): deflate, no flags, no time, no
/// extra flags, unknown OS.
pub(crate) const HEADER: &[u8; 10] = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff";

/// The compression level of events: zlib's default, a balance for data
/// compressed once and sent many times.
const LEVEL: u32 = 6;

/// The largest stored block (RFC 1951 §3.2.4: LEN is 16 bits).
const MAX_STORED: usize = 0xffff;

/// The CRC-32 polynomial, reflected (RFC 1952 §8).
const POLY: u32 = 0xedb8_8320;

/// `X2N[k]` is `x^(2^k)` modulo the polynomial, in reflected form.
const X2N: [u32; 32] = {
    let mut table = [0u32; 32];
    // x^1: in reflected form, bit 30.
    let mut p = 1u32 << 30;
    table[0] = p;
    let mut k = 1;
    while k < 32 {
        p = mult_mod_p(p, p);
        table[k] = p;
        k += 1;
    }
    table
};

/// Part of an event stream, coded once for every subscriber.
#[derive(Clone)]
pub(crate) struct Segment {
    /// The deflate bytes: byte-aligned, non-final, independent of any
    /// other segment.
    pub(crate) bytes: Bytes,
    /// The CRC-32 of the plain bytes.
    crc: u32,
    /// The plain length, modulo 2^32 (what ISIZE keeps).
    len: u32,
    /// `x^(8·len)` modulo the polynomial: what appending this segment
    /// multiplies a stream's CRC by.
    shift: u32,
}

/// One stream's running gzip state: 12 bytes, updated per segment.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Coder {
    crc: u32,
    len: u32,
    /// The header went out.
    started: bool,
}

// ===== impl Segment =====

impl Segment {
    /// `plain` deflated at [`LEVEL`] and sync-flushed by a compressor of
    /// its own.
    pub(crate) fn deflate(plain: &[u8]) -> Segment {
        let mut compress = Compress::new(Compression::new(LEVEL), false);
        // Deflate's worst case is about 5 bytes per 16 KiB over the input;
        // the flush adds 5 and the headers of the blocks a few more.
        let mut out = Vec::with_capacity(plain.len() + plain.len() / 1000 + 64);
        loop {
            let consumed = (compress.total_in() as usize).min(plain.len());
            if compress
                .compress_vec(&plain[consumed..], &mut out, FlushCompress::Sync)
                .is_err()
            {
                // An in-memory compressor has no error to give; should it,
                // the event goes stored, which any inflater reads.
                return Segment::stored(plain);
            }
            // Done when all the input is in and the flush left room in the
            // output (zlib's rule for a complete flush).
            if compress.total_in() as usize == plain.len() && out.len() < out.capacity() {
                break;
            }
            out.reserve(out.capacity().max(64));
        }
        Segment::with_bytes(plain, Bytes::from(out))
    }

    /// `plain` as stored blocks (RFC 1951 §3.2.4): for the few bytes of a
    /// heartbeat or a `retry` field, where a compressor is not worth its
    /// set-up.
    pub(crate) fn stored(plain: &[u8]) -> Segment {
        let blocks = plain.len().div_ceil(MAX_STORED).max(1);
        let mut out = BytesMut::with_capacity(plain.len() + 5 * blocks);
        let mut chunks = plain.chunks(MAX_STORED);
        for _ in 0..blocks {
            let chunk = chunks.next().unwrap_or_default();
            // BFINAL 0, BTYPE 00, padded to the byte: the stream is on a
            // byte boundary before every segment.
            out.put_u8(0);
            let len = u16::try_from(chunk.len()).unwrap_or(u16::MAX);
            out.put_u16_le(len);
            out.put_u16_le(!len);
            out.put_slice(chunk);
        }
        Segment::with_bytes(plain, out.freeze())
    }

    fn with_bytes(plain: &[u8], bytes: Bytes) -> Segment {
        Segment {
            bytes,
            crc: crc32fast::hash(plain),
            // ISIZE is the length modulo 2^32 (RFC 1952 §2.3.1).
            len: plain.len() as u32,
            shift: shift_for(plain.len() as u64),
        }
    }

    /// The coded bytes' length.
    pub(crate) fn coded_len(&self) -> usize {
        self.bytes.len()
    }
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment")
            .field("coded", &self.bytes.len())
            .field("plain", &self.len)
            .finish_non_exhaustive()
    }
}

// ===== impl Coder =====

impl Coder {
    /// The bytes to send for `segment`: the header first if it has not
    /// gone out yet.
    pub(crate) fn send(&mut self, segment: &Segment) -> Bytes {
        self.crc = mult_mod_p(segment.shift, self.crc) ^ segment.crc;
        self.len = self.len.wrapping_add(segment.len);
        if self.started {
            return segment.bytes.clone();
        }
        self.started = true;
        let mut out = BytesMut::with_capacity(HEADER.len() + segment.bytes.len());
        out.put_slice(HEADER);
        out.put_slice(&segment.bytes);
        out.freeze()
    }

    /// The end of the stream: a last, empty block (fixed Huffman codes,
    /// only the end-of-block code: `03 00`), the CRC-32 and ISIZE; the
    /// header first if nothing went out.
    pub(crate) fn finish(&mut self) -> Bytes {
        let mut out = BytesMut::with_capacity(HEADER.len() + 10);
        if !self.started {
            self.started = true;
            out.put_slice(HEADER);
        }
        out.put_slice(&[0x03, 0x00]);
        out.put_u32_le(self.crc);
        out.put_u32_le(self.len);
        out.freeze()
    }
}

// ===== CRC-32 algebra =====

/// `a · b` modulo the CRC polynomial, both in reflected form (bit 31 is
/// `x^0`).
const fn mult_mod_p(a: u32, mut b: u32) -> u32 {
    let mut m = 1u32 << 31;
    let mut p = 0u32;
    loop {
        if a & m != 0 {
            p ^= b;
            if a & (m - 1) == 0 {
                return p;
            }
        }
        m >>= 1;
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
        if m == 0 {
            return p;
        }
    }
}

/// `x^(8·len)` modulo the polynomial: appending `len` bytes to a message
/// multiplies its CRC by this (before adding theirs).
fn shift_for(mut len: u64) -> u32 {
    // x^0.
    let mut p = 1u32 << 31;
    // 8·len = len << 3: start at x^(2^3).
    let mut k = 3;
    while len != 0 {
        if len & 1 != 0 {
            p = mult_mod_p(X2N[k & 31], p);
        }
        len >>= 1;
        k += 1;
    }
    p
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn gunzip(stream: &[u8]) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(stream).read_to_end(&mut out)?;
        Ok(out)
    }

    /// Bytes that compress a little and not all alike.
    fn text(n: usize, seed: u32) -> Vec<u8> {
        let mut x = seed.wrapping_mul(2_654_435_761).max(1);
        (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                if i % 7 == 0 {
                    b' '
                } else {
                    b'a' + (x % 26) as u8
                }
            })
            .collect()
    }

    #[test]
    fn a_stream_of_segments_is_one_valid_gzip_member() {
        let parts: Vec<Vec<u8>> = vec![
            b"retry: 1000\n\n".to_vec(),
            text(1, 1),
            text(0, 2),
            text(70_000, 3),
            b":\n\n".to_vec(),
            text(200_000, 4),
            b"data: {\"a\":1}\n\n".repeat(500),
        ];
        let mut coder = Coder::default();
        let mut stream = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            let segment = if i % 2 == 0 {
                Segment::stored(part)
            } else {
                Segment::deflate(part)
            };
            stream.extend_from_slice(&coder.send(&segment));
        }
        stream.extend_from_slice(&coder.finish());
        // The decoder checks the trailer's CRC and ISIZE.
        assert_eq!(gunzip(&stream).unwrap(), parts.concat());
    }

    #[test]
    fn each_segment_is_a_whole_raw_deflate_run_of_its_own() {
        let a = text(5_000, 7);
        let b = b"data: same\n\n".repeat(100);
        for plain in [&a, &b] {
            let segment = Segment::deflate(plain);
            assert!(segment.bytes.len() < plain.len());
            assert!(segment.bytes.ends_with(&[0, 0, 0xff, 0xff]));
            let mut inflate = flate2::Decompress::new(false);
            let mut out = Vec::with_capacity(plain.len() + 1);
            inflate
                .decompress_vec(&segment.bytes, &mut out, flate2::FlushDecompress::Sync)
                .unwrap();
            assert_eq!(inflate.total_in(), segment.bytes.len() as u64);
            assert_eq!(&out, plain);
        }
        // Joined in either order, with a subscriber's own header and
        // trailer, they make a valid member.
        let (sa, sb) = (Segment::deflate(&a), Segment::deflate(&b));
        for (first, second, want) in [
            (&sa, &sb, [&a[..], &b[..]].concat()),
            (&sb, &sa, [&b[..], &a[..]].concat()),
        ] {
            let mut coder = Coder::default();
            let mut stream = coder.send(first).to_vec();
            stream.extend_from_slice(&coder.send(second));
            stream.extend_from_slice(&coder.finish());
            assert_eq!(gunzip(&stream).unwrap(), want);
        }
    }

    #[test]
    fn an_empty_stream_is_a_valid_empty_member() {
        let mut coder = Coder::default();
        let stream = coder.finish();
        assert_eq!(gunzip(&stream).unwrap(), b"");
    }

    #[test]
    fn the_combined_crc_is_the_crc_of_the_whole() {
        let mut whole = Vec::new();
        let mut crc = 0u32;
        for (n, len) in [0usize, 1, 3, 64, 1_000, 65_535, 65_536, 100_003]
            .into_iter()
            .enumerate()
        {
            let part = text(len, n as u32 + 11);
            let segment = Segment::stored(&part);
            crc = mult_mod_p(segment.shift, crc) ^ segment.crc;
            whole.extend_from_slice(&part);
            assert_eq!(crc, crc32fast::hash(&whole), "after {len} bytes");
        }
    }

    #[test]
    fn the_multiplication_has_x0_as_its_unit() {
        for a in [0u32, 1, 0xdead_beef, u32::MAX, POLY] {
            assert_eq!(mult_mod_p(1 << 31, a), a);
            assert_eq!(mult_mod_p(a, 1 << 31), a);
        }
        assert_eq!(shift_for(0), 1 << 31);
    }
}
