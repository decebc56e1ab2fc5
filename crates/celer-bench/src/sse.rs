//! SSE fan-out latency (`--sse N`): N subscribers read a server-sent event
//! stream (HTML Living Standard §9.2); the bench itself changes the
//! stream's source, a file the server watches, `--rounds` times, and times
//! each subscriber's receipt of each new version from the change.
//!
//! Each update rewrites `--sse-file` atomically (a sibling file renamed
//! over it) with one field added at the start of its JSON object:
//! `"celer_bench":"NONCE:SEQ:NS"`, where NS is the writer's
//! `CLOCK_REALTIME` in nanoseconds taken just before the write. A
//! subscriber that completes an event (its blank line) whose first data
//! line carries this run's NONCE records `now - NS` on the same clock, so
//! the figure spans the whole path: the server noticing the file, reading
//! it, making the version and pushing it, and the client reading it.
//!
//! Subscribers are spread over the load threads, each a current-thread
//! runtime; the calling thread writes the updates and collects the
//! arrivals. Before the first update every subscriber must have received
//! the current version (its first event).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Semaphore, watch};

use crate::conn::{open_tcp, tls_handshake};
use crate::encode::RequestParts;
use crate::parse::{self, BodyDecoder, Framing};
use crate::plan::Plan;
use crate::procfs::Processes;
use crate::report::{Latency, RoundReport, ServerCpu, SseReport};
use crate::stats::{ErrorKind, nanos};
use crate::target::{Origin, Target};
use crate::{BenchArgs, Error};

mod gzip;

pub(crate) use gzip::GzipCounts;

/// Subscribers connecting at once per thread; more would overflow listen backlogs.
const OPENING_AT_ONCE: usize = 128;

/// Read buffer per subscriber; events stream through it.
const READ_BUFFER: usize = 16 * 1024;

/// Bytes kept of each event-stream line to look for the marker, which is
/// at the start of the document and so of the event's first data line.
const LINE_PREFIX: usize = 256;

/// Pause after an update reached every subscriber (or timed out) before
/// the next one, so that one update's stragglers do not queue behind the
/// next.
const UPDATE_PAUSE: Duration = Duration::from_millis(300);

/// Time left to the server to settle (free what sending the first event
/// took) before its RSS is read with the subscribers connected.
const SETTLE: Duration = Duration::from_secs(1);

/// Largest `--sse-file` read, in bytes.
pub(crate) const MAX_FILE_BYTES: u64 = 64 << 20;

/// The field name the bench adds to the document.
const FIELD: &str = "celer_bench";

/// The validated `--sse` settings.
#[derive(Debug, Clone)]
pub(crate) struct SsePlan {
    /// Subscribers to open.
    pub(crate) subscribers: usize,
    /// Updates to publish.
    pub(crate) updates: u32,
    /// The source file the bench rewrites.
    pub(crate) file: PathBuf,
    /// Its content when the run started: a JSON object.
    document: Vec<u8>,
    /// Index just after the object's `{`.
    brace: usize,
    /// Whether the object has members (a comma follows the added field).
    members: bool,
    /// The subscription request (GET with `Accept: text/event-stream`).
    request: Vec<u8>,
}

/// Validates the `--sse` arguments; `None` without `--sse`.
pub(crate) fn plan(
    args: &BenchArgs,
    origin: &Origin,
    target: &Target,
) -> Result<Option<SsePlan>, Error> {
    let Some(subscribers) = args.sse else {
        if args.sse_file.is_some() {
            return Err(Error::usage("--sse-file needs --sse"));
        }
        return Ok(None);
    };
    if origin.websocket {
        return Err(Error::usage(
            "--sse needs an http:// or https:// URL (the event stream)",
        ));
    }
    if subscribers == 0 {
        return Err(Error::usage("--sse must be at least 1"));
    }
    if args.rounds == 0 {
        return Err(Error::usage("--rounds must be at least 1"));
    }
    let Some(file) = args.sse_file.clone() else {
        return Err(Error::usage(
            "--sse needs --sse-file: the source file of the stream, which the bench rewrites for each update",
        ));
    };
    let document = read_document(&file)?;
    let brace = document
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .filter(|&at| document[at] == b'{')
        .map(|at| at + 1)
        .ok_or_else(|| {
            Error::usage(format!(
                "{} does not hold a JSON object: --sse adds a field to it",
                file.display()
            ))
        })?;
    let members = document[brace..]
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b != b'}');
    let mut headers = args.headers.clone();
    if !headers
        .iter()
        .any(|h| h.to_ascii_lowercase().starts_with("accept:"))
    {
        headers.push("Accept: text/event-stream".to_string());
    }
    let parts = RequestParts::new("GET", &headers, Vec::new(), false)?;
    Ok(Some(SsePlan {
        subscribers,
        updates: args.rounds,
        file,
        document,
        brace,
        members,
        request: parts.encode(origin, target).bytes,
    }))
}

