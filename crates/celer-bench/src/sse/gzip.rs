//! Gzip-coded event streams (`Content-Encoding: gzip`, RFC 9110 §8.4.1.3):
//! the gzip member (RFC 1952) around one raw deflate stream (RFC 1951),
//! inflated once per distinct segment for all the subscribers of a thread.
//!
//! A server that compresses an event stream for many subscribers sends
//! every subscriber the same bytes for an event: after the 10-byte gzip
//! header, each event is one *segment*, compressed by a fresh compressor
//! (no reference to an earlier segment) and ended by a sync flush, the
//! empty stored block `00 00 ff ff`, which leaves the stream byte-aligned
//! at a block boundary. Inflating each subscriber's copy would make the
//! load generator (one core, 10,000 subscribers) the bound of the figure
//! again, so the subscribers of a thread share `Segments`, a small cache:
//!
//! - A subscriber collects its compressed bytes since its last segment
//!   boundary. Where they end with `00 00 ff ff` there may be a boundary
//!   (the pattern can also occur inside compressed data). The candidate
//!   is looked up (length, then the bytes); on a miss it is inflated by a
//!   fresh raw inflater and the outcome cached.
//! - The candidate is a segment when the fresh inflate takes all of it
//!   without error and the inflater then stands at a block boundary: fed
//!   `03 00` (an empty final block), it ends the stream with no output.
//!   Its plain bytes are then exactly what any inflater at that block
//!   boundary would produce, whatever came before, because zlib's inflate
//!   refuses a distance reaching before its first output byte ("invalid
//!   distance too far back"; the zlib-rs backend is built for this). A
//!   candidate that fails the probe is no boundary: the subscriber keeps
//!   collecting, and nothing is emitted, so no plain byte is emitted twice
//!   or out of order.
//! - A segment's entry keeps its plain bytes and a `Replay`: what feeding
//!   them to a reader at an event boundary does. A subscriber at an event
//!   boundary replays it (no scan of the plain bytes); one in the middle
//!   of an event (a server that splits events across segments) feeds the
//!   plain bytes.
//! - A candidate whose fresh inflate fails (a server whose segments refer
//!   to earlier ones: one continuous compressor with sync flushes) or
//!   whose plain bytes pass `MAX_SEGMENT_PLAIN`, a segment longer than
//!   `MAX_SEGMENT_BYTES`, and the end of the deflate stream switch that
//!   subscriber to its own continuous inflater for the rest of the stream.
//!   Its window is restored from the subscriber's recent plain segments
//!   (`History`, the last 32 KiB): the new inflater is first fed them as a
//!   stored block, whose output is dropped, then the compressed bytes from
//!   the last boundary on. If that inflate fails too, the stream is
//!   corrupt (`ErrorKind::Gzip`).
//!
//! The trailer's ISIZE is checked against the plain bytes received; its
//! CRC-32 is not: per subscriber it would cost a CRC over every plain
//! byte, or a CRC combination per segment, which is the per-delivery cost
//! this module exists to avoid (TCP and TLS already guard the bytes, and a
//! corrupt deflate stream fails to inflate). One gzip member per response:
//! bytes after its trailer are an error.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;

use flate2::{Decompress, FlushDecompress, Status};
use serde::Serialize;

use super::{Reader, Replay};
use crate::parse::MAX_HEADERS;
use crate::stats::ErrorKind;

/// Segments a thread's cache keeps (least recently used goes first).
pub(crate) const CACHE_ENTRIES: usize = 16;

/// Compressed bytes a subscriber collects while looking for the end of a
/// segment; a longer segment switches it to its own continuous inflater.
pub(crate) const MAX_SEGMENT_BYTES: usize = 1 << 20;

/// Plain bytes of one cached segment; a segment inflating to more is not
/// cached and its subscriber switches to its own continuous inflater.
pub(crate) const MAX_SEGMENT_PLAIN: usize = 4 << 20;

/// Longest FNAME or FCOMMENT field accepted in a gzip header, with its NUL.
pub(crate) const MAX_HEADER_TEXT: usize = 4096;

/// Deflate's largest distance: the plain bytes a continuous inflater needs.
const WINDOW: usize = 32 * 1024;

/// Plain segments a subscriber's `History` keeps before merging them.
const HISTORY_PIECES: usize = 64;

/// Output buffer of a continuous inflater.
const INFLATE_BUFFER: usize = 16 * 1024;

/// The empty stored block a sync flush ends with (RFC 1951 §3.2.4).
const SYNC_FLUSH: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// An empty final block with fixed codes (RFC 1951 §3.2.6): the probe
/// that tells a block boundary.
const FINAL_BLOCK: [u8; 2] = [0x03, 0x00];

/// The response's content coding (RFC 9110 §8.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Coding {
    /// No Content-Encoding, or `identity`.
    Identity,
    /// `gzip` (or `x-gzip`, RFC 9110 §8.4.1.3).
    Gzip,
}

