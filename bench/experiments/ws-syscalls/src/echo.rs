//! Echo: C loopback connections, each with one 64-byte WebSocket message in
//! flight. The server (this process) answers each masked client frame with
//! the unmasked server frame; the client process, on another CPU, sends the
//! next message on a connection when the echo of the last one is back.
//! Every variant serves the same sockets in turn for one phase.

use crate::ring::{self, BufRing, RingOpts};
use crate::util::{self, check, med_p90, mono_ns, prepare_socket, Args, Perf, Usage};
use io_uring::{cqueue, opcode, types};
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};

/// The variants, in the order of the summary.
pub const VARIANTS: &[&str] = &["epoll", "uring", "uring-fixed"];

const PAYLOAD: &[u8; 64] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!?";
const CLIENT_FRAME: usize = 2 + 4 + 64;
const SERVER_FRAME: usize = 2 + 64;

/// Server side of one connection.
struct Conn {
    inbuf: Vec<u8>,
    out: [[u8; SERVER_FRAME]; 2],
    flip: usize,
}

impl Conn {
    /// Takes received bytes; for each whole client frame, unmasks it into
    /// the next reply buffer and calls `reply` with it (RFC 6455 §5.2, §5.3).
    fn on_bytes(
        &mut self,
        data: &[u8],
        mut reply: impl FnMut(&[u8; SERVER_FRAME]) -> io::Result<()>,
    ) -> io::Result<u64> {
        self.inbuf.extend_from_slice(data);
        let mut done = 0;
        let mut at = 0;
        while self.inbuf.len() - at >= CLIENT_FRAME {
            let f = &self.inbuf[at..at + CLIENT_FRAME];
            if f[0] != 0x81 || f[1] != 0x80 | 64 {
                return Err(io::Error::other(format!(
                    "unexpected frame header {:02x} {:02x}",
                    f[0], f[1]
                )));
            }
            let o = &mut self.out[self.flip];
            self.flip ^= 1;
            o[0] = 0x81;
            o[1] = 64;
            for j in 0..64 {
                o[2 + j] = f[6 + j] ^ f[2 + j % 4];
            }
            reply(o)?;
            at += CLIENT_FRAME;
            done += 1;
        }
        self.inbuf.drain(..at);
        Ok(done)
    }
}

/// A phase with edge-triggered epoll, one recv per event, one send per reply.
fn phase_epoll(fds: &[RawFd], conns: &mut [Conn], ctrl: RawFd) -> io::Result<u64> {
    // SAFETY: creating an epoll instance, closed at the end.
    let ep = check(
        unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) } as isize,
        "epoll_create1",
    )? as i32;
    let add = |fd: RawFd, data: u64, et: bool| -> io::Result<()> {
        let flags = libc::EPOLLIN | if et { libc::EPOLLET } else { 0 };
        let mut ev = libc::epoll_event {
            events: flags as u32,
            u64: data,
        };
        // SAFETY: registering a descriptor we own.
        check(
            unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) } as isize,
            "epoll_ctl",
        )
        .map(drop)
    };
    for (i, &fd) in fds.iter().enumerate() {
        add(fd, i as u64, true)?;
    }
    add(ctrl, u64::MAX, false)?;
    let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; fds.len() + 1];
    let mut buf = vec![0u8; 4096];
    let mut msgs = 0;
    let mut stop = false;
    while !stop {
        // SAFETY: `evs` has room for its length.
        let k = unsafe { libc::epoll_wait(ep, evs.as_mut_ptr(), evs.len() as i32, -1) };
        if k < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        for ev in &evs[..check(k as isize, "epoll_wait")? as usize] {
            if ev.u64 == u64::MAX {
                stop = true;
                continue;
            }
            let (i, fd) = (ev.u64 as usize, fds[ev.u64 as usize]);
            // SAFETY: `buf` is valid for its length.
            let r = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
            if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN) {
                continue;
            }
            if check(r, "recv")? == 0 {
                return Err(io::Error::other("client closed a connection"));
            }
            msgs += conns[i].on_bytes(&buf[..r as usize], |o| {
                // SAFETY: `o` is valid for its length.
                let w = unsafe { libc::send(fd, o.as_ptr().cast(), o.len(), libc::MSG_NOSIGNAL) };
                if check(w, "send")? != o.len() as isize {
                    return Err(io::Error::other("short send"));
                }
                Ok(())
            })?;
        }
    }
    // SAFETY: closing the epoll instance made above.
    unsafe { libc::close(ep) };
    Ok(msgs)
}

