//! The connection driver: one task per WebSocket reads frames, answers
//! pings, pings a silent peer, writes what the app and other threads queued
//! and runs the close handshake. It holds no buffer while idle.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use futures_util::task::AtomicWaker;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use super::deflate::{self, Deflate};
use super::frame::{self, DecodeConfig, Decoded, Decoder, Opcode, Status};
use super::{CloseCode, CloseFrame, Config, Message, SlowConsumer};
use crate::upgrade::Upgraded;

/// Bytes read from the socket at once.
const READ_CHUNK: usize = 8 * 1024;

/// Most pongs waiting to be written; past it the oldest is dropped (only
/// the latest ping needs an answer, RFC 6455 §5.5.3), so a ping flood from
/// a client that does not read holds at most this many.
const MAX_PONGS: usize = 16;

/// Most bytes gathered from the queue into one write.
const WRITE_BATCH: usize = 64 * 1024;

/// Slots of the outgoing queue kept once it is drained (the first push
/// allocates four): a socket that gets one message at a time reuses them,
/// one that got a burst gives the larger buffer back. Freeing the four as
/// well costs an allocation per broadcast delivery, 17% more instructions
/// (docs/decisions/066), for 128 bytes per socket.
const KEPT_QUEUE_SLOTS: usize = 4;

/// A byte stream a WebSocket runs on.
pub trait Transport: AsyncRead + AsyncWrite + Unpin + Send {
    /// Ready once the server's graceful shutdown has started.
    fn poll_shutdown_started(&self, cx: &mut Context<'_>) -> Poll<()>;
}

impl Transport for Upgraded {
    fn poll_shutdown_started(&self, cx: &mut Context<'_>) -> Poll<()> {
        Upgraded::poll_shutdown_started(self, cx)
    }
}

/// Why a message was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// The connection is closing or closed.
    Closed,
    /// The queue was full: the slow-consumer policy closed the connection,
    /// or (drop-oldest) the message alone is larger than the queue.
    Full,
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SendError::Closed => "the WebSocket is closed",
            SendError::Full => "the WebSocket's outgoing queue is full",
        })
    }
}

impl std::error::Error for SendError {}

/// A message framed for sending, compressed at most once per window size:
/// a broadcast prepares it once and every receiver's queue holds the same
/// bytes.
#[derive(Debug)]
pub struct Prepared {
    message: Message,
    plain: Bytes,
    /// The compressed frame by server window bits (index `bits - 9`).
    deflated: [OnceLock<Bytes>; 7],
}

impl Prepared {
    /// Frames `message` (uncompressed; compressed frames are made on first
    /// use).
    pub fn new(message: Message) -> Prepared {
        Prepared {
            plain: frame::encode(true, false, opcode_of(&message), message.as_bytes()),
            message,
            deflated: Default::default(),
        }
    }

    /// The message.
    pub fn message(&self) -> &Message {
        &self.message
    }

    /// The frame for a connection with these settings.
    fn frame(&self, deflate: Option<Deflate>, config: &Config) -> Bytes {
        match compression(deflate, config, &self.message) {
            Some(bits) => self.deflated[(bits - 9) as usize]
                .get_or_init(|| compressed_frame(&self.message, bits, config))
                .clone(),
            None => self.plain.clone(),
        }
    }
}

fn opcode_of(message: &Message) -> Opcode {
    match message {
        Message::Text(_) => Opcode::Text,
        Message::Binary(_) => Opcode::Binary,
    }
}

/// The server window bits `message` is compressed with on a connection
/// with these settings, or `None` when it goes uncompressed.
fn compression(deflate: Option<Deflate>, config: &Config, message: &Message) -> Option<u8> {
    match deflate {
        Some(d) if d.compresses() && message.as_bytes().len() >= config.compress_min_bytes => {
            Some(d.server_max_window_bits)
        }
        _ => None,
    }
}

fn compressed_frame(message: &Message, bits: u8, config: &Config) -> Bytes {
    let z = deflate::compress(message.as_bytes(), bits, config.compression_level);
    frame::encode(true, true, opcode_of(message), &z)
}

