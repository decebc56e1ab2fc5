//! A connection's whole state: the streams, both flow-control directions,
//! the HPACK contexts, the output not yet written, and what each frame the
//! client sends does to them (RFC 9113 §5 and §6).
//!
//! Errors follow RFC 9113 §5.4: a frame that breaks the connection's rules
//! returns its [`Reason`] and the connection sends GOAWAY and ends; one that
//! breaks a stream's rules resets that stream (`RST_STREAM`) and the
//! connection goes on. Every header block is decoded, even one whose stream
//! is refused, so the HPACK table stays the one the client keeps.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, StatusCode, Uri, Version};

use super::frame::{self, Head, flag, kind, setting};
use super::handles::{RecvStream, SendResponse};
use super::{Error, Protocol, Reason};
use crate::http2::hpack::{Decoder, Encoder, Field, Pseudo};

/// The state every handle and the connection share.
pub(super) type Shared = Mutex<Core>;

/// Locks the shared state (a panic while it was held leaves it usable: the
/// state is consistent between statements that touch it).
pub(super) fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Core> {
    shared
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Streams the server reset that it keeps in mind, so frames the client
/// sent before it saw the reset are ignored rather than taken for errors.
const RESET_MEMORY: usize = 128;

/// Streams the client may reset before the server has taken them
/// (before any handler ran) before the connection is closed with
/// ENHANCE_YOUR_CALM: the cheap half of a rapid-reset attack, which the
/// handlers' own count (`conn`) never sees.
const MAX_PENDING_RESETS: u32 = 20;

/// The PING payload of a graceful shutdown's first GOAWAY.
const DRAIN_PING: [u8; 8] = *b"celer-gw";

/// Output bytes past which the connection stops framing queued DATA and
/// stops reading the client's frames until the output drains: a client that
/// does not read makes the server write, and buffer, no more.
pub(super) const OUT_HIGH: usize = 64 * 1024;

/// Slack over the header list limit that a compressed header block may
/// take before it is taken for a flood (HPACK adds at most a few bytes per
/// field, and the list limit counts 32 per field).
const BLOCK_SLACK: usize = 1024;

/// The server's own settings, from the limits.
#[derive(Debug, Clone)]
pub(super) struct Settings {
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub(super) max_concurrent_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: each stream's receive window.
    pub(super) stream_window: u32,
    /// The connection's receive window (raised from 65,535 by a
    /// WINDOW_UPDATE at the start).
    pub(super) connection_window: u32,
    /// SETTINGS_MAX_FRAME_SIZE.
    pub(super) max_frame_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE.
    pub(super) max_header_list_size: u32,
    /// Response bytes one stream may queue beyond what the windows let go.
    pub(super) send_buffer: usize,
    /// SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 8441).
    pub(super) connect_protocol: bool,
}

/// A request accepted and not yet handed to the connection's owner.
pub(crate) type Accepted = (Request<RecvStream>, SendResponse);

/// Where a stream's sending stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sending {
    /// No response head yet.
    Head,
    /// Head sent; body going.
    Body,
    /// END_STREAM queued (it may still wait behind queued DATA).
    Ended,
}

/// One stream the client opened and the server has not forgotten.
struct Stream {
    /// The client may still send (no END_STREAM, no reset).
    recv_open: bool,
    /// Bytes the client may still send before a WINDOW_UPDATE.
    recv_window: i64,
    /// Bytes consumed and not yet given back by a WINDOW_UPDATE.
    recv_release: u32,
    /// DATA received and not yet read.
    recv_buf: VecDeque<Bytes>,
    /// Trailers received and not yet read.
    trailers: Option<HeaderMap>,
    /// Bytes the request's `content-length` still expects.
    remaining: Option<u64>,
    /// The reader waiting for data.
    recv_waker: Option<Waker>,
    /// A [`RecvStream`] exists.
    recv_handle: bool,
    sending: Sending,
    /// Bytes the client's window lets this stream send.
    send_window: i64,
    /// DATA queued behind the windows, oldest first.
    queue: VecDeque<Bytes>,
    /// Bytes in `queue`.
    queued: usize,
    /// Trailers to send once `queue` is empty.
    queued_trailers: Option<HeaderMap>,
    /// Capacity the sender asked for.
    reserved: usize,
    /// The sender waiting for capacity.
    send_waker: Option<Waker>,
    /// [`SendResponse`] and [`SendStream`](super::SendStream) handles alive.
    send_handles: u8,
    /// In the connection's list of streams with DATA to frame.
    in_ready: bool,
    /// Reset by either side: (reason, by the server).
    reset: Option<(Reason, bool)>,
    /// A handle waiting to hear of a reset.
    reset_waker: Option<Waker>,
    /// Counted against the concurrent-stream limit.
    counted: bool,
    /// Handed to the connection's owner (out of the accept queue).
    taken: bool,
    /// The request's `:authority` became its `Host` field.
    host_added: bool,
}

impl Stream {
    /// Every queued byte and the end have been framed into the output.
    fn send_done(&self) -> bool {
        self.sending == Sending::Ended && self.queue.is_empty() && self.queued_trailers.is_none()
    }

    /// Wakes every handle waiting on the stream.
    fn wake_all(&mut self) {
        for waker in [
            self.recv_waker.take(),
            self.send_waker.take(),
            self.reset_waker.take(),
        ]
        .into_iter()
        .flatten()
        {
            waker.wake();
        }
    }
}

/// A header block still arriving in CONTINUATION frames.
struct Partial {
    stream: u32,
    end_stream: bool,
    bad_priority: bool,
    block: BytesMut,
}

/// The streams a connection keeps, by id. A hash table: a vector
/// searched by id took as many instructions at one stream in flight and
/// a quarter more at a hundred (decision 037).
#[derive(Default)]
struct Streams(HashMap<u32, Stream, BuildHasherDefault<IdHasher>>);

