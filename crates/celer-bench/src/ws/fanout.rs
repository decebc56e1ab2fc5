//! Broadcast fan-out: N receivers connect to the URL; each round one message
//! is sent through the trigger (a WebSocket publisher or an HTTP POST) and
//! its arrival is timed at every receiver, from just before the send.
//!
//! Receivers are spread over the load threads. Each thread opens its
//! sockets on a current-thread runtime; plain-TCP receivers are then read
//! by one mio event loop per thread (no task, no wake-up, no channel
//! message per arrival: the arrivals of each pass go to the coordinator
//! together), so that reading 10,000 sockets costs the client little more
//! than the reads themselves. TLS receivers stay tasks on the runtime. The
//! calling thread runs the trigger and collects arrivals.

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::sync::{Semaphore, mpsc, watch};

use super::socket::{self, Event, Socket, Stream};
use super::{FanoutPlan, SMALL_BUFFER, Trigger, WsPlan, template};
use crate::conn::ReadBuf;
use crate::procfs::Processes;
use crate::report::{FanoutReport, Latency, RoundReport, ServerCpu};
use crate::stats::{ErrorKind, Stats, nanos};
use crate::{Error, report};

/// Smallest message that holds the round marker, in bytes.
pub(crate) const MIN_MESSAGE_SIZE: usize = 40;

/// Pause between rounds, so that one round's stragglers do not queue behind
/// the next round's message.
const ROUND_PAUSE: Duration = Duration::from_millis(100);

/// Sockets being opened at once per thread; more would overflow listen backlogs.
const OPENING_AT_ONCE: usize = 128;

/// Read buffer of the POST trigger's connection.
const POST_BUFFER: usize = 16 * 1024;

/// Events waited for at once by a receivers' event loop.
const EVENTS_AT_ONCE: usize = 1024;

/// How often a receivers' event loop looks whether it should stop.
const STOP_CHECK: Duration = Duration::from_millis(20);

/// How long receivers wait for the server's close after theirs.
const CLOSE_WAIT: Duration = Duration::from_millis(500);

/// What receivers tell the coordinator.
#[derive(Debug, Clone)]
enum Note {
    /// Upgraded and listening.
    Connected,
    /// Could not connect or upgrade.
    Failed(ErrorKind),
    /// A round's message arrived (first time for this receiver).
    Arrived { round: u32, at: Instant },
    /// Arrivals found by one pass of an event loop: round, instant.
    Arrivals(Vec<(u32, Instant)>),
    /// A connected receiver was lost.
    Lost(ErrorKind),
}

/// The text every message starts with: it names the run and the round.
fn marker(nonce: u64, round: u32) -> String {
    format!("celer-bench:{nonce:016x}:{round:06}:")
}

/// The round a message belongs to, if it carries this run's marker anywhere
/// (a server may wrap it, e.g. in JSON).
fn round_of(message: &[u8], prefix: &[u8]) -> Option<u32> {
    let at = message.windows(prefix.len()).position(|w| w == prefix)? + prefix.len();
    let digits = message.get(at..at + 6)?;
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Runs fan-out mode on `threads` receiver threads.
///
/// With `--pid`, the server's CPU time is measured over the rounds.
pub(crate) fn run(
    ws: &WsPlan,
    fanout: &FanoutPlan,
    threads: usize,
    processes: &Processes,
) -> Result<FanoutReport, Error> {
    let nonce = {
        let mut seed = [0u8; 8];
        let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut seed);
        u64::from_ne_bytes(seed)
    };
    let prefix: Arc<[u8]> = Arc::from(format!("celer-bench:{nonce:016x}:").into_bytes());
    let (notes_tx, notes) = mpsc::unbounded_channel();
    let (stop_tx, stop_rx) = watch::channel(false);
    let threads = threads.clamp(1, fanout.receivers);
    let mut handles = Vec::with_capacity(threads);
    for idx in 0..threads {
        let count = fanout.receivers / threads + usize::from(idx < fanout.receivers % threads);
        let (ws, notes_tx, stop_rx, prefix) = (
            ws.clone(),
            notes_tx.clone(),
            stop_rx.clone(),
            Arc::clone(&prefix),
        );
        let handle = std::thread::Builder::new()
            .name(format!("celer-bench-{idx}"))
            .spawn(move || receivers(&ws, count, &notes_tx, &stop_rx, &prefix))
            .map_err(|e| Error::io("cannot start a receiver thread", e))?;
        handles.push(handle);
    }
    drop(notes_tx);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("cannot start the runtime", e))?;
    let local = tokio::task::LocalSet::new();
    let result = local.block_on(&runtime, coordinate(ws, fanout, nonce, notes, processes));
    let _ = stop_tx.send(true);
    for handle in handles {
        let _ = handle.join();
    }
    Ok(result)
}

