//! Idle mode: open N WebSockets, hold them idle (answering the server's
//! pings), check each still answers a ping, and measure what idle sockets
//! cost the server.

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
    hold_idle(n, idle, processes, |opening, notes, check| {
        hold(ws.clone(), opening, notes, check)
    })
}

/// One idle socket: open, idle until told (answering pings), ping, close.
async fn hold(
    ws: WsPlan,
    opening: Rc<Semaphore>,
    notes: mpsc::UnboundedSender<HangEvent>,
    mut check: watch::Receiver<bool>,
) {
    let permit = opening.acquire().await;
    let opened = Socket::open(&ws.endpoint, &ws.offer, SMALL_BUFFER).await;
    drop(permit);
    let mut socket = match opened {
        Ok((socket, _, _)) => socket,
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