/// The content coding a complete response head declares; any coding but
/// gzip, or gzip twice, is `ErrorKind::Encoding`.
pub(crate) fn content_coding(head: &[u8]) -> Result<Coding, ErrorKind> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    if !matches!(response.parse(head), Ok(httparse::Status::Complete(_))) {
        return Err(ErrorKind::Malformed);
    }
    let mut gzip = 0;
    for header in response.headers.iter() {
        if !header.name.eq_ignore_ascii_case("content-encoding") {
            continue;
        }
        // A list of codings in the order applied (RFC 9110 §8.4).
        for coding in header.value.split(|&b| b == b',') {
            let coding = coding.trim_ascii();
            if coding.is_empty() || coding.eq_ignore_ascii_case(b"identity") {
                continue;
            }
            if coding.eq_ignore_ascii_case(b"gzip") || coding.eq_ignore_ascii_case(b"x-gzip") {
                gzip += 1;
            } else {
                return Err(ErrorKind::Encoding);
            }
        }
    }
    match gzip {
        0 => Ok(Coding::Identity),
        1 => Ok(Coding::Gzip),
        _ => Err(ErrorKind::Encoding),
    }
}

/// What the gzip subscribers of a run did, summed over threads.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct GzipCounts {
    /// Subscribers whose response was gzip-coded.
    pub(crate) streams: u64,
    /// Segments taken through the cache (each subscriber's copy counts).
    pub(crate) segments: u64,
    /// Segments inflated: cache misses, each a fresh inflate of one
    /// distinct segment (the candidates that were no boundary included).
    pub(crate) inflated: u64,
    /// Subscribers that switched to their own continuous inflater before
    /// the end of the stream.
    pub(crate) continuous: u64,
    /// Compressed body bytes received (gzip header and trailer included).
    pub(crate) compressed_bytes: u64,
    /// Plain bytes those gave.
    pub(crate) plain_bytes: u64,
}

impl GzipCounts {
    /// Adds another thread's counts.
    pub(crate) fn add(&mut self, other: &GzipCounts) {
        self.streams += other.streams;
        self.segments += other.segments;
        self.inflated += other.inflated;
        self.continuous += other.continuous;
        self.compressed_bytes += other.compressed_bytes;
        self.plain_bytes += other.plain_bytes;
    }
}

/// A thread's cache of recent segments, shared by its subscribers.
pub(crate) struct Segments {
    /// This run's marker prefix, for the entries' `Replay`.
    prefix: Arc<[u8]>,
    entries: Vec<Rc<Entry>>,
    /// A clock for least-recently-used eviction.
    tick: u64,
    /// What the thread's gzip subscribers did.
    pub(crate) counts: GzipCounts,
}

/// One cached candidate: its compressed bytes and what they are.
struct Entry {
    compressed: Box<[u8]>,
    outcome: Outcome,
    used: Cell<u64>,
}

/// What a fresh inflate made of a candidate.
enum Outcome {
    /// A segment: its plain bytes and what they do to a reader.
    Segment {
        plain: Rc<[u8]>,
        replay: Box<Replay>,
    },
    /// The sync-flush pattern inside compressed data: no block boundary.
    NoBoundary,
    /// It cannot be inflated alone (it refers to earlier segments, is
    /// corrupt, ends the deflate stream or inflates to more than
    /// `MAX_SEGMENT_PLAIN`): a continuous inflater takes over.
    Continuous,
}

impl Segments {
    /// An empty cache for the subscribers of one run.
    pub(crate) fn new(prefix: Arc<[u8]>) -> Segments {
        Segments {
            prefix,
            entries: Vec::with_capacity(CACHE_ENTRIES),
            tick: 0,
            counts: GzipCounts::default(),
        }
    }

    /// The outcome of `candidate`, from the cache or by a fresh inflate.
    fn outcome(&mut self, candidate: &[u8]) -> Rc<Entry> {
        self.tick += 1;
        if let Some(entry) = self
            .entries
            .iter()
            .find(|e| e.compressed.len() == candidate.len() && *e.compressed == *candidate)
        {
            entry.used.set(self.tick);
            return entry.clone();
        }
        self.counts.inflated += 1;
        let outcome = match inflate_alone(candidate) {
            Alone::Segment(plain) => {
                let replay = Replay::of(&plain, &self.prefix);
                Outcome::Segment {
                    plain: plain.into(),
                    replay: Box::new(replay),
                }
            }
            Alone::NoBoundary => Outcome::NoBoundary,
            Alone::Continuous => Outcome::Continuous,
        };
        let entry = Rc::new(Entry {
            compressed: candidate.into(),
            outcome,
            used: Cell::new(self.tick),
        });
        if self.entries.len() == CACHE_ENTRIES {
            let oldest = (0..self.entries.len())
                .min_by_key(|&i| self.entries[i].used.get())
                .unwrap_or(0);
            self.entries.swap_remove(oldest);
        }
        self.entries.push(entry.clone());
        entry
    }
}

/// What a fresh raw inflater makes of a candidate segment.
enum Alone {
    Segment(Vec<u8>),
    NoBoundary,
    Continuous,
}