/// One thread's receivers, until told to stop.
fn receivers(
    ws: &WsPlan,
    count: usize,
    notes: &mpsc::UnboundedSender<Note>,
    stop: &watch::Receiver<bool>,
    prefix: &Arc<[u8]>,
) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        for _ in 0..count {
            let _ = notes.send(Note::Failed(ErrorKind::Connect));
        }
        return;
    };
    let local = tokio::task::LocalSet::new();
    let sockets = local.block_on(&runtime, open_all(ws, count, notes));
    if sockets.iter().all(Socket::is_plain) {
        let mut detached = Vec::with_capacity(sockets.len());
        // Inside the runtime: leaving its reactor needs it.
        let _guard = runtime.enter();
        for socket in sockets {
            match socket.detach() {
                Ok(socket) => detached.push(socket),
                Err(kind) => {
                    let _ = notes.send(Note::Failed(kind));
                }
            }
        }
        event_loop(detached, notes, stop, prefix);
        return;
    }
    local.block_on(&runtime, async {
        let tasks: Vec<_> = sockets
            .into_iter()
            .map(|socket| {
                let _ = notes.send(Note::Connected);
                let task = receive(socket, notes.clone(), stop.clone(), Arc::clone(prefix));
                tokio::task::spawn_local(task)
            })
            .collect();
        for task in tasks {
            let _ = task.await;
        }
    });
}

/// Opens `count` sockets, [`OPENING_AT_ONCE`] at a time; failures are
/// noted.
async fn open_all(ws: &WsPlan, count: usize, notes: &mpsc::UnboundedSender<Note>) -> Vec<Socket> {
    let opening = Rc::new(Semaphore::new(OPENING_AT_ONCE));
    let tasks: Vec<_> = (0..count)
        .map(|_| {
            let (ws, opening) = (ws.clone(), Rc::clone(&opening));
            tokio::task::spawn_local(async move {
                let _permit = opening.acquire().await;
                Socket::open(&ws.endpoint, &ws.offer, SMALL_BUFFER).await
            })
        })
        .collect();
    let mut sockets = Vec::with_capacity(count);
    for task in tasks {
        match task.await {
            Ok(Ok((socket, _, _))) => sockets.push(socket),
            Ok(Err(kind)) => {
                let _ = notes.send(Note::Failed(kind));
            }
            Err(_) => {
                let _ = notes.send(Note::Failed(ErrorKind::Connect));
            }
        }
    }
    sockets
}

