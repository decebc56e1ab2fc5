//! One client WebSocket over TCP or TLS: connect, handshake, send masked
//! messages, and read events while pending writes keep flowing.
//!
//! Reading and writing share one task: `next_event` writes queued bytes
//! whenever the socket takes them and reads whenever bytes arrive, so a
//! server that echoes while the client still writes cannot deadlock the two.
//! Every method keeps its state in `Socket` between polls, so a
//! `next_event` dropped in a `select!` loses nothing.

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::deflate::Deflate;
use super::frame::{self, Masks, opcode};
use super::handshake::{self, Offer, Refused};
use super::{Endpoint, MAX_MESSAGE_BYTES};
use crate::stats::ErrorKind;

/// A TCP stream, or a TLS stream over one.
#[derive(Debug)]
pub(crate) enum Stream {
    /// Plain TCP (ws://, http://).
    Plain(TcpStream),
    /// TLS (wss://, https://).
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// How long each step of opening took.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timings {
    /// TCP connect.
    pub(crate) connect: Duration,
    /// TLS handshake, for wss:// and https://.
    pub(crate) tls: Option<Duration>,
}

/// Opens a TCP connection (with TCP_NODELAY) and the TLS session if any.
pub(crate) async fn connect(endpoint: &Endpoint) -> Result<(Stream, Timings), ErrorKind> {
    let started = Instant::now();
    let tcp = tokio::time::timeout(endpoint.timeout, TcpStream::connect(endpoint.addr))
        .await
        .map_err(|_| ErrorKind::Connect)?
        .map_err(|e| match ErrorKind::from_io(&e, ErrorKind::Connect) {
            ErrorKind::ConnectRefused => ErrorKind::ConnectRefused,
            _ => ErrorKind::Connect,
        })?;
    let _ = tcp.set_nodelay(true);
    let connect = started.elapsed();
    let Some(tls) = &endpoint.tls else {
        return Ok((Stream::Plain(tcp), Timings { connect, tls: None }));
    };
    let started = Instant::now();
    let handshake = tls.connector.connect(tls.server_name.clone(), tcp);
    let stream = match tokio::time::timeout(endpoint.timeout, handshake).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(_)) => return Err(ErrorKind::Tls),
        Err(_) => return Err(ErrorKind::Timeout),
    };
    let timings = Timings {
        connect,
        tls: Some(started.elapsed()),
    };
    Ok((Stream::Tls(Box::new(stream)), timings))
}

/// What `next_event` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// A complete data message, now in `Socket::message`.
    Message {
        /// Binary (else text, already checked to be UTF-8).
        binary: bool,
    },
    /// A pong.
    Pong,
    /// The server closed the WebSocket; the close reply is queued.
    Close,
}

/// The frame being read.
#[derive(Debug, Clone, Copy)]
struct Current {
    opcode: u8,
    fin: bool,
    remaining: u64,
}

/// An open WebSocket, on a runtime's [`Stream`] or, for the fan-out
/// receivers' event loop, on a non-blocking mio stream read without a
/// runtime ([`Socket::detach`]).
#[derive(Debug)]
pub(crate) struct Socket<S = Stream> {
    stream: S,
    /// Received bytes; `start..end` is not yet parsed.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Bytes to write; `written..` is still pending.
    out: Vec<u8>,
    written: usize,
    /// A flush is owed after the last write.
    needs_flush: bool,
    /// The frame whose payload is being read.
    current: Option<Current>,
    /// The data message being assembled: opcode, compressed.
    assembling: Option<(u8, bool)>,
    /// Payload of the message being assembled (compressed if RSV1 was set).
    message: Vec<u8>,
    /// Payload of the control frame being read.
    control: Vec<u8>,
    /// Scratch: inflated or compressed message.
    scratch: Vec<u8>,
    /// permessage-deflate state, when agreed.
    deflate: Option<Deflate>,
    masks: Masks,
    /// A close frame has been queued.
    close_sent: bool,
    /// Bytes read from the socket (frames as on the wire, after TLS) since
    /// the caller last took the count.
    pub(crate) received: usize,
}

