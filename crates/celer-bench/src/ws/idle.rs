//! Idle mode: open N WebSockets, hold them idle (answering the server's
//! pings), check each still answers a ping, and measure what idle sockets
//! cost the server. With `--message-file`, each socket first has one of
//! the file's messages echoed, so the server holds what a used connection
//! holds.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc, watch};

use super::socket::{Event, Socket};
use super::{SMALL_BUFFER, WsPlan};
use crate::Error;
use crate::hang::{Event as HangEvent, hold_idle};
use crate::procfs::Processes;
use crate::report::HangReport;
use crate::stats::ErrorKind;

/// The payload of the final ping.
const PROBE: &[u8] = b"celer-bench idle check";

/// Runs idle mode with `n` sockets idle for `idle`.
pub(crate) fn run(
    ws: &WsPlan,
    n: usize,
    idle: Duration,
    processes: &Processes,
) -> Result<HangReport, Error> {
    let next = Rc::new(Cell::new(0u64));
    hold_idle(n, idle, processes, |opening, notes, check| {
        let seq = next.get();
        next.set(seq + 1);
        hold(ws.clone(), seq, opening, notes, check)
    })
}

/// Has message `seq` of the file echoed (checked byte for byte).
async fn echo_one(ws: &WsPlan, socket: &mut Socket, seq: u64) -> Result<(), ErrorKind> {
    let Some(messages) = &ws.messages else {
        return Ok(());
    };
    let message = messages.get(seq);
    socket.send(ws.binary, message)?;
    let answer = tokio::time::timeout(ws.endpoint.timeout, async {
        loop {
            match socket.next_event().await? {
                Event::Message { binary } => return Ok(binary),
                Event::Pong => {}
                Event::Close => return Err(ErrorKind::Closed),
            }
        }
    })
    .await
    .unwrap_or(Err(ErrorKind::Timeout))?;
    if answer == ws.binary && socket.message() == message {
        Ok(())
    } else {
        Err(ErrorKind::Mismatch)
    }
}

/// One idle socket: open, idle until told (answering pings), ping, close.
async fn hold(
    ws: WsPlan,
    seq: u64,
    opening: Rc<Semaphore>,
    notes: mpsc::UnboundedSender<HangEvent>,
    mut check: watch::Receiver<bool>,
) {
    let permit = opening.acquire().await;
    let opened = match Socket::open(&ws.endpoint, &ws.offer, SMALL_BUFFER).await {
        Ok((mut socket, _, _)) => echo_one(&ws, &mut socket, seq).await.map(|()| socket),
        Err(kind) => Err(kind),
    };
    drop(permit);
    let mut socket = match opened {
        Ok(socket) => socket,
        Err(kind) => {
            let _ = notes.send(HangEvent::Failed(kind));
            return;
        }
    };
    let _ = notes.send(HangEvent::Established);
    // Idle: whatever the server sends is read (pings are answered) until the check.
    loop {
        tokio::select! {
            _ = check.wait_for(|&go| go) => break,
            event = socket.next_event() => match event {
                Ok(Event::Message { .. } | Event::Pong) => {}
                Ok(Event::Close) => {
                    let _ = socket.flush().await;
                    let _ = notes.send(HangEvent::Failed(ErrorKind::Closed));
                    return;
                }
                Err(kind) => {
                    let _ = notes.send(HangEvent::Failed(kind));
                    return;
                }
            },
        }
    }
    socket.ping(PROBE);
    let timeout = ws.endpoint.timeout;
    let answered = tokio::time::timeout(timeout, async {
        loop {
            match socket.next_event().await {
                Ok(Event::Pong) => return Ok(()),
                Ok(Event::Message { .. }) => {}
                Ok(Event::Close) => return Err(ErrorKind::Closed),
                Err(kind) => return Err(kind),
            }
        }
    })
    .await
    .unwrap_or(Err(ErrorKind::Timeout));
    let _ = notes.send(match answered {
        Ok(()) => HangEvent::Alive,
        Err(kind) => HangEvent::Failed(kind),
    });
    if answered.is_ok() {
        socket.close(timeout.min(Duration::from_secs(1))).await;
    }
}
