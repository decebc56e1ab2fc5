//! The pool's behaviour at its bounds, without HTTP.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::task::{Context, Poll, Wake, Waker};
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

#[test]
fn a_job_goes_to_an_idle_worker_while_another_is_busy() {
    block_on(async {
        let pool = Dispatcher::builder().threads(2).queue(4).build();
        let (release, wait) = mpsc::channel::<()>();
        let busy = tokio::spawn({
            let pool = pool.clone();
            async move {
                pool.dispatch(move || {
                    let _ = wait.recv_timeout(DEADLINE);
                    std::thread::current().name().map(str::to_owned)
                })
                .await
                .unwrap()
            }
        });
        wait_until(|| pool.stats().running == 1).await;
        // The held worker cannot take it: only the idle one can.
        let other = pool
            .dispatch(|| std::thread::current().name().map(str::to_owned))
            .await
            .unwrap();
        assert_eq!(pool.stats().running, 1);
        assert_eq!(pool.stats().queued, 0);
        release.send(()).unwrap();
        let held = busy.await.unwrap();
        assert_ne!(held, other);
        assert!(other.unwrap().starts_with("celer-dispatch-"));
        assert_eq!(pool.stats().completed, 2);
        pool.shutdown();
    });
}

#[test]
fn a_sleeping_worker_is_woken_for_a_job() {
    block_on(async {
        let pool = Dispatcher::builder().threads(3).build();
        assert_eq!(pool.dispatch(|| 1).await.unwrap(), 1);
        // Every worker sleeps once idle.
        wait_until(|| pool.asleep() == 3).await;
        assert_eq!(pool.dispatch(|| 2).await.unwrap(), 2);
        wait_until(|| pool.asleep() == 3).await;
        let jobs: Vec<_> = (0..3).map(|n| pool.dispatch(move || n * 10)).collect();
        let mut values = Vec::new();
        for job in jobs {
            values.push(job.await.unwrap());
        }
        assert_eq!(values, [0, 10, 20]);
        assert_eq!(pool.stats().completed, 5);
        pool.shutdown();
    });
}

#[test]
fn shutdown_stops_sleeping_workers() {
    block_on(async {
        let pool = Dispatcher::builder().threads(4).build();
        assert_eq!(pool.dispatch(|| "ran").await.unwrap(), "ran");
        wait_until(|| pool.asleep() == 4).await;
        // Returns once all four threads have ended (it joins them).
        pool.shutdown();
        assert_eq!(pool.asleep(), 0);
        assert!(pool.dispatch(|| ()).await.unwrap_err().is_stopped());
    });
}

#[test]
fn shutdown_right_after_a_job_stops_idle_workers() {
    block_on(async {
        // The workers are between their last job and their sleep.
        for _ in 0..20 {
            let pool = Dispatcher::builder().threads(2).build();
            pool.dispatch(|| ()).await.unwrap();
            pool.shutdown();
            assert!(pool.dispatch(|| ()).await.unwrap_err().is_stopped());
        }
    });
}