fn read_document(file: &PathBuf) -> Result<Vec<u8>, Error> {
    let cannot = |e: std::io::Error| Error::io(format!("cannot read {}", file.display()), e);
    let len = std::fs::metadata(file).map_err(cannot)?.len();
    if len > MAX_FILE_BYTES {
        return Err(Error::usage(format!(
            "{} is {len} bytes, over the {MAX_FILE_BYTES}-byte limit of --sse-file",
            file.display()
        )));
    }
    std::fs::read(file).map_err(cannot)
}

impl SsePlan {
    /// Bytes of each published document.
    fn document_bytes(&self, nonce: u64) -> usize {
        self.render(nonce, 0, 0).len()
    }

    /// The document with the marker of update `seq`, published at `ns`.
    fn render(&self, nonce: u64, seq: u32, ns: u128) -> Vec<u8> {
        let field = format!(
            "\"{FIELD}\":\"{nonce:016x}:{seq}:{ns}\"{}",
            if self.members { "," } else { "" }
        );
        let mut out = Vec::with_capacity(self.document.len() + field.len());
        out.extend_from_slice(&self.document[..self.brace]);
        out.extend_from_slice(field.as_bytes());
        out.extend_from_slice(&self.document[self.brace..]);
        out
    }

    /// Publishes update `seq`: the clock is read, the document with it is
    /// written to a sibling file and renamed over the source (one atomic
    /// change the server sees); returns the time written into it.
    fn publish(&self, nonce: u64, seq: u32) -> Result<(), Error> {
        let ns = realtime_ns();
        let body = self.render(nonce, seq, ns);
        let name = self
            .file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = self.file.with_file_name(format!(".{name}.celer-bench"));
        let cannot = |e: std::io::Error| Error::io(format!("cannot write {}", tmp.display()), e);
        let mut f = std::fs::File::create(&tmp).map_err(cannot)?;
        f.write_all(&body).map_err(cannot)?;
        drop(f);
        std::fs::rename(&tmp, &self.file).map_err(|e| {
            Error::io(
                format!("cannot rename {} to {}", tmp.display(), self.file.display()),
                e,
            )
        })
    }

    /// Puts the file back as it was.
    fn restore(&self) {
        let _ = std::fs::write(&self.file, &self.document);
    }
}

/// `CLOCK_REALTIME` in nanoseconds.
fn realtime_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// What subscribers tell the coordinator.
#[derive(Debug, Clone, Copy)]
enum Note {
    /// Subscribed, and the first event (the current version) arrived.
    Ready,
    /// Could not connect, handshake or subscribe.
    Failed(ErrorKind),
    /// Update `seq` arrived, `latency` after it was published.
    Arrived { seq: u32, latency: Duration },
    /// A ready subscriber lost its stream.
    Lost(ErrorKind),
}