const RECV: u64 = 1 << 32;
const SEND: u64 = 2 << 32;
const CTRL: u64 = 3 << 32;

/// A phase on io_uring: one multishot recv per connection into a
/// provided-buffer ring, one send SQE per reply, all SQEs queued while
/// handling a batch of completions submitted by the next
/// `submit_and_wait(1)`.
fn phase_uring(fds: &[RawFd], conns: &mut [Conn], ctrl: RawFd, o: RingOpts) -> io::Result<u64> {
    let mut ring = ring::build(o, 1024, 4096, fds)?;
    let mut bufs = BufRing::new(&ring, 1024, 2048, 0)?;
    let recv = |i: usize| {
        if o.fixed {
            opcode::RecvMulti::new(types::Fixed(i as u32), 0).build()
        } else {
            opcode::RecvMulti::new(types::Fd(fds[i]), 0).build()
        }
        .user_data(RECV | i as u64)
    };
    for i in 0..fds.len() {
        ring::push(&mut ring, &recv(i))?;
    }
    ring::push(
        &mut ring,
        &opcode::PollAdd::new(types::Fd(ctrl), libc::POLLIN as u32)
            .build()
            .user_data(CTRL),
    )?;
    let mut cqes: Vec<(u64, i32, u32)> = Vec::with_capacity(4096);
    let mut msgs = 0;
    let mut stop = false;
    while !stop {
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::EBUSY)) => {}
            Err(e) => return Err(e),
        }
        cqes.clear();
        cqes.extend(
            ring.completion()
                .map(|c| (c.user_data(), c.result(), c.flags())),
        );
        for &(ud, res, flags) in &cqes {
            let i = (ud & 0xffff_ffff) as usize;
            match ud & !0xffff_ffff {
                RECV => {
                    if res == -libc::ENOBUFS {
                        ring::push(&mut ring, &recv(i))?;
                        continue;
                    }
                    if res <= 0 {
                        return Err(io::Error::other(format!("recv on connection {i}: {res}")));
                    }
                    let bid = cqueue::buffer_select(flags).expect("a provided buffer");
                    let fd = fds[i];
                    let mut sends = Vec::new();
                    msgs += conns[i].on_bytes(bufs.buf(bid, res as usize), |out| {
                        sends.push(out.as_ptr());
                        Ok(())
                    })?;
                    bufs.give(bid);
                    for p in sends {
                        let e = if o.fixed {
                            opcode::Send::new(types::Fixed(i as u32), p, SERVER_FRAME as u32)
                        } else {
                            opcode::Send::new(types::Fd(fd), p, SERVER_FRAME as u32)
                        };
                        ring::push(
                            &mut ring,
                            &e.flags(libc::MSG_NOSIGNAL)
                                .build()
                                .user_data(SEND | i as u64),
                        )?;
                    }
                    if !cqueue::more(flags) {
                        ring::push(&mut ring, &recv(i))?;
                    }
                }
                SEND => {
                    if res != SERVER_FRAME as i32 {
                        return Err(io::Error::other(format!("send on connection {i}: {res}")));
                    }
                }
                _ => stop = true,
            }
        }
        bufs.publish();
    }
    Ok(msgs)
}

/// One measured phase.
struct Row {
    variant: String,
    rep: usize,
    cpu: Usage,
    wall_ns: u64,
    msgs: u64,
    client_cpu_ns: u64,
    client_nivcsw: u64,
}