/// The frame of one message for one connection (a message sent by the
/// connection's own task is framed once, with no [`Prepared`]).
fn frame_for(message: &Message, deflate: Option<Deflate>, config: &Config) -> Bytes {
    match compression(deflate, config, message) {
        Some(bits) => compressed_frame(message, bits, config),
        None => frame::encode(true, false, opcode_of(message), message.as_bytes()),
    }
}

/// What other threads and the driver share.
#[derive(Debug)]
struct Shared {
    outbox: Mutex<Outbox>,
    waker: AtomicWaker,
    deflate: Option<Deflate>,
    config: Arc<Config>,
}

#[derive(Debug, Default)]
struct Outbox {
    frames: VecDeque<Bytes>,
    bytes: usize,
    /// A close asked for by the app or the slow-consumer policy.
    close: Option<CloseFrame>,
    /// The connection no longer takes messages.
    closed: bool,
}

impl Shared {
    fn outbox(&self) -> MutexGuard<'_, Outbox> {
        // Every critical section leaves the queue consistent.
        self.outbox.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `frame` and wakes the connection's task, unless the task
    /// itself is queueing (`wake` false): it writes right after.
    fn push(&self, frame: Bytes, wake: bool) -> Result<(), SendError> {
        let mut out = self.outbox();
        if out.closed || out.close.is_some() {
            return Err(SendError::Closed);
        }
        let max = self.config.max_queued_bytes;
        if out.bytes + frame.len() > max {
            match self.config.slow_consumer {
                SlowConsumer::Close(code) => {
                    out.frames.clear();
                    out.bytes = 0;
                    out.close = Some(CloseFrame {
                        code,
                        reason: "client too slow to read".into(),
                    });
                    drop(out);
                    self.waker.wake();
                    return Err(SendError::Full);
                }
                SlowConsumer::DropOldest => {
                    if frame.len() > max {
                        return Err(SendError::Full);
                    }
                    while out.bytes + frame.len() > max {
                        let old = out.frames.pop_front().expect("queued bytes are in frames");
                        out.bytes -= old.len();
                    }
                }
            }
        }
        out.bytes += frame.len();
        out.frames.push_back(frame);
        drop(out);
        if wake {
            self.waker.wake();
        }
        Ok(())
    }
}

/// A handle that queues messages for one WebSocket from any thread.
///
/// Cloning is one reference count. Sending never waits: the message is
/// queued (bounded by [`Config::max_queued_bytes`] and the connection's
/// [`SlowConsumer`] policy) and the connection's task writes it.
#[derive(Debug, Clone)]
pub struct Sender {
    shared: Arc<Shared>,
}

impl Sender {
    /// Queues a message.
    pub fn send(&self, message: Message) -> Result<(), SendError> {
        self.send_prepared(&Prepared::new(message))
    }

    /// Queues a prepared message (a broadcast prepares once for all).
    pub fn send_prepared(&self, message: &Prepared) -> Result<(), SendError> {
        self.shared.push(
            message.frame(self.shared.deflate, &self.shared.config),
            true,
        )
    }

    /// Starts the close handshake with this code and reason (cut to 123
    /// bytes); messages queued before are sent first.
    pub fn close(&self, code: CloseCode, reason: &str) {
        let mut out = self.shared.outbox();
        if out.close.is_none() && !out.closed {
            out.close = Some(CloseFrame {
                code,
                reason: reason.into(),
            });
        }
        drop(out);
        self.shared.waker.wake();
    }

    /// True once the connection takes no more messages.
    pub fn is_closed(&self) -> bool {
        let out = self.shared.outbox();
        out.closed || out.close.is_some()
    }

    /// Bytes queued and not yet handed to the socket.
    pub fn queued_bytes(&self) -> usize {
        self.shared.outbox().bytes
    }