/// Runs the SSE mode on `threads` subscriber threads.
///
/// With `--pid`, the server's RSS is read before the subscribers connect
/// and once they all have the current version; its CPU time is measured
/// over the updates.
pub(crate) fn run(
    plan: &Arc<Plan>,
    sse: &Arc<SsePlan>,
    threads: usize,
    processes: &Processes,
) -> Result<SseReport, Error> {
    let rss_before = (!processes.is_empty()).then(|| processes.rss_bytes());
    let nonce = (realtime_ns() as u64) ^ u64::from(std::process::id()).rotate_left(32);
    let prefix: Arc<[u8]> = format!("\"{FIELD}\":\"{nonce:016x}:").into_bytes().into();
    let (notes, inbox) = mpsc::channel();
    let (stop, stopped) = watch::channel(false);
    let start = Instant::now();
    let mut handles = Vec::with_capacity(threads);
    let mut first = 0;
    for idx in 0..threads {
        let count = sse.subscribers / threads + usize::from(idx < sse.subscribers % threads);
        let range = first..first + count;
        first += count;
        let (plan, sse, prefix, notes) = (plan.clone(), sse.clone(), prefix.clone(), notes.clone());
        let mut stopped = stopped.clone();
        let handle = std::thread::Builder::new()
            .name(format!("celer-bench-sse-{idx}"))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                let local = tokio::task::LocalSet::new();
                // The subscribers of a thread share its segment cache.
                let segments = Rc::new(RefCell::new(gzip::Segments::new(prefix.clone())));
                let shared = segments.clone();
                local.block_on(&runtime, async move {
                    let gate = Rc::new(Semaphore::new(OPENING_AT_ONCE));
                    for global in range {
                        let offset = plan.ramp.mul_f64(global as f64 / sse.subscribers as f64);
                        tokio::task::spawn_local(subscribe(
                            plan.clone(),
                            sse.clone(),
                            prefix.clone(),
                            notes.clone(),
                            gate.clone(),
                            shared.clone(),
                            start + offset,
                        ));
                    }
                    let _ = stopped.wait_for(|&s| s).await;
                });
                // Dropping the set ends the subscribers and closes their sockets.
                drop(local);
                let counts = segments.borrow().counts;
                Ok::<_, std::io::Error>(counts)
            })
            .map_err(|e| Error::io("cannot start a subscriber thread", e))?;
        handles.push(handle);
    }
    drop(notes);
    let result = coordinate(plan, sse, &inbox, nonce, start, processes, rss_before);
    let _ = stop.send(true);
    let mut counts = GzipCounts::default();
    for handle in handles {
        counts.add(
            &handle
                .join()
                .map_err(|_| Error::io("a subscriber thread failed", "panic"))?
                .map_err(|e| Error::io("cannot start a subscriber thread runtime", e))?,
        );
    }
    sse.restore();
    let mut report = result?;
    report.gzip = (counts.streams > 0).then_some(counts);
    Ok(report)
}

/// Counts of what went wrong, by kind name.
fn bump(map: &mut BTreeMap<&'static str, u64>, kind: ErrorKind) {
    *map.entry(kind.name()).or_default() += 1;
}

