"""Shared pieces of the hostile-client suite: starting `celer serve` and
nginx on loopback, reading a process tree's memory from /proc, and raw
HTTP/1.1 and HTTP/2 bytes. Standard library only."""

import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, seconds=20.0):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on port {port} after {seconds} s")


def celer_binary():
    """The `celer` binary: $CELER, else the release build, else the debug one."""
    for path in (os.environ.get("CELER"),
                 os.path.join(REPO, "target/release/celer"),
                 os.path.join(REPO, "target/debug/celer")):
        if path and os.access(path, os.X_OK):
            return path
    raise RuntimeError("no celer binary: build it (cargo build -p celer-cli) or set CELER")


class Server:
    """A server process on 127.0.0.1:port, stopped by its PID."""

    def __init__(self, name, argv, port, workdir, env=None, cpu=None):
        self.name, self.port, self.workdir = name, port, workdir
        if cpu is not None and shutil.which("taskset"):
            argv = ["taskset", "-c", str(cpu)] + argv
        self.log = open(os.path.join(workdir, f"{name}.log"), "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True)
        wait_port(port, self.proc)

    def pids(self):
        """The server's processes: its own and its children (nginx workers)."""
        pids = [self.proc.pid]
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
                pids += [int(p) for p in f.read().split()]
        except OSError:
            pass
        return pids

    def rss(self):
        """Resident memory of the server's processes, in bytes."""
        return sum(rss_of(pid) for pid in self.pids())

    def log_text(self):
        self.log.flush()
        with open(self.log.name, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def rss_of(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def start_celer(root, workdir, extra=(), env=None, cpu=None):
    port = free_port()
    argv = [celer_binary(), "serve", "--root", root, "--listen", f"tcp://127.0.0.1:{port}", *extra]
    if "--workers" not in extra:
        argv += ["--workers", "1"]
    return Server("celer", argv, port, workdir, env=env, cpu=cpu)


NGINX_CONF = """daemon off;
master_process on;
worker_processes 1;
worker_rlimit_nofile 65536;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ use epoll; worker_connections 16384; }}
http {{
    access_log off;
    sendfile on;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    server {{
        listen 127.0.0.1:{port} http2 backlog=4096;
        root {root};
    }}
}}
"""


def start_nginx(root, workdir, cpu=None):
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.access(nginx, os.X_OK):
        return None
    port = free_port()
    ndir = os.path.join(workdir, "nginx")
    os.makedirs(ndir, exist_ok=True)
    conf = os.path.join(ndir, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(dir=ndir, port=port, root=root))
    return Server("nginx", [nginx, "-p", ndir, "-c", conf], port, workdir, cpu=cpu)


def workdir():
    return tempfile.mkdtemp(prefix="celer-hostile.")


# ---- HTTP/2 frames (RFC 9113 §4.1) and a minimal HPACK encoder ----

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
SETTINGS_INITIAL_WINDOW_SIZE = 4


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def _hpack_literal(index, value):
    # Literal header field without indexing, indexed name (RFC 7541 §6.2.2).
    value = value.encode()
    assert index < 15 and len(value) < 127
    return bytes([index, len(value)]) + value


def get_headers(path, authority="localhost"):
    """A HEADERS block for GET http://authority/path: :method GET (2),
    :scheme http (6), :path and :authority as literals."""
    return b"\x82\x86" + _hpack_literal(4, path) + _hpack_literal(1, authority)


def settings(**pairs):
    ids = {"initial_window_size": SETTINGS_INITIAL_WINDOW_SIZE}
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", ids[k], v) for k, v in pairs.items()))


def mib(n):
    return n / (1 << 20)
