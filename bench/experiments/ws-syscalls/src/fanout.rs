//! Fan-out: one 100-byte WebSocket text frame to each of N loopback TCP
//! connections per round; the sender (this process) writes, a receiver
//! process on another CPU reads every connection with epoll and reports
//! when the last byte of the round has arrived.

use crate::ring::{self, RingOpts};
use crate::util::{self, check, med_p90, mono_ns, prepare_socket, Args, Perf, Usage};
use io_uring::{opcode, types, IoUring};
use std::io::{self, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{IntoRawFd, RawFd};

/// The variants, in the order of the summary.
pub const VARIANTS: &[&str] = &[
    "send",
    "uring-b256",
    "uring-b1024-fixed",
    "uring-all-fixed",
    "uring-sqpoll",
];

/// A server-to-client text frame: FIN + text, 7-bit length 100, payload.
fn frame() -> Vec<u8> {
    let mut f = vec![0x81, 100];
    f.extend((0..100u8).map(|i| b'a' + i % 26));
    f
}

/// One way to write the frame to every socket.
enum Sender {
    /// `send(2)` per socket.
    Plain,
    /// Send SQEs, submitted `batch` at a time.
    Uring {
        ring: Box<IoUring>,
        batch: usize,
        fixed: bool,
        sqpoll: bool,
    },
}

impl Sender {
    fn new(name: &str, fds: &[RawFd], sender_cpu: u32) -> io::Result<Sender> {
        let n = fds.len();
        let sq = (n.next_power_of_two() as u32).clamp(1024, 32768);
        let mk = |o: RingOpts, batch: usize| -> io::Result<Sender> {
            let ring = ring::build(o, sq, sq * 2, fds)?;
            Ok(Sender::Uring {
                ring: Box::new(ring),
                batch,
                fixed: o.fixed,
                sqpoll: o.sqpoll_cpu.is_some(),
            })
        };
        let plain = RingOpts {
            defer: false,
            fixed: false,
            sqpoll_cpu: None,
        };
        let tuned = RingOpts {
            defer: true,
            fixed: true,
            sqpoll_cpu: None,
        };
        match name {
            "send" => Ok(Sender::Plain),
            "uring-b256" => mk(plain, 256),
            "uring-b1024-fixed" => mk(tuned, 1024),
            "uring-all-fixed" => mk(tuned, n),
            "uring-sqpoll" => mk(
                RingOpts {
                    defer: false,
                    fixed: true,
                    sqpoll_cpu: Some(sender_cpu),
                },
                1024,
            ),
            _ => unreachable!("checked by Args::variants"),
        }
    }

    /// Writes `f` to every socket; returns when every write has completed.
    fn round(&mut self, fds: &[RawFd], f: &[u8]) -> io::Result<()> {
        match self {
            Sender::Plain => {
                for &fd in fds {
                    // SAFETY: `f` is valid for its length.
                    let r =
                        unsafe { libc::send(fd, f.as_ptr().cast(), f.len(), libc::MSG_NOSIGNAL) };
                    if r != f.len() as isize {
                        check(r, "send")?;
                        return Err(io::Error::other(format!("short send: {r} of {}", f.len())));
                    }
                }
                Ok(())
            }
            Sender::Uring {
                ring,
                batch,
                fixed,
                sqpoll,
            } => {
                let (n, mut next, mut inflight) = (fds.len(), 0usize, 0usize);
                while next < n || inflight > 0 {
                    let chunk = (n - next).min(*batch);
                    for (i, &fd) in fds.iter().enumerate().skip(next).take(chunk) {
                        let e = if *fixed {
                            opcode::Send::new(types::Fixed(i as u32), f.as_ptr(), f.len() as u32)
                        } else {
                            opcode::Send::new(types::Fd(fd), f.as_ptr(), f.len() as u32)
                        }
                        .flags(libc::MSG_NOSIGNAL)
                        .build()
                        .user_data(i as u64);
                        ring::push(ring, &e)?;
                    }
                    next += chunk;
                    inflight += chunk;
                    if *sqpoll && next < n {
                        ring.submit()?; // wakes the SQ thread only if it sleeps
                    } else {
                        // Sends on sockets with room complete inline: the
                        // wait returns at once unless one had to wait.
                        let want = if next == n { inflight } else { chunk };
                        ring.submit_and_wait(want)?;
                    }
                    for c in ring.completion() {
                        inflight -= 1;
                        if c.result() != f.len() as i32 {
                            return Err(io::Error::other(format!(
                                "send completion on socket {}: {} (expected {})",
                                c.user_data(),
                                c.result(),
                                f.len()
                            )));
                        }
                    }
                }
                Ok(())
            }
        }
    }
}

/// One measured round.
struct Row {
    variant: String,
    round: usize,
    cpu: Usage,
    send_ns: u64,
    last_ns: u64,
    recv_cpu_ns: u64,
    recv_nivcsw: u64,
}

/// `fanout`: the sender; starts the receiver on `--recv-cpu`.
pub fn run(a: &Args) -> io::Result<()> {
    let n = a.num("--conns", 10_000) as usize;
    let rounds = a.num("--rounds", 40) as usize;
    let warmup = a.num("--warmup", 3) as usize;
    let sender_cpu = a.num("--sender-cpu", 0) as u32;
    let recv_cpu = a.get("--recv-cpu").unwrap_or("1").to_string();
    let variants = a.variants(VARIANTS);

    let listener = TcpListener::bind("127.0.0.1:0")?;
    // SAFETY: raising the backlog of our own listening socket.
    check(
        unsafe { libc::listen(std::os::fd::AsRawFd::as_raw_fd(&listener), 4096) } as isize,
        "listen",
    )?;
    let port = listener.local_addr()?.port();
    let mut child = util::spawn_pinned(
        &recv_cpu,
        &["fanout-recv".into(), port.to_string(), n.to_string()],
    )?;
    let mut fds = Vec::with_capacity(n);
    for _ in 0..n {
        let (s, _) = listener.accept()?;
        let fd = s.into_raw_fd();
        prepare_socket(fd)?;
        fds.push(fd);
    }
    let mut from = child.stdout.take().unwrap();
    let mut to = child.stdin.take().unwrap();
    util::get_u64s(&mut from, 1)?; // the receiver is ready

    let mut senders = Vec::new();
    for v in &variants {
        senders.push((v.clone(), Sender::new(v, &fds, sender_cpu)?));
    }
    let f = frame();
    let mut rows = Vec::new();
    let mut perf = None;
    for r in 0..warmup + rounds {
        if r == warmup {
            perf = Some(Perf::start(a.get("--perf"))?);
        }
        for k in 0..senders.len() {
            let (name, s) = &mut senders[(k + r) % variants.len()];
            std::thread::sleep(std::time::Duration::from_millis(2));
            let t0 = mono_ns();
            let u0 = Usage::now(libc::RUSAGE_SELF);
            s.round(&fds, &f)?;
            let u1 = Usage::now(libc::RUSAGE_SELF);
            let t1 = mono_ns();
            let rec = util::get_u64s(&mut from, 3)?; // [done at, receiver cpu, receiver nivcsw]
            if r >= warmup {
                rows.push(Row {
                    variant: name.clone(),
                    round: r - warmup,
                    cpu: u1.since(&u0),
                    send_ns: t1 - t0,
                    last_ns: rec[0].saturating_sub(t0),
                    recv_cpu_ns: rec[1],
                    recv_nivcsw: rec[2],
                });
            }
        }
    }
    if let Some(p) = perf {
        p.stop()?;
    }
    drop(to.write_all(b"q"));
    drop(to);
    let st = child.wait()?;
    if !st.success() {
        return Err(io::Error::other(format!("receiver failed: {st}")));
    }
    report(a, n, &variants, &rows)
}

fn report(a: &Args, n: usize, variants: &[String], rows: &[Row]) -> io::Result<()> {
    if let Some(path) = a.get("--csv") {
        let mut w = std::fs::File::create(path)?;
        writeln!(w, "variant,round,sender_user_ns,sender_sys_ns,sender_nivcsw,send_wall_ns,last_ns,recv_cpu_ns,recv_nivcsw")?;
        for r in rows {
            writeln!(
                w,
                "{},{},{},{},{},{},{},{},{}",
                r.variant,
                r.round,
                r.cpu.user_ns,
                r.cpu.sys_ns,
                r.cpu.nivcsw,
                r.send_ns,
                r.last_ns,
                r.recv_cpu_ns,
                r.recv_nivcsw
            )?;
        }
    }
    let ms = |x: u64| x as f64 / 1e6;
    let clean = rows
        .iter()
        .filter(|r| r.cpu.nivcsw == 0 && r.recv_nivcsw == 0)
        .count();
    println!(
        "fan-out: {n} connections, 102-byte frame, {} rounds per variant (interleaved); {clean} of {} rounds undisturbed (no involuntary switch on either side)",
        rows.len() / variants.len().max(1),
        rows.len()
    );
    println!(
        "{:<18} {:>15} {:>9} {:>9} {:>12} {:>15} {:>12} {:>8} {:>8}",
        "variant",
        "sender CPU ms",
        "sys %",
        "rounds",
        "us/message",
        "last recv ms",
        "send ms",
        "CPU x",
        "last x"
    );
    let base = |f: &dyn Fn(&Row) -> f64| {
        med_p90(
            &rows
                .iter()
                .filter(|r| r.variant == variants[0])
                .map(f)
                .collect::<Vec<_>>(),
        )
        .0
    };
    let (cpu0, last0) = (base(&|r| ms(r.cpu.cpu_ns())), base(&|r| ms(r.last_ns)));
    for v in variants {
        let mine: Vec<&Row> = rows.iter().filter(|r| &r.variant == v).collect();
        let col = |f: &dyn Fn(&Row) -> f64| med_p90(&mine.iter().map(|r| f(r)).collect::<Vec<_>>());
        let cpu = col(&|r| ms(r.cpu.cpu_ns()));
        let last = col(&|r| ms(r.last_ns));
        println!(
            "{:<18} {:>7.2} ({:>5.2}) {:>9.1} {:>9} {:>12.3} {:>7.2} ({:>5.2}) {:>12.2} {:>8.3} {:>8.3}",
            v,
            cpu.0,
            cpu.1,
            100.0 * mine.iter().map(|r| r.cpu.sys_ns).sum::<u64>() as f64
                / mine.iter().map(|r| r.cpu.cpu_ns()).sum::<u64>().max(1) as f64,
            mine.len(),
            cpu.0 * 1e3 / n as f64,
            last.0,
            last.1,
            col(&|r| ms(r.send_ns)).0,
            cpu.0 / cpu0,
            last.0 / last0,
        );
    }
    println!("(median (p90); sys %: of the summed CPU, tick-sampled split; CPU x and last x: median against {}; receiver CPU per round, median: {})", variants[0],
        variants.iter().map(|v| format!("{v} {:.2} ms", med_p90(&rows.iter().filter(|r| &r.variant == v).map(|r| ms(r.recv_cpu_ns)).collect::<Vec<_>>()).0)).collect::<Vec<_>>().join(", "));
    Ok(())
}

/// `fanout-recv PORT N`: opens N connections, reads them with edge-triggered
/// epoll (one recv per event), and after every N*102 bytes writes the time
/// the last byte arrived, its CPU and involuntary switches since the last
/// report. On a byte on stdin it checks every connection got whole rounds.
pub fn recv(port: u16, n: usize) -> io::Result<()> {
    let flen = frame().len();
    let expect = frame();
    // SAFETY: creating an epoll instance.
    let ep = check(
        unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) } as isize,
        "epoll_create1",
    )? as i32;
    let add = |fd: RawFd, data: u64| -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: data,
        };
        // SAFETY: registering a descriptor we own.
        check(
            unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) } as isize,
            "epoll_ctl",
        )
        .map(drop)
    };
    let mut fds = Vec::with_capacity(n);
    for i in 0..n {
        let fd = TcpStream::connect(("127.0.0.1", port))?.into_raw_fd();
        prepare_socket(fd)?;
        add(fd, i as u64)?;
        fds.push(fd);
    }
    add(0, u64::MAX)?;
    let mut out = io::stdout().lock();
    util::put_u64s(&mut out, &[0])?;
    let mut got = vec![0usize; n];
    let mut first_ok = vec![false; n];
    let (mut total, mut rounds) = (0usize, 0usize);
    let mut u0 = Usage::now(libc::RUSAGE_THREAD);
    let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    let mut buf = vec![0u8; 4096];
    loop {
        // SAFETY: `evs` has room for its length.
        let k = unsafe { libc::epoll_wait(ep, evs.as_mut_ptr(), evs.len() as i32, -1) };
        if k < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        for ev in &evs[..check(k as isize, "epoll_wait")? as usize] {
            let i = ev.u64;
            if i == u64::MAX {
                let bad = (0..n)
                    .filter(|&i| got[i] != rounds * flen || (rounds > 0 && !first_ok[i]))
                    .count();
                eprintln!("fanout-recv: {rounds} rounds, {n} connections, {bad} with a wrong byte count or frame");
                std::process::exit(if bad == 0 { 0 } else { 1 });
            }
            let i = i as usize;
            // SAFETY: `buf` is valid for its length.
            let r = unsafe { libc::recv(fds[i], buf.as_mut_ptr().cast(), buf.len(), 0) };
            if r == 0 {
                return Err(io::Error::other("sender closed a connection"));
            }
            if r < 0 {
                if io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN) {
                    continue;
                }
                check(r, "recv")?;
            }
            let r = r as usize;
            if got[i] == 0 && r >= flen {
                first_ok[i] = buf[..flen] == expect[..];
            }
            got[i] += r;
            total += r;
            if total == (rounds + 1) * n * flen {
                let at = mono_ns();
                let u = Usage::now(libc::RUSAGE_THREAD);
                let d = u.since(&u0);
                u0 = u;
                rounds += 1;
                util::put_u64s(&mut out, &[at, d.cpu_ns(), d.nivcsw])?;
            }
        }
    }
}
