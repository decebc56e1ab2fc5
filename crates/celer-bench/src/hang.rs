//! Hanging connections: open N keep-alive connections, hold them idle, check
//! they still answer, and measure what idle connections cost the server.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Semaphore, mpsc, watch};

use crate::conn::{self, ReadBuf};
use crate::plan::Plan;
use crate::procfs::Processes;
use crate::report::HangReport;
use crate::stats::{ErrorKind, Stats};
use crate::{Error, report};

/// Connections being opened at once; more would overflow listen backlogs.
const OPENING_AT_ONCE: usize = 256;

/// Read buffer per connection while it reads a response (none while idle).
const HANG_BUFFER: usize = 16 * 1024;

/// Wait after closing before sampling the server's memory again.
const SETTLE: Duration = Duration::from_millis(500);

/// What a held connection or socket reports after each phase.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Event {
    /// Opened (first request answered, or upgraded); it is now idle.
    Established,
    /// The final check answered.
    Alive,
    /// A phase failed.
    Failed(ErrorKind),
}

/// Runs hang mode with `n` connections idle for `idle`.
pub(crate) fn run_hang(
    plan: &Arc<Plan>,
    n: usize,
    idle: Duration,
    processes: &Processes,
) -> Result<HangReport, Error> {
    hold_idle(n, idle, processes, |opening, events, check| {
        hold(Arc::clone(plan), opening, events, check)
    })
}

/// Holds `n` connections idle for `idle`, each made by `open`, and measures
/// the server's memory before, while and after they idle: the common part
/// of HTTP hang mode and WebSocket idle mode.
///
/// `open` returns one connection's task, which opens it (at most
/// [`OPENING_AT_ONCE`] at a time, through the semaphore), reports
/// `Established` or `Failed`, idles until the watch turns true, then
/// checks the connection and reports `Alive` or `Failed`.
pub(crate) fn hold_idle<F, Fut>(
    n: usize,
    idle: Duration,
    processes: &Processes,
    mut open: F,
) -> Result<HangReport, Error>
where
    F: FnMut(Rc<Semaphore>, mpsc::UnboundedSender<Event>, watch::Receiver<bool>) -> Fut,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let sample = || (!processes.is_empty()).then(|| processes.rss_bytes());
    let rss_before = sample();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("cannot start the runtime", e))?;
    let local = tokio::task::LocalSet::new();
    let mut errors = Stats::new(0);
    let (established, alive, rss_during) = local.block_on(&runtime, async {
        let (events_tx, mut events) = mpsc::unbounded_channel();
        let (check_tx, check_rx) = watch::channel(false);
        let opening = Rc::new(Semaphore::new(OPENING_AT_ONCE));
        for _ in 0..n {
            let task = open(Rc::clone(&opening), events_tx.clone(), check_rx.clone());
            tokio::task::spawn_local(task);
        }
        drop(events_tx);
        let mut established = 0;
        let mut settled = 0;
        while settled < n {
            match events.recv().await {
                Some(Event::Established) => established += 1,
                Some(Event::Failed(kind)) => errors.error(kind, 1, 0),
                Some(Event::Alive) | None => {}
            }
            settled += 1;
        }
        tokio::time::sleep(idle / 2).await;
        let rss_during = sample();
        tokio::time::sleep(idle - idle / 2).await;
        let _ = check_tx.send(true);
        let mut alive = 0;
        while let Some(event) = events.recv().await {
            match event {
                Event::Alive => alive += 1,
                Event::Failed(kind) => errors.error(kind, 1, 0),
                Event::Established => {}
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

/// One hanging connection: open, first request, idle until told, check.
async fn hold(
    plan: Arc<Plan>,
    opening: Rc<Semaphore>,
    events: mpsc::UnboundedSender<Event>,
    check: watch::Receiver<bool>,
) {
    let permit = opening.acquire().await;
    let stream = match conn::open_tcp(&plan).await {
        Ok(stream) => stream,
        Err(kind) => {
            let _ = events.send(Event::Failed(kind));
            return;
        }
    };
    if plan.tls.is_none() {
        phases(&plan, stream, permit, &events, check).await;
        return;
    }
    match conn::tls_handshake(&plan, stream).await {
        Ok(stream) => phases(&plan, stream, permit, &events, check).await,
        Err(kind) => {
            let _ = events.send(Event::Failed(kind));
        }
    }
}

async fn phases<S: AsyncRead + AsyncWrite + Unpin>(
    plan: &Plan,
    mut stream: S,
    permit: Result<tokio::sync::SemaphorePermit<'_>, tokio::sync::AcquireError>,
    events: &mpsc::UnboundedSender<Event>,
    mut check: watch::Receiver<bool>,
) {
    let first = one_request(plan, &mut stream).await;
    drop(permit);
    // A server that closes after the first response leaves nothing to hang.
    match first {
        Ok(false) => {}
        Ok(true) => {
            let _ = events.send(Event::Failed(ErrorKind::Closed));
            return;
        }
        Err(kind) => {
            let _ = events.send(Event::Failed(kind));
            return;
        }
    }
    let _ = events.send(Event::Established);
    let _ = check.wait_for(|&go| go).await;
    let event = match one_request(plan, &mut stream).await {
        Ok(_) => Event::Alive,
        Err(kind) => Event::Failed(kind),
    };
    let _ = events.send(event);
}

/// Sends the first target's request and reads its response; returns whether
/// the server closes the connection after it.
async fn one_request<S: AsyncRead + AsyncWrite + Unpin>(
    plan: &Plan,
    stream: &mut S,
) -> Result<bool, ErrorKind> {
    let request = &plan.requests[0];
    let exchange = async {
        let write_error = |e: std::io::Error| ErrorKind::from_io(&e, ErrorKind::Write);
        stream
            .write_all(&request.bytes)
            .await
            .map_err(write_error)?;
        stream.flush().await.map_err(write_error)?;
        let mut io = ReadBuf::new(HANG_BUFFER.min(plan.buffer));
        io.read_response(stream, request.is_head).await
    };
    let response = tokio::time::timeout(plan.timeout, exchange)
        .await
        .map_err(|_| ErrorKind::Timeout)??;
    Ok(response.close)
}