/// Inflates `candidate` with a fresh raw inflater, then probes whether it
/// stands at a block boundary.
fn inflate_alone(candidate: &[u8]) -> Alone {
    let mut inflater = Decompress::new(false);
    let mut plain = Vec::with_capacity((candidate.len() * 8).clamp(64, MAX_SEGMENT_PLAIN));
    loop {
        let (taken, made) = (inflater.total_in() as usize, plain.len());
        match inflater.decompress_vec(&candidate[taken..], &mut plain, FlushDecompress::None) {
            // A distance before the first byte, or corrupt data.
            Err(_) => return Alone::Continuous,
            // The deflate stream ends in it: the rest is the trailer.
            Ok(Status::StreamEnd) => return Alone::Continuous,
            Ok(Status::Ok | Status::BufError) => {}
        }
        let room = plain.len() < plain.capacity();
        if inflater.total_in() as usize == candidate.len() && room {
            break;
        }
        if room && plain.len() == made && inflater.total_in() as usize == taken {
            // No progress with input and room: not a deflate stream.
            return Alone::Continuous;
        }
        if !room {
            // The capacity never passes MAX_SEGMENT_PLAIN + 1: a segment
            // that fills it is too large.
            if plain.len() > MAX_SEGMENT_PLAIN {
                return Alone::Continuous;
            }
            plain.reserve_exact(plain.len().max(64).min(MAX_SEGMENT_PLAIN + 1 - plain.len()));
        }
    }
    let mut after = Vec::with_capacity(16);
    match inflater.decompress_vec(&FINAL_BLOCK, &mut after, FlushDecompress::Finish) {
        Ok(Status::StreamEnd) if after.is_empty() => Alone::Segment(plain),
        _ => Alone::NoBoundary,
    }
}

/// A subscriber's recent plain bytes, at least the last `WINDOW` of them
/// when there were as many: what a continuous inflater taking over needs.
/// The pieces are the cache's own segments (shared, not copied).
#[derive(Default)]
struct History {
    pieces: VecDeque<Rc<[u8]>>,
    len: usize,
}

impl History {
    fn push(&mut self, piece: Rc<[u8]>) {
        if piece.is_empty() {
            return;
        }
        self.len += piece.len();
        self.pieces.push_back(piece);
        while let Some(front) = self.pieces.front() {
            if self.len - front.len() < WINDOW {
                break;
            }
            self.len -= front.len();
            self.pieces.pop_front();
        }
        if self.pieces.len() > HISTORY_PIECES {
            let merged: Rc<[u8]> = self.window().into();
            self.len = merged.len();
            self.pieces.clear();
            self.pieces.push_back(merged);
        }
    }

    /// The last `WINDOW` plain bytes (fewer at the start of a stream).
    fn window(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len.min(WINDOW));
        let mut skip = self.len.saturating_sub(WINDOW);
        for piece in &self.pieces {
            let from = skip.min(piece.len());
            skip -= from;
            out.extend_from_slice(&piece[from..]);
        }
        out
    }
}

/// A subscriber's gzip body decoder.
pub(crate) struct GzipBody {
    shared: Rc<RefCell<Segments>>,
    state: State,
    /// Plain bytes of the member so far, modulo 2^32 (ISIZE, RFC 1952 §2.3.1).
    isize: u32,
}

enum State {
    /// The gzip header, collected until complete.
    Header(Vec<u8>),
    /// Segment by segment through the cache: the compressed bytes since
    /// the last boundary, the plain bytes so far.
    Segments { pending: Vec<u8>, history: History },
    /// The subscriber's own inflater.
    Continuous {
        inflater: Box<Decompress>,
        out: Box<[u8]>,
    },
    /// The deflate stream ended; the 8 trailer bytes, collected.
    Trailer(Vec<u8>),
    /// The member is complete.
    Done,
}

impl GzipBody {
    /// A decoder for one response, sharing the thread's cache.
    pub(crate) fn new(shared: Rc<RefCell<Segments>>) -> GzipBody {
        shared.borrow_mut().counts.streams += 1;
        GzipBody {
            shared,
            state: State::Header(Vec::with_capacity(10)),
            isize: 0,
        }
    }

    /// Takes body bytes (the coded content, in order) and hands the
    /// plain bytes to `reader`.
    pub(crate) fn push(&mut self, bytes: &[u8], reader: &mut Reader) -> Result<(), ErrorKind> {
        self.shared.borrow_mut().counts.compressed_bytes += bytes.len() as u64;
        self.decode(bytes, reader)
    }

    fn decode(&mut self, mut bytes: &[u8], reader: &mut Reader) -> Result<(), ErrorKind> {
        while !bytes.is_empty() {
            bytes = match &mut self.state {
                State::Header(header) => {
                    let old = header.len();
                    header.extend_from_slice(bytes);
                    match parse_header(header)? {
                        None => {
                            if header.len() > MAX_HEADER_BYTES {
                                return Err(ErrorKind::Gzip);
                            }
                            &[]
                        }
                        Some(len) => {
                            self.state = State::Segments {
                                pending: Vec::new(),
                                history: History::default(),
                            };
                            &bytes[len - old..]
                        }
                    }
                }
                State::Segments { .. } => {
                    self.push_segments(bytes, reader)?;
                    &[]
                }
                State::Continuous { .. } => self.push_continuous(bytes, reader)?,
                State::Trailer(trailer) => {
                    let n = bytes.len().min(8 - trailer.len());
                    trailer.extend_from_slice(&bytes[..n]);
                    if trailer.len() == 8 {
                        // ISIZE: little-endian, the last four (RFC 1952 §2.3.1).
                        let isize =
                            u32::from_le_bytes([trailer[4], trailer[5], trailer[6], trailer[7]]);
                        if isize != self.isize {
                            return Err(ErrorKind::Gzip);
                        }
                        self.state = State::Done;
                    }
                    &bytes[n..]
                }
                // One member per response.
                State::Done => return Err(ErrorKind::Gzip),
            };
        }
        Ok(())
    }