impl Socket {
    /// Connects and runs the opening handshake (RFC 6455 section 4.1) with
    /// a read buffer of `buffer` bytes; returns the socket, the timings and
    /// the handshake time.
    pub(crate) async fn open(
        endpoint: &Endpoint,
        offer: &Offer,
        buffer: usize,
    ) -> Result<(Socket, Timings, Duration), ErrorKind> {
        let (stream, timings) = connect(endpoint).await?;
        let started = Instant::now();
        let key = handshake::new_key();
        let mut socket = Socket {
            stream,
            buf: vec![0; buffer],
            start: 0,
            end: 0,
            out: offer.encode(&key),
            written: 0,
            needs_flush: false,
            current: None,
            assembling: None,
            message: Vec::new(),
            control: Vec::new(),
            scratch: Vec::new(),
            deflate: None,
            masks: Masks::new(),
            close_sent: false,
            received: 0,
        };
        let upgrade = async {
            loop {
                match handshake::check_response(&socket.buf[..socket.end], &key, offer) {
                    Ok(Some((agreed, len))) => return Ok((agreed, len)),
                    Ok(None) if socket.end == socket.buf.len() => return Err(ErrorKind::Handshake),
                    Ok(None) => socket.fill().await?,
                    Err(Refused::Malformed) => return Err(ErrorKind::Malformed),
                    Err(_) => return Err(ErrorKind::Handshake),
                }
            }
        };
        let (agreed, len) = tokio::time::timeout(endpoint.timeout, upgrade)
            .await
            .map_err(|_| ErrorKind::Timeout)??;
        socket.start = len;
        // The 101 is not counted; frames that came with it are.
        socket.received = socket.end - len;
        if agreed.deflate {
            socket.deflate = Some(Deflate::new(
                agreed.client_no_context_takeover,
                agreed.server_no_context_takeover,
            ));
        }
        Ok((socket, timings, started.elapsed()))
    }

    /// True for plain TCP (which [`Socket::detach`] takes).
    pub(crate) fn is_plain(&self) -> bool {
        matches!(self.stream, Stream::Plain(_))
    }

    /// The socket on a non-blocking mio stream, taken out of the runtime,
    /// for an event loop of its own; plain TCP only.
    pub(crate) fn detach(self) -> Result<Socket<mio::net::TcpStream>, ErrorKind> {
        self.map_stream(|stream| match stream {
            Stream::Plain(tcp) => tcp
                .into_std()
                .map(mio::net::TcpStream::from_std)
                .map_err(|e| ErrorKind::from_io(&e, ErrorKind::Read)),
            Stream::Tls(_) => Err(ErrorKind::Tls),
        })
    }

    /// Writes everything queued.
    pub(crate) async fn flush(&mut self) -> Result<(), ErrorKind> {
        poll_fn(|cx| match self.poll_write_out(cx) {
            Err(kind) => Poll::Ready(Err(kind)),
            Ok(true) => Poll::Ready(Ok(())),
            Ok(false) => Poll::Pending,
        })
        .await
    }

    /// The close handshake (RFC 6455 section 5.5.1): sends 1000 and waits
    /// up to `timeout` for the server's close, reading past other frames.
    pub(crate) async fn close(mut self, timeout: Duration) {
        if !self.close_sent {
            self.queue_close(&1000u16.to_be_bytes());
        }
        let _ = tokio::time::timeout(timeout, async {
            while let Ok(event) = self.next_event().await {
                if event == Event::Close {
                    let _ = self.flush().await;
                    break;
                }
            }
        })
        .await;
    }

    /// Reads until the next event, writing queued bytes meanwhile. Pings are
    /// answered here (RFC 6455 section 5.5.2).
    pub(crate) async fn next_event(&mut self) -> Result<Event, ErrorKind> {
        loop {
            if let Some(event) = self.parse()? {
                return Ok(event);
            }
            self.fill().await?;
        }
    }

    /// Writes what it can of the queued bytes; true when all are written
    /// and flushed, false when the socket is not ready (the waker is set).
    fn poll_write_out(&mut self, cx: &mut Context<'_>) -> Result<bool, ErrorKind> {
        let write_error = |e: io::Error| ErrorKind::from_io(&e, ErrorKind::Write);
        while self.written < self.out.len() {
            match Pin::new(&mut self.stream).poll_write(cx, &self.out[self.written..]) {
                Poll::Ready(Ok(0)) => return Err(ErrorKind::Write),
                Poll::Ready(Ok(n)) => {
                    self.written += n;
                    self.needs_flush = true;
                }
                Poll::Ready(Err(e)) => return Err(write_error(e)),
                Poll::Pending => return Ok(false),
            }
        }
        self.out.clear();
        self.written = 0;
        if self.needs_flush {
            match Pin::new(&mut self.stream).poll_flush(cx) {
                Poll::Ready(Ok(())) => self.needs_flush = false,
                Poll::Ready(Err(e)) => return Err(write_error(e)),
                Poll::Pending => return Ok(false),
            }
        }
        Ok(true)
    }

