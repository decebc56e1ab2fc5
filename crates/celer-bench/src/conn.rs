//! The connection driver: connect, write pre-encoded requests, read and parse
//! responses in place, record. This is the hot path: it allocates nothing per
//! request.

use std::pin::Pin;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Sleep;

use crate::parse::{self, BodyDecoder, Framing};
use crate::plan::Plan;
use crate::stats::ErrorKind;
use crate::worker::Worker;

/// Pause after a failed connect before the next attempt, so that a dead
/// server is not hammered by a busy loop.
const CONNECT_BACKOFF: Duration = Duration::from_millis(10);

/// How a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Open a new connection and go on.
    Reconnect,
    /// The run is over for this connection.
    Stop,
}

/// A complete response.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Response {
    /// Status code.
    pub(crate) status: u16,
    /// The connection cannot be reused.
    pub(crate) close: bool,
}

/// A connection's read buffer; responses are parsed where they land.
#[derive(Debug)]
pub(crate) struct ReadBuf {
    buf: Vec<u8>,
    /// Start of unparsed bytes.
    start: usize,
    /// End of received bytes.
    end: usize,
    /// Bytes read since the last response was recorded.
    pub(crate) unrecorded: usize,
}

impl ReadBuf {
    /// A buffer of `size` bytes.
    pub(crate) fn new(size: usize) -> ReadBuf {
        ReadBuf {
            buf: vec![0; size],
            start: 0,
            end: 0,
            unrecorded: 0,
        }
    }

    fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
        self.unrecorded = 0;
    }

    /// Reads more bytes, making room first; `Closed` at EOF.
    async fn fill<S: AsyncRead + Unpin>(&mut self, stream: &mut S) -> Result<(), ErrorKind> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            if self.start == 0 {
                // A head larger than the whole buffer.
                return Err(ErrorKind::Malformed);
            }
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let n = stream
            .read(&mut self.buf[self.end..])
            .await
            .map_err(|e| ErrorKind::from_io(&e, ErrorKind::Read))?;
        if n == 0 {
            return Err(ErrorKind::Closed);
        }
        self.end += n;
        self.unrecorded += n;
        Ok(())
    }

    /// Reads one response, skipping interim (1xx) responses; the body is
    /// consumed and dropped as it arrives.
    pub(crate) async fn read_response<S: AsyncRead + Unpin>(
        &mut self,
        stream: &mut S,
        request_was_head: bool,
    ) -> Result<Response, ErrorKind> {
        let head = loop {
            if self.end > self.start {
                match parse::parse_head(&self.buf[self.start..self.end], request_was_head) {
                    Ok(Some(head)) => {
                        self.start += head.len;
                        if head.is_interim() {
                            continue;
                        }
                        break head;
                    }
                    Ok(None) => {}
                    Err(_) => return Err(ErrorKind::Malformed),
                }
            }
            self.fill(stream).await?;
        };
        let mut decoder = BodyDecoder::new(head.framing);
        loop {
            let progress = decoder
                .decode(&self.buf[self.start..self.end])
                .map_err(|_| ErrorKind::Malformed)?;
            self.start += progress.consumed;
            if progress.done {
                break;
            }
            match self.fill(stream).await {
                Ok(()) => {}
                // A close-delimited body ends at EOF (RFC 9112 section 6.3, item 8).
                Err(ErrorKind::Closed) if head.framing == Framing::Close => break,
                Err(kind) => return Err(kind),
            }
        }
        Ok(Response {
            status: head.status,
            close: head.close,
        })
    }
}

/// State a connection keeps across reconnects.
#[derive(Debug)]
struct ConnState {
    io: ReadBuf,
    /// Requests of the current batch when several targets are mixed.
    batch: Vec<u8>,
    /// Whether each request of the current batch is a HEAD.
    heads: Vec<bool>,
    /// xorshift64 state for weighted target picking.
    rng: u64,
    /// Open loop: when the next request is due.
    next_send: Option<Instant>,
    /// Open loop: time between this connection's requests.
    interval: Duration,
}