/// Waits for the subscribers, publishes the updates and collects the arrivals.
fn coordinate(
    plan: &Plan,
    sse: &SsePlan,
    inbox: &mpsc::Receiver<Note>,
    nonce: u64,
    start: Instant,
    processes: &Processes,
    rss_before: Option<u64>,
) -> Result<SseReport, Error> {
    let mut errors = BTreeMap::new();
    let mut lost = BTreeMap::new();
    let (mut ready, mut failed) = (0usize, 0usize);
    // Every subscriber has its first event, or failed, or the time is up.
    let deadline = start + plan.ramp + plan.timeout;
    while ready + failed < sse.subscribers {
        let left = deadline.saturating_duration_since(Instant::now());
        match inbox.recv_timeout(left) {
            Ok(Note::Ready) => ready += 1,
            Ok(Note::Failed(kind)) => {
                failed += 1;
                bump(&mut errors, kind);
            }
            Ok(Note::Lost(kind)) => {
                ready = ready.saturating_sub(1);
                failed += 1;
                bump(&mut lost, kind);
            }
            Ok(Note::Arrived { .. }) => {}
            Err(_) => break,
        }
    }
    let subscribe_s = start.elapsed().as_secs_f64();
    let waited_out = sse.subscribers - ready - failed;
    if waited_out > 0 {
        *errors.entry(ErrorKind::Timeout.name()).or_default() += waited_out as u64;
    }
    let mut alive = ready;
    let rss_with = rss_before.map(|_| {
        std::thread::sleep(SETTLE);
        processes.rss_bytes()
    });
    let cpu = (!processes.is_empty()).then(|| processes.start_cpu());
    let mut all = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)
        .map_err(|e| Error::io("cannot make a histogram", e.to_string()))?;
    let mut updates = Vec::with_capacity(sse.updates as usize);
    let mut deliveries = 0u64;
    for seq in 1..=sse.updates {
        if alive == 0 {
            break;
        }
        sse.publish(nonce, seq)?;
        let sent = Instant::now();
        let mut arrivals = Vec::with_capacity(alive);
        while arrivals.len() < alive {
            let left = (sent + plan.timeout).saturating_duration_since(Instant::now());
            match inbox.recv_timeout(left) {
                Ok(Note::Arrived { seq: s, latency }) if s == seq => arrivals.push(latency),
                Ok(Note::Arrived { .. }) => {}
                Ok(Note::Ready) => alive += 1,
                Ok(Note::Failed(kind)) => bump(&mut errors, kind),
                Ok(Note::Lost(kind)) => {
                    alive = alive.saturating_sub(1);
                    bump(&mut lost, kind);
                }
                Err(_) => break,
            }
        }
        for latency in &arrivals {
            all.saturating_record(nanos(*latency));
        }
        deliveries += arrivals.len() as u64;
        updates.push(RoundReport::new(seq, &mut arrivals, alive));
        // Notes during the pause: losses count against the next update.
        let pause_end = Instant::now() + UPDATE_PAUSE;
        while let Ok(note) = inbox.recv_timeout(pause_end.saturating_duration_since(Instant::now()))
        {
            match note {
                Note::Lost(kind) => {
                    alive = alive.saturating_sub(1);
                    bump(&mut lost, kind);
                }
                Note::Failed(kind) => bump(&mut errors, kind),
                Note::Ready => alive += 1,
                Note::Arrived { .. } => {}
            }
        }
    }
    let server =
        cpu.map(|cpu| ServerCpu::new(processes.roots(), processes.cpu_since(&cpu), deliveries));
    Ok(SseReport::new(
        sse,
        ready,
        subscribe_s,
        sse.document_bytes(nonce),
        errors,
        lost,
        updates,
        Latency::from_ns(&all),
        (rss_before, rss_with),
        server,
    ))
}

/// One subscriber: waits for its turn in the ramp, connects, subscribes
/// and reads events until the run ends.
async fn subscribe(
    plan: Arc<Plan>,
    sse: Arc<SsePlan>,
    prefix: Arc<[u8]>,
    notes: mpsc::Sender<Note>,
    gate: Rc<Semaphore>,
    segments: Rc<RefCell<gzip::Segments>>,
    at: Instant,
) {
    tokio::time::sleep_until(at.into()).await;
    let Ok(permit) = gate.acquire().await else {
        return;
    };
    let stream = match open_tcp(&plan).await {
        Ok(stream) => stream,
        Err(kind) => {
            let _ = notes.send(Note::Failed(kind));
            return;
        }
    };
    let mut reader = Reader::new(prefix, notes);
    let ended = match &plan.tls {
        None => reader.run(stream, &plan, &sse, &segments, permit).await,
        Some(_) => match tls_handshake(&plan, stream).await {
            Ok(stream) => reader.run(stream, &plan, &sse, &segments, permit).await,
            Err(kind) => Err(kind),
        },
    };
    if let Err(kind) = ended {
        let note = if reader.ready {
            Note::Lost(kind)
        } else {
            Note::Failed(kind)
        };
        let _ = reader.notes.send(note);
    }
}

/// A subscriber's stream reader: the response, its body framing and
/// coding, and the event-stream lines.
struct Reader {
    prefix: Arc<[u8]>,
    notes: mpsc::Sender<Note>,
    /// The first event arrived.
    ready: bool,
    /// Where the reader is in the event stream.
    lines: Lines,
}

/// The event-stream line state of a reader: everything that carries over
/// from one body byte to the next.
#[derive(Debug, Clone)]
struct Lines {
    /// The first bytes of the current line.
    line: [u8; LINE_PREFIX],
    /// Bytes of the current line seen (kept: at most `LINE_PREFIX`).
    line_len: usize,
    /// The current event carries this update: sequence and publication ns.
    pending: Option<(u32, u128)>,
    /// The last byte was a CR (CR LF ends one line, RFC-style).
    after_cr: bool,
}

