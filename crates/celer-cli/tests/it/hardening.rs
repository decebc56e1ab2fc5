//! `celer serve` against what hostile or unusual clients send, and the
//! process-wide settings that keep it healthy after an attack.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::support::{Celer, DEADLINE};

/// Sends `request` raw and reads until the server closes.
fn exchange(celer: &Celer, request: &[u8]) -> String {
    let mut tcp = TcpStream::connect(("127.0.0.1", celer.port())).unwrap();
    tcp.set_read_timeout(Some(DEADLINE)).unwrap();
    tcp.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = tcp.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// RFC 9110 §9.3.7: `OPTIONS *` asks about the server as a whole; both
/// sites answer it (it used to be 400 from `celer serve`).
#[test]
fn options_asterisk_is_answered_by_both_sites() {
    let site = tempfile::tempdir().unwrap();
    std::fs::write(site.path().join("a.txt"), "alpha").unwrap();
    let root = site.path().to_str().unwrap();
    for args in [
        vec!["--listen", "tcp://127.0.0.1:0"],
        vec!["--listen", "tcp://127.0.0.1:0", "--root", root],
    ] {
        let celer = Celer::serve(&args);
        let out = exchange(
            &celer,
            b"OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(
            out.to_ascii_lowercase()
                .contains("\r\nallow: get, head\r\n"),
            "{out}"
        );
    }
}

/// jemalloc runs its background purging thread (`MALLOC_CONF` in
/// main.rs), so memory freed after a burst goes back while the server
/// idles.
#[test]
fn the_allocator_purges_in_the_background() {
    let celer = Celer::serve(&["--listen", "tcp://127.0.0.1:0"]);
    // Threads are named when created; the background thread starts with
    // the allocator, before the start-up line.
    let deadline = std::time::Instant::now() + DEADLINE;
    let names = loop {
        let names: Vec<String> = std::fs::read_dir(format!("/proc/{}/task", celer.pid()))
            .unwrap()
            .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
            .map(|name| name.trim().to_owned())
            .collect();
        if names.iter().any(|n| n.starts_with("jemalloc_bg_thd"))
            || std::time::Instant::now() > deadline
        {
            break names;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        names.iter().any(|n| n.starts_with("jemalloc_bg_thd")),
        "{names:?}"
    );
}
