//! `--mode uring`: a completion loop on one io_uring.
//!
//! - setup: SINGLE_ISSUER|DEFER_TASKRUN by default (completion work runs only
//!   inside our own io_uring_enter, never as task_work interrupting us);
//! - one multishot accept (optionally allocating fixed-file slots, so accepted
//!   sockets never get a normal fd and every op skips the fd-table lookup);
//! - per connection either one multishot recv that picks buffers from a
//!   provided-buffer ring (armed once, stays armed), or a plain recv SQE into
//!   the connection's own buffer, re-armed after every completion;
//! - at most one send in flight per connection: responses produced meanwhile
//!   wait in `pending` and go out in one send when it completes;
//! - one `submit_and_wait(1)` per loop turn submits every SQE queued while
//!   reaping the previous batch and waits for the next completions.

use crate::{push_responses, set_nodelay, HeadCounter, UringOpts};
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU16, Ordering};

const BUF_SIZE: usize = 4096; // provided / per-connection read buffer
const RING_BUFS: u16 = 1024; // provided-buffer ring entries (power of two)
const BGID: u16 = 0;

// user_data: operation kind in the high 32 bits, connection slot in the low.
const ACCEPT: u64 = 1 << 32;
const RECV: u64 = 2 << 32;
const SEND: u64 = 3 << 32;
const CLOSE: u64 = 4 << 32;

struct Conn {
    heads: HeadCounter,
    pending: Vec<u8>,  // responses produced while a send was in flight
    inflight: Vec<u8>, // owned by the kernel while `sending`: never touched then
    sent: usize,
    sending: bool,
    recv_armed: bool,
    closing: bool,
    rbuf: Vec<u8>, // plain-recv mode only; owned by the kernel while recv_armed
}

/// Builds an SQE on either a raw fd or a fixed-file slot.
macro_rules! on {
    ($fixed:expr, $id:expr, |$t:ident| $e:expr) => {
        if $fixed { let $t = types::Fixed($id as u32); $e } else { let $t = types::Fd($id as RawFd); $e }
    };
}

/// Provided-buffer ring: RING_BUFS entries pointing into one BUF_SIZE-sliced
/// arena. The kernel consumes from the head; we return buffers at the tail.
struct BufRing {
    entries: *mut types::BufRingEntry,
    arena: Vec<u8>,
    tail: u16, // local tail, published once per loop turn
}

impl BufRing {
    fn new(sub: &io_uring::Submitter<'_>) -> io::Result<Self> {
        let bytes = RING_BUFS as usize * std::mem::size_of::<types::BufRingEntry>();
        // SAFETY: anonymous private mapping; page aligned as the kernel requires.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), bytes, libc::PROT_READ | libc::PROT_WRITE,
                                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
        if p == libc::MAP_FAILED { return Err(io::Error::last_os_error()); }
        let mut r = BufRing { entries: p.cast(), arena: vec![0u8; RING_BUFS as usize * BUF_SIZE], tail: 0 };
        // SAFETY: the mapping and the arena live as long as the process (never
        // unmapped or freed while the ring exists: `run` never returns Ok).
        unsafe { sub.register_buf_ring_with_flags(p as u64, RING_BUFS, BGID, 0)? };
        for bid in 0..RING_BUFS { r.give(bid); }
        r.publish();
        Ok(r)
    }

    /// Bytes of buffer `bid`.
    fn buf(&self, bid: u16) -> &[u8] {
        &self.arena[bid as usize * BUF_SIZE..][..BUF_SIZE]
    }

    /// Queues buffer `bid` for the kernel again (visible after `publish`).
    fn give(&mut self, bid: u16) {
        let addr = self.arena.as_ptr() as u64 + (bid as usize * BUF_SIZE) as u64;
        // SAFETY: index masked into the mapping; the kernel only reads entries
        // between head and the published tail, and this one is past it.
        let e = unsafe { &mut *self.entries.add((self.tail & (RING_BUFS - 1)) as usize) };
        e.set_addr(addr);
        e.set_len(BUF_SIZE as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail field sits in the first entry of the page-aligned
        // ring; the kernel reads it with acquire semantics.
        unsafe { (*(types::BufRingEntry::tail(self.entries) as *const AtomicU16)).store(self.tail, Ordering::Release) };
    }
}

pub fn run(lfd: RawFd, o: &UringOpts) -> io::Result<()> {
    let mut b = IoUring::builder();
    match o.setup.as_str() {
        "defer" => { b.setup_single_issuer().setup_defer_taskrun(); }
        "coop" => { b.setup_single_issuer().setup_coop_taskrun().setup_taskrun_flag(); }
        "none" => {}
        s => return Err(io::Error::other(format!("unknown --setup {s}"))),
    }
    let mut ring: IoUring = b.setup_cqsize(16384).build(4096)?;
    let (mut sub, mut sq, mut cq) = ring.split();
    if o.regring { sub.register_ring_fd()?; }
    if o.fixed { sub.register_files_sparse(16384)?; }
    let mut bufs = if o.multishot_recv { Some(BufRing::new(&sub)?) } else { None };

    let accept = |sq: &mut squeue::SubmissionQueue<'_>| {
        // (CLOEXEC is meaningless, and refused, for fixed-file slots)
        let flags = if o.fixed { 0 } else { libc::SOCK_CLOEXEC };
        let e = opcode::AcceptMulti::new(types::Fd(lfd)).allocate_file_index(o.fixed)
            .flags(flags).build().user_data(ACCEPT);
        push(sq, &sub, &e);
    };
    accept(&mut sq);