/// What a blank line does: ends an event, which carries this update or none.
type Dispatch = Option<(u32, u128)>;

impl Lines {
    fn new() -> Lines {
        Lines {
            line: [0; LINE_PREFIX],
            line_len: 0,
            pending: None,
            after_cr: false,
        }
    }

    /// At an event boundary: no line begun, no event pending, no CR to
    /// pair with a LF. Feeding bytes from here does not depend on
    /// anything before (what a cached segment's `Replay` needs).
    fn at_boundary(&self) -> bool {
        self.line_len == 0 && self.pending.is_none() && !self.after_cr
    }

    /// Takes body bytes: splits them into lines and calls `dispatch` at
    /// blank lines. Line ends are found with `memchr` and only a line's
    /// first `LINE_PREFIX` bytes are copied: one core reads 10,000
    /// subscribers' copies of a 50 KiB document per update, and a loop
    /// over every byte made the load generator, not the server, the
    /// bound of the figure.
    fn feed(&mut self, mut bytes: &[u8], prefix: &[u8], dispatch: &mut impl FnMut(Dispatch)) {
        while let Some(&first) = bytes.first() {
            if self.after_cr && first == b'\n' {
                // The LF of a CR LF: the line already ended.
                self.after_cr = false;
                bytes = &bytes[1..];
                continue;
            }
            let Some(at) = memchr::memchr2(b'\n', b'\r', bytes) else {
                self.keep(bytes);
                return;
            };
            self.keep(&bytes[..at]);
            self.after_cr = bytes[at] == b'\r';
            self.end_line(prefix, dispatch);
            bytes = &bytes[at + 1..];
        }
    }

    /// Adds bytes of the current line (no line end among them).
    fn keep(&mut self, part: &[u8]) {
        if part.is_empty() {
            return;
        }
        self.after_cr = false;
        let start = self.line_len.min(LINE_PREFIX);
        let n = part.len().min(LINE_PREFIX - start);
        self.line[start..start + n].copy_from_slice(&part[..n]);
        self.line_len += part.len();
    }

    fn end_line(&mut self, prefix: &[u8], dispatch: &mut impl FnMut(Dispatch)) {
        let line = &self.line[..self.line_len.min(LINE_PREFIX)];
        if self.line_len == 0 {
            // A blank line ends an event.
            dispatch(self.pending.take());
        } else if line.starts_with(b"data:") {
            if let Some(found) = marker(line, prefix) {
                self.pending = Some(found);
            }
        }
        self.line_len = 0;
    }
}

/// What feeding one segment's plain bytes to a reader at an event
/// boundary does: the events it ends, in order, and the line state it
/// leaves. Computed once per distinct segment and replayed on every
/// subscriber that receives it at an event boundary.
#[derive(Debug, Clone)]
struct Replay {
    dispatches: Vec<Dispatch>,
    end: Lines,
}

impl Replay {
    fn of(plain: &[u8], prefix: &[u8]) -> Replay {
        let mut lines = Lines::new();
        let mut dispatches = Vec::new();
        lines.feed(plain, prefix, &mut |d| dispatches.push(d));
        Replay {
            dispatches,
            end: lines,
        }
    }
}

impl Reader {
    fn new(prefix: Arc<[u8]>, notes: mpsc::Sender<Note>) -> Reader {
        Reader {
            prefix,
            notes,
            ready: false,
            lines: Lines::new(),
        }
    }