impl ConnState {
    fn new(worker: &Worker, global_idx: usize) -> ConnState {
        let plan = &worker.plan;
        let pipeline = plan.pipeline as usize;
        let longest = plan
            .requests
            .iter()
            .map(|r| r.bytes.len())
            .max()
            .unwrap_or(0);
        let (next_send, interval) = match plan.rate {
            Some(rate) => {
                let interval = Duration::from_secs_f64(plan.connections as f64 / rate);
                // Stagger the connections over one interval.
                let offset = interval.mul_f64(global_idx as f64 / plan.connections as f64);
                (Some(worker.start + offset), interval)
            }
            None => (None, Duration::ZERO),
        };
        ConnState {
            io: ReadBuf::new(plan.buffer),
            batch: Vec::with_capacity(longest * pipeline),
            heads: vec![plan.requests[0].is_head; pipeline],
            rng: 0x9E37_79B9_7F4A_7C15
                ^ (global_idx as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03),
            next_send,
            interval,
        }
    }
}

/// The bytes of a batch of `k` requests; with several targets, each request
/// is picked by weight and `heads` records which ones are HEAD.
fn prepare<'a>(
    plan: &'a Plan,
    k: usize,
    batch: &'a mut Vec<u8>,
    heads: &mut [bool],
    rng: &mut u64,
) -> &'a [u8] {
    if plan.requests.len() == 1 {
        return &plan.batch[..k * plan.requests[0].bytes.len()];
    }
    batch.clear();
    let total = plan.cumulative_weights.last().copied().unwrap_or(1);
    for slot in heads.iter_mut().take(k) {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        let pick = *rng % total;
        let idx = plan.cumulative_weights.partition_point(|&w| w <= pick);
        let request = &plan.requests[idx];
        batch.extend_from_slice(&request.bytes);
        *slot = request.is_head;
    }
    batch
}

/// Runs one connection slot until the run is over.
///
/// A batch is claimed before a connection is opened for it, so that no
/// connection is opened once the requests are used up, and a failed connect
/// fails the requests it was opened for.
pub(crate) async fn run(worker: Rc<Worker>, global_idx: usize) {
    let mut state = ConnState::new(&worker, global_idx);
    let mut timer = Box::pin(tokio::time::sleep(Duration::ZERO));
    let plan = &worker.plan;
    if !plan.ramp.is_zero() {
        let offset = plan
            .ramp
            .mul_f64(global_idx as f64 / plan.connections as f64);
        timer.as_mut().reset((worker.start + offset).into());
        timer.as_mut().await;
        if state.next_send.is_some_and(|at| at < worker.start + offset) {
            state.next_send = Some(worker.start + offset);
        }
    }
    while let Some(batch) = next_batch(&worker, &mut state, timer.as_mut()).await {
        let outcome = match connect(&worker).await {
            Ok(stream) => match &worker.plan.tls {
                None => {
                    worker.set_up();
                    hold(&worker).await;
                    drive(&worker, stream, &mut state, timer.as_mut(), batch).await
                }
                Some(_) => match handshake(&worker, stream).await {
                    Ok(stream) => {
                        worker.set_up();
                        hold(&worker).await;
                        drive(&worker, stream, &mut state, timer.as_mut(), batch).await
                    }
                    Err(kind) => {
                        worker.setup_failed(kind);
                        worker.failed(kind, u64::from(batch.size));
                        Outcome::Reconnect
                    }
                },
            },
            Err(kind) => {
                worker.setup_failed(kind);
                worker.failed(kind, u64::from(batch.size));
                tokio::time::sleep(CONNECT_BACKOFF).await;
                Outcome::Reconnect
            }
        };
        if outcome == Outcome::Stop {
            break;
        }
    }
}

/// During `--ramp`, a connection that is set up sends nothing until the
/// ramp ends: the clients already connected must not keep the server so
/// busy that the later ones cannot connect (a server that serves requests
/// before it accepts would never reach N connections).
async fn hold(worker: &Worker) {
    let end = worker.start + worker.plan.ramp;
    if Instant::now() < end {
        tokio::time::sleep_until(end.into()).await;
    }
}

/// Requests claimed to be sent together.
#[derive(Debug, Clone, Copy)]
struct Batch {
    /// How many.
    size: u32,
    /// Open loop: when they were due.
    intended: Option<Instant>,
}

/// Waits for the schedule (open loop) and claims the next batch; `None` ends the run.
async fn next_batch(
    worker: &Worker,
    state: &mut ConnState,
    mut timer: Pin<&mut Sleep>,
) -> Option<Batch> {
    let intended = state.next_send;
    let now = Instant::now();
    if let Some(at) = intended {
        if at > now {
            timer.as_mut().reset(at.into());
            timer.as_mut().await;
        }
    }
    let size = worker.claim(worker.plan.pipeline, intended.unwrap_or(now));
    if size == 0 {
        return None;
    }
    if let Some(at) = &mut state.next_send {
        *at += state.interval;
    }
    Some(Batch { size, intended })
}

