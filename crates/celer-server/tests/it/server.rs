//! Listeners and socket options.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;

use celer_server::listen::BindOptions;
use celer_server::{Limits, Listen, Server};
use celer_test_support::Raw;

use crate::support::start_on;

#[test]
fn listen_specs_parse_and_print_back() {
    for spec in [
        "tcp://127.0.0.1:8080",
        "tcp://[::1]:0",
        "tcp://localhost:80",
        "unix:/tmp/x.sock",
        "fd:3",
        "systemd",
        "systemd:web",
        "fastcgi+unix:/tmp/x.sock",
        "fastcgi+tcp://[::1]:9000",
        "scgi+tcp://127.0.0.1:4000",
        "scgi+fd:3",
    ] {
        assert_eq!(Listen::parse(spec).unwrap().to_string(), spec);
    }
    for bad in [
        "127.0.0.1:80",
        "tcp://127.0.0.1",
        "tcp://::1:80",
        "tcp://h:99999",
        "unix:",
        "fd:x",
        "fd:-1",
        "udp://x:1",
        "fastcgi+",
        "fastcgi+scgi+unix:/x",
        "scgi+http://x:1",
        "fcgi+unix:/x",
    ] {
        let err = Listen::parse(bad).unwrap_err().to_string();
        assert!(err.contains(bad), "{err}");
    }
}

#[tokio::test]
async fn ipv6_loopback() {
    let srv = start_on("tcp://[::1]:0", Limits::default()).await;
    assert!(srv.addr.is_ipv6());
    let mut c = Raw::connect(srv.addr).await;
    c.send(b"GET /hello HTTP/1.1\r\nHost: [::1]\r\n\r\n").await;
    assert_eq!(c.response().await.status, 200);
}

#[tokio::test]
async fn unix_socket_with_mode_and_stale_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sock");
    // A stale socket file from a dead server is replaced.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let opts = BindOptions {
        unix_mode: Some(0o600),
        ..BindOptions::default()
    };
    let bound = Server::builder()
        .listen(Listen::Unix(path.clone()))
        .bind_options(opts)
        .bind()
        .expect("stale socket is replaced");
    let shutdown = celer_server::Shutdown::new();
    let task = tokio::spawn(bound.serve(
        tower::service_fn(|_req| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Full::new(
                bytes::Bytes::from("unix ok"),
            )))
        }),
        shutdown.clone(),
    ));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // A live socket is not taken over.
    let err = Server::builder()
        .listen(Listen::Unix(path.clone()))
        .bind()
        .unwrap_err();
    assert!(err.to_string().contains("another server"), "{err}");
    let p = path.clone();
    let text = tokio::task::spawn_blocking(move || {
        let mut s = std::os::unix::net::UnixStream::connect(p).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    })
    .await
    .unwrap();
    assert!(text.ends_with("unix ok"), "{text}");
    shutdown.trigger();
    task.await.unwrap().unwrap();
    assert!(!path.exists(), "the server removes its socket file on exit");
}

#[tokio::test]
async fn a_path_that_is_not_a_socket_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("file");
    std::fs::write(&path, "x").unwrap();
    let err = Server::builder()
        .listen(Listen::Unix(path.clone()))
        .bind()
        .unwrap_err();
    assert!(err.to_string().contains("not a socket"), "{err}");
    assert!(path.exists(), "the file is left alone");
}

#[tokio::test]
async fn inherited_fd() {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_listener.local_addr().unwrap();
    // Hand the descriptor over as a parent process would.
    let fd = std_listener.as_raw_fd();
    std::mem::forget(std_listener);
    let bound = Server::builder()
        .listen(Listen::Fd(fd))
        .bind()
        .expect("adopt fd");
    assert_eq!(bound.tcp_addr(), Some(addr));
    let shutdown = celer_server::Shutdown::new();
    tokio::spawn(bound.serve(
        tower::service_fn(|_req| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Full::new(
                bytes::Bytes::from("fd ok"),
            )))
        }),
        shutdown.clone(),
    ));
    let mut c = Raw::connect(addr).await;
    c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(c.response().await.text(), "fd ok");
    shutdown.trigger();
}

#[test]
fn bad_fds_are_refused_with_a_reason() {
    let err = Server::builder()
        .listen(Listen::Fd(987_654))
        .bind()
        .unwrap_err();
    assert!(err.to_string().starts_with("fd:987654:"), "{err}");
    let file = std::fs::File::open("/dev/null").unwrap();
    let fd = file.as_raw_fd();
    std::mem::forget(file);
    let err = Server::builder().listen(Listen::Fd(fd)).bind().unwrap_err();
    assert!(err.to_string().contains("socket"), "{err}");
}

#[test]
fn an_address_in_use_is_an_error_naming_it() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let spec = format!("tcp://127.0.0.1:{port}");
    let err = Server::builder()
        .listen(Listen::parse(&spec).unwrap())
        .bind()
        .unwrap_err();
    assert!(err.to_string().starts_with(&spec), "{err}");
}

#[test]
fn systemd_sockets_need_the_environment() {
    let err = Server::builder()
        .listen(Listen::Systemd(None))
        .bind()
        .unwrap_err();
    assert!(err.to_string().contains("systemd"), "{err}");
}

#[test]
fn a_port_held_by_another_server_is_refused_even_with_reuseport() {
    // Per-core threading binds one SO_REUSEPORT socket per worker; it must
    // still refuse a port another process holds.
    let first = Server::builder()
        .workers(2)
        .listen(Listen::parse("tcp://127.0.0.1:0").unwrap())
        .bind()
        .unwrap();
    let spec = first.local_specs()[0].clone();
    let err = Server::builder()
        .workers(2)
        .listen(Listen::parse(&spec).unwrap())
        .bind()
        .unwrap_err();
    assert!(err.to_string().starts_with(&spec), "{err}");
}
