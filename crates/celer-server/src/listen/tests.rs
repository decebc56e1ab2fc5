//! Adopting inherited descriptors: what is refused, that a refused
//! descriptor stays open, and that none gets two owners.

use std::os::fd::{AsRawFd, IntoRawFd, RawFd};

use socket2::{Domain, Socket, Type};

use super::options::{BindOptions, adopt, systemd_from};
use super::{Listen, Listener};

/// True while `fd` is open in this process.
fn is_open(fd: RawFd) -> bool {
    std::fs::symlink_metadata(format!("/proc/self/fd/{fd}")).is_ok()
}

/// A listening TCP socket on loopback, released as a bare descriptor the
/// way a parent process hands one over.
fn inherited_listener() -> RawFd {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .into_raw_fd()
}

fn error(fd: RawFd) -> String {
    match adopt(fd, &BindOptions::default()) {
        Ok(_) => panic!("descriptor {fd} was adopted"),
        Err(err) => err.to_string(),
    }
}

#[test]
fn the_same_descriptor_is_adopted_once() {
    let fd = inherited_listener();
    let first = Listen::Fd(fd).bind(&BindOptions::default(), 1).unwrap();
    let err = Listen::Fd(fd)
        .bind(&BindOptions::default(), 1)
        .unwrap_err()
        .to_string();
    assert!(err.contains("already taken"), "{err}");
    // The refusal closed nothing: the first owner's socket still accepts.
    let Listener::Tcp(listener) = &first[0][0] else {
        panic!("a TCP listener");
    };
    std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    assert!(is_open(fd));
}

#[test]
fn standard_streams_are_refused_and_left_open() {
    for (fd, name) in [
        (0, "standard input"),
        (1, "standard output"),
        (2, "standard error"),
    ] {
        let err = error(fd);
        assert!(err.contains(name), "{err}");
        assert!(is_open(fd), "descriptor {fd} was closed");
    }
}

#[test]
fn descriptors_that_are_not_listeners_are_refused_and_left_open() {
    let file = std::fs::File::open("/dev/null").unwrap();
    let udp = Socket::new(Domain::IPV4, Type::DGRAM, None).unwrap();
    let unbound = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    let netlink = Socket::new(Domain::from(libc::AF_NETLINK), Type::RAW, None).unwrap();
    for (fd, reason) in [
        (file.as_raw_fd(), "not a socket"),
        (udp.as_raw_fd(), "not a stream socket"),
        (unbound.as_raw_fd(), "not a listening socket"),
        (netlink.as_raw_fd(), "family"),
    ] {
        let err = error(fd);
        assert!(err.contains(reason), "{err}");
        assert!(is_open(fd), "descriptor {fd} was closed");
    }
    // Their owners still own them: closing them here is not a double close.
    drop((file, udp, unbound, netlink));
}

#[test]
fn a_descriptor_that_is_not_open_is_refused() {
    let err = error(900_000);
    assert!(err.contains("not open"), "{err}");
}

#[test]
fn systemd_and_a_named_systemd_socket_do_not_share_one() {
    let web = inherited_listener();
    let api = inherited_listener();
    let passed = [(web, "web".to_owned()), (api, "api".to_owned())];
    let opts = BindOptions::default();
    let named = systemd_from(&passed, Some("web"), &opts).unwrap();
    assert_eq!(named.len(), 1);
    // `systemd` after `systemd:web` would adopt `web` a second time.
    let err = systemd_from(&passed, None, &opts).unwrap_err().to_string();
    assert!(err.contains("already taken"), "{err}");
    assert!(is_open(web) && is_open(api));
    let err = systemd_from(&passed, Some("db"), &opts)
        .unwrap_err()
        .to_string();
    assert!(err.contains("no socket has that name"), "{err}");
}
