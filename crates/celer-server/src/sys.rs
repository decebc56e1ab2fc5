//! The few system calls the standard library and socket2 do not wrap.
//!
//! This is the only module with `unsafe` code; each block states why it is
//! sound.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// Takes ownership of an inherited descriptor after checking it is open.
pub(crate) fn adopt_fd(fd: RawFd) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "negative file descriptor",
        ));
    }
    // SAFETY: F_GETFD only reads the descriptor's flags; it is harmless on
    // any integer and fails with EBADF when nothing is open there.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor is open (checked above) and was handed to this
    // process to own (by the parent or by systemd); nothing else in the
    // process uses it, so wrapping it in an owner that closes it is sound.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: setting FD_CLOEXEC on a descriptor we now own.
    unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) };
    Ok(owned)
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