    /// The permessage-deflate settings of the connection, if negotiated.
    pub fn deflate(&self) -> Option<Deflate> {
        self.shared.deflate
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Open,
    /// The server sent its close and waits for the client's.
    CloseSent,
    /// Both closes are through (or the connection failed): the write side
    /// is shut down and reads are drained until end of stream.
    Lingering,
    Done,
}

/// The server's end of a WebSocket connection.
///
/// Everything happens while the owner awaits [`WebSocket::recv`]: reading,
/// pongs, pings, writing queued messages, the close handshake and the
/// reaction to the server's graceful shutdown (a 1001 close). `recv`
/// returns `None` once the connection is over.
///
/// The handle is one pointer: the connection's state is boxed, so a
/// handler's future that holds the handle (an `async fn` holds its
/// argument twice, once as passed and once as bound) does not hold the
/// state twice. An idle connection keeps the box and no buffer.
pub struct WebSocket<T: Transport = Upgraded> {
    driver: Box<Driver<T>>,
}

/// The connection's state.
struct Driver<T: Transport> {
    io: T,
    decoder: Decoder,
    shared: Arc<Shared>,
    phase: Phase,
    /// Bytes read but not decoded yet (a message ended inside them).
    pending_in: BytesMut,
    /// Bytes being written; always retried as they are (`write_all`).
    wbuf: Vec<u8>,
    wpos: usize,
    /// Pongs (and the server's ping) not yet written, at most
    /// [`MAX_PONGS`].
    pongs: VecDeque<Bytes>,
    /// The close frame to write after what is queued.
    close_out: Option<Bytes>,
    close_written: bool,
    write_shut: bool,
    /// Boxed: rare, and kept out of every idle connection's state.
    peer_close: Option<Box<CloseFrame>>,
    timer: Pin<Box<Sleep>>,
    /// A frame arrived since the timer last fired.
    heard: bool,
    ping_sent: bool,
    shutdown_seen: bool,
}

impl<T: Transport> std::fmt::Debug for WebSocket<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSocket")
            .field("phase", &self.driver.phase)
            .field("deflate", &self.driver.shared.deflate)
            .finish_non_exhaustive()
    }
}

impl<T: Transport> WebSocket<T> {
    /// Runs the WebSocket protocol on `io` (after the 101), with the
    /// permessage-deflate settings agreed in the handshake.
    pub fn new(io: T, deflate: Option<Deflate>, config: Arc<Config>) -> WebSocket<T> {
        WebSocket {
            driver: Box::new(Driver::new(io, deflate, config)),
        }
    }

    /// A handle to queue messages from anywhere.
    pub fn sender(&self) -> Sender {
        Sender {
            shared: self.driver.shared.clone(),
        }
    }

    /// True once the connection is over.
    pub fn is_over(&self) -> bool {
        self.driver.phase == Phase::Done
    }

    /// The client's close frame, once received.
    pub fn peer_close(&self) -> Option<&CloseFrame> {
        self.driver.peer_close.as_deref()
    }

    /// Queues a message and writes what the socket takes now; the rest is
    /// written while the owner awaits [`WebSocket::recv`].
    pub async fn send(&mut self, message: Message) -> Result<(), SendError> {
        let driver = &mut *self.driver;
        let mut frame = frame_for(&message, driver.shared.deflate, &driver.shared.config);
        poll_fn(|cx| Poll::Ready(driver.send_own(cx, std::mem::take(&mut frame)))).await
    }

    /// Starts the close handshake and drives the connection until it ends.
    pub async fn close(&mut self, code: CloseCode, reason: &str) {
        self.sender().close(code, reason);
        while self.recv().await.is_some() {}
    }

    /// The next message from the client, or `None` once the connection is
    /// over (closed by either side, failed, timed out, or dropped at
    /// shutdown).
    pub async fn recv(&mut self) -> Option<Message> {
        poll_fn(|cx| self.driver.poll_recv(cx)).await
    }

    /// Polls for the next message; see [`WebSocket::recv`].
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Message>> {
        self.driver.poll_recv(cx)
    }
}

impl<T: Transport> Driver<T> {
    fn new(io: T, deflate: Option<Deflate>, config: Arc<Config>) -> Driver<T> {
        let decoder = Decoder::new(DecodeConfig {
            max_frame_bytes: config.max_frame_bytes,
            max_message_bytes: config.max_message_bytes,
            deflate: deflate.is_some(),
            client_no_context_takeover: deflate.is_some_and(|d| d.client_no_context_takeover),
        });
        let now = Instant::now();
        let timer = Box::pin(tokio::time::sleep_until(now + config.ping_interval));
        Driver {
            io,
            decoder,
            shared: Arc::new(Shared {
                outbox: Mutex::new(Outbox::default()),
                waker: AtomicWaker::new(),
                deflate,
                config,
            }),
            phase: Phase::Open,
            pending_in: BytesMut::new(),
            wbuf: Vec::new(),
            wpos: 0,
            pongs: VecDeque::new(),
            close_out: None,
            close_written: false,
            write_shut: false,
            peer_close: None,
            timer,
            heard: false,
            ping_sent: false,
            shutdown_seen: false,
        }
    }