/// Plain-TCP receivers read by one mio event loop until told to stop, then
/// closed (RFC 6455 section 5.5.1), waiting up to [`CLOSE_WAIT`] for the
/// server's close.
fn event_loop(
    mut sockets: Vec<Socket<mio::net::TcpStream>>,
    notes: &mpsc::UnboundedSender<Note>,
    stop: &watch::Receiver<bool>,
    prefix: &Arc<[u8]>,
) {
    let mut poll = match mio::Poll::new() {
        Ok(poll) => poll,
        Err(_) => {
            for _ in &sockets {
                let _ = notes.send(Note::Failed(ErrorKind::Read));
            }
            return;
        }
    };
    let interest = mio::Interest::READABLE.add(mio::Interest::WRITABLE);
    let mut slots: Vec<Option<Socket<mio::net::TcpStream>>> = Vec::with_capacity(sockets.len());
    for (i, mut socket) in sockets.drain(..).enumerate() {
        match poll
            .registry()
            .register(socket.stream_mut(), mio::Token(i), interest)
        {
            Ok(()) => {
                let _ = notes.send(Note::Connected);
                slots.push(Some(socket));
            }
            Err(e) => {
                let _ = notes.send(Note::Failed(ErrorKind::from_io(&e, ErrorKind::Read)));
                slots.push(None);
            }
        }
    }
    let mut last_round: Vec<Option<u32>> = vec![None; slots.len()];
    let mut events = mio::Events::with_capacity(EVENTS_AT_ONCE);
    let mut arrived = Vec::new();
    while !*stop.borrow() {
        if let Err(e) = poll.poll(&mut events, Some(STOP_CHECK)) {
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            for _ in slots.iter().flatten() {
                let _ = notes.send(Note::Lost(ErrorKind::Read));
            }
            return;
        }
        for event in &events {
            let i = event.token().0;
            let Some(socket) = slots.get_mut(i).and_then(Option::as_mut) else {
                continue;
            };
            let lost = loop {
                match socket.next_event_now() {
                    Ok(Some(Event::Message { .. })) => {
                        let at = Instant::now();
                        let round = round_of(socket.message(), prefix);
                        if let Some(round) = round.filter(|&r| Some(r) > last_round[i]) {
                            last_round[i] = Some(round);
                            arrived.push((round, at));
                        }
                    }
                    Ok(Some(Event::Pong)) => {}
                    Ok(Some(Event::Close)) => {
                        // The reply was queued when the close was parsed.
                        let _ = socket.start_close();
                        break Some(ErrorKind::Closed);
                    }
                    Ok(None) => break None,
                    Err(kind) => break Some(kind),
                }
            };
            if let Some(kind) = lost {
                let _ = notes.send(Note::Lost(kind));
                slots[i] = None;
            }
        }
        if !arrived.is_empty() {
            let _ = notes.send(Note::Arrivals(std::mem::take(&mut arrived)));
        }
    }
    let mut open = 0usize;
    for slot in &mut slots {
        if let Some(socket) = slot {
            if socket.start_close().is_ok() {
                open += 1;
            } else {
                *slot = None;
            }
        }
    }
    let deadline = Instant::now() + CLOSE_WAIT;
    while open > 0 {
        let now = Instant::now();
        if now >= deadline || poll.poll(&mut events, Some(deadline - now)).is_err() {
            break;
        }
        for event in &events {
            let i = event.token().0;
            let Some(socket) = slots.get_mut(i).and_then(Option::as_mut) else {
                continue;
            };
            let done = loop {
                match socket.next_event_now() {
                    Ok(Some(Event::Close)) | Err(_) => break true,
                    Ok(Some(_)) => {}
                    Ok(None) => break socket.start_close().is_err(),
                }
            };
            if done {
                slots[i] = None;
                open -= 1;
            }
        }
    }
}

/// One receiver on the runtime (TLS): report the first arrival of each
/// round.
async fn receive(
    mut socket: Socket,
    notes: mpsc::UnboundedSender<Note>,
    mut stop: watch::Receiver<bool>,
    prefix: Arc<[u8]>,
) {
    let mut last_round = None;
    loop {
        tokio::select! {
            _ = stop.wait_for(|&stop| stop) => break,
            event = socket.next_event() => match event {
                Ok(Event::Message { .. }) => {
                    let at = Instant::now();
                    let round = round_of(socket.message(), &prefix);
                    if let Some(round) = round.filter(|&r| Some(r) > last_round) {
                        last_round = Some(round);
                        let _ = notes.send(Note::Arrived { round, at });
                    }
                }
                Ok(Event::Pong) => {}
                Ok(Event::Close) => {
                    let _ = socket.flush().await;
                    let _ = notes.send(Note::Lost(ErrorKind::Closed));
                    return;
                }
                Err(kind) => {
                    let _ = notes.send(Note::Lost(kind));
                    return;
                }
            },
        }
    }
    socket.close(CLOSE_WAIT).await;
}

/// The trigger's open connection.
enum Sender {
    Publisher(Box<Socket>),
    Post(Stream, ReadBuf),
}

