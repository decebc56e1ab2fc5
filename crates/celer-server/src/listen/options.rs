//! Socket options and the bind calls for each listener kind.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use socket2::{Domain, SockAddr, Socket, Type};

use crate::listen::Listener;
use crate::sys;

/// Default listen backlog.
pub const BACKLOG: i32 = 1024;

/// Options applied when binding listeners.
#[derive(Debug, Clone)]
pub struct BindOptions {
    /// Listen backlog. Default is [`BACKLOG`].
    pub backlog: i32,
    /// `TCP_DEFER_ACCEPT` on Linux: accept only once the client has sent
    /// data, or after this long (the kernel rounds up to its SYN-ACK
    /// retransmission schedule: 1 s gives 1–3 s). The head timeout starts
    /// at accept, so a silent connection lasts this plus the head timeout.
    /// Default is 1 s; `None` turns it off.
    pub defer_accept: Option<Duration>,
    /// Set `TCP_NODELAY` (accepted sockets inherit it). Default is true.
    pub nodelay: bool,
    /// File mode of UNIX socket files the server creates. Default is `None`
    /// (the process umask decides).
    pub unix_mode: Option<u32>,
}

impl Default for BindOptions {
    fn default() -> Self {
        BindOptions {
            backlog: BACKLOG,
            defer_accept: Some(Duration::from_secs(1)),
            nodelay: true,
            unix_mode: None,
        }
    }
}

pub(super) fn bind_tcp(
    addr: SocketAddr,
    opts: &BindOptions,
    reuse_port: bool,
) -> io::Result<std::net::TcpListener> {
    let socket = Socket::new(
        Domain::for_address(addr),
        Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    socket.set_tcp_nodelay(opts.nodelay)?;
    socket.bind(&addr.into())?;
    socket.listen(opts.backlog)?;
    if let Some(defer) = opts.defer_accept {
        sys::set_defer_accept(socket.as_raw_fd(), defer.as_secs().max(1) as u32)?;
    }
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Binds `addr` without SO_REUSEPORT and releases it: fails when anyone
/// holds the port; returns the address with the port it got.
pub(super) fn probe_tcp(addr: SocketAddr) -> io::Result<SocketAddr> {
    let socket = Socket::new(
        Domain::for_address(addr),
        Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.bind(&addr.into())?;
    socket
        .local_addr()?
        .as_socket()
        .ok_or_else(|| io::Error::other("probe socket has no inet address"))
}

pub(super) fn bind_unix(path: &Path, opts: &BindOptions) -> io::Result<Listener> {
    remove_stale(path)?;
    let socket = Socket::new(Domain::UNIX, Type::STREAM, None)?;
    socket.bind(&SockAddr::unix(path)?)?;
    if let Some(mode) = opts.unix_mode {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    socket.listen(opts.backlog)?;
    socket.set_nonblocking(true)?;
    let fd: OwnedFd = socket.into();
    Ok(Listener::Unix(fd.into(), Some(path.to_path_buf())))
}

/// Removes a socket file no server answers on; refuses to touch a live
/// socket or a file that is not a socket.
fn remove_stale(path: &Path) -> io::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(err),
    };
    if !meta.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "path exists and is not a socket",
        ));
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            "another server is listening on this socket",
        )),
        Err(_) => std::fs::remove_file(path),
    }
}

/// Wraps an inherited listening socket, once [`check_listener`] accepts it
/// (see `sys::adopt_fd` for what else is refused).
pub(super) fn adopt(fd: RawFd, opts: &BindOptions) -> io::Result<Listener> {
    let socket = Socket::from(sys::adopt_fd(fd, check_listener)?);
    socket.set_nonblocking(true)?;
    let local = socket.local_addr()?;
    if local.is_unix() {
        let fd: OwnedFd = socket.into();
        return Ok(Listener::Unix(fd.into(), None));
    }
    if opts.nodelay {
        socket.set_tcp_nodelay(true)?;
    }
    Ok(Listener::Tcp(socket.into()))
}

