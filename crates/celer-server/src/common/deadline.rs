//! [`Deadline`]: one timer per connection, re-armed only when late and
//! polled only when it may have something to say.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::time::{Instant, Sleep};

/// A connection's timer for whichever deadline is in force (head, idle,
/// body, ...).
///
/// The timer is moved only when it would fire too late; one that fires
/// early (the deadline moved on since it was set) is re-armed then, so
/// keep-alive traffic costs no timer work per request. Nor is the timer
/// polled again by the task that last polled it while it is armed no
/// later than the deadline asked for and has not fired: it already holds
/// that task's waker and will use it when it fires (decision 164). A poll
/// that found the task's cooperative budget spent left no waker in the
/// timer, so it is not recorded (decision 171).
#[derive(Debug)]
pub(crate) struct Deadline {
    /// One allocation for the timer and what is known of its waker: the
    /// connection's own state stays its size (decision 004's size class).
    inner: Pin<Box<Inner>>,
}

pin_project_lite::pin_project! {
    #[derive(Debug)]
    struct Inner {
        #[pin]
        sleep: Sleep,
        // The data pointer of the waker the last poll left in the timer,
        // when that poll was pending and nothing has moved the timer since
        // (0: none). A pointer, not a clone: the timer holds the waker
        // itself, so the pointer is not reused while it is kept here.
        polled_by: usize,
    }
}

impl Deadline {
    /// A timer armed at `at` (an instant already past fires on the first
    /// poll, which re-arms it for the deadline asked for).
    pub(crate) fn new(at: Instant) -> Deadline {
        Deadline {
            inner: Box::pin(Inner {
                sleep: tokio::time::sleep_until(at),
                polled_by: 0,
            }),
        }
    }

    /// When the timer is armed to fire.
    #[cfg(test)]
    fn armed_at(&self) -> Instant {
        self.inner.sleep.deadline()
    }

    /// Arms the timer at `at`, earlier or later than before.
    pub(crate) fn reset(&mut self, at: Instant) {
        let inner = self.inner.as_mut().project();
        inner.sleep.reset(at);
        *inner.polled_by = 0;
    }

    /// Ready once `deadline` has passed; otherwise `cx` is woken when it
    /// may have.
    pub(crate) fn poll(&mut self, deadline: Instant, cx: &mut Context<'_>) -> Poll<()> {
        let waker = cx.waker().data() as usize;
        let inner = self.inner.as_mut().project();
        let mut sleep = inner.sleep;
        // Armed no later than `deadline`, not fired, and holding this
        // waker: polling would register the same waker again and answer
        // pending. A fire marks the timer elapsed before it wakes, so a
        // waker it took is seen here as elapsed.
        if waker != 0
            && *inner.polled_by == waker
            && sleep.deadline() <= deadline
            && !sleep.is_elapsed()
        {
            return Poll::Pending;
        }
        *inner.polled_by = 0;
        loop {
            if sleep.deadline() > deadline {
                sleep.as_mut().reset(deadline);
            }
            // A timer polled when the task's cooperative budget has run out
            // answers pending without taking the waker (tokio wakes the task
            // itself, to go on later): that answer is not recorded, or the
            // next poll would leave alone a timer that holds no waker, and
            // the deadline would never fire.
            let budgeted = tokio::task::coop::has_budget_remaining();
            if sleep.as_mut().poll(cx).is_pending() {
                if budgeted {
                    *inner.polled_by = waker;
                }
                return Poll::Pending;
            }
            if sleep.deadline() >= deadline {
                return Poll::Ready(());
            }
            sleep.as_mut().reset(deadline);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::poll_fn;
    use std::time::Duration;

    /// A deadline waited on again by the same task (not re-polled inside)
    /// still fires; after a reset, and when the deadline moves earlier,
    /// the timer is polled again and fires at the new time.
    #[tokio::test(start_paused = true)]
    async fn a_deadline_left_alone_between_waits_still_fires() {
        let start = Instant::now();
        let mut timer = Deadline::new(start);
        let first = start + Duration::from_secs(10);
        // Arms the timer (it starts in the past: fires, is re-armed).
        let mut polls = 0;
        poll_fn(|cx| {
            polls += 1;
            if polls == 1 {
                assert!(timer.poll(first, cx).is_pending());
                // Polled again at once by the same task: left alone, pending.
                assert!(timer.poll(first + Duration::from_secs(5), cx).is_pending());
                assert_eq!(timer.armed_at(), first);
                return Poll::Pending;
            }
            // Woken by the timer at `first`: a later deadline re-arms it.
            assert!(Instant::now() >= first);
            timer.poll(first + Duration::from_secs(5), cx)
        })
        .await;
        assert!(Instant::now() >= first + Duration::from_secs(5));
        assert!(
            polls >= 3,
            "the timer woke the task and re-armed: {polls} polls"
        );

        // A reset forgets the waker: the next poll registers it again.
        let at = Instant::now() + Duration::from_secs(30);
        timer.reset(at + Duration::from_secs(60));
        poll_fn(|cx| timer.poll(at, cx)).await;
        assert!(Instant::now() >= at);
        assert!(Instant::now() < at + Duration::from_secs(60));

        // An earlier deadline than the one armed moves the timer even when
        // this task polled it last.
        let late = Instant::now() + Duration::from_secs(100);
        let early = Instant::now() + Duration::from_secs(1);
        let mut first_poll = true;
        poll_fn(|cx| {
            if first_poll {
                first_poll = false;
                assert!(timer.poll(late, cx).is_pending());
            }
            timer.poll(early, cx)
        })
        .await;
        assert!(Instant::now() >= early);
        assert!(Instant::now() < late);
    }

    /// A poll by another task's waker registers that waker: the first
    /// task's record does not keep it from being woken.
    #[tokio::test(start_paused = true)]
    async fn a_deadline_polled_by_another_waker_registers_it() {
        let at = Instant::now() + Duration::from_secs(2);
        let mut timer = Deadline::new(at);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        // The no-op waker (data pointer null) is never recorded.
        assert!(timer.poll(at, &mut cx).is_pending());
        assert_eq!(timer.inner.polled_by, 0);
        poll_fn(|cx| timer.poll(at, cx)).await;
        assert!(Instant::now() >= at);
    }

    /// A timer first polled when the task's cooperative budget has run out
    /// holds no waker (tokio answers pending and wakes the task itself):
    /// the next poll must not leave it alone, or the deadline never fires.
    /// (The HTTP/2 connection fuzz target found a connection that never
    /// timed out this way.)
    #[tokio::test(start_paused = true)]
    async fn a_deadline_polled_without_budget_still_fires() {
        let start = Instant::now();
        let at = start + Duration::from_secs(2);
        let mut timer = Deadline::new(at);
        let mut first_poll = true;
        let waited = tokio::time::timeout(
            Duration::from_secs(3600),
            poll_fn(|cx| {
                if first_poll {
                    first_poll = false;
                    // Spend the budget of this poll of the task.
                    let mut spent = 0;
                    while tokio::task::coop::has_budget_remaining() {
                        let mut step = std::pin::pin!(tokio::task::consume_budget());
                        let _ = step.as_mut().poll(cx);
                        spent += 1;
                        assert!(spent < 10_000, "the budget never ran out");
                    }
                    assert!(timer.poll(at, cx).is_pending());
                    return Poll::Pending;
                }
                timer.poll(at, cx)
            }),
        )
        .await;
        assert!(waited.is_ok(), "the deadline never fired");
        assert!(Instant::now() >= at);
    }
}
