#!/usr/bin/env python3
"""bench/ws-idle.py: server RSS per idle WebSocket.

Starts a server command (with {port}), opens N WebSocket connections with a
raw handshake (optionally offering permessage-deflate), keeps them open and
idle, and prints the server's RSS growth per connection (VmRSS from
/proc/PID/status, before the first connection and after the last).

    bench/ws-idle.py [--n 10000] [--deflate] -- SERVER CMD WITH {port}
"""
import argparse, base64, os, resource, socket, subprocess, sys, time

def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise SystemExit("no VmRSS")

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--deflate", action="store_true")
    ap.add_argument("--path", default="/echo")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = [c for c in a.cmd if c != "--"]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    server = subprocess.Popen([c.replace("{port}", str(port)) for c in cmd], stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 1).close(); break
            except OSError:
                time.sleep(0.1)
        time.sleep(0.5)
        before = rss_kib(server.pid)
        ext = "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n" if a.deflate else ""
        socks = []
        for i in range(a.n):
            c = socket.create_connection(("127.0.0.1", port))
            key = base64.b64encode(os.urandom(16)).decode()
            c.sendall((f"GET {a.path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                       f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{ext}\r\n").encode())
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = c.recv(4096)
                if not chunk:
                    raise SystemExit(f"connection {i} closed during the handshake")
                head += chunk
            if not head.startswith(b"HTTP/1.1 101"):
                raise SystemExit(f"connection {i}: {head[:40]!r}")
            socks.append(c)
        time.sleep(2)
        after = rss_kib(server.pid)
        print(f"{' '.join(cmd[:1])} n={a.n} deflate={a.deflate} rss_before_kib={before} rss_after_kib={after} "
              f"per_socket_bytes={(after - before) * 1024 / a.n:.0f}")
    finally:
        server.kill()

main()
