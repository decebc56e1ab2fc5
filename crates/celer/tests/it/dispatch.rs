//! The dispatcher over real sockets: a full queue answers 503 with
//! Retry-After, a waiting handler gets its slot, a panic answers 500 and the
//! pool goes on.

use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use celer::dispatch::{DispatchError, Dispatcher};
use celer::{App, Request};
use celer_test_support::bounded;

use crate::wire::Served;

/// Upper bound for anything a test waits on; never asserted.
const DEADLINE: Duration = Duration::from_secs(20);

/// Releases the jobs of `/block`, one message each.
#[derive(Clone)]
struct Gate(Arc<Mutex<mpsc::Receiver<()>>>);

fn app(pool: &Dispatcher, gate: Gate) -> App {
    let mut app = App::new();
    app.state(pool.clone());
    app.state(gate);
    app.get("/block", |req: Request| async move {
        let pool = req.state::<Dispatcher>().unwrap().clone();
        let gate = req.state::<Gate>().unwrap().clone();
        pool.dispatch(move || {
            let _ = gate.0.lock().unwrap().recv_timeout(DEADLINE);
            "released"
        })
        .await
    });
    app.get("/wait", |req: Request| async move {
        let pool = req.state::<Dispatcher>().unwrap().clone();
        pool.dispatch_wait(DEADLINE, || "waited").await
    });
    app.get("/panic", |req: Request| async move {
        let pool = req.state::<Dispatcher>().unwrap().clone();
        pool.dispatch(|| -> &'static str { panic!("job failed") })
            .await
    });
    app.get("/sum/<int:n>", |req: Request| async move {
        let pool = req.state::<Dispatcher>().unwrap().clone();
        let n: u64 = req.param("n").unwrap();
        let sum = pool.dispatch(move || (1..=n).sum::<u64>()).await?;
        Ok::<_, DispatchError>(sum.to_string())
    });
    app
}

async fn wait_until(cond: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < DEADLINE, "condition never held");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_answers_503_with_retry_after_and_a_waiter_is_served() {
    let pool = Dispatcher::builder()
        .threads(1)
        .queue(1)
        .retry_after(Duration::from_secs(3))
        .build();
    let (release, gate) = mpsc::channel();
    let served = Served::start(app(&pool, Gate(Arc::new(Mutex::new(gate))))).await;

    // One job runs, one waits in the queue: the pool is full.
    let running = tokio::spawn({
        let url = served.addr;
        async move {
            celer_test_support::exchange(
                url,
                b"GET /block HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            )
            .await
        }
    });
    wait_until(|| pool.stats().running == 1).await;
    let queued = tokio::spawn({
        let url = served.addr;
        async move {
            celer_test_support::exchange(
                url,
                b"GET /block HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            )
            .await
        }
    });
    wait_until(|| pool.stats().queued == 1).await;

    let refused = served
        .one("GET /sum/10 HTTP/1.1\nHost: x\nConnection: close\n\n", b"")
        .await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("retry-after"), Some("3"));
    assert_eq!(pool.stats().rejected, 1);

    // A handler that waits for a slot gets one when the queue moves.
    let waiter = tokio::spawn({
        let url = served.addr;
        async move {
            celer_test_support::exchange(
                url,
                b"GET /wait HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            )
            .await
        }
    });
    release.send(()).unwrap();
    release.send(()).unwrap();
    for reply in [running, queued] {
        let bytes = bounded(reply).await.unwrap();
        let resp = &celer_test_support::parse_all(&bytes)[0];
        assert_eq!((resp.status, resp.text().as_str()), (200, "released"));
    }
    let bytes = bounded(waiter).await.unwrap();
    let resp = &celer_test_support::parse_all(&bytes)[0];
    assert_eq!((resp.status, resp.text().as_str()), (200, "waited"));

    let sum = served
        .one("GET /sum/10 HTTP/1.1\nHost: x\nConnection: close\n\n", b"")
        .await;
    assert_eq!((sum.status, sum.text().as_str()), (200, "55"));
    served.stop().await;
    pool.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_job_answers_500_and_the_worker_lives_on() {
    let pool = Dispatcher::builder().threads(1).queue(4).build();
    let (_release, gate) = mpsc::channel();
    let served = Served::start(app(&pool, Gate(Arc::new(Mutex::new(gate))))).await;
    for _ in 0..3 {
        let resp = served
            .one("GET /panic HTTP/1.1\nHost: x\nConnection: close\n\n", b"")
            .await;
        assert_eq!(resp.status, 500);
        assert!(!resp.text().contains("job failed"), "panic detail leaked");
    }
    let sum = served
        .one("GET /sum/4 HTTP/1.1\nHost: x\nConnection: close\n\n", b"")
        .await;
    assert_eq!((sum.status, sum.text().as_str()), (200, "10"));
    let stats = pool.stats();
    assert_eq!((stats.panicked, stats.completed), (3, 4));
    served.stop().await;
    pool.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_pool_answers_503_without_retry_after() {
    let pool = Dispatcher::builder().threads(1).build();
    let (_release, gate) = mpsc::channel();
    let served = Served::start(app(&pool, Gate(Arc::new(Mutex::new(gate))))).await;
    pool.shutdown();
    let resp = served
        .one("GET /sum/4 HTTP/1.1\nHost: x\nConnection: close\n\n", b"")
        .await;
    assert_eq!(resp.status, 503);
    assert_eq!(resp.header("retry-after"), None);
    served.stop().await;
}
