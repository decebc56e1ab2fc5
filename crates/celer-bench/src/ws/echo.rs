//! Echo mode: each connection keeps `--pipeline` messages in flight, checks
//! every echo byte for byte against the message it answers, and records the
//! round trip. Runs on the load threads of `worker`, like HTTP load.

use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::socket::{Event, Socket};
use super::{WsPlan, stamp, template};
use crate::stats::ErrorKind;
use crate::worker::Worker;

/// Pause after a failed connect or handshake before the next attempt.
const CONNECT_BACKOFF: Duration = Duration::from_millis(10);

/// How long a connection waits for the server's close reply at the end.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// What a connection keeps across reconnects.
#[derive(Debug)]
struct EchoState {
    /// The message body before stamping.
    template: Vec<u8>,
    /// Scratch: the message being sent or expected.
    scratch: Vec<u8>,
    /// Sequence number and send time of each message in flight, oldest first.
    in_flight: VecDeque<(u64, Instant)>,
    /// Next sequence number.
    next_seq: u64,
}

/// Runs one echo connection slot until the run is over.
pub(crate) async fn run(worker: Rc<Worker>, ws: &WsPlan) {
    let mut state = EchoState {
        template: template(ws.message_size),
        scratch: Vec::with_capacity(ws.message_size),
        in_flight: VecDeque::with_capacity(worker.plan.pipeline as usize),
        next_seq: 0,
    };
    loop {
        let claimed = worker.claim(worker.plan.pipeline, Instant::now());
        if claimed == 0 {
            return;
        }
        let buffer = worker.plan.buffer;
        let socket = match Socket::open(&ws.endpoint, &ws.offer, buffer).await {
            Ok((socket, timings, upgrade)) => {
                worker.connected(timings.connect);
                if let Some(tls) = timings.tls {
                    worker.handshaken(tls);
                }
                worker.upgraded(upgrade);
                worker.set_up();
                socket
            }
            Err(kind) => {
                worker.setup_failed(kind);
                worker.failed(kind, u64::from(claimed));
                tokio::time::sleep(CONNECT_BACKOFF).await;
                continue;
            }
        };
        if !drive(&worker, ws, socket, claimed, &mut state).await {
            return;
        }
    }
}

/// Sends `claimed` messages and keeps the window full until the run ends
/// (false) or the connection fails (true: open another).
async fn drive(
    worker: &Worker,
    ws: &WsPlan,
    mut socket: Socket,
    claimed: u32,
    state: &mut EchoState,
) -> bool {
    let timeout = worker.plan.timeout;
    for _ in 0..claimed {
        if let Err(kind) = send_one(&mut socket, ws, state) {
            return fail(worker, state, kind);
        }
    }
    let timer = tokio::time::sleep(timeout);
    tokio::pin!(timer);
    loop {
        if state.in_flight.is_empty() {
            socket.close(CLOSE_WAIT).await;
            return false;
        }
        let event = tokio::select! {
            biased;
            event = socket.next_event() => event,
            () = &mut timer => Err(ErrorKind::Timeout),
        };
        match event {
            Ok(Event::Message { binary }) => {
                let Some((seq, sent)) = state.in_flight.pop_front() else {
                    return fail(worker, state, ErrorKind::Mismatch);
                };
                expected(ws, state, seq);
                if binary == ws.binary && socket.message() == state.scratch.as_slice() {
                    worker.message(std::mem::take(&mut socket.received), sent);
                } else {
                    worker.failed(ErrorKind::Mismatch, 1);
                }
                let now = Instant::now();
                timer.as_mut().reset((now + timeout).into());
                if worker.claim(1, now) == 1 {
                    if let Err(kind) = send_one(&mut socket, ws, state) {
                        return fail(worker, state, kind);
                    }
                }
            }
            Ok(Event::Pong) => {}
            Ok(Event::Close) => {
                let _ = socket.flush().await;
                return fail(worker, state, ErrorKind::Closed);
            }
            Err(kind) => return fail(worker, state, kind),
        }
    }
}

/// Queues the next message.
fn send_one(socket: &mut Socket, ws: &WsPlan, state: &mut EchoState) -> Result<(), ErrorKind> {
    let seq = state.next_seq;
    state.next_seq += 1;
    expected(ws, state, seq);
    socket.send(ws.binary, &state.scratch)?;
    state.in_flight.push_back((seq, Instant::now()));
    Ok(())
}

/// Puts message `seq` in `state.scratch`: the file's line in turn, or the
/// template stamped with `seq`.
fn expected(ws: &WsPlan, state: &mut EchoState, seq: u64) {
    match &ws.messages {
        Some(messages) => {
            state.scratch.clear();
            state.scratch.extend_from_slice(messages.get(seq));
        }
        None => stamp(&state.template, seq, &mut state.scratch),
    }
}

/// Counts the messages in flight as failed; the caller opens a new connection.
fn fail(worker: &Worker, state: &mut EchoState, kind: ErrorKind) -> bool {
    worker.failed(kind, state.in_flight.len() as u64);
    state.in_flight.clear();
    true
}
