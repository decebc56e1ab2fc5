//! Listening sockets handed over by a parent: `fd:N` and systemd socket
//! activation, the way a supervisor or systemd would start celer.

use std::process::Command;

use celer_test_support::run_tool;

use crate::support::CELER;

/// A parent that binds a socket, puts it at fd 3 and execs celer the way
/// systemd does (`LISTEN_PID` is the pid celer runs as, thanks to `exec`),
/// then makes one request through the inherited socket.
const PARENT: &str = r#"
import os, socket, subprocess, sys, time, urllib.request
celer, spec, env_style = sys.argv[1], sys.argv[2], sys.argv[3]
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0)); s.listen(64)
port = s.getsockname()[1]
os.dup2(s.fileno(), 3); os.set_inheritable(3, True)
if env_style == "systemd":
    cmd = ["sh", "-c", 'LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=web exec "$0" serve --listen "$1" --workers 1', celer, spec]
else:
    cmd = [celer, "serve", "--listen", spec, "--workers", "1"]
p = subprocess.Popen(cmd, pass_fds=(3,), stderr=subprocess.PIPE, text=True)
line = p.stderr.readline()
if "listening" not in line:
    print(line.strip()); print("exit", p.wait(timeout=10)); sys.exit(0)
try:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).read()
    print(line.strip()); print("served", len(body) > 0)
finally:
    p.terminate(); print("exit", p.wait(timeout=10))
"#;

fn parent(spec: &str, style: &str) -> String {
    let out = run_tool(Command::new("python3").args(["-c", PARENT, CELER, spec, style]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn inherited_fd() {
    let out = parent("fd:3", "plain");
    assert!(out.contains("listening on tcp://127.0.0.1:"), "{out}");
    assert!(out.contains("served True"), "{out}");
    assert!(out.contains("exit 0"), "{out}");
}

#[test]
fn systemd_socket_activation() {
    let out = parent("systemd", "systemd");
    assert!(out.contains("served True"), "{out}");
    assert!(out.contains("exit 0"), "{out}");
    let out = parent("systemd:web", "systemd");
    assert!(out.contains("served True"), "{out}");
}

#[test]
fn systemd_name_that_is_not_there_exits_2() {
    let out = parent("systemd:other", "systemd");
    assert!(out.contains("exit 2"), "{out}");
}
