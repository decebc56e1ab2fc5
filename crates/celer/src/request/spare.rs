//! One spare request allocation per thread.
//!
//! A request's state is one heap allocation ([`InnerBox`]). A thread that
//! serves requests one after another frees one and allocates the next, of
//! the same size; keeping the freed one for the next request replaces a
//! `malloc` and a `free` (about 50 instructions with jemalloc) with two
//! accesses to a thread-local slot. A request dropped on another thread, or
//! while the thread's locals are being torn down, just frees its memory.
//!
//! This module and `handler/inline.rs` are the framework's only `unsafe`
//! code; each block states why it is sound.
#![allow(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

use std::cell::Cell;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::ops::{Deref, DerefMut};
use std::ptr;

use super::Inner;

thread_local! {
    /// The allocation of the last request dropped on this thread, unused.
    static SPARE: Cell<Option<Box<MaybeUninit<Inner>>>> = const { Cell::new(None) };
}

/// A request's state on the heap; its allocation becomes the thread's spare
/// when it is dropped.
pub(super) struct InnerBox {
    /// Always a live box; taken out only by `drop` and `into_inner`.
    inner: ManuallyDrop<Box<Inner>>,
}

// ===== impl InnerBox =====

impl InnerBox {
    /// An allocation for a request: the thread's spare, else a new one.
    #[inline]
    pub(super) fn alloc() -> Box<MaybeUninit<Inner>> {
        SPARE
            .try_with(Cell::take)
            .ok()
            .flatten()
            .unwrap_or_else(Box::new_uninit)
    }

    /// Takes ownership of a request's state written into an allocation from
    /// [`alloc`](InnerBox::alloc) (any `Box` will do).
    #[inline]
    pub(super) fn new(inner: Box<Inner>) -> Self {
        InnerBox {
            inner: ManuallyDrop::new(inner),
        }
    }

    /// Moves the state out; the allocation becomes the thread's spare.
    pub(super) fn into_inner(self) -> Inner {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped (it is in a `ManuallyDrop`) and
        // its box is not used after being taken here.
        let boxed = unsafe { ManuallyDrop::take(&mut this.inner) };
        let raw = Box::into_raw(boxed);
        // SAFETY: `raw` comes from a `Box<Inner>`: valid, aligned and
        // initialised. The value is read out once and the memory is then
        // treated as uninitialised, so it is never dropped twice.
        let (value, spare) = unsafe {
            (
                ptr::read(raw),
                Box::from_raw(raw.cast::<MaybeUninit<Inner>>()),
            )
        };
        keep(spare);
        value
    }
}

/// Makes `spare` the thread's spare allocation (freeing the one before, if
/// any); frees it when the thread's locals are gone.
#[inline]
fn keep(spare: Box<MaybeUninit<Inner>>) {
    let _ = SPARE.try_with(move |slot| slot.set(Some(spare)));
}

impl Deref for InnerBox {
    type Target = Inner;

    #[inline]
    fn deref(&self) -> &Inner {
        &self.inner
    }
}

impl DerefMut for InnerBox {
    #[inline]
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.inner
    }
}

impl Drop for InnerBox {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: this is the box's last use: `drop` runs once and nothing
        // reads `self.inner` afterwards.
        let boxed = unsafe { ManuallyDrop::take(&mut self.inner) };
        let raw = Box::into_raw(boxed);
        // SAFETY: `raw` comes from a `Box<Inner>`: valid, aligned and
        // initialised. The value is dropped once, in place; the memory is
        // then reclaimed as a `MaybeUninit<Inner>` box, which has the same
        // layout and never drops its contents. If the drop panics, the
        // allocation leaks instead.
        let spare = unsafe {
            ptr::drop_in_place(raw);
            Box::from_raw(raw.cast::<MaybeUninit<Inner>>())
        };
        keep(spare);
    }
}

#[cfg(test)]
mod tests {
    use crate::Request;

    fn request(path: &str) -> Request {
        Request::builder().uri(path).body("x").unwrap()
    }

    #[test]
    fn freed_request_is_reused_by_the_next() {
        let first = request("/a");
        let addr = first.inner_addr();
        drop(first);
        let second = request("/b");
        assert_eq!(second.inner_addr(), addr);
        assert_eq!(second.path(), "/b");
    }

    #[test]
    fn into_http_keeps_the_request_and_frees_the_state() {
        let http = request("/c").into_http();
        assert_eq!(http.uri().path(), "/c");
        let next = request("/d");
        assert_eq!(next.path(), "/d");
    }

    #[test]
    fn request_dropped_on_another_thread_is_fine() {
        let req = request("/e");
        std::thread::spawn(move || drop(req)).join().unwrap();
        let handle = std::thread::spawn(|| {
            // Kept in a thread-local that is torn down with the thread.
            drop(request("/f"));
        });
        handle.join().unwrap();
    }
}