/// Accepts a descriptor that is a listening stream socket of a family the
/// server serves (IPv4, IPv6, UNIX), looking at it through a borrow.
pub(super) fn check_listener(fd: BorrowedFd<'_>) -> io::Result<()> {
    let invalid = |msg: &str| io::Error::new(io::ErrorKind::InvalidInput, msg.to_owned());
    let socket = socket2::SockRef::from(&fd);
    let domain = match socket.domain() {
        Ok(domain) => domain,
        Err(err) if err.raw_os_error() == Some(libc::ENOTSOCK) => {
            return Err(invalid("descriptor is not a socket"));
        }
        Err(err) => return Err(err),
    };
    if ![Domain::IPV4, Domain::IPV6, Domain::UNIX].contains(&domain) {
        return Err(invalid(
            "descriptor is a socket of a family the server does not serve (not IPv4, IPv6 or UNIX)",
        ));
    }
    if socket.r#type()? != Type::STREAM {
        return Err(invalid("descriptor is not a stream socket"));
    }
    if !socket.is_listener()? {
        return Err(invalid("descriptor is not a listening socket"));
    }
    Ok(())
}

/// The sockets systemd passed, read from the environment once.
static SYSTEMD: OnceLock<Result<Vec<(RawFd, String)>, String>> = OnceLock::new();

/// Reads systemd's variables (sd_listen_fds(3)): `LISTEN_PID` must be this
/// process, `LISTEN_FDS` counts descriptors from 3, `LISTEN_FDNAMES` names
/// them. Once read they are removed from the environment.
fn systemd_env() -> Result<Vec<(RawFd, String)>, String> {
    let pid = std::env::var("LISTEN_PID").map_err(|_| "LISTEN_PID is not set".to_owned())?;
    if pid.trim().parse::<u32>().ok() != Some(std::process::id()) {
        return Err("LISTEN_PID is another process".to_owned());
    }
    let count = std::env::var("LISTEN_FDS")
        .ok()
        .and_then(|n| n.trim().parse::<u16>().ok())
        .ok_or_else(|| "LISTEN_FDS is not set".to_owned())?;
    let names = std::env::var("LISTEN_FDNAMES").unwrap_or_default();
    sys::unset_listen_env();
    let names: Vec<&str> = names.split(':').collect();
    Ok((0..count)
        .map(|i| {
            let name = names.get(usize::from(i)).copied().unwrap_or("");
            (3 + RawFd::from(i), name.to_owned())
        })
        .collect())
}

/// The sockets systemd passed, all of them or those named `name`. Each is
/// adopted once: `systemd` and `systemd:NAME` together name some twice,
/// which is an error rather than two owners.
pub(super) fn systemd(name: Option<&str>, opts: &BindOptions) -> io::Result<Vec<Listener>> {
    let passed = SYSTEMD
        .get_or_init(systemd_env)
        .as_ref()
        .map_err(|what| missing_systemd(what))?;
    systemd_from(passed, name, opts)
}

fn missing_systemd(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("no sockets from systemd ({what})"),
    )
}

/// [`systemd`] on the list of passed sockets `passed`.
pub(super) fn systemd_from(
    passed: &[(RawFd, String)],
    name: Option<&str>,
    opts: &BindOptions,
) -> io::Result<Vec<Listener>> {
    let mut out = Vec::new();
    for (fd, fd_name) in passed {
        if name.is_some_and(|want| want != fd_name) {
            continue;
        }
        out.push(adopt(*fd, opts)?);
    }
    if out.is_empty() {
        return Err(missing_systemd("no socket has that name"));
    }
    Ok(out)
}

/// The paths of UNIX sockets the server created, to remove at exit.
pub(crate) fn owned_paths<'a>(listeners: impl IntoIterator<Item = &'a Listener>) -> Vec<PathBuf> {
    listeners
        .into_iter()
        .filter_map(|l| match l {
            Listener::Unix(_, Some(p)) => Some(p.clone()),
            _ => None,
        })
        .collect()
}