/// `echo`: the server; starts the client on `--client-cpu`.
pub fn run(a: &Args) -> io::Result<()> {
    let c = a.num("--conns", 256) as usize;
    let phase_ms = a.num("--phase-ms", 2000);
    let repeats = a.num("--repeats", 7) as usize;
    let client_cpu = a.get("--client-cpu").unwrap_or("1").to_string();
    let variants = a.variants(VARIANTS);

    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    let mut child = util::spawn_pinned(
        &client_cpu,
        &["echo-client".into(), port.to_string(), c.to_string()],
    )?;
    let mut fds = Vec::with_capacity(c);
    for _ in 0..c {
        let fd = listener.accept()?.0.into_raw_fd();
        prepare_socket(fd)?;
        fds.push(fd);
    }
    let mut from = child.stdout.take().unwrap();
    let mut to = child.stdin.take().unwrap();
    let ctrl = from.as_raw_fd();
    util::get_u64s(&mut from, 1)?;
    let mut conns: Vec<Conn> = (0..c)
        .map(|_| Conn {
            inbuf: Vec::with_capacity(256),
            out: [[0; SERVER_FRAME]; 2],
            flip: 0,
        })
        .collect();

    let mut rows = Vec::new();
    let mut perf = None;
    // Repeat 0 is a short unrecorded warm-up of every variant.
    for rep in 0..=repeats {
        if rep == 1 {
            perf = Some(Perf::start(a.get("--perf"))?);
        }
        for k in 0..variants.len() {
            let v = &variants[(k + rep) % variants.len()];
            let ms = if rep == 0 { 300 } else { phase_ms };
            let t0 = mono_ns();
            let u0 = Usage::now(libc::RUSAGE_SELF);
            util::put_u64s(&mut to, &[ms])?;
            let msgs = match v.as_str() {
                "epoll" => phase_epoll(&fds, &mut conns, ctrl)?,
                "uring" => phase_uring(
                    &fds,
                    &mut conns,
                    ctrl,
                    RingOpts {
                        defer: true,
                        fixed: false,
                        sqpoll_cpu: None,
                    },
                )?,
                _ => phase_uring(
                    &fds,
                    &mut conns,
                    ctrl,
                    RingOpts {
                        defer: true,
                        fixed: true,
                        sqpoll_cpu: None,
                    },
                )?,
            };
            let u1 = Usage::now(libc::RUSAGE_SELF);
            let t1 = mono_ns();
            let rec = util::get_u64s(&mut from, 3)?; // [echoes, client cpu, client nivcsw]
            if rec[0] != msgs {
                return Err(io::Error::other(format!(
                    "{v}: server answered {msgs}, client got {}",
                    rec[0]
                )));
            }
            if rep > 0 {
                rows.push(Row {
                    variant: v.clone(),
                    rep: rep - 1,
                    cpu: u1.since(&u0),
                    wall_ns: t1 - t0,
                    msgs,
                    client_cpu_ns: rec[1],
                    client_nivcsw: rec[2],
                });
            }
        }
    }
    if let Some(p) = perf {
        p.stop()?;
    }
    util::put_u64s(&mut to, &[0])?;
    let st = child.wait()?;
    if !st.success() {
        return Err(io::Error::other(format!("client failed: {st}")));
    }
    report(a, c, &variants, &rows)
}

fn report(a: &Args, c: usize, variants: &[String], rows: &[Row]) -> io::Result<()> {
    if let Some(path) = a.get("--csv") {
        let mut w = std::fs::File::create(path)?;
        writeln!(w, "variant,rep,server_user_ns,server_sys_ns,server_nivcsw,wall_ns,msgs,client_cpu_ns,client_nivcsw")?;
        for r in rows {
            writeln!(
                w,
                "{},{},{},{},{},{},{},{},{}",
                r.variant,
                r.rep,
                r.cpu.user_ns,
                r.cpu.sys_ns,
                r.cpu.nivcsw,
                r.wall_ns,
                r.msgs,
                r.client_cpu_ns,
                r.client_nivcsw
            )?;
        }
    }
    let per = |x: u64, r: &Row| x as f64 / 1e3 / r.msgs as f64;
    println!(
        "echo: {c} connections, one 64-byte message in flight each, {} phases per variant (interleaved)",
        rows.len() / variants.len().max(1)
    );
    println!(
        "{:<12} {:>16} {:>9} {:>9} {:>10} {:>12} {:>9} {:>9}",
        "variant", "server us/msg", "sys %", "phases", "msg/s", "client us/msg", "CPU x", "msg/s x"
    );
    let col = |v: &str, f: &dyn Fn(&Row) -> f64| {
        med_p90(
            &rows
                .iter()
                .filter(|r| r.variant == v)
                .map(f)
                .collect::<Vec<_>>(),
        )
    };
    let rate = |r: &Row| r.msgs as f64 * 1e9 / r.wall_ns as f64;
    let cpu0 = col(&variants[0], &|r| per(r.cpu.cpu_ns(), r)).0;
    let rate0 = col(&variants[0], &rate).0;
    for v in variants {
        let cpu = col(v, &|r| per(r.cpu.cpu_ns(), r));
        println!(
            "{:<12} {:>7.3} ({:>6.3}) {:>9.1} {:>9} {:>10.0} {:>12.3} {:>9.3} {:>9.3}",
            v,
            cpu.0,
            cpu.1,
            100.0
                * rows
                    .iter()
                    .filter(|r| &r.variant == v)
                    .map(|r| r.cpu.sys_ns)
                    .sum::<u64>() as f64
                / rows
                    .iter()
                    .filter(|r| &r.variant == v)
                    .map(|r| r.cpu.cpu_ns())
                    .sum::<u64>()
                    .max(1) as f64,
            rows.iter().filter(|r| &r.variant == v).count(),
            col(v, &rate).0,
            col(v, &|r| per(r.client_cpu_ns, r)).0,
            cpu.0 / cpu0,
            col(v, &rate).0 / rate0,
        );
    }
    let disturbed = rows
        .iter()
        .filter(|r| r.cpu.nivcsw > 0 || r.client_nivcsw > 0)
        .count();
    println!("(median (p90); sys %: of the summed CPU, tick-sampled split; x: median against {}; {disturbed} of {} phases saw an involuntary switch)", variants[0], rows.len());
    Ok(())
}

