//! uring-probe: does io_uring lower the server's CPU per request for small
//! keep-alive HTTP/1.1 requests on loopback, compared with edge-triggered
//! epoll + recv/send? Two minimal single-threaded servers that answer every
//! complete request head (`\r\n\r\n`) with one fixed response, so that the
//! only difference between them is the I/O interface. See `measure`.
//!
//! Usage: uring-probe --mode epoll|uring [--port N] [uring options]
//!   --recv multi|plain   multishot recv + provided-buffer ring (default), or
//!                        one plain recv SQE per read into a per-connection buffer
//!   --setup defer|coop|none
//!                        SINGLE_ISSUER|DEFER_TASKRUN (default), COOP_TASKRUN
//!                        (|TASKRUN_FLAG), or no setup flags
//!   --fixed              accepted sockets go straight into the registered
//!                        file table (multishot accept with file-index alloc)
//!   --regring            register the ring fd (io_uring_enter skips fdget)

mod epoll;
mod uring;

use std::io;
use std::os::fd::RawFd;

/// The fixed answer: 13-byte body, 130 bytes in all.
pub const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\nDate: Wed, 25 Nov 2026 04:00:00 GMT\r\nServer: probe\r\n\r\nHello, World!";

/// Counts complete request heads in a byte stream that may be split at any
/// point: a tiny state machine over the terminator `\r\n\r\n`. Bodies are not
/// supported (the load is GETs only).
#[derive(Default, Clone, Copy)]
pub struct HeadCounter {
    matched: u8, // how many bytes of "\r\n\r\n" the stream currently ends with
}

impl HeadCounter {
    /// Feeds `data`, returns the number of heads completed by it.
    pub fn feed(&mut self, data: &[u8]) -> usize {
        let mut heads = 0;
        let mut m = self.matched;
        for &b in data {
            m = match (m, b) {
                (0 | 2, b'\r') => m + 1,
                (1 | 3, b'\n') => m + 1,
                (_, b'\r') => 1,
                _ => 0,
            };
            if m == 4 {
                heads += 1;
                m = 0;
            }
        }
        self.matched = m;
        heads
    }
}

/// Appends `n` copies of the response to `out`.
pub fn push_responses(out: &mut Vec<u8>, n: usize) {
    out.reserve(n * RESPONSE.len());
    for _ in 0..n {
        out.extend_from_slice(RESPONSE);
    }
}

pub fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r) }
}

fn set_int_opt(fd: RawFd, level: libc::c_int, opt: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: plain setsockopt on an fd we own with a valid c_int value.
    cvt(unsafe {
        libc::setsockopt(fd, level, opt, (&v as *const libc::c_int).cast(),
                         std::mem::size_of::<libc::c_int>() as libc::socklen_t)
    }).map(drop)
}

pub fn set_nodelay(fd: RawFd) -> io::Result<()> {
    set_int_opt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)
}

/// A nonblocking listening socket on 127.0.0.1:`port` with TCP_NODELAY set,
/// which Linux copies into every accepted socket (so the fixed-file uring
/// variant, which never sees a real fd, gets it too).
pub fn listen(port: u16) -> io::Result<RawFd> {
    // SAFETY: plain socket syscalls on a fresh fd; sockaddr_in is fully initialised.
    unsafe {
        let fd = cvt(libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0))?;
        set_int_opt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
        set_nodelay(fd)?;
        let mut sa: libc::sockaddr_in = std::mem::zeroed();
        sa.sin_family = libc::AF_INET as libc::sa_family_t;
        sa.sin_port = port.to_be();
        sa.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        cvt(libc::bind(fd, (&sa as *const libc::sockaddr_in).cast(),
                       std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t))?;
        cvt(libc::listen(fd, 4096))?;
        Ok(fd)
    }
}

pub struct UringOpts {
    pub multishot_recv: bool,
    pub setup: String,
    pub fixed: bool,
    pub regring: bool,
}

fn main() -> io::Result<()> {
    let mut mode = String::from("epoll");
    let mut port: u16 = 8080;
    let mut o = UringOpts { multishot_recv: true, setup: "defer".into(), fixed: false, regring: false };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| die(&format!("{a} needs a value")));
        match a.as_str() {
            "--mode" => mode = val(),
            "--port" => port = val().parse().unwrap_or_else(|_| die("bad --port")),
            "--recv" => o.multishot_recv = match val().as_str() {
                "multi" => true,
                "plain" => false,
                _ => die("--recv multi|plain"),
            },
            "--setup" => o.setup = val(),
            "--fixed" => o.fixed = true,
            "--regring" => o.regring = true,
            _ => die(&format!("unknown argument {a}")),
        }
    }
    let lfd = listen(port)?;
    match mode.as_str() {
        "epoll" => epoll::run(lfd),
        "uring" => uring::run(lfd, &o),
        _ => die("--mode epoll|uring"),
    }
}

fn die(msg: &str) -> ! {
    eprintln!("uring-probe: {msg}");
    std::process::exit(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_split_anywhere() {
        let req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".repeat(16);
        for cut in 0..req.len() {
            let mut c = HeadCounter::default();
            assert_eq!(c.feed(&req[..cut]) + c.feed(&req[cut..]), 16, "cut at {cut}");
        }
        let mut c = HeadCounter::default();
        assert_eq!(c.feed(b"\r\r\n\r\n"), 1);
    }
}
