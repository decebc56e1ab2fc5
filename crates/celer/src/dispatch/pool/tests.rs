//! The pool's behaviour at its bounds, without HTTP.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use super::Dispatcher;

/// Upper bound for anything a test waits on; never asserted.
const DEADLINE: Duration = Duration::from_secs(20);

fn block_on<F: std::future::Future>(fut: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(fut)
}

/// A pool of one thread whose worker is held inside a job until the
/// returned sender is used or dropped; callers wait for `running == 1`.
fn held_pool(queue: usize) -> (Dispatcher, mpsc::Sender<()>, tokio::task::JoinHandle<()>) {
    let pool = Dispatcher::builder().threads(1).queue(queue).build();
    let (release, wait) = mpsc::channel::<()>();
    let blocker = tokio::spawn({
        let pool = pool.clone();
        async move {
            pool.dispatch(move || {
                let _ = wait.recv_timeout(DEADLINE);
            })
            .await
            .unwrap();
        }
    });
    (pool, release, blocker)
}

#[test]
fn a_job_gives_its_value() {
    block_on(async {
        let pool = Dispatcher::builder().threads(2).build();
        assert_eq!(pool.dispatch(|| 6 * 7).await.unwrap(), 42);
        let stats = pool.stats();
        assert_eq!(stats.completed, 1);
        assert_eq!(stats.threads, 2);
        pool.shutdown();
    });
}

#[test]
fn a_panic_is_an_error_and_the_worker_lives_on() {
    block_on(async {
        let pool = Dispatcher::builder().threads(1).build();
        let err = pool.dispatch(|| panic!("boom")).await.unwrap_err();
        assert!(err.is_panic());
        assert!(err.to_string().contains("boom"));
        assert_eq!(pool.dispatch(|| "alive").await.unwrap(), "alive");
        let stats = pool.stats();
        assert_eq!((stats.panicked, stats.completed), (1, 2));
    });
}

#[test]
fn a_full_queue_refuses_at_once_and_a_waiter_gets_the_freed_slot() {
    block_on(async {
        let (pool, release, blocker) = held_pool(1);
        wait_until(|| pool.stats().running == 1).await;
        // One job fills the queue.
        let queued = tokio::spawn({
            let pool = pool.clone();
            async move { pool.dispatch(|| 1).await }
        });
        wait_until(|| pool.stats().queued == 1).await;
        let err = pool.dispatch(|| 2).await.unwrap_err();
        assert!(err.is_overloaded());
        assert_eq!(err.status(), 503);
        assert_eq!(pool.stats().rejected, 1);
        // A waiter with a deadline gets in once the worker takes the job.
        let waiter = tokio::spawn({
            let pool = pool.clone();
            async move { pool.dispatch_wait(DEADLINE, || 3).await }
        });
        release.send(()).unwrap();
        blocker.await.unwrap();
        assert_eq!(queued.await.unwrap().unwrap(), 1);
        assert_eq!(waiter.await.unwrap().unwrap(), 3);
        assert_eq!(pool.stats().rejected, 1);
    });
}

#[test]
fn a_waiter_past_its_deadline_is_refused() {
    block_on(async {
        let (pool, release, blocker) = held_pool(1);
        wait_until(|| pool.stats().running == 1).await;
        let queued = tokio::spawn({
            let pool = pool.clone();
            async move { pool.dispatch(|| ()).await }
        });
        wait_until(|| pool.stats().queued == 1).await;
        let err = pool
            .dispatch_wait(Duration::from_millis(10), || ())
            .await
            .unwrap_err();
        assert!(err.is_overloaded());
        release.send(()).unwrap();
        blocker.await.unwrap();
        queued.await.unwrap().unwrap();
    });
}

#[test]
fn a_job_whose_requester_has_gone_is_not_started() {
    block_on(async {
        let (pool, release, blocker) = held_pool(4);
        wait_until(|| pool.stats().running == 1).await;
        let ran = Arc::new(AtomicBool::new(false));
        let requester = tokio::spawn({
            let pool = pool.clone();
            let ran = ran.clone();
            async move {
                pool.dispatch(move || ran.store(true, Ordering::SeqCst))
                    .await
            }
        });
        wait_until(|| pool.stats().queued == 1).await;
        requester.abort();
        assert!(requester.await.unwrap_err().is_cancelled());
        release.send(()).unwrap();
        blocker.await.unwrap();
        wait_until(|| pool.stats().abandoned == 1).await;
        assert!(!ran.load(Ordering::SeqCst));
        assert_eq!(pool.stats().completed, 1);
    });
}

#[test]
fn shutdown_runs_the_queued_jobs_then_refuses() {
    block_on(async {
        let (pool, release, blocker) = held_pool(4);
        wait_until(|| pool.stats().running == 1).await;
        let queued = tokio::spawn({
            let pool = pool.clone();
            async move { pool.dispatch(|| "ran").await }
        });
        wait_until(|| pool.stats().queued == 1).await;
        let stopper = std::thread::spawn({
            let pool = pool.clone();
            move || pool.shutdown()
        });
        wait_until(|| pool.dispatch_now_refused()).await;
        release.send(()).unwrap();
        blocker.await.unwrap();
        assert_eq!(queued.await.unwrap().unwrap(), "ran");
        stopper.join().unwrap();
        assert!(pool.dispatch(|| ()).await.unwrap_err().is_stopped());
        assert!(
            pool.dispatch_wait(DEADLINE, || ())
                .await
                .unwrap_err()
                .is_stopped()
        );
    });
}

impl Dispatcher {
    /// Whether the queue is closed (for tests).
    fn dispatch_now_refused(&self) -> bool {
        super::lock(&self.owner.shared.queue).closed
    }
}

/// Polls `cond` until it holds; a test that never sees it fails at
/// [`DEADLINE`].
async fn wait_until(cond: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < DEADLINE, "condition never held");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}