    /// The body ended. A member cut short is the server closing the
    /// stream (not an error here); one whose end is corrupt is `Gzip`.
    pub(crate) fn finish(&mut self, reader: &mut Reader) -> Result<(), ErrorKind> {
        if let State::Segments { pending, .. } = &mut self.state {
            // The rest of the deflate stream (its final block) and the
            // trailer: no sync flush follows them.
            if !pending.is_empty() {
                let rest = std::mem::take(pending);
                self.continue_alone(&rest, reader)?;
            }
        }
        Ok(())
    }

    /// Segments mode: collects `bytes`, and at each candidate boundary
    /// takes the segment through the cache.
    fn push_segments(&mut self, bytes: &[u8], reader: &mut Reader) -> Result<(), ErrorKind> {
        let State::Segments { pending, .. } = &mut self.state else {
            return Ok(());
        };
        let old = pending.len();
        pending.extend_from_slice(bytes);
        // Where a sync flush ending in the new bytes may start.
        let mut from = old.saturating_sub(SYNC_FLUSH.len() - 1);
        let mut start = 0;
        loop {
            let State::Segments { pending, history } = &mut self.state else {
                unreachable!("segments mode changes only below");
            };
            let Some(at) = memchr::memmem::find(&pending[from..], &SYNC_FLUSH) else {
                break;
            };
            let end = from + at + SYNC_FLUSH.len();
            from = end;
            let entry = {
                let mut shared = self.shared.borrow_mut();
                let entry = shared.outcome(&pending[start..end]);
                if let Outcome::Segment { plain, .. } = &entry.outcome {
                    shared.counts.segments += 1;
                    shared.counts.plain_bytes += plain.len() as u64;
                }
                entry
            };
            match &entry.outcome {
                Outcome::Segment { plain, replay } => {
                    if reader.lines.at_boundary() {
                        reader.replay(replay);
                    } else {
                        reader.feed(plain);
                    }
                    history.push(plain.clone());
                    self.isize = self.isize.wrapping_add(plain.len() as u32);
                    start = end;
                }
                Outcome::NoBoundary => {}
                Outcome::Continuous => {
                    self.shared.borrow_mut().counts.continuous += 1;
                    let rest = pending.split_off(start);
                    return self.continue_alone(&rest, reader);
                }
            }
        }
        let State::Segments { pending, .. } = &mut self.state else {
            unreachable!("segments mode changes only above");
        };
        pending.drain(..start);
        if pending.len() > MAX_SEGMENT_BYTES {
            self.shared.borrow_mut().counts.continuous += 1;
            let rest = std::mem::take(pending);
            return self.continue_alone(&rest, reader);
        }
        Ok(())
    }

    /// Switches to a continuous inflater, its window restored from the
    /// history, and feeds it `rest` (compressed bytes from the last segment
    /// boundary on).
    fn continue_alone(&mut self, rest: &[u8], reader: &mut Reader) -> Result<(), ErrorKind> {
        let State::Segments { history, .. } = &self.state else {
            return Ok(());
        };
        let window = history.window();
        let mut inflater = Box::new(Decompress::new(false));
        // A stored block (RFC 1951 §3.2.4) of the window, not final: the
        // inflater's history becomes the window; its output is dropped.
        let len = u16::try_from(window.len()).unwrap_or(u16::MAX);
        let mut primer = Vec::with_capacity(5 + window.len());
        primer.push(0x00);
        primer.extend_from_slice(&len.to_le_bytes());
        primer.extend_from_slice(&(!len).to_le_bytes());
        primer.extend_from_slice(&window[..usize::from(len)]);
        let mut out = vec![0u8; INFLATE_BUFFER.max(WINDOW)].into_boxed_slice();
        match inflater.decompress(&primer, &mut out, FlushDecompress::None) {
            Ok(Status::Ok | Status::BufError)
                if inflater.total_in() as usize == primer.len()
                    && inflater.total_out() as usize == window.len() => {}
            _ => return Err(ErrorKind::Gzip),
        }
        self.state = State::Continuous { inflater, out };
        // What follows the deflate stream: the trailer.
        let left = self.push_continuous(rest, reader)?;
        self.decode(left, reader)
    }

    /// Continuous mode: inflates `bytes` and feeds the plain bytes; returns
    /// the bytes after the end of the deflate stream (the trailer).
    fn push_continuous<'a>(
        &mut self,
        bytes: &'a [u8],
        reader: &mut Reader,
    ) -> Result<&'a [u8], ErrorKind> {
        let State::Continuous { inflater, out } = &mut self.state else {
            return Ok(bytes);
        };
        let mut taken = 0;
        loop {
            let (in_before, out_before) = (inflater.total_in(), inflater.total_out());
            let status = inflater
                .decompress(&bytes[taken..], out, FlushDecompress::None)
                .map_err(|_| ErrorKind::Gzip)?;
            taken += (inflater.total_in() - in_before) as usize;
            let made = (inflater.total_out() - out_before) as usize;
            reader.feed(&out[..made]);
            self.isize = self.isize.wrapping_add(made as u32);
            {
                let mut shared = self.shared.borrow_mut();
                shared.counts.plain_bytes += made as u64;
            }
            if status == Status::StreamEnd {
                self.state = State::Trailer(Vec::with_capacity(8));
                return Ok(&bytes[taken..]);
            }
            if taken == bytes.len() && made < out.len() {
                return Ok(&[]);
            }
            if made == 0 && inflater.total_in() == in_before {
                // No progress with input and room: not a deflate stream.
                return Err(ErrorKind::Gzip);
            }
        }
    }
}

