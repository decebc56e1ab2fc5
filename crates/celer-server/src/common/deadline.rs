//! [`poll_deadline`]: one timer per connection, re-armed only when late.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::time::{Instant, Sleep};

/// Ready once `deadline` has passed. The timer is moved only when it would
/// fire too late; one that fires early (the deadline moved on since it was
/// set) is re-armed then, so keep-alive traffic costs no timer work per
/// request.
pub(crate) fn poll_deadline(
    timer: &mut Pin<Box<Sleep>>,
    deadline: Instant,
    cx: &mut Context<'_>,
) -> Poll<()> {
    loop {
        if timer.deadline() > deadline {
            timer.as_mut().reset(deadline);
        }
        ready!(timer.as_mut().poll(cx));
        if timer.deadline() >= deadline {
            return Poll::Ready(());
        }
        timer.as_mut().reset(deadline);
    }
}
