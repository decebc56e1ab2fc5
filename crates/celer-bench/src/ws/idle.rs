//! Idle mode: open N WebSockets, hold them idle (answering the server's
//! pings), check each still answers a ping, and measure what idle sockets
//! cost the server.

use std::rc::Rc;
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc, watch};

use super::socket::{Event, Socket};
use super::{SMALL_BUFFER, WsPlan};
use crate::procfs::Processes;
use crate::report::HangReport;
use crate::stats::{ErrorKind, Stats};
use crate::{Error, report};

/// Sockets being opened at once; more would overflow listen backlogs.
const OPENING_AT_ONCE: usize = 256;

/// Wait after closing before sampling the server's memory again.
const SETTLE: Duration = Duration::from_millis(500);

/// The payload of the final ping.
const PROBE: &[u8] = b"celer-bench idle check";

/// What a socket reports after each phase.
#[derive(Debug, Clone, Copy)]
enum Note {
    /// Upgraded; the socket is now idle.
    Established,
    /// The final ping was answered.
    Alive,
    /// A phase failed.
    Failed(ErrorKind),
}

/// Runs idle mode with `n` sockets idle for `idle`.
pub(crate) fn run(
    ws: &WsPlan,
    n: usize,
    idle: Duration,
    processes: &Processes,
) -> Result<HangReport, Error> {
    let sample = || (!processes.is_empty()).then(|| processes.rss_bytes());
    let rss_before = sample();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("cannot start the runtime", e))?;
    let local = tokio::task::LocalSet::new();
    let mut errors = Stats::new(0);
    let (established, alive, rss_during) = local.block_on(&runtime, async {
        let (notes_tx, mut notes) = mpsc::unbounded_channel();
        let (check_tx, check_rx) = watch::channel(false);
        let opening = Rc::new(Semaphore::new(OPENING_AT_ONCE));
        for _ in 0..n {
            let task = hold(
                ws.clone(),
                Rc::clone(&opening),
                notes_tx.clone(),
                check_rx.clone(),
            );
            tokio::task::spawn_local(task);
        }
        drop(notes_tx);
        let (mut established, mut settled) = (0, 0);
        while settled < n {
            match notes.recv().await {
                Some(Note::Established) => established += 1,
                Some(Note::Failed(kind)) => errors.error(kind, 1, 0),
                Some(Note::Alive) | None => {}
            }
            settled += 1;
        }
        tokio::time::sleep(idle / 2).await;
        let rss_during = sample();
        tokio::time::sleep(idle - idle / 2).await;
        let _ = check_tx.send(true);
        let mut alive = 0;
        while let Some(note) = notes.recv().await {
            match note {
                Note::Alive => alive += 1,
                Note::Failed(kind) => errors.error(kind, 1, 0),
                Note::Established => {}
            }
        }
        (established, alive, rss_during)
    });
    drop(local);
    drop(runtime);
    let rss_after = rss_before.map(|_| {
        std::thread::sleep(SETTLE);
        processes.rss_bytes()
    });
    let bytes_per_idle_connection = match (rss_before, rss_during) {
        (Some(before), Some(during)) if established > 0 => {
            Some((during as f64 - before as f64) / established as f64)
        }
        _ => None,
    };
    Ok(HangReport {
        connections: n,
        established,
        alive_at_end: alive,
        idle_s: idle.as_secs_f64(),
        errors: report::error_map(&errors),
        rss_before,
        rss_during,
        rss_after,
        bytes_per_idle_connection,
    })
}

/// One idle socket: open, idle until told (answering pings), ping, close.
async fn hold(
    ws: WsPlan,
    opening: Rc<Semaphore>,
    notes: mpsc::UnboundedSender<Note>,
    mut check: watch::Receiver<bool>,
) {
    let permit = opening.acquire().await;
    let opened = Socket::open(&ws.endpoint, &ws.offer, SMALL_BUFFER).await;
    drop(permit);
    let mut socket = match opened {
        Ok((socket, _, _)) => socket,
        Err(kind) => {
            let _ = notes.send(Note::Failed(kind));
            return;
        }
    };
    let _ = notes.send(Note::Established);
    // Idle: whatever the server sends is read (pings are answered) until the check.
    loop {
        tokio::select! {
            _ = check.wait_for(|&go| go) => break,
            event = socket.next_event() => match event {
                Ok(Event::Message { .. } | Event::Pong) => {}
                Ok(Event::Close) => {
                    let _ = socket.flush().await;
                    let _ = notes.send(Note::Failed(ErrorKind::Closed));
                    return;
                }
                Err(kind) => {
                    let _ = notes.send(Note::Failed(kind));
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
        Ok(()) => Note::Alive,
        Err(kind) => Note::Failed(kind),
    });
    if answered.is_ok() {
        socket.close(timeout.min(Duration::from_secs(1))).await;
    }
}