/// A runtime of two threads, for requesters that run at once.
fn two_threads() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// `requesters` tasks, each waiting for a slot `jobs` times and summing
/// `value(r, j)` computed on the pool; the sum of all their sums.
async fn sum_of_waited_values(
    pool: &Dispatcher,
    requesters: u64,
    jobs: u64,
    value: fn(u64, u64) -> u64,
) -> u64 {
    let mut tasks = Vec::new();
    for r in 0..requesters {
        let pool = pool.clone();
        tasks.push(tokio::spawn(async move {
            let mut sum = 0;
            for j in 0..jobs {
                sum += pool
                    .dispatch_wait(DEADLINE, move || value(r, j))
                    .await
                    .unwrap();
            }
            sum
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    total
}

#[test]
fn many_requesters_on_few_workers_get_every_value() {
    two_threads().block_on(async {
        // Waits for a slot when the queue is full; some jobs go to idle
        // workers, some through the queue.
        let pool = Dispatcher::builder().threads(3).queue(8).build();
        let total = sum_of_waited_values(&pool, 32, 50, |r, j| r * 1000 + j).await;
        let expected: u64 = (0..32u64)
            .map(|r| (0..50u64).map(|j| r * 1000 + j).sum::<u64>())
            .sum();
        assert_eq!(total, expected);
        let stats = pool.stats();
        assert_eq!((stats.completed, stats.queued, stats.running), (1600, 0, 0));
        assert_eq!((stats.rejected, stats.abandoned, stats.panicked), (0, 0, 0));
        pool.shutdown();
    });
}

#[test]
fn slots_are_counted_exactly_under_concurrency() {
    two_threads().block_on(async {
        // Two threads and a queue of four: at most six jobs held at once.
        let pool = Dispatcher::builder().threads(2).queue(4).build();
        let over = Arc::new(AtomicBool::new(false));
        let mut requesters = Vec::new();
        for _ in 0..16 {
            let pool = pool.clone();
            let over = over.clone();
            requesters.push(tokio::spawn(async move {
                let (mut accepted, mut refused) = (0u64, 0u64);
                for _ in 0..200 {
                    let seen = pool.clone();
                    let over = over.clone();
                    let job = move || {
                        if seen.owner.shared.slots.taken() > 6 {
                            over.store(true, Ordering::SeqCst);
                        }
                    };
                    match pool.dispatch(job).await {
                        Ok(()) => accepted += 1,
                        Err(err) => {
                            assert!(err.is_overloaded());
                            refused += 1;
                        }
                    }
                }
                (accepted, refused)
            }));
        }
        let (mut accepted, mut refused) = (0, 0);
        for requester in requesters {
            let (a, r) = requester.await.unwrap();
            accepted += a;
            refused += r;
        }
        assert_eq!(accepted + refused, 16 * 200);
        assert!(
            !over.load(Ordering::SeqCst),
            "more slots taken than the bound"
        );
        let stats = pool.stats();
        assert_eq!((stats.completed, stats.rejected), (accepted, refused));
        assert_eq!((stats.queued, stats.running), (0, 0));
        // Every slot is back once every value is in.
        wait_until(|| pool.owner.shared.slots.taken() == 0).await;
        pool.shutdown();
    });
}

#[test]
fn waiters_for_a_slot_are_never_left_asleep() {
    two_threads().block_on(async {
        // Two slots for eight requesters: nearly every job waits for one,
        // and a lost wake-up would hold a waiter until its deadline, which
        // refuses it.
        let pool = Dispatcher::builder().threads(1).queue(1).build();
        let total = sum_of_waited_values(&pool, 8, 100, |r, j| r + j).await;
        assert_eq!(total, (0..8u64).map(|r| 100 * r + 4950).sum::<u64>());
        let stats = pool.stats();
        assert_eq!((stats.completed, stats.rejected), (800, 0));
        assert_eq!(pool.owner.shared.slots.waiters.load(Ordering::SeqCst), 0);
        pool.shutdown();
    });
}

#[test]
fn abandoned_jobs_give_their_slots_back() {
    block_on(async {
        let (pool, release, blocker) = held_pool(3);
        wait_until(|| pool.stats().running == 1).await;
        let ran = Arc::new(AtomicUsize::new(0));
        let requesters: Vec<_> = (0..3)
            .map(|_| {
                let pool = pool.clone();
                let ran = ran.clone();
                tokio::spawn(async move {
                    pool.dispatch(move || ran.fetch_add(1, Ordering::SeqCst))
                        .await
                })
            })
            .collect();
        wait_until(|| pool.stats().queued == 3).await;
        // Full: the blocker and three queued hold the four slots.
        assert_eq!(pool.owner.shared.slots.taken(), 4);
        assert!(pool.dispatch(|| 0).await.unwrap_err().is_overloaded());
        for requester in requesters {
            requester.abort();
            assert!(requester.await.unwrap_err().is_cancelled());
        }
        release.send(()).unwrap();
        blocker.await.unwrap();
        wait_until(|| pool.stats().abandoned == 3).await;
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        wait_until(|| pool.owner.shared.slots.taken() == 0).await;
        // The whole bound is free again: four jobs at once are taken.
        let (hold, held) = mpsc::channel::<()>();
        let held = Arc::new(std::sync::Mutex::new(held));
        let jobs: Vec<_> = (0..4)
            .map(|n| {
                let pool = pool.clone();
                let held = held.clone();
                tokio::spawn(async move {
                    pool.dispatch(move || {
                        if n == 0 {
                            let _ = held.lock().unwrap().recv_timeout(DEADLINE);
                        }
                        n
                    })
                    .await
                })
            })
            .collect();
        wait_until(|| pool.owner.shared.slots.taken() == 4).await;
        drop(hold);
        for job in jobs {
            job.await.unwrap().unwrap();
        }
        let stats = pool.stats();
        assert_eq!(
            (stats.completed, stats.rejected, stats.abandoned),
            (5, 1, 3)
        );
    });
}

#[test]
fn shutdown_refuses_the_waiters_at_once() {
    block_on(async {
        let (pool, release, blocker) = held_pool(1);
        wait_until(|| pool.stats().running == 1).await;
        let queued = tokio::spawn({
            let pool = pool.clone();
            async move { pool.dispatch(|| "queued").await }
        });
        wait_until(|| pool.stats().queued == 1).await;
        let waiter = tokio::spawn({
            let pool = pool.clone();
            async move { pool.dispatch_wait(DEADLINE, || "waited").await }
        });
        wait_until(|| pool.owner.shared.slots.waiters.load(Ordering::SeqCst) == 1).await;
        let stopper = std::thread::spawn({
            let pool = pool.clone();
            move || pool.shutdown()
        });
        // Refused by the close, long before its deadline.
        assert!(waiter.await.unwrap().unwrap_err().is_stopped());
        release.send(()).unwrap();
        blocker.await.unwrap();
        assert_eq!(queued.await.unwrap().unwrap(), "queued");
        stopper.join().unwrap();
    });
}

/// Sets its flag when dropped; panics too when asked.
struct Dropped(Arc<AtomicBool>, bool);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
        if self.1 {
            panic!("drop of a value nobody waits for");
        }
    }
}

#[test]
fn a_value_whose_requester_left_during_the_run_is_dropped() {
    for panics in [false, true] {
        block_on(async {
            let pool = Dispatcher::builder().threads(1).build();
            let (release, wait) = mpsc::channel::<()>();
            let dropped = Arc::new(AtomicBool::new(false));
            let requester = tokio::spawn({
                let pool = pool.clone();
                let dropped = dropped.clone();
                async move {
                    pool.dispatch(move || {
                        let _ = wait.recv_timeout(DEADLINE);
                        Dropped(dropped, panics)
                    })
                    .await
                    .map(|_| ())
                }
            });
            wait_until(|| pool.stats().running == 1).await;
            requester.abort();
            assert!(requester.await.unwrap_err().is_cancelled());
            release.send(()).unwrap();
            // The worker drops the value (a panic in that drop included)
            // and lives on.
            wait_until(|| dropped.load(Ordering::SeqCst)).await;
            assert_eq!(pool.dispatch(|| "alive").await.unwrap(), "alive");
            let stats = pool.stats();
            assert_eq!((stats.completed, stats.abandoned), (2, 0));
            wait_until(|| pool.owner.shared.slots.taken() == 0).await;
            pool.shutdown();
        });
    }
}

/// Counts its wake-ups.
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_requester_polled_with_another_waker_is_woken_on_that_one() {
    block_on(async {
        let (pool, release, blocker) = held_pool(1);
        wait_until(|| pool.stats().running == 1).await;
        let first = Arc::new(Count(AtomicUsize::new(0)));
        let second = Arc::new(Count(AtomicUsize::new(0)));
        let mut job = pin!(pool.dispatch(|| 5));
        let waker = Waker::from(first.clone());
        assert!(
            job.as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
        assert_eq!(pool.stats().queued, 1);
        let waker = Waker::from(second.clone());
        assert!(
            job.as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
        release.send(()).unwrap();
        blocker.await.unwrap();
        wait_until(|| second.0.load(Ordering::SeqCst) > 0).await;
        let Poll::Ready(value) = job.as_mut().poll(&mut Context::from_waker(&waker)) else {
            panic!("woken without its value");
        };
        assert_eq!(value.unwrap(), 5);
        assert_eq!(first.0.load(Ordering::SeqCst), 0);
    });
}

impl Dispatcher {
    /// Whether the queue is closed (for tests).
    fn dispatch_now_refused(&self) -> bool {
        super::lock(&self.owner.shared.state).closed
    }

    /// Worker threads idle now, asleep or about to be (for tests).
    fn asleep(&self) -> usize {
        super::lock(&self.owner.shared.state).idle.len()
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