    /// Subscribes on `stream` and reads events until it ends; a gzip-coded
    /// stream is inflated with the help of `segments`, the thread's cache.
    async fn run<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        mut stream: S,
        plan: &Plan,
        sse: &SsePlan,
        segments: &Rc<RefCell<gzip::Segments>>,
        permit: tokio::sync::SemaphorePermit<'_>,
    ) -> Result<(), ErrorKind> {
        let write_error = |e: std::io::Error| ErrorKind::from_io(&e, ErrorKind::Write);
        let mut buf = vec![0u8; READ_BUFFER];
        let (mut start, mut end) = (0, 0);
        let head = tokio::time::timeout(plan.timeout, async {
            stream.write_all(&sse.request).await.map_err(write_error)?;
            stream.flush().await.map_err(write_error)?;
            loop {
                if let Some(head) =
                    parse::parse_head(&buf[..end], false).map_err(|_| ErrorKind::Malformed)?
                {
                    if head.is_interim() {
                        buf.copy_within(head.len..end, 0);
                        end -= head.len;
                        continue;
                    }
                    return Ok(head);
                }
                if end == buf.len() {
                    return Err(ErrorKind::Malformed);
                }
                end += read(&mut stream, &mut buf[end..]).await?;
            }
        })
        .await
        .map_err(|_| ErrorKind::Timeout)??;
        drop(permit);
        if head.status != 200 {
            return Err(ErrorKind::Status);
        }
        let mut gzip = match gzip::content_coding(&buf[..head.len])? {
            gzip::Coding::Identity => None,
            gzip::Coding::Gzip => Some(gzip::GzipBody::new(segments.clone())),
        };
        if matches!(head.framing, Framing::Empty | Framing::Length(0)) {
            return Err(ErrorKind::Closed);
        }
        start += head.len;
        let mut body = BodyDecoder::new(head.framing);
        loop {
            while start < end {
                let data = body.data_ahead();
                if data > 0 {
                    let n = usize::try_from(data).map_or(end - start, |d| d.min(end - start));
                    match &mut gzip {
                        None => self.feed(&buf[start..start + n]),
                        Some(gzip) => gzip.push(&buf[start..start + n], self)?,
                    }
                    let _ = body.decode(&buf[start..start + n]);
                    start += n;
                } else {
                    let step = body
                        .decode(&buf[start..=start])
                        .map_err(|_| ErrorKind::Malformed)?;
                    start += step.consumed;
                    if step.done {
                        return Err(self.ended(gzip.as_mut()));
                    }
                }
            }
            start = 0;
            end = match read(&mut stream, &mut buf).await {
                Ok(n) => n,
                Err(ErrorKind::Closed) => return Err(self.ended(gzip.as_mut())),
                Err(kind) => return Err(kind),
            };
        }
    }

    /// The body ended: `Closed`, unless the gzip stream it carried ends
    /// wrongly.
    fn ended(&mut self, gzip: Option<&mut gzip::GzipBody>) -> ErrorKind {
        match gzip.map(|gzip| gzip.finish(self)) {
            Some(Err(kind)) => kind,
            _ => ErrorKind::Closed,
        }
    }

    /// Takes plain body bytes, in order.
    fn feed(&mut self, bytes: &[u8]) {
        let Reader {
            prefix,
            notes,
            ready,
            lines,
        } = self;
        lines.feed(bytes, prefix, &mut |d| dispatch(notes, ready, d));
    }

    /// Does what feeding the plain bytes of `replay` would do; only valid
    /// at an event boundary (`Lines::at_boundary`).
    fn replay(&mut self, replay: &Replay) {
        debug_assert!(self.lines.at_boundary());
        for &d in &replay.dispatches {
            dispatch(&self.notes, &mut self.ready, d);
        }
        self.lines.clone_from(&replay.end);
    }
}

/// An event ended: the first makes the subscriber ready; one that carries
/// this run's marker is an arrival, timed now.
fn dispatch(notes: &mpsc::Sender<Note>, ready: &mut bool, event: Dispatch) {
    if !*ready {
        *ready = true;
        let _ = notes.send(Note::Ready);
    }
    if let Some((seq, ns)) = event {
        let now = realtime_ns();
        let latency =
            Duration::from_nanos(u64::try_from(now.saturating_sub(ns)).unwrap_or(u64::MAX));
        let _ = notes.send(Note::Arrived { seq, latency });
    }
}

/// Reads into `buf`; EOF is `Closed`.
async fn read<S: AsyncRead + Unpin>(stream: &mut S, buf: &mut [u8]) -> Result<usize, ErrorKind> {
    match stream.read(buf).await {
        Ok(0) => Err(ErrorKind::Closed),
        Ok(n) => Ok(n),
        Err(e) => Err(ErrorKind::from_io(&e, ErrorKind::Read)),
    }
}

