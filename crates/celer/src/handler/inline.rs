//! A handler function's future kept in place instead of in a `Box`.
//!
//! Most handler futures are a few words: the request (one pointer) and the
//! state of an `async fn` that answers without waiting. Boxing one costs an
//! allocation and a free per request, about as much as routing it. A future
//! that fits in [`WORDS`] words is therefore stored, type-erased, inside the
//! app's response future, which the server keeps pinned in its own
//! per-request state; larger ones are boxed as before.
//!
//! This is the only module of the framework with `unsafe` code: the
//! type-erased slot. Each block states why it is sound.
#![allow(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::marker::{PhantomData, PhantomPinned};
use std::mem::{MaybeUninit, align_of, size_of};
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::response::Response;

/// The room for a future, in words: a request and some state.
pub(crate) const WORDS: usize = 4;

/// What the future yields: the output of the app's `Service` future.
type Output = Result<Response, Infallible>;

/// A future of up to [`WORDS`] words, stored in place.
///
/// It is `!Unpin`: the stored future never moves once polled, because the
/// slot is only reached through `Pin<&mut InlineFuture>`. Moving an
/// `InlineFuture` before its first poll moves the future, which every
/// future allows.
pub(crate) struct InlineFuture {
    /// The stored type's `poll` and `drop`.
    vtable: &'static VTable,
    /// A value of the stored type, from `new` until `drop`.
    slot: MaybeUninit<[usize; WORDS]>,
    /// Keeps the slot in place once pinned.
    _pinned: PhantomPinned,
    /// `Send` like the boxed future this replaces (the stored type is
    /// `Send`), and not `Sync`, which the stored type need not be.
    _send: PhantomData<Pin<Box<dyn Future<Output = Output> + Send>>>,
}

/// The operations on the stored type, erased.
struct VTable {
    poll: unsafe fn(*mut (), &mut Context<'_>) -> Poll<Output>,
    drop: unsafe fn(*mut ()),
}

/// The vtable of `F`, as a constant so that a reference to it is `'static`.
trait Erase: Future<Output = Output> + Sized {
    const VTABLE: VTable = VTable {
        poll: poll_erased::<Self>,
        drop: drop_erased::<Self>,
    };
}

impl<F: Future<Output = Output>> Erase for F {}

/// # Safety
///
/// `ptr` points to a live, pinned `F`.
unsafe fn poll_erased<F: Future<Output = Output>>(
    ptr: *mut (),
    cx: &mut Context<'_>,
) -> Poll<Output> {
    // SAFETY: the caller guarantees a live `F` at `ptr` that never moves
    // again (the slot is pinned), so it may be pinned and borrowed for the
    // duration of this call.
    unsafe { Pin::new_unchecked(&mut *ptr.cast::<F>()) }.poll(cx)
}

/// # Safety
///
/// `ptr` points to a live `F`, which is dead afterwards.
unsafe fn drop_erased<F>(ptr: *mut ()) {
    // SAFETY: the caller guarantees a live `F` at `ptr` and never uses it
    // again.
    unsafe { std::ptr::drop_in_place(ptr.cast::<F>()) }
}

// ===== impl InlineFuture =====

impl InlineFuture {
    /// Whether a future of type `F` fits in the slot.
    const fn fits<F>() -> bool {
        size_of::<F>() <= size_of::<[usize; WORDS]>() && align_of::<F>() <= align_of::<usize>()
    }

    /// Stores `fut` in place, or gives it back when it does not fit.
    #[inline]
    pub(crate) fn new<F>(fut: F) -> Result<Self, F>
    where
        F: Future<Output = Output> + Send + 'static,
    {
        if !Self::fits::<F>() {
            return Err(fut);
        }
        let mut slot = MaybeUninit::<[usize; WORDS]>::uninit();
        // SAFETY: the slot is uninitialised memory of ours, large enough and
        // aligned enough for `F` (`fits`); writing does not read it.
        unsafe { slot.as_mut_ptr().cast::<F>().write(fut) };
        Ok(InlineFuture {
            vtable: &<F as Erase>::VTABLE,
            slot,
            _pinned: PhantomPinned,
            _send: PhantomData,
        })
    }
}

impl Future for InlineFuture {
    type Output = Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Output> {
        // SAFETY: nothing is moved out of `this`; the slot stays where the
        // pin keeps it.
        let this = unsafe { self.get_unchecked_mut() };
        let ptr = this.slot.as_mut_ptr().cast::<()>();
        // SAFETY: the slot holds the live future `vtable` was made for
        // (written by `new`, dropped only by `drop`), and it is pinned.
        unsafe { (this.vtable.poll)(ptr, cx) }
    }
}

impl Drop for InlineFuture {
    fn drop(&mut self) {
        let ptr = self.slot.as_mut_ptr().cast::<()>();
        // SAFETY: the slot holds the live future `vtable` was made for, and
        // nothing uses it after this. Dropping in place keeps the pinning
        // promise (a pinned value is dropped before its memory is reused).
        unsafe { (self.vtable.drop)(ptr) }
    }
}

impl fmt::Debug for InlineFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InlineFuture").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Waker;

    use super::*;

    /// Counts its drops; answers on the second poll.
    struct Probe {
        drops: Arc<AtomicUsize>,
        polls: u8,
    }

    impl Future for Probe {
        type Output = Output;

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Output> {
            self.polls += 1;
            if self.polls < 2 {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            Poll::Ready(Ok(crate::response::status(http::StatusCode::CREATED)))
        }
    }

    impl Drop for Probe {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn small_future_is_polled_in_place_and_dropped_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let probe = Probe {
            drops: drops.clone(),
            polls: 0,
        };
        {
            let fut = InlineFuture::new(probe).ok().expect("fits");
            let mut fut = std::pin::pin!(fut);
            let mut cx = Context::from_waker(Waker::noop());
            assert!(fut.as_mut().poll(&mut cx).is_pending());
            match fut.as_mut().poll(&mut cx) {
                Poll::Ready(Ok(res)) => assert_eq!(res.status(), http::StatusCode::CREATED),
                _ => panic!("second poll should answer"),
            }
            assert_eq!(drops.load(Ordering::SeqCst), 0);
        }
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn unpolled_future_is_dropped_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let fut = InlineFuture::new(Probe {
            drops: drops.clone(),
            polls: 0,
        });
        drop(fut);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn large_future_is_given_back() {
        let big = [0u64; WORDS + 1];
        let fut = async move {
            Ok(crate::response::status(
                http::StatusCode::from_u16(200 + big.len() as u16).unwrap_or_default(),
            ))
        };
        assert!(InlineFuture::new(fut).is_err());
    }
}
