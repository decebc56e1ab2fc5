//! Where the server listens: [`Listen`] specs parsed from URLs, bound into
//! [`Listener`]s with the socket options of [`BindOptions`].
//!
//! | spec | meaning |
//! |---|---|
//! | `tcp://127.0.0.1:8080`, `tcp://[::1]:8080`, `tcp://localhost:8080` | TCP; a name binds every address it resolves to |
//! | `unix:/run/celer.sock` | a UNIX stream socket; a stale socket file is replaced |
//! | `fd:3` | an inherited listening socket |
//! | `systemd`, `systemd:NAME` | sockets passed by systemd (`LISTEN_FDS`, `LISTEN_FDNAMES`) |
//! | `fastcgi+unix:PATH`, `fastcgi+tcp://HOST:PORT` | FastCGI responder behind a web server (any of the above after `fastcgi+`) |
//! | `scgi+unix:PATH`, `scgi+tcp://HOST:PORT` | SCGI behind a web server (any of the above after `scgi+`) |

mod options;

use std::fmt;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::RawFd;
use std::path::PathBuf;

use crate::gateway::Gateway;

pub(crate) use options::owned_paths as options_paths;
pub use options::{BACKLOG, BindOptions};

/// A listener spec, as given to `--listen`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// `tcp://HOST:PORT`.
    Tcp {
        /// Host name or address literal (IPv6 without brackets).
        host: String,
        /// Port; 0 picks a free one.
        port: u16,
    },
    /// `unix:PATH`.
    Unix(PathBuf),
    /// `fd:N`: a listening stream socket (IPv4, IPv6 or UNIX) the parent
    /// process handed over. Binding checks it before taking it over and
    /// leaves it open when refusing it; descriptors 0–2 are refused, and a
    /// descriptor is taken over once per process (naming it twice is an
    /// error, not two owners).
    Fd(RawFd),
    /// `systemd` or `systemd:NAME`: the sockets systemd passed (all, or
    /// those named NAME in `LISTEN_FDNAMES`), checked as [`Listen::Fd`]'s.
    /// The first bind reads `LISTEN_PID`, `LISTEN_FDS` and `LISTEN_FDNAMES`
    /// and removes them from the environment, as `sd_listen_fds(3)` does, so
    /// bind it before starting threads that read the environment.
    Systemd(Option<String>),
    /// `fastcgi+SPEC` or `scgi+SPEC`: the listener SPEC (any of the other
    /// kinds) serving a gateway protocol to a front-end web server instead
    /// of HTTP. The front end is trusted with the request's meta-variables
    /// (client address, scheme): keep the socket reachable by it alone.
    Gateway(Gateway, Box<Listen>),
}

/// Why a listener spec could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseListenError {
    spec: String,
    reason: &'static str,
}

impl fmt::Display for ParseListenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid listen address {:?}: {} (expected tcp://HOST:PORT, unix:PATH, fd:N or systemd, optionally after fastcgi+ or scgi+)",
            self.spec, self.reason
        )
    }
}

impl std::error::Error for ParseListenError {}

