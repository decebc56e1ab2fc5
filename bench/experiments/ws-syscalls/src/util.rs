//! Clocks, CPU accounting, socket options, argument parsing, statistics and
//! the optional `perf` attached to this process during the measured part.

use std::io::{self, Read, Write};
use std::os::fd::RawFd;
use std::process::{Child, Command, Stdio};

/// CLOCK_MONOTONIC in nanoseconds (one clock for every process on the machine).
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time and involuntary context switches from getrusage.
#[derive(Clone, Copy, Default)]
pub struct Usage {
    pub user_ns: u64,
    pub sys_ns: u64,
    /// Involuntary context switches: another task took the CPU from us.
    pub nivcsw: u64,
}

impl Usage {
    /// Usage of `who` (`libc::RUSAGE_SELF`: every thread of the process,
    /// including io_uring's SQPOLL and io-wq threads; `RUSAGE_THREAD`).
    pub fn now(who: i32) -> Usage {
        // SAFETY: zeroed rusage is a valid value; the pointer is valid.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe { libc::getrusage(who, &mut ru) };
        let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
        Usage {
            user_ns: ns(ru.ru_utime),
            sys_ns: ns(ru.ru_stime),
            nivcsw: ru.ru_nivcsw as u64,
        }
    }

    /// `self - earlier`.
    pub fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            user_ns: self.user_ns - earlier.user_ns,
            sys_ns: self.sys_ns - earlier.sys_ns,
            nivcsw: self.nivcsw - earlier.nivcsw,
        }
    }

    /// User + system time.
    pub fn cpu_ns(&self) -> u64 {
        self.user_ns + self.sys_ns
    }
}

/// Turns a negative libc return into the OS error, naming the call.
pub fn check(ret: isize, what: &str) -> io::Result<isize> {
    if ret < 0 {
        let e = io::Error::last_os_error();
        Err(io::Error::new(e.kind(), format!("{what}: {e}")))
    } else {
        Ok(ret)
    }
}

/// O_NONBLOCK and TCP_NODELAY, as every WebSocket server sets them.
pub fn prepare_socket(fd: RawFd) -> io::Result<()> {
    // SAFETY: plain fcntl/setsockopt on a descriptor we own.
    unsafe {
        let fl = check(libc::fcntl(fd, libc::F_GETFL) as isize, "F_GETFL")? as i32;
        check(
            libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) as isize,
            "F_SETFL",
        )?;
        let one: libc::c_int = 1;
        check(
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_NODELAY,
                (&one as *const i32).cast(),
                4,
            ) as isize,
            "TCP_NODELAY",
        )?;
    }
    Ok(())
}

/// Writes u64s (native endian) as one write: the record a child sends back.
pub fn put_u64s(w: &mut impl Write, v: &[u64]) -> io::Result<()> {
    let mut b = Vec::with_capacity(v.len() * 8);
    for x in v {
        b.extend_from_slice(&x.to_ne_bytes());
    }
    w.write_all(&b)?;
    w.flush()
}

/// Reads `n` u64s.
pub fn get_u64s(r: &mut impl Read, n: usize) -> io::Result<Vec<u64>> {
    let mut b = vec![0u8; n * 8];
    r.read_exact(&mut b)?;
    Ok(b.chunks(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
        .collect())
}

/// `--key value` options.
pub struct Args(pub Vec<String>);

impl Args {
    /// The value after `--key`, if given.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .position(|a| a == key)
            .and_then(|i| self.0.get(i + 1))
            .map(|s| s.as_str())
    }

    /// A number option with a default; exits with a message on a bad value.
    pub fn num(&self, key: &str, default: u64) -> u64 {
        match self.get(key) {
            None => default,
            Some(v) => v
                .parse()
                .unwrap_or_else(|_| die(&format!("{key}: not a number: {v}"))),
        }
    }

    /// The variants to run: `--only a,b` or all of `all`, checked.
    pub fn variants(&self, all: &[&str]) -> Vec<String> {
        match self.get("--only") {
            None => all.iter().map(|s| s.to_string()).collect(),
            Some(list) => list
                .split(',')
                .map(|v| {
                    if !all.contains(&v) {
                        die(&format!(
                            "--only: unknown variant {v} (known: {})",
                            all.join(", ")
                        ));
                    }
                    v.to_string()
                })
                .collect(),
        }
    }
}

/// Prints the message and exits with status 2.
pub fn die(msg: &str) -> ! {
    eprintln!("ws-syscalls: {msg}");
    std::process::exit(2)
}

/// Median and 90th percentile (nearest rank) of the values.
pub fn med_p90(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let med = if s.len() % 2 == 1 {
        s[s.len() / 2]
    } else {
        (s[s.len() / 2 - 1] + s[s.len() / 2]) / 2.0
    };
    let p90 = s[((s.len() as f64 * 0.9).ceil() as usize).clamp(1, s.len()) - 1];
    (med, p90)
}

/// `perf <args> -p <this pid>` running while the measured part runs
/// (`--perf "stat -e raw_syscalls:sys_enter -o FILE"`, or `record ...`).
pub struct Perf(Option<Child>);

impl Perf {
    /// Starts perf on this process (and waits for it to attach) if asked.
    pub fn start(args: Option<&str>) -> io::Result<Perf> {
        let Some(args) = args else {
            return Ok(Perf(None));
        };
        let child = Command::new("perf")
            .args(args.split_whitespace())
            .args(["-p", &std::process::id().to_string()])
            .stdin(Stdio::null())
            .spawn()?;
        std::thread::sleep(std::time::Duration::from_millis(700));
        Ok(Perf(Some(child)))
    }

    /// Stops perf (SIGINT, as Ctrl-C) and waits for it to write its output.
    pub fn stop(mut self) -> io::Result<()> {
        if let Some(mut c) = self.0.take() {
            // SAFETY: signalling the child we started, by its pid.
            unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
            c.wait()?;
        }
        Ok(())
    }
}

/// A child of this binary pinned with `taskset -c CPU`, talking over its
/// stdin (commands) and stdout (records).
pub fn spawn_pinned(cpu: &str, args: &[String]) -> io::Result<Child> {
    let exe = std::env::current_exe()?;
    Command::new("taskset")
        .arg("-c")
        .arg(cpu)
        .arg(exe)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
}