    /// Reads more bytes, writing queued ones meanwhile; `Closed` at EOF.
    async fn fill(&mut self) -> Result<(), ErrorKind> {
        self.make_room();
        poll_fn(|cx| {
            if let Err(kind) = self.poll_write_out(cx) {
                return Poll::Ready(Err(kind));
            }
            let mut read = ReadBuf::new(&mut self.buf[self.end..]);
            match Pin::new(&mut self.stream).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) => {
                    let n = read.filled().len();
                    if n == 0 {
                        return Poll::Ready(Err(ErrorKind::Closed));
                    }
                    self.end += n;
                    self.received += n;
                    Poll::Ready(Ok(()))
                }
                Poll::Ready(Err(e)) => Poll::Ready(Err(ErrorKind::from_io(&e, ErrorKind::Read))),
                Poll::Pending => Poll::Pending,
            }
        })
        .await
    }
}

impl<S> Socket<S> {
    /// The payload of the last `Event::Message`.
    pub(crate) fn message(&self) -> &[u8] {
        &self.message
    }

    /// Queues one data message (compressed when permessage-deflate is on).
    pub(crate) fn send(&mut self, binary: bool, payload: &[u8]) -> Result<(), ErrorKind> {
        let op = if binary { opcode::BINARY } else { opcode::TEXT };
        let mask = self.masks.next_key();
        match &mut self.deflate {
            Some(deflate) => {
                // RFC 7692 section 6.1: RSV1 marks the compressed message.
                deflate
                    .compress(payload, &mut self.scratch)
                    .map_err(|()| ErrorKind::Protocol)?;
                frame::encode(&mut self.out, op, true, &self.scratch, mask);
            }
            None => frame::encode(&mut self.out, op, false, payload, mask),
        }
        Ok(())
    }

    /// Queues a ping.
    pub(crate) fn ping(&mut self, payload: &[u8]) {
        let mask = self.masks.next_key();
        frame::encode(&mut self.out, opcode::PING, false, payload, mask);
    }

    fn queue_close(&mut self, payload: &[u8]) {
        let mask = self.masks.next_key();
        frame::encode(&mut self.out, opcode::CLOSE, false, payload, mask);
        self.close_sent = true;
    }

    /// Parses what the buffer holds; `None` when more bytes are needed.
    fn parse(&mut self) -> Result<Option<Event>, ErrorKind> {
        loop {
            let current = match self.current {
                Some(current) => current,
                None => {
                    let available = &self.buf[self.start..self.end];
                    let head = match frame::parse_head(available, self.deflate.is_some()) {
                        Ok(Some(head)) => head,
                        Ok(None) => return Ok(None),
                        // Section 7.1.7: any violation fails the connection.
                        Err(_) => return Err(ErrorKind::Protocol),
                    };
                    self.start += head.len;
                    self.begin_frame(head)?;
                    Current {
                        opcode: head.opcode,
                        fin: head.fin,
                        remaining: head.payload_len,
                    }
                }
            };
            let available = self.end - self.start;
            let take = usize::try_from(current.remaining)
                .unwrap_or(usize::MAX)
                .min(available);
            let bytes = &self.buf[self.start..self.start + take];
            if current.opcode >= opcode::CLOSE {
                self.control.extend_from_slice(bytes);
            } else {
                self.message.extend_from_slice(bytes);
            }
            self.start += take;
            let remaining = current.remaining - take as u64;
            if remaining > 0 {
                self.current = Some(Current {
                    remaining,
                    ..current
                });
                return Ok(None);
            }
            self.current = None;
            if let Some(event) = self.end_frame(current)? {
                return Ok(Some(event));
            }
        }
    }

    /// Checks a new frame against the message in progress (RFC 6455 section 5.4).
    fn begin_frame(&mut self, head: frame::Head) -> Result<(), ErrorKind> {
        if head.opcode >= opcode::CLOSE {
            self.control.clear();
            return Ok(());
        }
        match (head.opcode, self.assembling) {
            (opcode::CONTINUATION, Some(_)) if !head.rsv1 => {}
            (opcode::TEXT | opcode::BINARY, None) => {
                self.message.clear();
                self.assembling = Some((head.opcode, head.rsv1));
            }
            _ => return Err(ErrorKind::Protocol),
        }
        let total = (self.message.len() as u64).saturating_add(head.payload_len);
        if total > MAX_MESSAGE_BYTES as u64 {
            return Err(ErrorKind::TooBig);
        }
        Ok(())
    }

