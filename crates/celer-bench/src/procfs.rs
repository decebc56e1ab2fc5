//! Server-side accounting from /proc: CPU time and resident memory of `--pid`s.

use std::collections::HashMap;
use std::time::Instant;

use crate::Error;

/// Clock ticks per second of `utime`/`stime` in /proc/PID/stat.
///
/// `sysconf(_SC_CLK_TCK)` needs `unsafe`, which this crate does not use; we
/// ask `getconf CLK_TCK` once and fall back to 100, the value Linux reports
/// on every common architecture.
pub(crate) fn clock_ticks() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .filter(|&ticks| ticks > 0)
        .unwrap_or(100)
}

/// The processes to account: the given pids, and their descendants with `tree`.
#[derive(Debug, Clone)]
pub(crate) struct Processes {
    pids: Vec<u32>,
    tree: bool,
}

impl Processes {
    /// Checks that every pid exists now.
    pub(crate) fn new(pids: &[u32], tree: bool) -> Result<Processes, Error> {
        for &pid in pids {
            cpu_ticks(pid).map_err(|e| Error::io(format!("cannot read /proc/{pid}/stat"), e))?;
        }
        Ok(Processes {
            pids: pids.to_vec(),
            tree,
        })
    }

    /// Whether any pid was given.
    pub(crate) fn is_empty(&self) -> bool {
        self.pids.is_empty()
    }

    /// The given pids.
    pub(crate) fn roots(&self) -> &[u32] {
        &self.pids
    }

    /// Every pid to account right now.
    pub(crate) fn all(&self) -> Vec<u32> {
        let mut all = self.pids.clone();
        if self.tree {
            let mut idx = 0;
            while idx < all.len() {
                let children = children(all[idx]);
                for child in children {
                    if !all.contains(&child) {
                        all.push(child);
                    }
                }
                idx += 1;
            }
        }
        all
    }

    /// Sum of resident set sizes in bytes, of the processes that still exist.
    pub(crate) fn rss_bytes(&self) -> u64 {
        self.all().into_iter().filter_map(rss_bytes).sum()
    }

    /// Starts measuring CPU time.
    pub(crate) fn start_cpu(&self) -> CpuSample {
        CpuSample {
            ticks: self
                .all()
                .into_iter()
                .filter_map(|pid| cpu_ticks(pid).ok().map(|t| (pid, t)))
                .collect(),
            at: Instant::now(),
        }
    }

    /// CPU seconds used since `start` and the wall-clock seconds it covers.
    pub(crate) fn cpu_since(&self, start: &CpuSample) -> (f64, f64) {
        let ticks: u64 = self
            .all()
            .into_iter()
            .filter_map(|pid| {
                let now = cpu_ticks(pid).ok()?;
                Some(now.saturating_sub(start.ticks.get(&pid).copied().unwrap_or(0)))
            })
            .sum();
        (
            ticks as f64 / clock_ticks() as f64,
            start.at.elapsed().as_secs_f64(),
        )
    }
}

/// CPU ticks per process at one instant.
#[derive(Debug, Clone)]
pub(crate) struct CpuSample {
    ticks: HashMap<u32, u64>,
    at: Instant,
}

/// `utime + stime` of a process (all its threads), in clock ticks.
fn cpu_ticks(pid: u32) -> std::io::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name may contain spaces and parentheses; fields resume
    // after the last ')'. utime and stime are fields 14 and 15 (proc(5)),
    // that is the 12th and 13th after the name.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let mut fields = rest.split_whitespace().skip(11);
    let parse = |field: Option<&str>| field.and_then(|f| f.parse::<u64>().ok());
    match (parse(fields.next()), parse(fields.next())) {
        (Some(utime), Some(stime)) => Ok(utime + stime),
        _ => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "unexpected /proc stat format",
        )),
    }
}

/// VmRSS of a process in bytes.
fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Direct children of a process, from every thread's `children` file.
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut children = Vec::new();
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            children.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    children
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_readable() {
        let me = std::process::id();
        assert!(cpu_ticks(me).is_ok());
        assert!(rss_bytes(me).unwrap() > 0);
        let processes = Processes::new(&[me], true).unwrap();
        assert!(processes.all().contains(&me));
        assert!(Processes::new(&[u32::MAX], false).is_err());
    }
}