    /// Queues a frame of the connection's own task: straight to the socket
    /// when nothing is queued before it (no lock held while writing, no
    /// wake-up of this same task), else behind what is queued.
    fn send_own(&mut self, cx: &mut Context<'_>, frame: Bytes) -> Result<(), SendError> {
        {
            let out = self.shared.outbox();
            if out.closed || out.close.is_some() {
                return Err(SendError::Closed);
            }
            let idle = out.frames.is_empty()
                && self.pongs.is_empty()
                && self.wpos == self.wbuf.len()
                && !self.write_shut;
            drop(out);
            if !idle {
                self.shared.push(frame, false)?;
                // Errors surface in `recv`, which ends the connection.
                let _ = self.poll_write(cx);
                return Ok(());
            }
        }
        match Pin::new(&mut self.io).poll_write(cx, &frame) {
            Poll::Ready(Ok(n)) if n == frame.len() => {
                // Over TLS the sealed bytes may wait for the socket.
                let _ = Pin::new(&mut self.io).poll_flush(cx);
            }
            Poll::Ready(Ok(n)) if n > 0 => self.wbuf.extend_from_slice(&frame[n..]),
            // Retried by `recv`, which then sees the error and ends the
            // connection.
            Poll::Ready(_) | Poll::Pending => self.wbuf.extend_from_slice(&frame),
        }
        Ok(())
    }

    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Message>> {
        self.shared.waker.register(cx.waker());
        loop {
            if self.phase == Phase::Done {
                return Poll::Ready(None);
            }
            if !self.shutdown_seen && self.io.poll_shutdown_started(cx).is_ready() {
                self.shutdown_seen = true;
                self.start_close(CloseCode::GOING_AWAY, "server shutting down");
            }
            if self.phase == Phase::Open {
                let asked = self.shared.outbox().close.clone();
                if let Some(close) = asked {
                    self.start_close(close.code, &close.reason);
                }
            }
            match self.poll_write(cx) {
                Poll::Ready(Err(err)) => return Poll::Ready(self.fail_io(&err)),
                Poll::Ready(Ok(())) | Poll::Pending => {}
            }
            if self.phase == Phase::Lingering
                && self.close_written
                && self.wpos == self.wbuf.len()
                && !self.write_shut
            {
                match Pin::new(&mut self.io).poll_shutdown(cx) {
                    Poll::Ready(_) => self.write_shut = true,
                    Poll::Pending => return self.poll_timer(cx),
                }
            }
            // Bytes already read come first.
            if !self.pending_in.is_empty() {
                let input = std::mem::take(&mut self.pending_in);
                match self.feed(&input) {
                    Fed::Message(msg, used) => {
                        self.keep_unread(&input[used..]);
                        return Poll::Ready(Some(msg));
                    }
                    Fed::Used(used) => self.keep_unread(&input[used..]),
                    Fed::Stop => {}
                }
                continue;
            }
            let mut chunk = [MaybeUninit::<u8>::uninit(); READ_CHUNK];
            let mut buf = ReadBuf::uninit(&mut chunk);
            match Pin::new(&mut self.io).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if buf.filled().is_empty() => {
                    // End of stream: a client that leaves without a close
                    // frame ends the connection (1006 is never sent).
                    self.phase = Phase::Done;
                    return Poll::Ready(None);
                }
                Poll::Ready(Ok(())) => {
                    self.heard = true;
                    let filled = buf.filled();
                    match self.feed(filled) {
                        Fed::Message(msg, used) => {
                            self.keep_unread(&filled[used..]);
                            return Poll::Ready(Some(msg));
                        }
                        Fed::Used(_) | Fed::Stop => {}
                    }
                }
                Poll::Ready(Err(err)) => return Poll::Ready(self.fail_io(&err)),
                Poll::Pending => return self.poll_timer(cx),
            }
        }
    }

    fn keep_unread(&mut self, rest: &[u8]) {
        if !rest.is_empty() {
            self.pending_in.extend_from_slice(rest);
        }
    }

    fn fail_io(&mut self, err: &io::Error) -> Option<Message> {
        tracing::debug!(target: "celer::ws", error = %err, "connection failed");
        self.phase = Phase::Done;
        self.shared.outbox().closed = true;
        None
    }

    /// Decodes `input` until a message completes or it is used up.
    fn feed(&mut self, input: &[u8]) -> Fed {
        let mut used = 0;
        while used < input.len() {
            if self.phase == Phase::Lingering {
                // §7.1.1: nothing after the close handshake is read.
                return Fed::Stop;
            }
            match self.decoder.decode(&input[used..]) {
                Ok(Status::Partial) => return Fed::Used(input.len()),
                Ok(Status::Complete(n, item)) => {
                    used += n;
                    match item {
                        Decoded::Message(msg) => {
                            if self.phase == Phase::Open {
                                return Fed::Message(msg, used);
                            }
                            // After the server's close, data is discarded (§1.4).
                        }
                        Decoded::Ping(data) => {
                            if self.phase == Phase::Open {
                                if self.pongs.len() == MAX_PONGS {
                                    self.pongs.pop_front();
                                }
                                self.pongs.push_back(frame::encode(
                                    true,
                                    false,
                                    Opcode::Pong,
                                    &data,
                                ));
                            }
                        }
                        Decoded::Pong(_) => {}
                        Decoded::Close(close) => {
                            self.on_peer_close(close);
                            return Fed::Stop;
                        }
                    }
                }
                Err(err) => {
                    tracing::debug!(target: "celer::ws", error = %err, "protocol error");
                    self.fail(err.code, err.reason);
                    return Fed::Stop;
                }
            }
        }
        Fed::Used(used)
    }

    /// The client's close: echo its code (§5.5.1) unless the server's close
    /// went out already, then linger.
    fn on_peer_close(&mut self, close: Option<CloseFrame>) {
        if self.phase == Phase::Open {
            let payload = match &close {
                Some(c) => frame::close_payload(c.code, ""),
                None => BytesMut::new(),
            };
            self.queue_close(frame::encode(true, false, Opcode::Close, &payload));
        }
        self.peer_close = close.map(Box::new);
        self.enter_lingering();
    }

    fn enter_lingering(&mut self) {
        self.phase = Phase::Lingering;
        self.pongs = VecDeque::new();
        self.pending_in = BytesMut::new();
        self.arm(self.shared.config.close_timeout);
    }

    /// Fails the connection (§7.1.7): what was queued is dropped, the close
    /// frame goes next and nothing more is read.
    fn fail(&mut self, code: CloseCode, reason: &str) {
        {
            let mut out = self.shared.outbox();
            out.frames.clear();
            out.bytes = 0;
            out.closed = true;
        }
        if !self.close_written && self.close_out.is_none() {
            let payload = frame::close_payload(code, reason);
            self.close_out = Some(frame::encode(true, false, Opcode::Close, &payload));
        }
        self.enter_lingering();
    }

    /// The server's close (§7.1.2): queued messages go first.
    fn start_close(&mut self, code: CloseCode, reason: &str) {
        if self.phase != Phase::Open {
            return;
        }
        let payload = frame::close_payload(code, reason);
        self.queue_close(frame::encode(true, false, Opcode::Close, &payload));
        self.phase = Phase::CloseSent;
        self.arm(self.shared.config.close_timeout);
    }

    fn queue_close(&mut self, frame: Bytes) {
        self.shared.outbox().closed = true;
        self.close_out = Some(frame);
    }

    fn arm(&mut self, after: std::time::Duration) {
        self.timer.as_mut().reset(Instant::now() + after);
    }

    /// The ping and close timers.
    fn poll_timer(&mut self, cx: &mut Context<'_>) -> Poll<Option<Message>> {
        loop {
            ready!(self.timer.as_mut().poll(cx));
            let config = &self.shared.config;
            match self.phase {
                Phase::Open => {
                    // The timer fires every `ping_interval` while frames
                    // arrive (a flag per read, no clock read per message),
                    // so a ping follows between one and two intervals of
                    // silence.
                    if self.heard {
                        self.heard = false;
                        self.ping_sent = false;
                        let after = config.ping_interval;
                        self.arm(after);
                        continue;
                    }
                    if self.ping_sent {
                        // §5.5.2: a peer that answers nothing is gone.
                        tracing::debug!(target: "celer::ws", "no answer to ping: connection dropped");
                        return Poll::Ready(self.drop_dead());
                    }
                    self.ping_sent = true;
                    self.pongs
                        .push_back(frame::encode(true, false, Opcode::Ping, b""));
                    let after = config.ping_timeout;
                    self.arm(after);
                    // Writes the ping, then waits again.
                    return self.poll_recv(cx);
                }
                Phase::CloseSent | Phase::Lingering | Phase::Done => {
                    return Poll::Ready(self.drop_dead());
                }
            }
        }
    }

    fn drop_dead(&mut self) -> Option<Message> {
        self.phase = Phase::Done;
        self.shared.outbox().closed = true;
        None
    }

    /// Writes pongs, queued frames and the close frame, in that order,
    /// until done or the socket is full.
    fn poll_write(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            while self.wpos < self.wbuf.len() {
                let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.wbuf[self.wpos..]))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                self.wpos += n;
            }
            // Nothing kept while idle.
            self.wbuf = Vec::new();
            self.wpos = 0;
            if self.write_shut {
                return Poll::Ready(Ok(()));
            }
            let mut batch = Gather {
                one: None,
                buf: &mut self.wbuf,
                size: 0,
            };
            // Taken whole: no buffer kept once they are written.
            for pong in std::mem::take(&mut self.pongs) {
                batch.add(pong);
            }
            if self.phase != Phase::Lingering || !self.close_written {
                let mut out = self.shared.outbox();
                while batch.size < WRITE_BATCH {
                    let Some(f) = out.frames.pop_front() else {
                        break;
                    };
                    out.bytes -= f.len();
                    batch.add(f);
                }
                let drained = out.frames.is_empty();
                if drained && out.frames.capacity() > KEPT_QUEUE_SLOTS {
                    // A burst's queue is not kept while idle.
                    out.frames = VecDeque::new();
                }
                drop(out);
                if drained && batch.size < WRITE_BATCH {
                    if let Some(close) = self.close_out.take() {
                        self.close_written = true;
                        batch.add(close);
                    }
                }
            }
            let Some(f) = batch.one else {
                if self.wbuf.is_empty() {
                    return Pin::new(&mut self.io).poll_flush(cx);
                }
                // Several frames, copied into one write.
                continue;
            };
            // One frame: written straight from its buffer, copied only if
            // the socket takes part of it.
            match Pin::new(&mut self.io).poll_write(cx, &f) {
                Poll::Ready(Ok(n)) if n == f.len() => {}
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => self.wbuf.extend_from_slice(&f[n..]),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {
                    // Retried with the same bytes.
                    self.wbuf.extend_from_slice(&f);
                    return Poll::Pending;
                }
            }
        }
    }
}