/// Waits for the receivers, runs the rounds and builds the report.
async fn coordinate(
    ws: &WsPlan,
    fanout: &FanoutPlan,
    nonce: u64,
    mut notes: mpsc::UnboundedReceiver<Note>,
    processes: &Processes,
) -> FanoutReport {
    let mut errors = Stats::new(0);
    let mut connected = 0usize;
    let mut settled = 0;
    while settled < fanout.receivers {
        match notes.recv().await {
            Some(Note::Connected) => connected += 1,
            Some(Note::Failed(kind)) => errors.error(kind, 1, 0),
            Some(Note::Lost(kind)) => {
                errors.error(kind, 1, 0);
                connected -= 1;
                continue;
            }
            Some(Note::Arrived { .. } | Note::Arrivals(_)) => continue,
            None => break,
        }
        settled += 1;
    }
    let mut alive = connected;
    let cpu_start = (!processes.is_empty()).then(|| processes.start_cpu());
    let mut rounds = Vec::with_capacity(fanout.rounds as usize);
    let mut all = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)
        .expect("constant histogram bounds are valid");
    let mut trigger_errors = Stats::new(0);
    let mut sender: Option<Sender> = None;
    let body = template(ws.message_size);
    for round in 0..fanout.rounds {
        if alive == 0 {
            break;
        }
        let mut message = marker(nonce, round).into_bytes();
        message.extend_from_slice(&body[message.len().min(body.len())..]);
        let mut arrivals: Vec<Duration> = Vec::with_capacity(alive);
        let sent = send(ws, &fanout.trigger, &mut sender, &message).await;
        let outcome = match sent {
            Ok(t0) => {
                let deadline = t0 + ws.endpoint.timeout;
                let collected = collect(
                    &mut notes,
                    &mut sender,
                    round,
                    t0,
                    deadline,
                    &mut alive,
                    &mut arrivals,
                    &mut errors,
                )
                .await;
                collected.map(|()| t0)
            }
            Err(kind) => Err(kind),
        };
        if let Err(kind) = outcome {
            trigger_errors.error(kind, 1, 0);
            sender = None;
        }
        for arrival in &arrivals {
            all.saturating_record(nanos(*arrival));
        }
        rounds.push(RoundReport::new(round, &mut arrivals, alive));
        let pause = tokio::time::sleep(ROUND_PAUSE);
        tokio::pin!(pause);
        drain_until(&mut notes, &mut sender, &mut alive, &mut errors, pause).await;
    }
    let server = cpu_start.map(|start| {
        let deliveries = rounds.iter().map(|r| r.received as u64).sum();
        ServerCpu::new(processes.roots(), processes.cpu_since(&start), deliveries)
    });
    if let Some(Sender::Publisher(socket)) = sender {
        socket.close(Duration::from_millis(500)).await;
    }
    FanoutReport::new(
        server,
        fanout,
        connected,
        report::error_map(&errors),
        report::error_map(&trigger_errors),
        rounds,
        Latency::from_ns(&all),
    )
}

/// Sends one round's message; returns the instant just before the send.
async fn send(
    ws: &WsPlan,
    trigger: &Trigger,
    sender: &mut Option<Sender>,
    message: &[u8],
) -> Result<Instant, ErrorKind> {
    if sender.is_none() {
        *sender = Some(match trigger {
            Trigger::Publish {
                endpoint, offer, ..
            } => Sender::Publisher(Box::new(
                Socket::open(endpoint, offer, SMALL_BUFFER).await?.0,
            )),
            Trigger::Post { endpoint, .. } => Sender::Post(
                socket::connect(endpoint).await?.0,
                ReadBuf::new(POST_BUFFER),
            ),
        });
    }
    match (sender.as_mut(), trigger) {
        (Some(Sender::Publisher(socket)), _) => {
            socket.send(ws.binary, message)?;
            let t0 = Instant::now();
            socket.flush().await?;
            Ok(t0)
        }
        (
            Some(Sender::Post(stream, _)),
            Trigger::Post {
                origin,
                target,
                parts,
                body,
                ..
            },
        ) => {
            use tokio::io::AsyncWriteExt;
            let text = String::from_utf8_lossy(message);
            let request = crate::encode::RequestParts {
                body: body.replace("{message}", &text).into_bytes(),
                ..parts.clone()
            };
            let encoded = request.encode(origin, target);
            let t0 = Instant::now();
            let write_error = |e: std::io::Error| ErrorKind::from_io(&e, ErrorKind::Write);
            stream
                .write_all(&encoded.bytes)
                .await
                .map_err(write_error)?;
            stream.flush().await.map_err(write_error)?;
            Ok(t0)
        }
        _ => Err(ErrorKind::Connect),
    }
}

