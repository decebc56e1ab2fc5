//! The few system calls the standard library and socket2 do not wrap.
//!
//! This is the only module with `unsafe` code; each block states why it is
//! sound.
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::sync::Mutex;

/// The descriptors this process has adopted (`fd:N`, systemd's), with the
/// identity (device, inode) of the socket each named then: a descriptor
/// that still names the same socket already has an owner, so two listen
/// addresses naming it cannot give it two; a number closed by its owner
/// and reused since names another socket and may be adopted again.
static ADOPTED: Mutex<BTreeMap<RawFd, (u64, u64)>> = Mutex::new(BTreeMap::new());

/// Takes ownership of an inherited descriptor once `check` has accepted
/// it, borrowed: a descriptor that is not open, is standard input, output
/// or error, was adopted already, or fails `check` is left as it is (not
/// closed: this process does not own it) and the error says why.
pub(crate) fn adopt_fd(
    fd: RawFd,
    check: impl FnOnce(BorrowedFd<'_>) -> io::Result<()>,
) -> io::Result<OwnedFd> {
    let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidInput, msg);
    if fd < 0 {
        return Err(invalid("negative file descriptor".to_owned()));
    }
    if fd <= 2 {
        let name = ["standard input", "standard output", "standard error"][fd as usize];
        return Err(invalid(format!(
            "descriptor {fd} is {name}, not an inherited socket (pass listening sockets as 3 and up)"
        )));
    }
    // Held until the descriptor is owned, so two binds cannot both pass.
    let mut adopted = ADOPTED.lock().unwrap_or_else(|err| err.into_inner());
    // SAFETY: F_GETFD only reads the descriptor's flags; it is harmless on
    // any integer and fails with EBADF when nothing is open there.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        let err = io::Error::last_os_error();
        return Err(io::Error::new(
            err.kind(),
            format!("descriptor {fd} is not open ({err})"),
        ));
    }
    // SAFETY: the descriptor is open (checked above) and stays open while
    // borrowed: it was handed to this process for a listener, and this
    // process closes such descriptors only through the owner made below,
    // which another bind could make only under `ADOPTED`'s lock, held.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    // Its identity, through a duplicate (closed at once).
    let meta = std::fs::File::from(borrowed.try_clone_to_owned()?).metadata()?;
    let identity = (meta.dev(), meta.ino());
    if adopted.get(&fd) == Some(&identity) {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("descriptor {fd} is already taken by another listen address"),
        ));
    }
    check(borrowed)?;
    adopted.insert(fd, identity);
    // SAFETY: the descriptor is open, was handed to this process to own (by
    // the parent or by systemd), passed `check`, and has no other owner in
    // the process (`ADOPTED` refuses a socket adopted already), so wrapping
    // it in an owner that closes it is sound.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: setting FD_CLOEXEC on a descriptor we now own.
    unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) };
    Ok(owned)
}

/// Removes systemd's socket-passing variables (`LISTEN_PID`, `LISTEN_FDS`,
/// `LISTEN_FDNAMES`) once their sockets are taken, as `sd_listen_fds(3)`
/// does when asked, so that no child process (a CGI program) takes them
/// for its own.
pub(crate) fn unset_listen_env() {
    for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
        // SAFETY: the standard library serializes its own environment
        // accesses; the hazard is foreign code reading the environment on
        // another thread at this moment. Listeners are bound while the
        // server starts, before its runtime threads exist (`celer serve`
        // binds before it starts any), and `Listen::Systemd` documents
        // that binding it changes the environment.
        unsafe { std::env::remove_var(name) };
    }
}

/// `TCP_DEFER_ACCEPT`: wake the accept loop only once data has arrived.
#[cfg(target_os = "linux")]
pub(crate) fn set_defer_accept(fd: RawFd, seconds: u32) -> io::Result<()> {
    let value = libc::c_int::try_from(seconds).unwrap_or(libc::c_int::MAX);
    // SAFETY: `value` lives across the call and its size is passed; the
    // kernel copies it and keeps no pointer.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `TCP_DEFER_ACCEPT` is Linux-only; elsewhere this does nothing.
#[cfg(not(target_os = "linux"))]
pub(crate) fn set_defer_accept(_fd: RawFd, _seconds: u32) -> io::Result<()> {
    Ok(())
}

/// Raises the soft limit on open files to the hard limit; returns the new
/// soft limit.
pub fn raise_fd_limit() -> io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit for the call's duration.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: `raised` is a valid rlimit read by the call only.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim = raised;
        }
    }
    Ok(lim.rlim_cur)
}

/// Largest count one `sendfile(2)` call accepts on Linux.
const SENDFILE_MAX: usize = 0x7fff_f000;

/// `sendfile(2)`: copies up to `len` bytes of `file` from `offset` to the
/// socket `sock` inside the kernel; returns how many were sent (0 at the
/// file's end). A non-blocking socket that is full fails with `WouldBlock`.
#[cfg(target_os = "linux")]
pub(crate) fn send_file(sock: RawFd, file: RawFd, offset: u64, len: usize) -> io::Result<usize> {
    let mut off = libc::off_t::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file offset too large"))?;
    // SAFETY: both descriptors are borrowed from open owners for the call's
    // duration; `off` is a valid, writable off_t the kernel updates and keeps
    // no pointer to.
    let n = unsafe { libc::sendfile(sock, file, &mut off, len.min(SENDFILE_MAX)) };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// Elsewhere there is no `sendfile(2)` with these semantics; callers check
/// [`HAS_SEND_FILE`] first.
#[cfg(not(target_os = "linux"))]
pub(crate) fn send_file(
    _sock: RawFd,
    _file: RawFd,
    _offset: u64,
    _len: usize,
) -> io::Result<usize> {
    Err(io::ErrorKind::Unsupported.into())
}

/// Whether [`send_file`] works on this system.
pub(crate) const HAS_SEND_FILE: bool = cfg!(target_os = "linux");