/// The frames of one write: a frame alone is written from its own buffer,
/// several are copied into the write buffer (empty when gathering starts).
struct Gather<'a> {
    one: Option<Bytes>,
    buf: &'a mut Vec<u8>,
    size: usize,
}

impl Gather<'_> {
    fn add(&mut self, frame: Bytes) {
        self.size += frame.len();
        if self.buf.is_empty() {
            match self.one.take() {
                None => {
                    self.one = Some(frame);
                    return;
                }
                Some(first) => self.buf.extend_from_slice(&first),
            }
        }
        self.buf.extend_from_slice(&frame);
    }
}

enum Fed {
    /// A message, and the bytes used up to its end.
    Message(Message, usize),
    /// All bytes used, no message.
    Used(usize),
    /// Reading stopped (close or failure).
    Stop,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An idle WebSocket holds its boxed state, the shared outbox, its
    /// timer and its socket, and no buffer; keep the two boxes small so
    /// 10,000 idle sockets cost little (docs/decisions/065).
    #[test]
    fn idle_state_stays_small() {
        let driver = std::mem::size_of::<Driver<Upgraded>>();
        let shared = std::mem::size_of::<Shared>();
        assert_eq!(std::mem::size_of::<WebSocket<Upgraded>>(), 8);
        assert!(driver <= 384, "the connection's state is {driver} bytes");
        assert!(shared <= 128, "the shared outbox is {shared} bytes");
    }
}
