//! io_uring set-up shared by both scenarios, and a provided-buffer ring for
//! multishot receives.

use io_uring::{squeue, types, IoUring};
use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

/// How a ring is set up.
#[derive(Clone, Copy, Debug)]
pub struct RingOpts {
    /// IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN: completion
    /// work runs only inside our own io_uring_enter.
    pub defer: bool,
    /// The sockets in the registered file table (no fd lookup per SQE) and
    /// the ring's own fd registered (no fdget per io_uring_enter).
    pub fixed: bool,
    /// IORING_SETUP_SQPOLL with its kernel thread on this CPU.
    pub sqpoll_cpu: Option<u32>,
}

/// A ring with `sq` submission and `cq` completion entries, sockets `fds`
/// registered if `o.fixed`.
pub fn build(o: RingOpts, sq: u32, cq: u32, fds: &[i32]) -> io::Result<IoUring> {
    let mut b = IoUring::builder();
    if o.defer {
        b.setup_single_issuer().setup_defer_taskrun();
    }
    if let Some(cpu) = o.sqpoll_cpu {
        // 1 ms idle before the thread sleeps: between rounds it stops spinning.
        b.setup_sqpoll(1).setup_sqpoll_cpu(cpu);
    }
    let ring = b.setup_cqsize(cq).build(sq)?;
    if o.fixed {
        ring.submitter().register_files(fds)?;
        if o.sqpoll_cpu.is_none() {
            ring.submitter().register_ring_fd()?;
        }
    }
    Ok(ring)
}

/// Pushes `e`, submitting first if the submission queue is full.
pub fn push(ring: &mut IoUring, e: &squeue::Entry) -> io::Result<()> {
    loop {
        // SAFETY: every buffer an entry points to outlives its completion
        // (the callers keep them until the ring is dropped).
        if unsafe { ring.submission().push(e) }.is_ok() {
            return Ok(());
        }
        ring.submit()?;
    }
}

/// Provided-buffer ring: `count` buffers of `size` bytes the kernel picks
/// from for multishot receives (group `bgid`).
pub struct BufRing {
    entries: *mut types::BufRingEntry,
    arena: &'static mut [u8],
    count: u16,
    size: usize,
    tail: u16,
}

impl BufRing {
    /// Maps the ring, registers it on `ring` and fills it with every buffer.
    ///
    /// The mapping and arena are deliberately never freed: the kernel may
    /// tear the ring down after it is dropped, asynchronously.
    pub fn new(ring: &IoUring, count: u16, size: usize, bgid: u16) -> io::Result<BufRing> {
        assert!(count.is_power_of_two());
        let bytes = count as usize * std::mem::size_of::<types::BufRingEntry>();
        // SAFETY: an anonymous private mapping, page-aligned as required.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut r = BufRing {
            entries: p.cast(),
            arena: Box::leak(vec![0u8; count as usize * size].into_boxed_slice()),
            count,
            size,
            tail: 0,
        };
        // SAFETY: the mapping lives as long as the process (never unmapped).
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(p as u64, count, bgid, 0)?
        };
        for bid in 0..count {
            r.give(bid);
        }
        r.publish();
        Ok(r)
    }

    /// The first `len` bytes of buffer `bid`.
    pub fn buf(&self, bid: u16, len: usize) -> &[u8] {
        &self.arena[bid as usize * self.size..][..len]
    }

    /// Hands buffer `bid` back to the kernel (visible after `publish`).
    pub fn give(&mut self, bid: u16) {
        let addr = self.arena.as_ptr() as u64 + (bid as usize * self.size) as u64;
        // SAFETY: the index is masked into the mapping; the kernel reads only
        // entries below the published tail, and this one is at the tail.
        let e = unsafe { &mut *self.entries.add((self.tail & (self.count - 1)) as usize) };
        e.set_addr(addr);
        e.set_len(self.size as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Publishes the buffers given back since the last call.
    pub fn publish(&self) {
        // SAFETY: the tail field lies in the first entry of the page-aligned
        // mapping; the kernel reads it with acquire semantics.
        unsafe {
            (*(types::BufRingEntry::tail(self.entries) as *const AtomicU16))
                .store(self.tail, Ordering::Release)
        };
    }
}
