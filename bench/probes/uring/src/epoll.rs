//! `--mode epoll`: the classic readiness loop, as tokio/mio and nginx do it.
//!
//! - the listener and every connection are registered once, edge-triggered,
//!   for EPOLLIN|EPOLLOUT|EPOLLRDHUP (tokio's and nginx's interest set);
//! - per readiness event: recv once into a read buffer; only if it filled the
//!   buffer read again (a read shorter than the buffer means the socket is
//!   drained, so no extra recv that would only return EAGAIN);
//! - count complete heads, append that many responses, and write them all
//!   with one send (pipelined requests get one send per read);
//! - a short send keeps the rest, which goes out on the next EPOLLOUT edge.
//!
//! Syscalls per keep-alive request: 1 recv + 1 send + 1/k epoll_wait when one
//! wait returns k ready connections.

use crate::{cvt, push_responses, set_nodelay, HeadCounter};
use std::io;
use std::os::fd::RawFd;

const READ_BUF: usize = 8192;
const MAX_EVENTS: usize = 512;
const LISTENER: u64 = u64::MAX;

struct Conn {
    heads: HeadCounter,
    out: Vec<u8>, // responses not yet accepted by the kernel
    sent: usize,  // bytes of `out` already sent
}

pub fn run(lfd: RawFd) -> io::Result<()> {
    // SAFETY: epoll_create1 has no memory arguments.
    let ep = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
    add(ep, lfd, LISTENER, libc::EPOLLIN | libc::EPOLLET)?;

    // Connections are indexed by fd (small dense integers).
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut buf = vec![0u8; READ_BUF];
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS];
    let mut checked_nodelay = false;

    loop {
        // SAFETY: `events` is a valid writable array of MAX_EVENTS entries.
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), MAX_EVENTS as i32, -1) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted { continue; }
            return Err(e);
        }
        for ev in &events[..n as usize] {
            let (bits, token) = (ev.events, ev.u64);
            if token == LISTENER {
                // Edge-triggered listener: accept until EAGAIN.
                loop {
                    // SAFETY: no address is requested (null pointers are allowed).
                    let fd = unsafe { libc::accept4(lfd, std::ptr::null_mut(), std::ptr::null_mut(),
                                                    libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) };
                    if fd < 0 { break; }
                    if !checked_nodelay {
                        checked_nodelay = true;
                        check_nodelay_inherited(fd);
                    }
                    set_nodelay(fd)?;
                    let i = fd as usize;
                    if conns.len() <= i { conns.resize_with(i + 1, || None); }
                    conns[i] = Some(Conn { heads: HeadCounter::default(), out: Vec::with_capacity(4096), sent: 0 });
                    let interest = libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET;
                    add(ep, fd, fd as u64, interest)?;
                }
                continue;
            }
            let fd = token as RawFd;
            let Some(c) = conns[fd as usize].as_mut() else { continue };
            let mut close = bits & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0;

            if bits & (libc::EPOLLIN | libc::EPOLLRDHUP) as u32 != 0 && !close {
                let mut heads = 0;
                loop {
                    // SAFETY: `buf` is valid for READ_BUF bytes.
                    let r = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), READ_BUF, 0) };
                    if r > 0 {
                        heads += c.heads.feed(&buf[..r as usize]);
                        if (r as usize) < READ_BUF { break; } // drained: no EAGAIN read
                    } else if r == 0 {
                        close = true; // peer closed
                        break;
                    } else {
                        let e = io::Error::last_os_error();
                        match e.kind() {
                            io::ErrorKind::WouldBlock => {}
                            io::ErrorKind::Interrupted => continue,
                            _ => close = true,
                        }
                        break;
                    }
                }
                push_responses(&mut c.out, heads);
            }
            // One send for everything pending (new responses, or the rest of a
            // short send when EPOLLOUT signals room again).
            if !close && c.sent < c.out.len() {
                let rest = &c.out[c.sent..];
                // SAFETY: `rest` is a valid initialised slice.
                let r = unsafe { libc::send(fd, rest.as_ptr().cast(), rest.len(), libc::MSG_NOSIGNAL) };
                if r >= 0 {
                    c.sent += r as usize;
                    if c.sent == c.out.len() { c.out.clear(); c.sent = 0; }
                } else if io::Error::last_os_error().kind() != io::ErrorKind::WouldBlock {
                    close = true;
                }
            }
            if close {
                conns[fd as usize] = None;
                // SAFETY: fd is ours; closing also removes it from the epoll set.
                unsafe { libc::close(fd) };
            }
        }
    }
}

fn add(ep: RawFd, fd: RawFd, token: u64, events: i32) -> io::Result<()> {
    let mut ev = libc::epoll_event { events: events as u32, u64: token };
    // SAFETY: `ev` is a valid epoll_event for the duration of the call.
    cvt(unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) }).map(drop)
}

/// Confirms once that accepted sockets inherit TCP_NODELAY from the listener
/// (the fixed-file uring variant relies on it).
fn check_nodelay_inherited(fd: RawFd) {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are valid out-pointers of the right size.
    unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, (&mut v as *mut libc::c_int).cast(), &mut len) };
    eprintln!("uring-probe: accepted socket inherits TCP_NODELAY: {}", v != 0);
}