impl Listen {
    /// Parses a listener spec such as `tcp://127.0.0.1:8080`.
    pub fn parse(spec: &str) -> Result<Listen, ParseListenError> {
        let err = |reason| ParseListenError {
            spec: spec.to_owned(),
            reason,
        };
        for gateway in [Gateway::FastCgi, Gateway::Scgi] {
            if let Some(inner) = spec
                .strip_prefix(gateway.scheme())
                .and_then(|r| r.strip_prefix('+'))
            {
                let inner = Listen::parse(inner).map_err(|e| err(e.reason))?;
                if matches!(inner, Listen::Gateway(..)) {
                    return Err(err("one gateway scheme at most"));
                }
                return Ok(Listen::Gateway(gateway, Box::new(inner)));
            }
        }
        if let Some(rest) = spec.strip_prefix("tcp://") {
            let (host, port) = rest.rsplit_once(':').ok_or_else(|| err("missing :PORT"))?;
            let port = port
                .parse::<u16>()
                .map_err(|_| err("port is not a number from 0 to 65535"))?;
            let host = match host.strip_prefix('[') {
                Some(v6) => v6
                    .strip_suffix(']')
                    .ok_or_else(|| err("unclosed [ in IPv6 address"))?,
                None if host.contains(':') => return Err(err("IPv6 addresses go in brackets")),
                None => host,
            };
            if host.is_empty() {
                return Err(err("missing host"));
            }
            return Ok(Listen::Tcp {
                host: host.to_owned(),
                port,
            });
        }
        if let Some(path) = spec.strip_prefix("unix:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            if path.is_empty() {
                return Err(err("missing socket path"));
            }
            return Ok(Listen::Unix(PathBuf::from(path)));
        }
        if let Some(fd) = spec.strip_prefix("fd:") {
            let fd = fd.parse::<RawFd>().map_err(|_| err("fd is not a number"))?;
            if fd < 0 {
                return Err(err("fd is negative"));
            }
            return Ok(Listen::Fd(fd));
        }
        if spec == "systemd" {
            return Ok(Listen::Systemd(None));
        }
        if let Some(name) = spec.strip_prefix("systemd:") {
            return Ok(Listen::Systemd(Some(name.to_owned())));
        }
        Err(err("unknown scheme"))
    }

    /// Binds this spec; TCP names may yield several listeners, and so may
    /// systemd. `copies` > 1 binds that many SO_REUSEPORT sockets per TCP
    /// address (one per worker); other kinds are shared by cloning.
    pub fn bind(&self, opts: &BindOptions, copies: usize) -> io::Result<Vec<Vec<Listener>>> {
        let named = |err: io::Error| io::Error::new(err.kind(), format!("{self}: {err}"));
        let singles = match self {
            Listen::Tcp { host, port } => {
                let addrs: Vec<SocketAddr> = (host.as_str(), *port)
                    .to_socket_addrs()
                    .map_err(named)?
                    .collect();
                if addrs.is_empty() {
                    return Err(named(io::Error::new(io::ErrorKind::NotFound, "no address")));
                }
                let mut out = Vec::new();
                for addr in addrs {
                    let mut set = Vec::with_capacity(copies);
                    // SO_REUSEPORT would let this bind join another process
                    // already on the port; a probe without it fails instead
                    // (and picks the port when 0 was asked).
                    let addr = if copies > 1 {
                        options::probe_tcp(addr).map_err(named)?
                    } else {
                        addr
                    };
                    let first = options::bind_tcp(addr, opts, copies > 1).map_err(named)?;
                    // Copies must share the first socket's port when it was 0.
                    let bound = first.local_addr().map_err(named)?;
                    set.push(Listener::Tcp(first));
                    for _ in 1..copies {
                        set.push(Listener::Tcp(
                            options::bind_tcp(bound, opts, true).map_err(named)?,
                        ));
                    }
                    out.push(set);
                }
                return Ok(out);
            }
            Listen::Unix(path) => vec![options::bind_unix(path, opts).map_err(named)?],
            Listen::Fd(fd) => vec![options::adopt(*fd, opts).map_err(named)?],
            Listen::Systemd(name) => options::systemd(name.as_deref(), opts).map_err(named)?,
            Listen::Gateway(_, inner) => return inner.bind(opts, copies),
        };
        singles
            .into_iter()
            .map(|l| {
                let mut set = Vec::with_capacity(copies);
                for _ in 1..copies {
                    set.push(l.try_clone().map_err(named)?);
                }
                // The original (which owns any socket file) serves worker 0.
                set.insert(0, l);
                Ok(set)
            })
            .collect()
    }
}

impl std::str::FromStr for Listen {
    type Err = ParseListenError;

    fn from_str(s: &str) -> Result<Listen, ParseListenError> {
        Listen::parse(s)
    }
}

impl fmt::Display for Listen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Listen::Tcp { host, port } if host.contains(':') => write!(f, "tcp://[{host}]:{port}"),
            Listen::Tcp { host, port } => write!(f, "tcp://{host}:{port}"),
            Listen::Unix(path) => write!(f, "unix:{}", path.display()),
            Listen::Fd(fd) => write!(f, "fd:{fd}"),
            Listen::Systemd(None) => f.write_str("systemd"),
            Listen::Systemd(Some(name)) => write!(f, "systemd:{name}"),
            Listen::Gateway(gateway, inner) => write!(f, "{gateway}+{inner}"),
        }
    }
}

/// A bound, listening socket.
#[derive(Debug)]
pub enum Listener {
    /// A TCP listener.
    Tcp(std::net::TcpListener),
    /// A UNIX stream listener, with the path to remove on shutdown when the
    /// server created it.
    Unix(std::os::unix::net::UnixListener, Option<PathBuf>),
}

impl Listener {
    /// The address as a `--listen` spec (with the real port when 0 was asked).
    pub fn local_spec(&self) -> String {
        match self {
            Listener::Tcp(l) => match l.local_addr() {
                Ok(SocketAddr::V6(a)) => format!("tcp://[{}]:{}", a.ip(), a.port()),
                Ok(a) => format!("tcp://{a}"),
                Err(_) => "tcp://?".to_owned(),
            },
            Listener::Unix(l, _) => match l
                .local_addr()
                .ok()
                .and_then(|a| a.as_pathname().map(|p| p.to_path_buf()))
            {
                Some(p) => format!("unix:{}", p.display()),
                None => "unix:?".to_owned(),
            },
        }
    }

    /// The TCP address, when this is a TCP listener.
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        match self {
            Listener::Tcp(l) => l.local_addr().ok(),
            Listener::Unix(..) => None,
        }
    }

    fn try_clone(&self) -> io::Result<Listener> {
        Ok(match self {
            Listener::Tcp(l) => Listener::Tcp(l.try_clone()?),
            Listener::Unix(l, _) => Listener::Unix(l.try_clone()?, None),
        })
    }
}

#[cfg(test)]
mod tests;