/// `echo-client PORT C`: for each 8-byte phase length (ms) on stdin, keeps
/// one masked 64-byte message in flight on every connection until the phase
/// ends, waits for the last echoes, and writes [echoes, CPU ns, involuntary
/// switches]. A length of 0 ends it.
pub fn client(port: u16, c: usize) -> io::Result<()> {
    // SAFETY: creating an epoll instance.
    let ep = check(
        unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) } as isize,
        "epoll_create1",
    )? as i32;
    let mut fds = Vec::with_capacity(c);
    for i in 0..c {
        let fd = TcpStream::connect(("127.0.0.1", port))?.into_raw_fd();
        prepare_socket(fd)?;
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: i as u64,
        };
        // SAFETY: registering a descriptor we own.
        check(
            unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) } as isize,
            "epoll_ctl",
        )?;
        fds.push(fd);
    }
    let mut out = io::stdout().lock();
    let mut inp = io::stdin().lock();
    util::put_u64s(&mut out, &[0])?;
    let mut rx: Vec<Vec<u8>> = (0..c).map(|_| Vec::with_capacity(256)).collect();
    let mut key: u32 = 0x9e37_79b9;
    let mut send = |fd: RawFd| -> io::Result<()> {
        key = key.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let m = key.to_ne_bytes();
        let mut f = [0u8; CLIENT_FRAME];
        f[0] = 0x81;
        f[1] = 0x80 | 64;
        f[2..6].copy_from_slice(&m);
        for j in 0..64 {
            f[6 + j] = PAYLOAD[j] ^ m[j % 4];
        }
        // SAFETY: `f` is valid for its length.
        let w = unsafe { libc::send(fd, f.as_ptr().cast(), f.len(), libc::MSG_NOSIGNAL) };
        if check(w, "send")? != f.len() as isize {
            return Err(io::Error::other("short send"));
        }
        Ok(())
    };
    let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; c];
    let mut buf = vec![0u8; 4096];
    loop {
        let mut cmd = [0u8; 8];
        if inp.read_exact(&mut cmd).is_err() {
            return Ok(());
        }
        let ms = u64::from_ne_bytes(cmd);
        if ms == 0 {
            return Ok(());
        }
        let u0 = Usage::now(libc::RUSAGE_THREAD);
        let deadline = mono_ns() + ms * 1_000_000;
        let (mut inflight, mut echoes) = (c, 0u64);
        for &fd in &fds {
            send(fd)?;
        }
        while inflight > 0 {
            // SAFETY: `evs` has room for its length.
            let k = unsafe { libc::epoll_wait(ep, evs.as_mut_ptr(), evs.len() as i32, -1) };
            if k < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            let more = mono_ns() < deadline;
            for ev in &evs[..check(k as isize, "epoll_wait")? as usize] {
                let i = ev.u64 as usize;
                // SAFETY: `buf` is valid for its length.
                let r = unsafe { libc::recv(fds[i], buf.as_mut_ptr().cast(), buf.len(), 0) };
                if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN) {
                    continue;
                }
                if check(r, "recv")? == 0 {
                    return Err(io::Error::other("server closed a connection"));
                }
                rx[i].extend_from_slice(&buf[..r as usize]);
                while rx[i].len() >= SERVER_FRAME {
                    if rx[i][..2] != [0x81, 64] || rx[i][2..SERVER_FRAME] != PAYLOAD[..] {
                        return Err(io::Error::other(format!("connection {i}: wrong echo")));
                    }
                    rx[i].drain(..SERVER_FRAME);
                    echoes += 1;
                    if more {
                        send(fds[i])?;
                    } else {
                        inflight -= 1;
                    }
                }
            }
        }
        let d = Usage::now(libc::RUSAGE_THREAD).since(&u0);
        util::put_u64s(&mut out, &[echoes, d.cpu_ns(), d.nivcsw])?;
    }
}
