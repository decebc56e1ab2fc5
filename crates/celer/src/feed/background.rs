//! The feeds' background compressor: one thread for the whole process, at
//! the lowest priority the system has for ordinary threads (Linux: nice
//! 19 under the fair scheduler, never a real-time policy it would
//! otherwise inherit), which makes the compressed variants of the versions
//! of feeds built with [`FeedBuilder::compress_in_background`]. On a core
//! it shares with the server's workers it runs when they have nothing to
//! do, so a version's compressing (tens of milliseconds for 50 KiB) never
//! delays the requests and pushes the workers are serving; on an idle
//! core it runs at once.
//!
//! [`FeedBuilder::compress_in_background`]: super::FeedBuilder::compress_in_background
#![allow(unsafe_code)]

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::OnceLock;
use std::sync::mpsc::{self, Sender};

/// A job for the compressor thread.
type Job = Box<dyn FnOnce() + Send>;

/// The name of the compressor thread.
pub(crate) const THREAD_NAME: &str = "celer-feed-bg";

/// Runs `f` on the compressor thread and waits for its value; runs it on
/// the calling thread when that thread cannot be started. A panic of `f`
/// is resumed on the calling thread, as if `f` had run there, and the
/// compressor thread lives on.
pub(crate) fn run<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::sync_channel(1);
    let job: Job = Box::new(move || {
        let _ = tx.send(catch_unwind(AssertUnwindSafe(f)));
    });
    match sender() {
        Some(sender) => {
            if let Err(mpsc::SendError(job)) = sender.send(job) {
                job();
            }
        }
        None => job(),
    }
    match rx.recv() {
        Ok(Ok(value)) => value,
        Ok(Err(panic)) => resume_unwind(panic),
        // The job is dropped unrun only if the thread ended while it was
        // queued, which it never does: it ends when every sender is gone,
        // and the one sender is a static.
        Err(_) => unreachable!("the feeds' compressor thread dropped a job"),
    }
}

/// The compressor thread's queue, the thread started on first use; `None`
/// when it could not be started.
fn sender() -> Option<&'static Sender<Job>> {
    static QUEUE: OnceLock<Option<Sender<Job>>> = OnceLock::new();
    QUEUE
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name(THREAD_NAME.to_owned())
                .spawn(move || {
                    lower_priority();
                    for job in rx {
                        job();
                    }
                })
                .ok()
                .map(|_| tx)
        })
        .as_ref()
}

/// Moves the calling thread to the fair scheduler at nice 19: below every
/// thread of the default priority, and below any real-time policy the
/// process runs under. Lowering one's own priority needs no privilege;
/// a failure leaves the thread as it was.
#[cfg(target_os = "linux")]
fn lower_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid `sched_param` for the call's duration;
    // pid 0 names the calling thread, whose policy alone changes.
    let _ = unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
    // SAFETY: a plain system call on this thread's own id (on Linux the
    // nice value is a thread's attribute); it reads no memory of ours.
    let _ = unsafe {
        libc::setpriority(
            libc::PRIO_PROCESS,
            libc::gettid() as libc::id_t,
            NICE_LOWEST,
        )
    };
}

/// Elsewhere the thread keeps its priority.
#[cfg(not(target_os = "linux"))]
fn lower_priority() {}

/// The lowest nice value (the least share of a busy core).
#[cfg(target_os = "linux")]
const NICE_LOWEST: libc::c_int = 19;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_runs_on_the_compressor_thread_and_its_value_comes_back() {
        let name = run(|| std::thread::current().name().map(str::to_owned));
        assert_eq!(name.as_deref(), Some(THREAD_NAME));
        assert_eq!(run(|| 6 * 7), 42);
    }

    #[test]
    fn a_panic_is_the_callers_and_the_thread_lives_on() {
        let caught = std::panic::catch_unwind(|| run(|| -> u8 { panic!("in the job") }));
        let payload = caught.expect_err("the job's panic reaches the caller");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"in the job"));
        assert_eq!(run(|| "still here"), "still here");
    }

    /// The thread's nice value and policy, as the kernel reports them
    /// (`/proc/self/task/TID/stat`: the fields after the name).
    #[cfg(target_os = "linux")]
    #[test]
    fn the_compressor_thread_runs_at_nice_19_under_the_fair_scheduler() {
        let tid = run(thread_id);
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = after_name.split(' ').collect();
        // Field 19 of stat(5) is the nice value, 41 the policy; `fields`
        // starts at field 3.
        assert_eq!(fields[19 - 3], "19", "nice value of {stat}");
        assert_eq!(fields[41 - 3], "0", "policy (SCHED_OTHER) of {stat}");
    }

    /// The calling thread's id, from `/proc/thread-self`.
    #[cfg(target_os = "linux")]
    fn thread_id() -> String {
        let link = std::fs::read_link("/proc/thread-self").unwrap();
        link.file_name().unwrap().to_string_lossy().into_owned()
    }
}