    // Connections indexed by fd, or by fixed-file slot with --fixed.
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut ready: Vec<(u64, i32, u32)> = Vec::with_capacity(1024);
    loop {
        sq.sync();
        match sub.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::EBUSY)) => {}
            Err(e) => return Err(e),
        }
        cq.sync();
        ready.clear();
        ready.extend((&mut cq).map(|c| (c.user_data(), c.result(), c.flags())));
        cq.sync(); // hand the CQ slots back before we queue more work

        for &(ud, res, flags) in &ready {
            let (kind, id) = (ud & !0xffff_ffff, (ud & 0xffff_ffff) as usize);
            match kind {
                ACCEPT => {
                    if !cqueue::more(flags) { accept(&mut sq); } // multishot ended: re-arm
                    if res == -libc::EINVAL || res == -libc::EBADF {
                        return Err(io::Error::from_raw_os_error(-res)); // misconfigured: don't spin
                    }
                    if res < 0 { continue; }
                    let id = res as usize;
                    if !o.fixed { set_nodelay(res)?; } // fixed slots inherit it from the listener
                    if conns.len() <= id { conns.resize_with(id + 1, || None); }
                    let rbuf = if o.multishot_recv { Vec::new() } else { vec![0u8; BUF_SIZE] };
                    conns[id] = Some(Conn { heads: HeadCounter::default(), pending: Vec::with_capacity(4096),
                        inflight: Vec::with_capacity(4096), sent: 0, sending: false, recv_armed: false,
                        closing: false, rbuf });
                    arm_recv(&mut sq, &sub, o, id, conns[id].as_mut().unwrap());
                }
                RECV => {
                    let c = conns[id].as_mut().expect("recv for a live connection");
                    let more = cqueue::more(flags);
                    if !more { c.recv_armed = false; }
                    if res > 0 {
                        let heads = match (&mut bufs, cqueue::buffer_select(flags)) {
                            (Some(br), Some(bid)) => {
                                let h = c.heads.feed(&br.buf(bid)[..res as usize]);
                                br.give(bid); // recycle at once: published before the next enter
                                h
                            }
                            _ => c.heads.feed(&c.rbuf[..res as usize]),
                        };
                        push_responses(&mut c.pending, heads);
                        start_send(&mut sq, &sub, o.fixed, id, c);
                    } else if res != -libc::ENOBUFS {
                        c.closing = true; // EOF or error
                    }
                    if !c.recv_armed && !c.closing { arm_recv(&mut sq, &sub, o, id, c); }
                }
                SEND => {
                    let c = conns[id].as_mut().expect("send for a live connection");
                    c.sending = false;
                    if res < 0 {
                        c.closing = true;
                    } else {
                        c.sent += res as usize;
                        if c.sent < c.inflight.len() {
                            send_inflight(&mut sq, &sub, o.fixed, id, c); // short send: the rest
                        } else {
                            c.inflight.clear();
                            start_send(&mut sq, &sub, o.fixed, id, c);
                        }
                    }
                }
                _ => {} // CLOSE: nothing to do
            }
            // Free a closing connection once the kernel holds none of its buffers.
            if kind != ACCEPT && kind != CLOSE {
                if let Some(c) = &conns[id] {
                    if c.closing && !c.sending && !c.recv_armed {
                        conns[id] = None;
                        if o.fixed {
                            push(&mut sq, &sub, &opcode::Close::new(types::Fixed(id as u32)).build().user_data(CLOSE));
                        } else {
                            // SAFETY: the fd is ours and no SQE refers to it any more.
                            unsafe { libc::close(id as RawFd) };
                        }
                    }
                }
            }
        }
        if let Some(br) = &bufs { br.publish(); }
    }
}

fn arm_recv(sq: &mut squeue::SubmissionQueue<'_>, sub: &io_uring::Submitter<'_>, o: &UringOpts, id: usize, c: &mut Conn) {
    let e = if o.multishot_recv {
        on!(o.fixed, id, |t| opcode::RecvMulti::new(t, BGID).build())
    } else {
        on!(o.fixed, id, |t| opcode::Recv::new(t, c.rbuf.as_mut_ptr(), BUF_SIZE as u32).build())
    };
    c.recv_armed = true;
    push(sq, sub, &e.user_data(RECV | id as u64));
}

/// Moves pending responses into the send buffer and sends them, unless a
/// send is already in flight (its completion calls this again).
fn start_send(sq: &mut squeue::SubmissionQueue<'_>, sub: &io_uring::Submitter<'_>, fixed: bool, id: usize, c: &mut Conn) {
    if c.sending || c.pending.is_empty() { return; }
    std::mem::swap(&mut c.pending, &mut c.inflight);
    c.sent = 0;
    send_inflight(sq, sub, fixed, id, c);
}

fn send_inflight(sq: &mut squeue::SubmissionQueue<'_>, sub: &io_uring::Submitter<'_>, fixed: bool, id: usize, c: &mut Conn) {
    let rest = &c.inflight[c.sent..];
    let e = on!(fixed, id, |t| opcode::Send::new(t, rest.as_ptr(), rest.len() as u32)
        .flags(libc::MSG_NOSIGNAL).build());
    c.sending = true;
    push(sq, sub, &e.user_data(SEND | id as u64));
}

/// Queues an SQE, submitting first if the queue is full.
fn push(sq: &mut squeue::SubmissionQueue<'_>, sub: &io_uring::Submitter<'_>, e: &squeue::Entry) {
    // SAFETY: every buffer an SQE points to (rbuf, inflight, the buffer ring)
    // stays alive and untouched until its completion arrives: see `Conn`.
    while unsafe { sq.push(e) }.is_err() {
        sq.sync();
        let _ = sub.submit();
        sq.sync();
    }
}