impl std::ops::Deref for Streams {
    type Target = HashMap<u32, Stream, BuildHasherDefault<IdHasher>>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Streams {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// Hashes a stream id by one multiply: ids are distinct small integers,
/// mostly sequential, and need no defence against chosen collisions at
/// the concurrent-stream limit's few hundred entries.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// How a stream id stands.
enum Lookup {
    /// A stream the server keeps.
    Live,
    /// Above every id the client has used.
    Idle,
    /// Used and forgotten; true when the server reset it.
    Closed(bool),
}

/// A connection's state.
pub(super) struct Core {
    /// The server's settings.
    pub(super) local: Settings,
    /// The client acknowledged the server's SETTINGS.
    settings_acked: bool,
    /// The client's first SETTINGS arrived (it must come first).
    pub(super) settings_seen: bool,
    /// The client's SETTINGS_INITIAL_WINDOW_SIZE.
    peer_window: u32,
    /// The client's SETTINGS_MAX_FRAME_SIZE.
    peer_max_frame: usize,
    encoder: Encoder,
    decoder: Decoder,
    streams: Streams,
    /// Frames to write, in order.
    pub(super) out: BytesMut,
    /// Requests accepted and not yet taken.
    pub(super) accepted: VecDeque<Accepted>,
    /// Streams with queued DATA, in turn.
    ready: VecDeque<u32>,
    /// The client's connection window: bytes all streams may still send.
    send_window: i64,
    /// Bytes queued in all streams.
    queued: usize,
    /// Bytes the client may still send on the connection.
    recv_window: i64,
    /// Bytes consumed on the connection and not yet given back.
    recv_release: u32,
    /// The highest stream id the client has used.
    max_seen: u32,
    /// The highest stream id the server accepted (GOAWAY's last stream).
    last_accepted: u32,
    /// Streams counted against the concurrent-stream limit.
    active: u32,
    /// Streams the server reset lately, oldest first.
    recently_reset: VecDeque<u32>,
    /// Streams the client reset before they were taken.
    pending_resets: u32,
    /// A graceful shutdown's first GOAWAY (last stream 2^31-1) is out and
    /// its PING not yet acknowledged.
    draining: bool,
    partial: Option<Partial>,
    /// The GOAWAY the server sent, if any.
    pub(super) goaway: Option<Reason>,
    /// The client sent GOAWAY: no more streams will come.
    pub(super) peer_gone: bool,
    /// The connection failed or ended: what every handle now gets.
    pub(super) failed: Option<Error>,
    /// The connection's task, to wake when a handle queues output.
    waker: Option<Waker>,
    /// `waker` was woken since the connection last ran.
    notified: bool,
}

impl Core {
    /// A connection's state before the client's preface.
    pub(super) fn new(local: Settings) -> Core {
        let recv_window = i64::from(local.connection_window.max(frame::DEFAULT_WINDOW));
        Core {
            local,
            settings_acked: false,
            settings_seen: false,
            peer_window: frame::DEFAULT_WINDOW,
            peer_max_frame: frame::DEFAULT_MAX_FRAME_SIZE as usize,
            encoder: Encoder::new(),
            decoder: Decoder::new(4096),
            streams: Streams::default(),
            out: BytesMut::new(),
            accepted: VecDeque::new(),
            ready: VecDeque::new(),
            send_window: i64::from(frame::DEFAULT_WINDOW),
            queued: 0,
            recv_window,
            recv_release: 0,
            max_seen: 0,
            last_accepted: 0,
            active: 0,
            recently_reset: VecDeque::new(),
            pending_resets: 0,
            draining: false,
            partial: None,
            goaway: None,
            peer_gone: false,
            failed: None,
            waker: None,
            notified: false,
        }
    }

    /// The server's SETTINGS and the connection window's raise: the first
    /// bytes the server sends.
    pub(super) fn start(&mut self) {
        let l = &self.local;
        let mut values = vec![
            (setting::MAX_CONCURRENT_STREAMS, l.max_concurrent_streams),
            (setting::INITIAL_WINDOW_SIZE, l.stream_window),
            (setting::MAX_FRAME_SIZE, l.max_frame_size),
            (setting::MAX_HEADER_LIST_SIZE, l.max_header_list_size),
            (setting::ENABLE_PUSH, 0),
        ];
        if l.connect_protocol {
            values.push((setting::ENABLE_CONNECT_PROTOCOL, 1));
        }
        frame::put_settings(&mut self.out, &values);
        let raise = self
            .local
            .connection_window
            .saturating_sub(frame::DEFAULT_WINDOW);
        if raise > 0 {
            frame::put_window_update(&mut self.out, 0, raise);
        }
    }

    // ---- the connection's task ----

    /// Keeps the waker of the connection's task (from its latest poll).
    pub(super) fn register(&mut self, waker: &Waker) {
        self.notified = false;
        match &self.waker {
            Some(w) if w.will_wake(waker) => {}
            _ => self.waker = Some(waker.clone()),
        }
    }

    /// A handle queued output or freed room: the connection's task runs.
    fn notify(&mut self) {
        if !self.notified {
            self.notified = true;
            if let Some(waker) = &self.waker {
                waker.wake_by_ref();
            }
        }
    }

    /// True when no stream holds the connection open.
    pub(super) fn idle(&self) -> bool {
        self.active == 0 && self.accepted.is_empty()
    }

    /// True when the read side should wait: the output is backed up, or
    /// enough requests wait to be taken.
    pub(super) fn backed_up(&self) -> bool {
        self.out.len() >= OUT_HIGH
            || self.accepted.len() >= self.local.max_concurrent_streams as usize
    }

    // ---- connection-wide ends ----

    /// Ends the connection with `reason`: GOAWAY, every stream failed.
    pub(super) fn fail(&mut self, reason: Reason) {
        if self.failed.is_some() {
            return;
        }
        if self.goaway.is_none() || reason != Reason::NO_ERROR {
            frame::put_goaway(&mut self.out, self.last_accepted, reason);
        }
        self.goaway = Some(reason);
        self.close_all(Error::go_away(reason));
    }

    /// The transport is gone (or failed): every stream fails with `err`.
    pub(super) fn close_all(&mut self, err: Error) {
        self.failed = Some(err);
        self.partial = None;
        for stream in self.streams.values_mut() {
            stream.queue.clear();
            stream.queued_trailers = None;
            if stream.counted {
                stream.counted = false;
            }
            stream.wake_all();
        }
        self.active = 0;
        self.queued = 0;
        self.ready.clear();
        self.streams
            .retain(|_, s| s.send_handles > 0 || s.recv_handle);
    }

    /// GOAWAY with NO_ERROR: streams accepted so far finish; later ones are
    /// ignored.
    ///
    /// In two steps (RFC 9113 §6.8): a GOAWAY naming the largest stream id
    /// and a PING; once the PING comes back, every stream the client sent
    /// before seeing the GOAWAY has arrived, and a second GOAWAY names the
    /// last one accepted.
    pub(super) fn graceful_shutdown(&mut self) {
        if self.goaway.is_none() && self.failed.is_none() && !self.draining {
            frame::put_goaway(&mut self.out, 0x7fff_ffff, Reason::NO_ERROR);
            frame::put_ping(&mut self.out, &DRAIN_PING);
            self.draining = true;
            self.notify();
        }
    }

    /// The shutdown's PING came back: the final GOAWAY.
    fn drained(&mut self) {
        if self.draining && self.goaway.is_none() && self.failed.is_none() {
            self.draining = false;
            frame::put_goaway(&mut self.out, self.last_accepted, Reason::NO_ERROR);
            self.goaway = Some(Reason::NO_ERROR);
        }
    }

    /// GOAWAY with `reason`, at once: every stream fails.
    pub(super) fn abrupt_shutdown(&mut self, reason: Reason) {
        self.fail(reason);
        self.notify();
    }

    // ---- frames from the client ----

    /// Acts on one frame. `Err` is a connection error.
    pub(super) fn on_frame(
        &mut self,
        shared: &Arc<Shared>,
        head: Head,
        payload: &[u8],
    ) -> Result<(), Reason> {
        if !self.settings_seen {
            if head.kind != kind::SETTINGS || head.has(flag::ACK) {
                return Err(Reason::PROTOCOL_ERROR);
            }
            self.settings_seen = true;
        }
        if let Some(partial) = &self.partial {
            if head.kind != kind::CONTINUATION || head.stream != partial.stream {
                return Err(Reason::PROTOCOL_ERROR);
            }
        }
        match head.kind {
            kind::DATA => self.on_data(head, payload),
            kind::HEADERS => self.on_headers(shared, head, payload),
            kind::PRIORITY => self.on_priority(head, payload),
            kind::RST_STREAM => self.on_reset(head, payload),
            kind::SETTINGS => self.on_settings(head, payload),
            kind::PUSH_PROMISE => Err(Reason::PROTOCOL_ERROR),
            kind::PING => self.on_ping(head, payload),
            kind::GOAWAY => self.on_goaway(head, payload),
            kind::WINDOW_UPDATE => self.on_window_update(head, payload),
            kind::CONTINUATION => self.on_continuation(shared, head, payload),
            // RFC 9113 §4.1: unknown types are ignored.
            _ => Ok(()),
        }
    }

    /// Where stream `id` stands.
    fn lookup(&self, id: u32) -> Lookup {
        if self.streams.contains_key(&id) {
            Lookup::Live
        } else if id > self.max_seen {
            Lookup::Idle
        } else {
            Lookup::Closed(self.recently_reset.contains(&id))
        }
    }

    fn on_data(&mut self, head: Head, payload: &[u8]) -> Result<(), Reason> {
        let id = head.stream;
        if id == 0 {
            return Err(Reason::PROTOCOL_ERROR);
        }
        let data = unpad(head, payload)?;
        let len = payload.len();
        // RFC 9113 §6.9: every DATA counts against the connection's window,
        // whatever becomes of its stream.
        if len as i64 > self.recv_window {
            return Err(Reason::FLOW_CONTROL_ERROR);
        }
        self.recv_window -= len as i64;
        let mut release = len - data.len();
        let outcome = match self.lookup(id) {
            Lookup::Idle => return Err(Reason::PROTOCOL_ERROR),
            Lookup::Closed(by_us) => {
                self.release(None, len);
                return if by_us {
                    Ok(())
                } else {
                    Err(Reason::STREAM_CLOSED)
                };
            }
            Lookup::Live => {
                let stream = self.streams.get_mut(&id).expect("live");
                match stream.reset {
                    Some((_, true)) => {
                        release = len;
                        Ok(None)
                    }
                    Some((_, false)) => Err(Reason::STREAM_CLOSED),
                    None if !stream.recv_open => {
                        release = len;
                        Ok(Some(Reason::STREAM_CLOSED))
                    }
                    None if len as i64 > stream.recv_window => {
                        release = len;
                        Ok(Some(Reason::FLOW_CONTROL_ERROR))
                    }
                    None => {
                        stream.recv_window -= len as i64;
                        let over = match stream.remaining.as_mut() {
                            Some(left) => match left.checked_sub(data.len() as u64) {
                                Some(rest) => {
                                    *left = rest;
                                    head.has(flag::END_STREAM) && rest != 0
                                }
                                None => true,
                            },
                            None => false,
                        };
                        if over {
                            // RFC 9113 §8.1.1: the body disagrees with its
                            // content-length: malformed.
                            release = len;
                            Ok(Some(Reason::PROTOCOL_ERROR))
                        } else {
                            if !data.is_empty() {
                                if stream.recv_handle {
                                    stream.recv_buf.push_back(Bytes::copy_from_slice(data));
                                } else {
                                    release += data.len();
                                }
                            }
                            if head.has(flag::END_STREAM) {
                                stream.recv_open = false;
                            }
                            if let Some(waker) = stream.recv_waker.take() {
                                waker.wake();
                            }
                            Ok(None)
                        }
                    }
                }
            }
        };
        match outcome {
            Err(reason) => {
                self.release(None, len);
                Err(reason)
            }
            Ok(reset) => {
                if release > 0 {
                    self.release(Some(id), release);
                }
                match reset {
                    Some(reason) => self.reset_stream(id, reason),
                    None => self.settle(id),
                }
                Ok(())
            }
        }
    }

    fn on_headers(
        &mut self,
        shared: &Arc<Shared>,
        head: Head,
        payload: &[u8],
    ) -> Result<(), Reason> {
        let id = head.stream;
        if id == 0 {
            return Err(Reason::PROTOCOL_ERROR);
        }
        let mut body = unpad(head, payload)?;
        let mut bad_priority = false;
        if head.has(flag::PRIORITY) {
            if body.len() < 5 {
                return Err(Reason::FRAME_SIZE_ERROR);
            }
            let dependency = u32::from_be_bytes([body[0], body[1], body[2], body[3]]) & 0x7fff_ffff;
            bad_priority = dependency == id;
            body = &body[5..];
        }
        let end_stream = head.has(flag::END_STREAM);
        if head.has(flag::END_HEADERS) {
            return self.on_block(
                shared,
                id,
                end_stream,
                bad_priority,
                Bytes::copy_from_slice(body),
            );
        }
        let mut block = BytesMut::with_capacity(body.len() * 2);
        block.extend_from_slice(body);
        self.partial = Some(Partial {
            stream: id,
            end_stream,
            bad_priority,
            block,
        });
        self.check_block_size()
    }

    fn on_continuation(
        &mut self,
        shared: &Arc<Shared>,
        head: Head,
        payload: &[u8],
    ) -> Result<(), Reason> {
        let Some(partial) = self.partial.as_mut() else {
            return Err(Reason::PROTOCOL_ERROR);
        };
        partial.block.extend_from_slice(payload);
        self.check_block_size()?;
        if head.has(flag::END_HEADERS) {
            let partial = self.partial.take().expect("checked above");
            return self.on_block(
                shared,
                partial.stream,
                partial.end_stream,
                partial.bad_priority,
                partial.block.freeze(),
            );
        }
        Ok(())
    }

    /// A header block arriving in pieces is cut off once it is longer than
    /// any block within the header list limit (the CONTINUATION flood).
    fn check_block_size(&self) -> Result<(), Reason> {
        let max = self.local.max_header_list_size as usize * 2 + BLOCK_SLACK;
        match &self.partial {
            Some(p) if p.block.len() > max => Err(Reason::ENHANCE_YOUR_CALM),
            _ => Ok(()),
        }
    }

    /// A whole header block on stream `id`: a request, or trailers.
    fn on_block(
        &mut self,
        shared: &Arc<Shared>,
        id: u32,
        end_stream: bool,
        bad_priority: bool,
        block: Bytes,
    ) -> Result<(), Reason> {
        if id.is_multiple_of(2) {
            return Err(Reason::PROTOCOL_ERROR);
        }
        let max_list = self.local.max_header_list_size as usize;
        // Decoded straight into what the block is for: a request's head,
        // trailers, or nothing (a block on a stream already reset, decoded
        // only to keep the table in step).
        match self.lookup(id) {
            Lookup::Idle => {
                let mut head = RequestHead::default();
                let decoded = self
                    .decoder
                    .decode(block, max_list, &mut |field| head.field(field))
                    .map_err(|_| Reason::COMPRESSION_ERROR)?;
                self.max_seen = id;
                self.open(shared, id, end_stream, bad_priority, decoded, head);
                Ok(())
            }
            Lookup::Live => {
                let mut map = HeaderMap::new();
                let mut pseudo = false;
                let decoded = self
                    .decoder
                    .decode(block, max_list, &mut |field| match field {
                        Field::Header(name, value) => {
                            map.append(name, value);
                        }
                        Field::Pseudo(..) => pseudo = true,
                    })
                    .map_err(|_| Reason::COMPRESSION_ERROR)?;
                let malformed = decoded.malformed || decoded.oversize || pseudo || bad_priority;
                self.on_trailers(id, end_stream, malformed, map);
                Ok(())
            }
            Lookup::Closed(by_us) => {
                self.decoder
                    .decode(block, max_list, &mut |_| {})
                    .map_err(|_| Reason::COMPRESSION_ERROR)?;
                if by_us {
                    Ok(())
                } else {
                    Err(Reason::STREAM_CLOSED)
                }
            }
        }
    }

    /// Trailers (or a misplaced HEADERS) on a stream the server keeps.
    fn on_trailers(&mut self, id: u32, end_stream: bool, malformed: bool, map: HeaderMap) {
        let stream = self.streams.get_mut(&id).expect("live");
        let reason = match stream.reset {
            Some((_, true)) => return,
            Some((_, false)) => Some(Reason::STREAM_CLOSED),
            None if !stream.recv_open => Some(Reason::STREAM_CLOSED),
            // RFC 9113 §8.1: trailers end the stream; a second HEADERS
            // without END_STREAM is malformed, as is a pseudo-field in one.
            None if !end_stream || malformed => Some(Reason::PROTOCOL_ERROR),
            None if stream.remaining.is_some_and(|n| n != 0) => Some(Reason::PROTOCOL_ERROR),
            None => {
                stream.trailers = Some(map);
                stream.recv_open = false;
                if let Some(waker) = stream.recv_waker.take() {
                    waker.wake();
                }
                None
            }
        };
        match reason {
            Some(reason) => self.reset_stream(id, reason),
            None => self.settle(id),
        }
    }

    /// A new stream: refused, answered 431, or accepted.
    fn open(
        &mut self,
        shared: &Arc<Shared>,
        id: u32,
        end_stream: bool,
        bad_priority: bool,
        decoded: crate::http2::hpack::Decoded,
        head: RequestHead,
    ) {
        if self.goaway.is_some() {
            // Past the GOAWAY's last stream: ignored (the client may retry).
            if !end_stream {
                self.forget(id);
            }
            return;
        }
        if bad_priority || decoded.malformed {
            return self.reset_stream(id, Reason::PROTOCOL_ERROR);
        }
        if decoded.oversize {
            // RFC 9113 §10.5.1: 431, then the rest of the request is
            // declined without error.
            self.put_block(id, true, |encoder, out| {
                encoder.encode_response(
                    StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                    &HeaderMap::new(),
                    out,
                );
            });
            if !end_stream {
                self.reset_stream(id, Reason::NO_ERROR);
            }
            return;
        }
        if self.active >= self.local.max_concurrent_streams {
            return self.reset_stream(id, Reason::REFUSED_STREAM);
        }
        let Some((parts, remaining, host_added)) = head.finish(self.local.connect_protocol) else {
            return self.reset_stream(id, Reason::PROTOCOL_ERROR);
        };
        if end_stream && remaining.is_some_and(|n| n != 0) {
            return self.reset_stream(id, Reason::PROTOCOL_ERROR);
        }
        let stream_window = if self.settings_acked {
            self.local.stream_window
        } else {
            // Until the client has our SETTINGS it may use the default.
            self.local.stream_window.max(frame::DEFAULT_WINDOW)
        };
        self.streams.insert(
            id,
            Stream {
                recv_open: !end_stream,
                recv_window: i64::from(stream_window),
                recv_release: 0,
                recv_buf: VecDeque::new(),
                trailers: None,
                remaining,
                recv_waker: None,
                recv_handle: true,
                sending: Sending::Head,
                send_window: i64::from(self.peer_window),
                queue: VecDeque::new(),
                queued: 0,
                queued_trailers: None,
                reserved: 0,
                send_waker: None,
                send_handles: 1,
                in_ready: false,
                reset: None,
                reset_waker: None,
                counted: true,
                taken: false,
                host_added,
            },
        );
        self.active += 1;
        self.last_accepted = id;
        let request = Request::from_parts(parts, RecvStream::new(shared.clone(), id));
        self.accepted
            .push_back((request, SendResponse::new(shared.clone(), id)));
    }

    fn on_priority(&mut self, head: Head, payload: &[u8]) -> Result<(), Reason> {
        if head.stream == 0 {
            return Err(Reason::PROTOCOL_ERROR);
        }
        if payload.len() != 5 {
            return Err(Reason::FRAME_SIZE_ERROR);
        }
        let dependency =
            u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & 0x7fff_ffff;
        if dependency == head.stream {
            self.reset_stream(head.stream, Reason::PROTOCOL_ERROR);
        }
        Ok(())
    }

    fn on_reset(&mut self, head: Head, payload: &[u8]) -> Result<(), Reason> {
        let id = head.stream;
        if id == 0 {
            return Err(Reason::PROTOCOL_ERROR);
        }
        if payload.len() != 4 {
            return Err(Reason::FRAME_SIZE_ERROR);
        }
        match self.lookup(id) {
            Lookup::Idle => Err(Reason::PROTOCOL_ERROR),
            Lookup::Closed(_) => Ok(()),
            Lookup::Live => {
                let reason = Reason(u32::from_be_bytes([
                    payload[0], payload[1], payload[2], payload[3],
                ]));
                let untaken = self
                    .streams
                    .get(&id)
                    .is_some_and(|s| !s.taken && s.reset.is_none());
                self.close_stream(id, reason, false);
                if untaken {
                    self.pending_resets += 1;
                    if self.pending_resets > MAX_PENDING_RESETS {
                        return Err(Reason::ENHANCE_YOUR_CALM);
                    }
                }
                Ok(())
            }
        }
    }

    fn on_settings(&mut self, head: Head, payload: &[u8]) -> Result<(), Reason> {
        if head.stream != 0 {
            return Err(Reason::PROTOCOL_ERROR);
        }
        if head.has(flag::ACK) {
            if !payload.is_empty() {
                return Err(Reason::FRAME_SIZE_ERROR);
            }
            self.settings_acked = true;
            return Ok(());
        }
        if !payload.len().is_multiple_of(6) {
            return Err(Reason::FRAME_SIZE_ERROR);
        }
        for pair in payload.chunks_exact(6) {
            let id = u16::from_be_bytes([pair[0], pair[1]]);
            let value = u32::from_be_bytes([pair[2], pair[3], pair[4], pair[5]]);
            match id {
                setting::HEADER_TABLE_SIZE => self.encoder.set_max_table_size(value as usize),
                setting::ENABLE_PUSH if value > 1 => return Err(Reason::PROTOCOL_ERROR),
                setting::INITIAL_WINDOW_SIZE => {
                    if i64::from(value) > frame::MAX_WINDOW {
                        return Err(Reason::FLOW_CONTROL_ERROR);
                    }
                    let delta = i64::from(value) - i64::from(self.peer_window);
                    self.peer_window = value;
                    for stream in self.streams.values_mut() {
                        stream.send_window += delta;
                        if stream.send_window > frame::MAX_WINDOW {
                            return Err(Reason::FLOW_CONTROL_ERROR);
                        }
                    }
                    if delta > 0 {
                        self.window_opened(None);
                    }
                }
                setting::MAX_FRAME_SIZE => {
                    if !(frame::DEFAULT_MAX_FRAME_SIZE..=frame::MAX_MAX_FRAME_SIZE).contains(&value)
                    {
                        return Err(Reason::PROTOCOL_ERROR);
                    }
                    self.peer_max_frame = value as usize;
                }
                // Unknown settings, and those a server has no use for.
                _ => {}
            }
        }
        frame::put_settings_ack(&mut self.out);
        Ok(())
    }

    fn on_ping(&mut self, head: Head, payload: &[u8]) -> Result<(), Reason> {
        if head.stream != 0 {
            return Err(Reason::PROTOCOL_ERROR);
        }
        if payload.len() != 8 {
            return Err(Reason::FRAME_SIZE_ERROR);
        }
        if !head.has(flag::ACK) {
            frame::put_ping_ack(&mut self.out, payload);
        } else if payload == DRAIN_PING {
            self.drained();
        }
        Ok(())
    }

    fn on_goaway(&mut self, head: Head, payload: &[u8]) -> Result<(), Reason> {
        if head.stream != 0 {
            return Err(Reason::PROTOCOL_ERROR);
        }
        if payload.len() < 8 {
            return Err(Reason::FRAME_SIZE_ERROR);
        }
        self.peer_gone = true;
        Ok(())
    }

    fn on_window_update(&mut self, head: Head, payload: &[u8]) -> Result<(), Reason> {
        if payload.len() != 4 {
            return Err(Reason::FRAME_SIZE_ERROR);
        }
        let increment = i64::from(
            u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & 0x7fff_ffff,
        );
        let id = head.stream;
        if id == 0 {
            if increment == 0 {
                return Err(Reason::PROTOCOL_ERROR);
            }
            self.send_window += increment;
            if self.send_window > frame::MAX_WINDOW {
                return Err(Reason::FLOW_CONTROL_ERROR);
            }
            self.window_opened(None);
            return Ok(());
        }
        match self.lookup(id) {
            Lookup::Idle => Err(Reason::PROTOCOL_ERROR),
            Lookup::Closed(_) => Ok(()),
            Lookup::Live => {
                let stream = self.streams.get_mut(&id).expect("live");
                if stream.reset.is_some() {
                    return Ok(());
                }
                if increment == 0 {
                    self.reset_stream(id, Reason::PROTOCOL_ERROR);
                    return Ok(());
                }
                stream.send_window += increment;
                if stream.send_window > frame::MAX_WINDOW {
                    self.reset_stream(id, Reason::FLOW_CONTROL_ERROR);
                    return Ok(());
                }
                self.window_opened(Some(id));
                Ok(())
            }
        }
    }

    /// The next accepted request, and those reset before they were taken
    /// (into `stale`, to be dropped once the lock is let go: their handles
    /// lock it when dropped).
    pub(super) fn take(&mut self, stale: &mut Vec<Accepted>) -> Option<Accepted> {
        while let Some(accepted) = self.accepted.pop_front() {
            let id = accepted.1.id();
            match self.streams.get_mut(&id) {
                Some(stream) if stream.reset.is_none() => {
                    stream.taken = true;
                    return Some(accepted);
                }
                _ => stale.push(accepted),
            }
        }
        None
    }

    /// True when stream `id`'s `Host` field was made from `:authority`.
    pub(super) fn host_added(&self, id: u32) -> bool {
        self.streams.get(&id).is_some_and(|s| s.host_added)
    }

    // ---- stream bookkeeping ----

    /// A window grew (`id`'s, or the connection's): streams with queued
    /// DATA get their turn again, and senders waiting for capacity look.
    fn window_opened(&mut self, id: Option<u32>) {
        let wake = |id: u32, stream: &mut Stream, ready: &mut VecDeque<u32>| {
            if stream.queued > 0 && !stream.in_ready {
                stream.in_ready = true;
                ready.push_back(id);
            }
            if stream.reserved > 0 {
                if let Some(waker) = stream.send_waker.take() {
                    waker.wake();
                }
            }
        };
        match id {
            Some(id) => {
                if let Some(stream) = self.streams.get_mut(&id) {
                    wake(id, stream, &mut self.ready);
                }
            }
            None => {
                for (&id, stream) in self.streams.iter_mut() {
                    wake(id, stream, &mut self.ready);
                }
            }
        }
    }

    /// The server resets stream `id` (known or not) with `reason`.
    pub(super) fn reset_stream(&mut self, id: u32, reason: Reason) {
        frame::put_reset(&mut self.out, id, reason);
        self.forget(id);
        if self.streams.contains_key(&id) {
            self.close_stream(id, reason, true);
        }
    }

    /// Keeps `id` among the streams the server reset, whose late frames
    /// are ignored.
    fn forget(&mut self, id: u32) {
        if self.recently_reset.len() == RESET_MEMORY {
            self.recently_reset.pop_front();
        }
        self.recently_reset.push_back(id);
    }

    /// Stream `id` is reset (by the server when `local`): its queue goes,
    /// its handles hear of it.
    fn close_stream(&mut self, id: u32, reason: Reason, local: bool) {
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        if stream.reset.is_none() {
            stream.reset = Some((reason, local));
        }
        stream.recv_open = false;
        self.queued -= stream.queued;
        stream.queue.clear();
        stream.queued = 0;
        stream.queued_trailers = None;
        stream.recv_buf.clear();
        stream.wake_all();
        self.settle(id);
    }

    /// After any change to stream `id`: counts it out of the concurrent
    /// streams once closed, declines the rest of a request nobody reads
    /// once the response has ended, and forgets it once no handle holds it.
    pub(super) fn settle(&mut self, id: u32) {
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        let mut closed = stream.reset.is_some() || (stream.send_done() && !stream.recv_open);
        if !closed && stream.send_done() && !stream.recv_handle {
            // RFC 9113 §8.1: the response is complete; the client need not
            // finish a request nobody will read.
            frame::put_reset(&mut self.out, id, Reason::NO_ERROR);
            stream.reset = Some((Reason::NO_ERROR, true));
            stream.recv_open = false;
            stream.wake_all();
            if self.recently_reset.len() == RESET_MEMORY {
                self.recently_reset.pop_front();
            }
            self.recently_reset.push_back(id);
            closed = true;
        }
        if closed && stream.counted {
            stream.counted = false;
            self.active -= 1;
        }
        if closed && stream.send_handles == 0 && !stream.recv_handle {
            self.streams.remove(&id);
        }
    }

    /// Gives `n` consumed bytes back to the connection's window and, for
    /// `id`, to the stream's, by WINDOW_UPDATE once half a window is due.
    pub(super) fn release(&mut self, id: Option<u32>, n: usize) {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        if n == 0 {
            return;
        }
        self.recv_release = self.recv_release.saturating_add(n);
        let conn_window = self.local.connection_window.max(frame::DEFAULT_WINDOW);
        if self.recv_release >= conn_window / 2 && self.failed.is_none() {
            frame::put_window_update(&mut self.out, 0, self.recv_release);
            self.recv_window += i64::from(self.recv_release);
            self.recv_release = 0;
        }
        let half = self.local.stream_window.max(1) / 2;
        if let Some(stream) = id.and_then(|id| self.streams.get_mut(&id).map(|s| (id, s))) {
            let (id, stream) = stream;
            if stream.recv_open && stream.reset.is_none() {
                stream.recv_release = stream.recv_release.saturating_add(n);
                if stream.recv_release >= half {
                    frame::put_window_update(&mut self.out, id, stream.recv_release);
                    stream.recv_window += i64::from(stream.recv_release);
                    stream.recv_release = 0;
                }
            }
        }
    }

    /// Frames queued DATA (and trailers behind it) as the windows allow,
    /// streams taking turns, until the output is backed up.
    pub(super) fn pump(&mut self) {
        while self.out.len() < OUT_HIGH {
            let Some(id) = self.ready.pop_front() else {
                return;
            };
            let Some(stream) = self.streams.get_mut(&id) else {
                continue;
            };
            stream.in_ready = false;
            let Some(front) = stream.queue.front_mut() else {
                continue;
            };
            let allowed = stream
                .send_window
                .min(self.send_window)
                .clamp(0, self.peer_max_frame as i64) as usize;
            let n = front.len().min(allowed);
            if n == 0 && !front.is_empty() {
                // Waits for a WINDOW_UPDATE (`window_opened` re-queues it).
                continue;
            }
            let piece = front.split_to(n);
            if front.is_empty() {
                stream.queue.pop_front();
            }
            stream.queued -= n;
            self.queued -= n;
            stream.send_window -= n as i64;
            self.send_window -= n as i64;
            let last = stream.queue.is_empty()
                && stream.sending == Sending::Ended
                && stream.queued_trailers.is_none();
            frame::put_data(&mut self.out, id, &piece, last);
            if stream.queue.is_empty() {
                if let Some(trailers) = stream.queued_trailers.take() {
                    self.put_block(id, true, |encoder, out| {
                        encoder.encode_fields(&trailers, out);
                    });
                }
            } else {
                stream.in_ready = true;
                self.ready.push_back(id);
            }
            let stream = self.streams.get_mut(&id).expect("live");
            if stream.reserved > 0 {
                if let Some(waker) = stream.send_waker.take() {
                    waker.wake();
                }
            }
            self.settle(id);
        }
    }

    /// Appends HEADERS for stream `id` with the block `encode` writes
    /// straight into the output; a block over the client's frame size goes
    /// on in CONTINUATION frames.
    fn put_block(
        &mut self,
        id: u32,
        end_stream: bool,
        encode: impl FnOnce(&mut Encoder, &mut BytesMut),
    ) {
        let at = self.out.len();
        frame::put_head(&mut self.out, 0, kind::HEADERS, 0, id);
        encode(&mut self.encoder, &mut self.out);
        let len = self.out.len() - at - frame::HEAD_LEN;
        if len <= self.peer_max_frame {
            let end = if end_stream { flag::END_STREAM } else { 0 };
            frame::patch_head(&mut self.out, at, len, flag::END_HEADERS | end);
        } else {
            let block = self.out.split_off(at + frame::HEAD_LEN);
            self.out.truncate(at);
            frame::put_header_block(&mut self.out, id, &block, end_stream, self.peer_max_frame);
        }
    }

    // ---- what the handles do ----

    /// The stream's reset or the connection's failure, if any.
    pub(super) fn stream_error(&self, id: u32) -> Option<Error> {
        if let Some(err) = &self.failed {
            return Some(err.clone());
        }
        match self.streams.get(&id).and_then(|s| s.reset) {
            Some((reason, local)) => Some(Error::reset(reason, local)),
            None if !self.streams.contains_key(&id) => Some(Error::reset(Reason::CANCEL, true)),
            None => None,
        }
    }

    /// The reason stream `id` was reset, if it was; registers `waker`
    /// otherwise.
    pub(super) fn poll_reset(&mut self, id: u32, waker: &Waker) -> Poll<Result<Reason, Error>> {
        if let Some(err) = &self.failed {
            return Poll::Ready(Err(err.clone()));
        }
        let Some(stream) = self.streams.get_mut(&id) else {
            return Poll::Ready(Ok(Reason::CANCEL));
        };
        match stream.reset {
            Some((reason, _)) => Poll::Ready(Ok(reason)),
            None => {
                store(&mut stream.reset_waker, waker);
                Poll::Pending
            }
        }
    }

    /// Sends the response head on stream `id`.
    pub(super) fn send_head(
        &mut self,
        id: u32,
        status: StatusCode,
        headers: &HeaderMap,
        end: bool,
    ) -> Result<(), Error> {
        if let Some(err) = self.stream_error(id) {
            return Err(err);
        }
        let stream = self.streams.get_mut(&id).expect("checked");
        if stream.sending != Sending::Head {
            return Err(Error::misuse("response head sent twice"));
        }
        stream.sending = if end { Sending::Ended } else { Sending::Body };
        self.put_block(id, end, |encoder, out| {
            encoder.encode_response(status, headers, out);
        });
        if end {
            self.settle(id);
        }
        self.notify();
        Ok(())
    }

    /// Queues (or frames at once, when the windows allow) a piece of body.
    pub(super) fn send_data(&mut self, id: u32, data: Bytes, end: bool) -> Result<(), Error> {
        if let Some(err) = self.stream_error(id) {
            return Err(err);
        }
        let stream = self.streams.get_mut(&id).expect("checked");
        if stream.sending != Sending::Body {
            return Err(Error::misuse("body sent outside a response"));
        }
        if end {
            stream.sending = Sending::Ended;
        }
        let n = data.len();
        let fits = stream.queue.is_empty()
            && (n as i64) <= stream.send_window.min(self.send_window)
            && n <= self.peer_max_frame;
        if fits {
            stream.send_window -= n as i64;
            self.send_window -= n as i64;
            frame::put_data(&mut self.out, id, &data, end);
            if end {
                self.settle(id);
            }
        } else {
            stream.queue.push_back(data);
            stream.queued += n;
            self.queued += n;
            if !stream.in_ready {
                stream.in_ready = true;
                self.ready.push_back(id);
            }
        }
        self.notify();
        Ok(())
    }

    /// Sends trailers (ending the stream) after any queued DATA.
    pub(super) fn send_trailers(&mut self, id: u32, trailers: HeaderMap) -> Result<(), Error> {
        if let Some(err) = self.stream_error(id) {
            return Err(err);
        }
        let stream = self.streams.get_mut(&id).expect("checked");
        if stream.sending != Sending::Body {
            return Err(Error::misuse("trailers sent outside a response"));
        }
        stream.sending = Sending::Ended;
        if stream.queue.is_empty() {
            self.put_block(id, true, |encoder, out| {
                encoder.encode_fields(&trailers, out)
            });
            self.settle(id);
        } else {
            stream.queued_trailers = Some(trailers);
        }
        self.notify();
        Ok(())
    }

    /// The handle resets its stream.
    pub(super) fn send_reset(&mut self, id: u32, reason: Reason) {
        let open = self
            .streams
            .get(&id)
            .is_some_and(|s| s.reset.is_none() && !s.send_done());
        if open && self.failed.is_none() {
            self.reset_stream(id, reason);
            self.notify();
        }
    }

    /// Asks for `n` bytes of capacity.
    pub(super) fn reserve(&mut self, id: u32, n: usize) {
        if let Some(stream) = self.streams.get_mut(&id) {
            stream.reserved = n;
        }
    }

    /// The bytes stream `id` may queue now: within what it reserved, its
    /// share of the send buffer, and the windows not yet spoken for.
    pub(super) fn capacity(&self, id: u32) -> usize {
        let Some(stream) = self.streams.get(&id) else {
            return 0;
        };
        if stream.reset.is_some() || stream.sending == Sending::Ended || self.failed.is_some() {
            return 0;
        }
        let buffer = self.local.send_buffer.saturating_sub(stream.queued);
        let stream_window = (stream.send_window - stream.queued as i64).max(0);
        let conn_window = (self.send_window - self.queued as i64).max(0);
        let window = stream_window.min(conn_window) as usize;
        stream.reserved.min(buffer).min(window)
    }

    /// Capacity, or registers `waker` for when it may grow; `None` when the
    /// stream can send no more.
    pub(super) fn poll_capacity(
        &mut self,
        id: u32,
        waker: &Waker,
    ) -> Poll<Option<Result<usize, Error>>> {
        if let Some(err) = self.stream_error(id) {
            return Poll::Ready(Some(Err(err)));
        }
        let n = self.capacity(id);
        let stream = self.streams.get_mut(&id).expect("checked");
        if stream.sending == Sending::Ended {
            return Poll::Ready(None);
        }
        if n > 0 {
            return Poll::Ready(Some(Ok(n)));
        }
        store(&mut stream.send_waker, waker);
        Poll::Pending
    }

    /// Takes the next piece of request data, if any.
    pub(super) fn poll_data(
        &mut self,
        id: u32,
        waker: &Waker,
    ) -> Poll<Option<Result<Bytes, Error>>> {
        let failed = self.failed.clone();
        let Some(stream) = self.streams.get_mut(&id) else {
            return Poll::Ready(Some(Err(
                failed.unwrap_or(Error::reset(Reason::CANCEL, true))
            )));
        };
        if let Some(data) = stream.recv_buf.pop_front() {
            return Poll::Ready(Some(Ok(data)));
        }
        if let Some((reason, local)) = stream.reset {
            if !(local && reason == Reason::NO_ERROR) {
                return Poll::Ready(Some(Err(Error::reset(reason, local))));
            }
        }
        if let Some(err) = failed {
            return Poll::Ready(Some(Err(err)));
        }
        if !stream.recv_open {
            return Poll::Ready(None);
        }
        store(&mut stream.recv_waker, waker);
        Poll::Pending
    }

    /// Takes the request's trailers, once its data is read.
    pub(super) fn poll_trailers(
        &mut self,
        id: u32,
        waker: &Waker,
    ) -> Poll<Result<Option<HeaderMap>, Error>> {
        let failed = self.failed.clone();
        let Some(stream) = self.streams.get_mut(&id) else {
            return Poll::Ready(Err(failed.unwrap_or(Error::reset(Reason::CANCEL, true))));
        };
        if let Some(trailers) = stream.trailers.take() {
            return Poll::Ready(Ok(Some(trailers)));
        }
        if let Some((reason, local)) = stream.reset {
            if !(local && reason == Reason::NO_ERROR) {
                return Poll::Ready(Err(Error::reset(reason, local)));
            }
        }
        if let Some(err) = failed {
            return Poll::Ready(Err(err));
        }
        if !stream.recv_open {
            return Poll::Ready(Ok(None));
        }
        store(&mut stream.recv_waker, waker);
        Poll::Pending
    }

    /// True when the request has nothing more to give.
    pub(super) fn is_end_stream(&self, id: u32) -> bool {
        self.streams
            .get(&id)
            .is_none_or(|s| !s.recv_open && s.recv_buf.is_empty() && s.trailers.is_none())
    }

    /// The reader gave back `n` bytes it consumed.
    pub(super) fn release_capacity(&mut self, id: u32, n: usize) {
        let before = self.out.len();
        self.release(Some(id), n);
        if self.out.len() != before {
            self.notify();
        }
    }

    /// A [`RecvStream`] was dropped: what it held goes back to the windows.
    pub(super) fn drop_recv(&mut self, id: u32) {
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        stream.recv_handle = false;
        let held: usize = stream.recv_buf.drain(..).map(|b| b.len()).sum();
        stream.trailers = None;
        let before = self.out.len();
        if held > 0 {
            self.release(Some(id), held);
        }
        self.settle(id);
        if self.out.len() != before {
            self.notify();
        }
    }

    /// A send handle was dropped: with no other left and the response not
    /// ended, the stream is reset with CANCEL.
    pub(super) fn drop_send(&mut self, id: u32) {
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        stream.send_handles -= 1;
        if stream.send_handles == 0
            && stream.sending != Sending::Ended
            && stream.reset.is_none()
            && self.failed.is_none()
        {
            self.reset_stream(id, Reason::CANCEL);
            self.notify();
        } else {
            self.settle(id);
        }
    }

    /// A second send handle (the [`SendStream`](super::SendStream) beside
    /// its [`SendResponse`]).
    pub(super) fn add_send_handle(&mut self, id: u32) {
        if let Some(stream) = self.streams.get_mut(&id) {
            stream.send_handles += 1;
        }
    }
}

/// Keeps `waker` in `slot` unless the one there wakes the same task.
fn store(slot: &mut Option<Waker>, waker: &Waker) {
    match slot {
        Some(w) if w.will_wake(waker) => {}
        _ => *slot = Some(waker.clone()),
    }
}

/// A DATA or HEADERS payload without its padding (RFC 9113 §6.1).
fn unpad(head: Head, payload: &[u8]) -> Result<&[u8], Reason> {
    if !head.has(flag::PADDED) {
        return Ok(payload);
    }
    let Some((&pad, rest)) = payload.split_first() else {
        return Err(Reason::PROTOCOL_ERROR);
    };
    let pad = usize::from(pad);
    if pad > rest.len() {
        return Err(Reason::PROTOCOL_ERROR);
    }
    Ok(&rest[..rest.len() - pad])
}

/// A request's head as its fields are decoded (RFC 9113 §8.3).
struct RequestHead {
    method: Option<Bytes>,
    scheme: Option<Bytes>,
    authority: Option<Bytes>,
    path: Option<Bytes>,
    protocol: Option<Bytes>,
    headers: HeaderMap,
    /// A regular field came (pseudo-fields must all come before).
    regular: bool,
    /// The declared `content-length`.
    remaining: Option<u64>,
    /// A rule was broken: the request is malformed.
    bad: bool,
}

impl Default for RequestHead {
    fn default() -> RequestHead {
        RequestHead {
            method: None,
            scheme: None,
            authority: None,
            path: None,
            protocol: None,
            // Room for a usual request's fields without a regrowth.
            headers: HeaderMap::with_capacity(12),
            regular: false,
            remaining: None,
            bad: false,
        }
    }
}

impl RequestHead {
    /// Takes one field, in block order.
    fn field(&mut self, field: Field) {
        if self.bad {
            return;
        }
        match field {
            Field::Pseudo(pseudo, value) => {
                if self.regular {
                    self.bad = true;
                    return;
                }
                let slot = match pseudo {
                    Pseudo::Method => &mut self.method,
                    Pseudo::Scheme => &mut self.scheme,
                    Pseudo::Authority => &mut self.authority,
                    Pseudo::Path => &mut self.path,
                    Pseudo::Protocol => &mut self.protocol,
                    Pseudo::Status => {
                        self.bad = true;
                        return;
                    }
                };
                if slot.replace(value).is_some() {
                    self.bad = true;
                }
            }
            Field::Header(name, value) => {
                self.regular = true;
                // RFC 9113 §8.2.2: no connection-specific fields.
                if name == header::CONNECTION
                    || name == header::TRANSFER_ENCODING
                    || name == header::UPGRADE
                    || name.as_str() == "keep-alive"
                    || name.as_str() == "proxy-connection"
                    || (name == header::TE && value != "trailers")
                {
                    self.bad = true;
                    return;
                }
                if name == header::CONTENT_LENGTH {
                    if let Some(n) = value.to_str().ok().and_then(|v| v.parse::<u64>().ok()) {
                        if self.remaining.is_some_and(|m| m != n) {
                            self.bad = true;
                            return;
                        }
                        self.remaining = Some(n);
                    }
                }
                self.headers.append(name, value);
            }
        }
    }

    /// The request's head, or `None` when it is malformed: in origin form,
    /// `:authority` as `Host` (as an HTTP/1.1 gateway forwards it,
    /// §8.3.1), with the declared `content-length` and whether `Host` was
    /// made from `:authority`.
    fn finish(self, connect_protocol: bool) -> Option<(http::request::Parts, Option<u64>, bool)> {
        let RequestHead {
            method,
            scheme,
            authority,
            path,
            protocol,
            mut headers,
            remaining,
            bad,
            ..
        } = self;
        if bad {
            return None;
        }
        let method = Method::from_bytes(&method?).ok()?;
        let uri = if method == Method::CONNECT && protocol.is_none() {
            // RFC 9113 §8.5: `:authority` only.
            if scheme.is_some() || path.is_some() {
                return None;
            }
            Uri::from_maybe_shared(authority.clone()?).ok()?
        } else {
            // RFC 8441 §4: `:protocol` only on CONNECT, once announced.
            if protocol.is_some() && (method != Method::CONNECT || !connect_protocol) {
                return None;
            }
            scheme?;
            let path = path?;
            let origin =
                path.first() == Some(&b'/') || (&path[..] == b"*" && method == Method::OPTIONS);
            if !origin {
                return None;
            }
            Uri::from_maybe_shared(path).ok()?
        };
        let mut host_added = false;
        if let Some(authority) = authority {
            if let header::Entry::Vacant(slot) = headers.entry(header::HOST) {
                slot.insert(HeaderValue::from_maybe_shared(authority).ok()?);
                host_added = true;
            }
        }
        let (mut parts, ()) = Request::new(()).into_parts();
        parts.method = method;
        parts.uri = uri;
        parts.version = Version::HTTP_2;
        parts.headers = headers;
        if let Some(protocol) = protocol {
            parts.extensions.insert(Protocol(protocol));
        }
        Some((parts, remaining, host_added))
    }
}