/// The update a data line carries: `…"celer_bench":"NONCE:SEQ:NS"…`
/// with this run's NONCE (the prefix).
fn marker(line: &[u8], prefix: &[u8]) -> Option<(u32, u128)> {
    let at = line.windows(prefix.len()).position(|w| w == prefix)? + prefix.len();
    let rest = &line[at..];
    let end = rest.iter().position(|&b| b == b'"')?;
    let text = std::str::from_utf8(&rest[..end]).ok()?;
    let (seq, ns) = text.split_once(':')?;
    Some((seq.parse().ok()?, ns.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader() -> (Reader, mpsc::Receiver<Note>) {
        let (tx, rx) = mpsc::channel();
        (
            Reader::new(Arc::from(&b"\"celer_bench\":\"00ab:"[..]), tx),
            rx,
        )
    }

    #[test]
    fn an_event_with_the_marker_is_an_arrival() {
        let (mut r, rx) = reader();
        // The first event (no marker) makes the subscriber ready.
        r.feed(b"id: 1\ndata: {\"a\":1}\n\n");
        assert!(matches!(rx.try_recv(), Ok(Note::Ready)));
        assert!(rx.try_recv().is_err());
        // Split anywhere, CR LF line ends: one arrival for update 7.
        let event = b"id: 2\r\ndata: {\"celer_bench\":\"00ab:7:1000\",\r\ndata:  \"a\": 1}\r\n\r\n";
        for chunk in event.chunks(3) {
            r.feed(chunk);
        }
        match rx.try_recv() {
            Ok(Note::Arrived { seq, .. }) => assert_eq!(seq, 7),
            other => panic!("expected an arrival, got {other:?}"),
        }
        assert!(rx.try_recv().is_err());
    }

    /// The arrivals (sequence numbers) and readiness notes a stream gives.
    fn notes(stream: &[u8], chunk: usize) -> Vec<Option<u32>> {
        let (mut r, rx) = reader();
        for part in stream.chunks(chunk) {
            r.feed(part);
        }
        drop(r);
        rx.iter()
            .map(|note| match note {
                Note::Arrived { seq, .. } => Some(seq),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_stream_split_anywhere_gives_the_same_arrivals() {
        let long = "x".repeat(3 * LINE_PREFIX);
        let stream = format!(
            "id: 1\r\ndata: {{\"a\":1}}\r\n\r\n\
             data: {{\"celer_bench\":\"00ab:1:5\",\"l\":\"{long}\"}}\n\n\
             data: {{\"{long}\":\"celer_bench\":\"00ab:2:5\"}}\r\n\r\n\
             : comment\r\rdata: {{\"celer_bench\":\"00ab:3:5\"}}\r\r\
             data: {{\"celer_bench\":\"00ab:4:5\"}}\n\n"
        );
        let whole = notes(stream.as_bytes(), stream.len());
        // Ready; update 1; update 2's marker is past the line's kept
        // prefix, so no arrival; CR alone ends lines too (3); 4.
        assert_eq!(whole, vec![None, Some(1), Some(3), Some(4)]);
        for chunk in 1..=7 {
            assert_eq!(
                notes(stream.as_bytes(), chunk),
                whole,
                "in pieces of {chunk}"
            );
        }
    }

    #[test]
    fn another_runs_marker_is_not_an_arrival() {
        let (mut r, rx) = reader();
        r.feed(b"data: {\"celer_bench\":\"00cd:7:1000\"}\n\n");
        assert!(matches!(rx.try_recv(), Ok(Note::Ready)));
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn the_marker_goes_after_the_brace() {
        let plan = |doc: &[u8]| SsePlan {
            subscribers: 1,
            updates: 1,
            file: PathBuf::from("doc.json"),
            document: doc.to_vec(),
            brace: doc.iter().position(|&b| b == b'{').unwrap() + 1,
            members: !doc.ends_with(b"{}"),
            request: Vec::new(),
        };
        let out = plan(b" {\"a\": 1}").render(0xab, 3, 42);
        assert_eq!(
            out,
            b" {\"celer_bench\":\"00000000000000ab:3:42\",\"a\": 1}"
        );
        let out = plan(b"{}").render(0xab, 3, 42);
        assert_eq!(out, b"{\"celer_bench\":\"00000000000000ab:3:42\"}");
        serde_json::from_slice::<serde_json::Value>(&out).unwrap();
    }
}