/// Longest gzip header accepted: the fixed part, FEXTRA at its largest,
/// FNAME and FCOMMENT at `MAX_HEADER_TEXT`, FHCRC.
const MAX_HEADER_BYTES: usize = 10 + 2 + 0xffff + 2 * MAX_HEADER_TEXT + 2;

/// FLG bits (RFC 1952 §2.3.1).
const FHCRC: u8 = 1 << 1;
const FEXTRA: u8 = 1 << 2;
const FNAME: u8 = 1 << 3;
const FCOMMENT: u8 = 1 << 4;
const FRESERVED: u8 = 0b1110_0000;

/// Parses a gzip member header (RFC 1952 §2.3) at the start of `buf`:
/// its length when complete, `None` while more bytes are needed.
/// FEXTRA is skipped, FNAME and FCOMMENT are skipped up to
/// `MAX_HEADER_TEXT`, FHCRC is checked; another method than deflate or a
/// reserved flag is an error.
fn parse_header(buf: &[u8]) -> Result<Option<usize>, ErrorKind> {
    let Some(fixed) = buf.get(..10) else {
        // Refuse a wrong magic number at once.
        if buf.iter().zip([0x1f, 0x8b, 8]).any(|(a, b)| *a != b) {
            return Err(ErrorKind::Gzip);
        }
        return Ok(None);
    };
    // ID1 ID2 CM (8: deflate) FLG MTIME(4) XFL OS.
    if fixed[..3] != [0x1f, 0x8b, 8] || fixed[3] & FRESERVED != 0 {
        return Err(ErrorKind::Gzip);
    }
    let flags = fixed[3];
    let mut at = 10;
    if flags & FEXTRA != 0 {
        let Some(xlen) = buf.get(at..at + 2) else {
            return Ok(None);
        };
        at += 2 + usize::from(u16::from_le_bytes([xlen[0], xlen[1]]));
        if buf.len() < at {
            return Ok(None);
        }
    }
    for flag in [FNAME, FCOMMENT] {
        if flags & flag != 0 {
            let field = &buf[at..buf.len().min(at + MAX_HEADER_TEXT)];
            match memchr::memchr(0, field) {
                Some(nul) => at += nul + 1,
                None if field.len() == MAX_HEADER_TEXT => return Err(ErrorKind::Gzip),
                None => return Ok(None),
            }
        }
    }
    if flags & FHCRC != 0 {
        let Some(crc16) = buf.get(at..at + 2) else {
            return Ok(None);
        };
        // The low 16 bits of the CRC-32 of the header before it (§2.3.1).
        let mut crc = flate2::Crc::new();
        crc.update(&buf[..at]);
        if (crc.sum() & 0xffff) as u16 != u16::from_le_bytes([crc16[0], crc16[1]]) {
            return Err(ErrorKind::Gzip);
        }
        at += 2;
    }
    Ok(Some(at))
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use flate2::{Compress, Compression, FlushCompress};

    use super::*;
    use crate::sse::Note;

    const PREFIX: &[u8] = b"\"celer_bench\":\"00ab:";

    /// The 10-byte header a server writes (no flags, OS unknown).
    const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

    /// One segment: a fresh raw compressor, ended by a sync flush.
    fn segment(plain: &[u8], level: Compression) -> Vec<u8> {
        let mut c = Compress::new(level, false);
        sync(&mut c, plain)
    }

    /// `plain` through `c`, ended by a sync flush.
    fn sync(c: &mut Compress, plain: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(plain.len() + 1024);
        let start = c.total_in();
        // All input without flushing, then one sync flush.
        while ((c.total_in() - start) as usize) < plain.len() {
            let taken = (c.total_in() - start) as usize;
            out.reserve(64 * 1024);
            c.compress_vec(&plain[taken..], &mut out, FlushCompress::None)
                .unwrap();
        }
        loop {
            out.reserve(64 * 1024);
            c.compress_vec(&[], &mut out, FlushCompress::Sync).unwrap();
            if out.len() < out.capacity() {
                break;
            }
        }
        assert!(out.ends_with(&SYNC_FLUSH));
        out
    }

    /// The end of a member: an empty final block and the trailer.
    fn trailer(plain: &[u8]) -> Vec<u8> {
        let mut crc = flate2::Crc::new();
        crc.update(plain);
        let mut out = FINAL_BLOCK.to_vec();
        out.extend_from_slice(&crc.sum().to_le_bytes());
        out.extend_from_slice(&(plain.len() as u32).to_le_bytes());
        out
    }

    /// The events of a stream: a retry preamble, the current version, a
    /// heartbeat, updates with the marker (one with CR LF line ends).
    fn events() -> Vec<Vec<u8>> {
        let long = "y".repeat(3000);
        vec![
            b"retry: 2000\n".to_vec(),
            format!("id: 0\ndata: {{\"rows\":[1,2,3],\"long\":\"{long}\"}}\n\n").into_bytes(),
            b": heartbeat\n\n".to_vec(),
            format!("id: 1\ndata: {{\"celer_bench\":\"00ab:1:5\",\"long\":\"{long}\"}}\n\n")
                .into_bytes(),
            b"id: 2\r\ndata: {\"celer_bench\":\"00ab:2:5\",\"n\":2}\r\n\r\n".to_vec(),
            format!("id: 3\ndata: {{\"celer_bench\":\"00ab:3:5\",\"long\":\"{long}x\"}}\n\n")
                .into_bytes(),
        ]
    }

    /// A gzip stream of independent segments, `end`ed with the trailer.
    fn independent(events: &[Vec<u8>], end: bool) -> Vec<u8> {
        let mut out = HEADER.to_vec();
        for e in events {
            out.extend(segment(e, Compression::default()));
        }
        if end {
            out.extend(trailer(&events.concat()));
        }
        out
    }

    /// A gzip stream from one continuous compressor with sync flushes.
    fn dependent(events: &[Vec<u8>]) -> Vec<u8> {
        let mut c = Compress::new(Compression::default(), false);
        let mut out = HEADER.to_vec();
        for e in events {
            out.extend(sync(&mut c, e));
        }
        out.extend(trailer(&events.concat()));
        out
    }

    fn cache() -> Rc<RefCell<Segments>> {
        Rc::new(RefCell::new(Segments::new(Arc::from(PREFIX))))
    }

    /// Arrivals (`Some(seq)`) and readiness (`None`) a reader notes.
    fn notes(rx: &mpsc::Receiver<Note>) -> Vec<Option<u32>> {
        rx.try_iter()
            .map(|note| match note {
                Note::Arrived { seq, .. } => Some(seq),
                _ => None,
            })
            .collect()
    }

    /// Feeds `stream` in pieces of `chunk` through a gzip body on `shared`:
    /// the notes and how the body ended.
    fn read(
        stream: &[u8],
        chunk: usize,
        shared: &Rc<RefCell<Segments>>,
    ) -> (Vec<Option<u32>>, Result<(), ErrorKind>) {
        let (tx, rx) = mpsc::channel();
        let mut reader = Reader::new(Arc::from(PREFIX), tx);
        let mut body = GzipBody::new(shared.clone());
        let mut ended = Ok(());
        for part in stream.chunks(chunk) {
            ended = body.push(part, &mut reader);
            if ended.is_err() {
                break;
            }
        }
        if ended.is_ok() {
            ended = body.finish(&mut reader);
        }
        (notes(&rx), ended)
    }

    /// The notes of the plain events.
    fn plain_notes(events: &[Vec<u8>]) -> Vec<Option<u32>> {
        let (tx, rx) = mpsc::channel();
        let mut reader = Reader::new(Arc::from(PREFIX), tx);
        reader.feed(&events.concat());
        notes(&rx)
    }

    #[test]
    fn a_gzip_stream_split_anywhere_gives_the_plain_arrivals() {
        let events = events();
        let want = plain_notes(&events);
        assert_eq!(want, vec![None, Some(1), Some(2), Some(3)]);
        let stream = independent(&events, true);
        for chunk in (1..=9).chain([64, 1000, stream.len()]) {
            let shared = cache();
            assert_eq!(
                read(&stream, chunk, &shared),
                (want.clone(), Ok(())),
                "in pieces of {chunk}"
            );
            let counts = shared.borrow().counts;
            assert_eq!(counts.continuous, 0, "in pieces of {chunk}");
            assert_eq!(counts.segments, events.len() as u64);
            assert_eq!(counts.compressed_bytes, stream.len() as u64);
        }
    }

    #[test]
    fn subscribers_share_one_inflate_per_segment() {
        let events = events();
        let want = plain_notes(&events);
        let stream = independent(&events, false);
        let shared = cache();
        for _ in 0..3 {
            assert_eq!(read(&stream, 100, &shared), (want.clone(), Ok(())));
        }
        let counts = shared.borrow().counts;
        assert_eq!(counts.streams, 3);
        assert_eq!(counts.segments, 3 * events.len() as u64);
        assert_eq!(counts.inflated, events.len() as u64);
        assert_eq!(counts.continuous, 0);
        assert_eq!(counts.plain_bytes, 3 * events.concat().len() as u64);
    }

    #[test]
    fn dependent_segments_are_read_by_a_continuous_inflater() {
        let events = events();
        let want = plain_notes(&events);
        let stream = dependent(&events);
        for chunk in [1, 7, stream.len()] {
            let shared = cache();
            assert_eq!(read(&stream, chunk, &shared), (want.clone(), Ok(())));
            // The later events refer to the first one: the subscriber
            // switched to its own inflater, its window restored.
            assert_eq!(shared.borrow().counts.continuous, 1);
        }
    }

    #[test]
    fn the_fallback_restores_the_window_from_many_pieces() {
        // Long events (more than the window in all), then more tiny ones
        // than the history keeps apart, each an independent segment; then
        // one from a compressor that saw them all, referring back into
        // the last 32 KiB.
        let mut events: Vec<Vec<u8>> = (0..10)
            .map(|i| {
                let body: String = (0..700)
                    .map(|j| format!("{:x}", (i * 7919 + j) % 4096))
                    .collect();
                format!("data: {{\"n\":{i},\"b\":\"{body}\"}}\n\n").into_bytes()
            })
            .collect();
        events.extend((0..HISTORY_PIECES as u32 + 40).map(|i| format!(": {i}\n\n").into_bytes()));
        let seen = events.concat();
        let last = &events[9];
        let mut later = b"data: {\"celer_bench\":\"00ab:1:5\",\"again\":".to_vec();
        later.extend_from_slice(&last[6..last.len() - 2]);
        later.extend_from_slice(b"}\n\n");
        let mut c = Compress::new(Compression::default(), false);
        let _ = sync(&mut c, &seen);
        let dependent = sync(&mut c, &later);
        // It does refer back: alone it does not inflate.
        assert!(matches!(inflate_alone(&dependent), Alone::Continuous));
        let mut stream = independent(&events, false);
        stream.extend(dependent);
        events.push(later);
        stream.extend(trailer(&events.concat()));
        let want = plain_notes(&events);
        assert_eq!(want.last(), Some(&Some(1)));
        let shared = cache();
        assert_eq!(read(&stream, 999, &shared), (want, Ok(())));
        assert_eq!(shared.borrow().counts.continuous, 1);
    }

    #[test]
    fn the_sync_pattern_inside_compressed_data_is_no_boundary() {
        // Stored blocks carry the plain bytes as they are.
        let mut event = b"data: {\"celer_bench\":\"00ab:1:5\",\"b\":\"".to_vec();
        event.extend_from_slice(&[0, 0, 0xff, 0xff, b'z', 0, 0, 0xff, 0xff]);
        event.extend_from_slice(b"\"}\n\n");
        let events = vec![b"data: {}\n\n".to_vec(), event];
        let want = plain_notes(&events);
        let mut stream = HEADER.to_vec();
        for e in &events {
            stream.extend(segment(e, Compression::none()));
        }
        stream.extend(trailer(&events.concat()));
        for chunk in [1, 5, stream.len()] {
            let shared = cache();
            assert_eq!(read(&stream, chunk, &shared), (want.clone(), Ok(())));
            let counts = shared.borrow().counts;
            assert_eq!(counts.continuous, 0);
            assert_eq!(counts.segments, 2);
            // Two segments and the two false candidates inside the second.
            assert_eq!(counts.inflated, 4);
        }
    }

    #[test]
    fn an_event_split_over_segments_is_fed_not_replayed() {
        let events = events();
        let want = plain_notes(&events);
        let all = events.concat();
        // Segments cut mid-line.
        let cut: Vec<Vec<u8>> = all.chunks(777).map(<[u8]>::to_vec).collect();
        let stream = independent(&cut, true);
        let shared = cache();
        assert_eq!(read(&stream, 3, &shared), (want, Ok(())));
        assert_eq!(shared.borrow().counts.continuous, 0);
    }

    #[test]
    fn a_long_segment_goes_to_a_continuous_inflater() {
        // Over MAX_SEGMENT_BYTES compressed before its sync flush (read in
        // pieces well under the excess).
        let long = "x".repeat(MAX_SEGMENT_BYTES + 100_000);
        let events = vec![
            b"data: {}\n\n".to_vec(),
            format!("data: {{\"celer_bench\":\"00ab:1:5\",\"l\":\"{long}\"}}\n\n").into_bytes(),
            b"data: {\"celer_bench\":\"00ab:2:5\"}\n\n".to_vec(),
        ];
        let want = plain_notes(&events);
        let mut stream = HEADER.to_vec();
        for (i, e) in events.iter().enumerate() {
            let level = if i == 1 {
                Compression::none()
            } else {
                Compression::default()
            };
            stream.extend(segment(e, level));
        }
        stream.extend(trailer(&events.concat()));
        let shared = cache();
        assert_eq!(read(&stream, 16 * 1024, &shared), (want, Ok(())));
        assert_eq!(shared.borrow().counts.continuous, 1);
    }

    #[test]
    fn a_segment_too_large_to_cache_goes_to_a_continuous_inflater() {
        let long = "z".repeat(MAX_SEGMENT_PLAIN + 10);
        let events = vec![
            b"data: {}\n\n".to_vec(),
            format!("data: {{\"celer_bench\":\"00ab:1:5\",\"l\":\"{long}\"}}\n\n").into_bytes(),
            b"data: {\"celer_bench\":\"00ab:2:5\"}\n\n".to_vec(),
        ];
        let want = plain_notes(&events);
        let shared = cache();
        assert_eq!(
            read(&independent(&events, true), 4096, &shared),
            (want, Ok(()))
        );
        let counts = shared.borrow().counts;
        assert_eq!(counts.continuous, 1);
        assert_eq!(counts.plain_bytes, events.concat().len() as u64);
    }

    #[test]
    fn the_cache_keeps_its_most_recent_entries() {
        let events: Vec<Vec<u8>> = (0..=CACHE_ENTRIES as u32)
            .map(|i| format!("data: {{\"celer_bench\":\"00ab:{i}:5\"}}\n\n").into_bytes())
            .collect();
        let shared = cache();
        let _ = read(&independent(&events, false), 50, &shared);
        assert_eq!(shared.borrow().entries.len(), CACHE_ENTRIES);
        assert_eq!(shared.borrow().counts.inflated, events.len() as u64);
        // The first was evicted, the last is still there.
        let _ = read(&independent(&events[..1], false), 50, &shared);
        let _ = read(&independent(&events[CACHE_ENTRIES..], false), 50, &shared);
        assert_eq!(shared.borrow().counts.inflated, events.len() as u64 + 1);
    }

    #[test]
    fn header_fields_are_skipped_and_checked() {
        let events = events();
        let want = plain_notes(&events);
        let body = &independent(&events, true)[10..];
        let flagged = |flags: u8, hcrc_ok: bool| {
            let mut h = vec![0x1f, 0x8b, 8, flags, 1, 2, 3, 4, 0, 3];
            if flags & FEXTRA != 0 {
                h.extend_from_slice(&[4, 0, b'A', b'p', 0, 0]);
            }
            if flags & FNAME != 0 {
                h.extend_from_slice(b"doc.json\0");
            }
            if flags & FCOMMENT != 0 {
                h.extend_from_slice(b"a comment\0");
            }
            if flags & FHCRC != 0 {
                let mut crc = flate2::Crc::new();
                crc.update(&h);
                let sum = (crc.sum() as u16) ^ u16::from(!hcrc_ok);
                h.extend_from_slice(&sum.to_le_bytes());
            }
            h.extend_from_slice(body);
            h
        };
        for flags in [
            FEXTRA,
            FNAME,
            FCOMMENT,
            FHCRC,
            FEXTRA | FNAME | FCOMMENT | FHCRC,
        ] {
            for chunk in [1, 1000] {
                assert_eq!(
                    read(&flagged(flags, true), chunk, &cache()),
                    (want.clone(), Ok(())),
                    "flags {flags:#x}"
                );
            }
        }
        let refused = |stream: &[u8]| read(stream, 1, &cache());
        assert_eq!(
            refused(&flagged(FHCRC, false)),
            (vec![], Err(ErrorKind::Gzip))
        );
        assert_eq!(
            refused(&flagged(1 << 5, true)),
            (vec![], Err(ErrorKind::Gzip))
        );
        let mut method = flagged(0, true);
        method[2] = 7;
        assert_eq!(refused(&method), (vec![], Err(ErrorKind::Gzip)));
        assert_eq!(refused(b"data: {}\n\n"), (vec![], Err(ErrorKind::Gzip)));
        let mut name = flagged(0, true)[..10].to_vec();
        name[3] = FNAME;
        name.extend(std::iter::repeat_n(b'n', MAX_HEADER_TEXT));
        assert_eq!(refused(&name), (vec![], Err(ErrorKind::Gzip)));
    }

    #[test]
    fn a_corrupt_stream_is_an_error() {
        let events = events();
        // An invalid block type (3, RFC 1951 §3.2.3) in the second segment.
        let mut stream = independent(&events[..1], false);
        stream.extend_from_slice(&[0x07, 1, 2, 3, 0, 0, 0xff, 0xff]);
        stream.extend(independent(&events[1..], true).split_off(10));
        for chunk in [1, stream.len()] {
            assert_eq!(
                read(&stream, chunk, &cache()),
                (vec![], Err(ErrorKind::Gzip))
            );
        }
        // A wrong ISIZE.
        let mut stream = independent(&events, true);
        let last = stream.len() - 1;
        stream[last] ^= 1;
        let (notes, ended) = read(&stream, 100, &cache());
        assert_eq!(notes, plain_notes(&events));
        assert_eq!(ended, Err(ErrorKind::Gzip));
        // Bytes after the member.
        let mut stream = independent(&events, true);
        stream.push(0);
        assert_eq!(read(&stream, 100, &cache()).1, Err(ErrorKind::Gzip));
        // Cut short: the server closed the stream, not an error.
        let stream = independent(&events, true);
        let (notes, ended) = read(&stream[..stream.len() - 5], 100, &cache());
        assert_eq!(notes, plain_notes(&events));
        assert_eq!(ended, Ok(()));
    }

    #[test]
    fn only_gzip_is_decoded() {
        let head = |fields: &str| format!("HTTP/1.1 200 OK\r\n{fields}\r\n").into_bytes();
        assert_eq!(content_coding(&head("")), Ok(Coding::Identity));
        let identity = head("Content-Encoding: identity\r\n");
        assert_eq!(content_coding(&identity), Ok(Coding::Identity));
        for coding in ["gzip", "GZip", "x-gzip", "identity, gzip"] {
            let h = head(&format!("Content-Encoding: {coding}\r\n"));
            assert_eq!(content_coding(&h), Ok(Coding::Gzip), "{coding}");
        }
        for coding in ["br", "deflate", "gzip, br", "gzip, gzip", "zstd"] {
            let h = head(&format!("Content-Encoding: {coding}\r\n"));
            assert_eq!(content_coding(&h), Err(ErrorKind::Encoding), "{coding}");
        }
        let twice = head("Content-Encoding: gzip\r\nContent-Encoding: gzip\r\n");
        assert_eq!(content_coding(&twice), Err(ErrorKind::Encoding));
    }
}
