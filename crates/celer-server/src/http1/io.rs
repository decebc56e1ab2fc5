//! Buffered reads and batched writes for HTTP/1 connections.
//!
//! Responses to pipelined requests accumulate in one [`WriteBuf`] and go out
//! in one `write` (or one `writev` when large bodies are queued by
//! reference). Idle connections give their buffers back to a per-thread pool,
//! so an idle connection holds no buffer memory.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::{Buf, Bytes, BytesMut};

/// Data at least this long is queued by reference instead of copied.
const COPY_LIMIT: usize = 8 * 1024;

/// Pending output: small pieces copied into one buffer, large ones queued.
#[derive(Debug, Default)]
pub(crate) struct WriteBuf {
    queue: VecDeque<Bytes>,
    flat: BytesMut,
}

impl WriteBuf {
    /// Bytes waiting to be written.
    pub(crate) fn len(&self) -> usize {
        self.queue.iter().map(Bytes::len).sum::<usize>() + self.flat.len()
    }

    /// True when nothing waits to be written.
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty() && self.flat.is_empty()
    }

    /// Copies `src` to the end.
    pub(crate) fn put(&mut self, src: &[u8]) {
        self.flat_mut(src.len()).extend_from_slice(src);
    }

    /// Appends `data`, by reference when it is large.
    pub(crate) fn put_bytes(&mut self, data: Bytes) {
        if data.len() < COPY_LIMIT {
            self.put(&data);
            return;
        }
        if !self.flat.is_empty() {
            let small = self.flat.split().freeze();
            self.queue.push_back(small);
        }
        self.queue.push_back(data);
    }

    /// Fills `dst` with the pending pieces in order; returns how many.
    pub(crate) fn slices<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let pieces = self.queue.iter().map(|b| &b[..]);
        let flat = Some(&self.flat[..]).filter(|f| !f.is_empty());
        let mut n = 0;
        for (slot, piece) in dst.iter_mut().zip(pieces.chain(flat)) {
            *slot = IoSlice::new(piece);
            n += 1;
        }
        n
    }

    /// Drops the first `n` written bytes.
    pub(crate) fn advance(&mut self, mut n: usize) {
        while n > 0 {
            match self.queue.front_mut() {
                Some(front) if front.len() <= n => {
                    n -= front.len();
                    self.queue.pop_front();
                }
                Some(front) => {
                    front.advance(n);
                    return;
                }
                None => {
                    self.flat.advance(n);
                    return;
                }
            }
        }
        if self.queue.is_empty() && self.flat.is_empty() {
            self.flat.clear();
        }
    }

    /// The single contiguous buffer, when nothing is queued by reference.
    pub(crate) fn flat(&self) -> Option<&[u8]> {
        self.queue.is_empty().then_some(&self.flat[..])
    }

    /// Releases the buffer's memory (used when a connection goes idle).
    pub(crate) fn release(&mut self) {
        if self.is_empty() {
            give_buf(std::mem::take(&mut self.flat));
            self.queue = VecDeque::new();
        }
    }

    /// The copy buffer, with room for at least `n` more bytes.
    pub(crate) fn flat_mut(&mut self, n: usize) -> &mut BytesMut {
        if self.flat.capacity() == 0 {
            self.flat = take_buf();
        }
        self.flat.reserve(n);
        &mut self.flat
    }
}

/// Capacity of a pooled buffer.
pub(crate) const BUF_SIZE: usize = 8 * 1024;

/// Most buffers kept per thread.
const POOL_MAX: usize = 16;

thread_local! {
    static POOL: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
}

/// A buffer with at least [`BUF_SIZE`] bytes of room, from the pool if it has one.
pub(crate) fn take_buf() -> BytesMut {
    POOL.with(|p| p.borrow_mut().pop())
        .unwrap_or_else(|| BytesMut::with_capacity(BUF_SIZE))
}

/// Returns an empty buffer to the pool; buffers still shared or grown past
/// their usual size are freed instead.
pub(crate) fn give_buf(mut buf: BytesMut) {
    if buf.capacity() == 0 || !buf.is_empty() {
        return;
    }
    // `try_reclaim` succeeds only when no frozen slice still points into the
    // allocation, so a pooled buffer is never shared.
    if buf.capacity() > 4 * BUF_SIZE || !buf.try_reclaim(BUF_SIZE) {
        return;
    }
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < POOL_MAX {
            p.push(buf);
        }
    });
}

/// How many buffers this thread's pool holds.
#[cfg(test)]
pub(crate) fn pooled() -> usize {
    POOL.with(|p| p.borrow().len())
}