/// Opens a TCP connection with TCP_NODELAY, recording the connect time.
async fn connect(worker: &Worker) -> Result<TcpStream, ErrorKind> {
    let started = Instant::now();
    let stream = open_tcp(&worker.plan).await?;
    worker.connected(started.elapsed());
    Ok(stream)
}

/// Opens a TCP connection with TCP_NODELAY within the request timeout.
pub(crate) async fn open_tcp(plan: &Plan) -> Result<TcpStream, ErrorKind> {
    let stream = tokio::time::timeout(plan.timeout, TcpStream::connect(plan.addr))
        .await
        .map_err(|_| ErrorKind::Connect)?
        .map_err(|e| match ErrorKind::from_io(&e, ErrorKind::Connect) {
            ErrorKind::ConnectRefused => ErrorKind::ConnectRefused,
            _ => ErrorKind::Connect,
        })?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// Runs the TLS handshake, recording its time.
async fn handshake(
    worker: &Worker,
    stream: TcpStream,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, ErrorKind> {
    let started = Instant::now();
    let stream = tls_handshake(&worker.plan, stream).await?;
    worker.handshaken(started.elapsed());
    Ok(stream)
}

/// Runs the TLS handshake within the request timeout.
pub(crate) async fn tls_handshake(
    plan: &Plan,
    stream: TcpStream,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, ErrorKind> {
    let tls = plan.tls.as_ref().ok_or(ErrorKind::Tls)?;
    let connect = tls.connector.connect(tls.server_name.clone(), stream);
    match tokio::time::timeout(plan.timeout, connect).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(_)) => Err(ErrorKind::Tls),
        Err(_) => Err(ErrorKind::Timeout),
    }
}

/// Sends `first` and then further batches on one connection until it must
/// be closed or the run ends.
async fn drive<S: AsyncRead + AsyncWrite + Unpin>(
    worker: &Worker,
    mut stream: S,
    state: &mut ConnState,
    mut timer: Pin<&mut Sleep>,
    first: Batch,
) -> Outcome {
    let plan = &*worker.plan;
    state.io.clear();
    let mut next = Some(first);
    while let Some(Batch { size, intended }) = next {
        let sent = Instant::now();
        // Open loop measures from the intended send time (coordinated omission).
        let base = intended.unwrap_or(sent);
        let ConnState {
            io,
            batch,
            heads,
            rng,
            ..
        } = state;
        let bytes = prepare(plan, size as usize, batch, heads, rng);
        timer.as_mut().reset((sent + plan.timeout).into());
        let mut answered = 0;
        let exchange = Exchange {
            worker,
            heads: &heads[..size as usize],
            base,
            sent,
        };
        let result = tokio::select! {
            biased;
            result = exchange.run(&mut stream, bytes, io, &mut answered) => result,
            () = timer.as_mut() => Err(ErrorKind::Timeout),
        };
        match result {
            Ok(true) if plan.keep_alive => {}
            Ok(_) => return Outcome::Reconnect,
            Err(kind) => {
                worker.failed(kind, u64::from(size - answered));
                return Outcome::Reconnect;
            }
        }
        next = next_batch(worker, state, timer.as_mut()).await;
    }
    Outcome::Stop
}

/// One batch: write it, read its responses.
struct Exchange<'a> {
    worker: &'a Worker,
    heads: &'a [bool],
    base: Instant,
    sent: Instant,
}

impl Exchange<'_> {
    /// Returns whether the connection can be reused.
    async fn run<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        stream: &mut S,
        bytes: &[u8],
        io: &mut ReadBuf,
        answered: &mut u32,
    ) -> Result<bool, ErrorKind> {
        let write_error = |e: std::io::Error| ErrorKind::from_io(&e, ErrorKind::Write);
        stream.write_all(bytes).await.map_err(write_error)?;
        stream.flush().await.map_err(write_error)?;
        for (idx, &is_head) in self.heads.iter().enumerate() {
            let response = io.read_response(stream, is_head).await?;
            *answered += 1;
            let bytes = std::mem::take(&mut io.unrecorded);
            self.worker
                .response(response.status, bytes, self.base, self.sent);
            if response.close {
                let last = idx + 1 == self.heads.len();
                return if last {
                    Ok(false)
                } else {
                    Err(ErrorKind::Closed)
                };
            }
        }
        Ok(true)
    }
}