    /// Handles a complete frame.
    fn end_frame(&mut self, current: Current) -> Result<Option<Event>, ErrorKind> {
        match current.opcode {
            opcode::PING => {
                if !self.close_sent {
                    let mask = self.masks.next_key();
                    frame::encode(&mut self.out, opcode::PONG, false, &self.control, mask);
                }
                Ok(None)
            }
            opcode::PONG => Ok(Some(Event::Pong)),
            opcode::CLOSE => {
                // Section 5.5.1: answer a close with a close, echoing the code.
                if !self.close_sent {
                    let code = self
                        .control
                        .get(..2)
                        .map(<[u8]>::to_vec)
                        .unwrap_or_default();
                    self.queue_close(&code);
                }
                Ok(Some(Event::Close))
            }
            _ if !current.fin => Ok(None),
            _ => {
                let (first_opcode, compressed) =
                    self.assembling.take().ok_or(ErrorKind::Protocol)?;
                if compressed {
                    let deflate = self.deflate.as_mut().ok_or(ErrorKind::Protocol)?;
                    deflate
                        .decompress(&self.message, &mut self.scratch, MAX_MESSAGE_BYTES)
                        .map_err(|()| ErrorKind::Protocol)?;
                    std::mem::swap(&mut self.message, &mut self.scratch);
                }
                let binary = first_opcode == opcode::BINARY;
                // Section 8.1: a text message must be valid UTF-8.
                if !binary && std::str::from_utf8(&self.message).is_err() {
                    return Err(ErrorKind::Protocol);
                }
                Ok(Some(Event::Message { binary }))
            }
        }
    }

    /// Moves the unparsed bytes to the front when the buffer is full, or
    /// starts over when all were parsed: `end..` is the room to read into.
    fn make_room(&mut self) {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
    }

    /// The same socket on the stream `f` makes of this one's.
    fn map_stream<T, E>(self, f: impl FnOnce(S) -> Result<T, E>) -> Result<Socket<T>, E> {
        Ok(Socket {
            stream: f(self.stream)?,
            buf: self.buf,
            start: self.start,
            end: self.end,
            out: self.out,
            written: self.written,
            needs_flush: self.needs_flush,
            current: self.current,
            assembling: self.assembling,
            message: self.message,
            control: self.control,
            scratch: self.scratch,
            deflate: self.deflate,
            masks: self.masks,
            close_sent: self.close_sent,
            received: self.received,
        })
    }
}

impl Socket<mio::net::TcpStream> {
    /// The stream, to register with a `mio::Poll`.
    pub(crate) fn stream_mut(&mut self) -> &mut mio::net::TcpStream {
        &mut self.stream
    }

    /// The next event among the bytes the socket has now, writing queued
    /// bytes (pongs, the close) first; `None` once a read would block.
    /// Pings are answered here (RFC 6455 section 5.5.2).
    pub(crate) fn next_event_now(&mut self) -> Result<Option<Event>, ErrorKind> {
        loop {
            if let Some(event) = self.parse()? {
                return Ok(Some(event));
            }
            self.write_now()?;
            self.make_room();
            match io::Read::read(&mut self.stream, &mut self.buf[self.end..]) {
                Ok(0) => return Err(ErrorKind::Closed),
                Ok(n) => {
                    self.end += n;
                    self.received += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ErrorKind::from_io(&e, ErrorKind::Read)),
            }
        }
    }

    /// Queues a close (1000) unless one was sent, and writes what it can.
    pub(crate) fn start_close(&mut self) -> Result<(), ErrorKind> {
        if !self.close_sent {
            self.queue_close(&1000u16.to_be_bytes());
        }
        self.write_now()
    }

    /// Writes what the socket takes of the queued bytes now; the rest waits
    /// for the next call.
    fn write_now(&mut self) -> Result<(), ErrorKind> {
        while self.written < self.out.len() {
            match io::Write::write(&mut self.stream, &self.out[self.written..]) {
                Ok(0) => return Err(ErrorKind::Write),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ErrorKind::from_io(&e, ErrorKind::Write)),
            }
        }
        self.out.clear();
        self.written = 0;
        Ok(())
    }
}