/// Collects the round's arrivals until every live receiver has it or the
/// deadline passes, while the trigger's connection is read (the POST's
/// response is checked; a publisher's incoming messages are dropped).
#[expect(
    clippy::too_many_arguments,
    reason = "the coordinator's state, passed by reference"
)]
async fn collect(
    notes: &mut mpsc::UnboundedReceiver<Note>,
    sender: &mut Option<Sender>,
    round: u32,
    t0: Instant,
    deadline: Instant,
    alive: &mut usize,
    arrivals: &mut Vec<Duration>,
    errors: &mut Stats,
) -> Result<(), ErrorKind> {
    let mut answered = !matches!(sender, Some(Sender::Post(..)));
    let timer = tokio::time::sleep_until(deadline.into());
    tokio::pin!(timer);
    while arrivals.len() < *alive || !answered {
        tokio::select! {
            biased;
            note = notes.recv() => match note {
                Some(Note::Arrived { round: r, at }) if r == round => arrivals.push(at.saturating_duration_since(t0)),
                Some(Note::Arrivals(list)) => arrivals.extend(
                    list.iter()
                        .filter(|&&(r, _)| r == round)
                        .map(|&(_, at)| at.saturating_duration_since(t0)),
                ),
                Some(Note::Lost(kind)) => {
                    errors.error(kind, 1, 0);
                    *alive = alive.saturating_sub(1);
                }
                Some(_) => {}
                None => return Ok(()),
            },
            result = trigger_progress(sender), if !answered => {
                result?;
                answered = true;
            }
            () = &mut timer => return if answered { Ok(()) } else { Err(ErrorKind::Timeout) },
        }
    }
    Ok(())
}

/// Drives the trigger's connection: the POST response (2xx expected), or
/// one event of the publisher (pings answered, messages dropped).
async fn trigger_progress(sender: &mut Option<Sender>) -> Result<(), ErrorKind> {
    match sender {
        Some(Sender::Post(stream, io)) => {
            let response = io.read_response(stream, false).await?;
            if !(200..300).contains(&response.status) {
                return Err(ErrorKind::Status);
            }
            if response.close {
                *sender = None;
            }
            Ok(())
        }
        Some(Sender::Publisher(socket)) => loop {
            match socket.next_event().await? {
                Event::Close => return Err(ErrorKind::Closed),
                Event::Message { .. } | Event::Pong => {}
            }
        },
        None => std::future::pending().await,
    }
}

/// Between rounds: counts lost receivers and keeps the publisher read.
async fn drain_until(
    notes: &mut mpsc::UnboundedReceiver<Note>,
    sender: &mut Option<Sender>,
    alive: &mut usize,
    errors: &mut Stats,
    mut until: std::pin::Pin<&mut tokio::time::Sleep>,
) {
    loop {
        let publisher = matches!(sender, Some(Sender::Publisher(_)));
        tokio::select! {
            biased;
            () = &mut until => return,
            note = notes.recv() => match note {
                Some(Note::Lost(kind)) => {
                    errors.error(kind, 1, 0);
                    *alive = alive.saturating_sub(1);
                }
                Some(_) => {}
                None => {
                    until.await;
                    return;
                }
            },
            result = trigger_progress(sender), if publisher => {
                if result.is_err() {
                    *sender = None;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_are_found_wherever_the_marker_is() {
        let prefix = b"celer-bench:00000000000000ff:";
        let message = format!("{{\"text\":\"{}abc\"}}", marker(255, 42));
        assert_eq!(round_of(message.as_bytes(), prefix), Some(42));
        assert_eq!(round_of(b"hello", prefix), None);
        assert_eq!(round_of(marker(254, 1).as_bytes(), prefix), None);
        assert!(marker(u64::MAX, 999_999).len() < MIN_MESSAGE_SIZE);
    }
}
