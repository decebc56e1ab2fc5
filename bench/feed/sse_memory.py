#!/usr/bin/env python3
"""RSS per SSE subscriber of `celer serve --feed`: starts the server (pinned
to CPU 0) on a small file feed, opens N SSE subscribers from CPU 1 that each
read the current version, and reports the server's RSS before and after,
per subscriber; then changes the file and checks that every subscriber got
the new version. The latency of that fan-out is not measured here (a Python
client would measure itself).

    bench/feed/sse_memory.py --celer target/release/celer [--celer OTHER]
        [--subscribers 10000] [--repeats 3] [--tls]

With several --celer binaries the runs interleave (A B A B ...), each on a
fresh server, and the summary gives each binary's median. With --tls the
server gets a throwaway ECDSA P-256 certificate and the subscribers speak
TLS 1.3 (HTTP/1.1 by ALPN).

The "after" figure is read --settle seconds (default 3) after the last
subscriber got its first event: the server's allocator hands pages freed
by the connection burst (handshakes, accept bursts) back to the system
within about a second (jemalloc's decay, decision 050), so what remains is
what the subscribers hold. The figure one second after (the first version
of this script read it there) is printed too.
"""

import argparse
import asyncio
import hashlib
import os
import resource
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

# Connections being set up at once: TLS handshakes beyond the server's
# pending-handshake cap would be shed, and an accept burst of 10,000 would
# overflow the listen backlog.
CONNECTING = 256


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_cert(work):
    cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True)
    return cert, key


def client_context():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


async def subscriber(port, tls, connecting, first_seen, second_id, done, retries):
    async with connecting:
        for attempt in range(5):
            try:
                reader, writer = await asyncio.open_connection(
                    "127.0.0.1", port, ssl=tls, server_hostname="localhost" if tls else None)
                writer.write(b"GET /feeds/doc/events HTTP/1.1\r\nHost: b\r\nAccept: text/event-stream\r\n\r\n")
                await writer.drain()
                break
            except (OSError, ssl.SSLError):
                # A handshake shed or timed out under the burst: try again.
                retries[0] += 1
                await asyncio.sleep(0.1)
        else:
            raise SystemExit("a subscriber could not connect 5 times")
    buf = b""
    seen = 0
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            return writer
        buf += chunk
        while b"\nid: " in buf:
            at = buf.index(b"\nid: ") + 5
            end = buf.find(b"\n", at)
            if end < 0:
                break
            event_id = buf[at:end].decode()
            buf = buf[end:]
            seen += 1
            if seen == 1:
                first_seen.release()
            if event_id == second_id.get("id"):
                done.release()
                return writer


async def measure(celer, n, tls_files, settle):
    """One run on a fresh server: (RSS before, after 1 s, after settling) in KiB."""
    work = tempfile.mkdtemp(prefix="feed-sse-")
    path = os.path.join(work, "doc.json")
    with open(path, "w") as f:
        f.write('{"version": 1, "pad": "' + "x" * 1000 + '"}')
    port = free_port()
    argv = ["taskset", "-c", "0", celer, "serve", "--listen", f"tcp://127.0.0.1:{port}",
            "--workers", "1", "--feed", f"doc=file:{path}", "--max-connections", str(n + 100)]
    if tls_files:
        argv += ["--tls-cert", tls_files[0], "--tls-key", tls_files[1]]
    server = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    tasks = []
    try:
        server.stderr.readline()
        time.sleep(0.5)
        before = rss_kib(server.pid)
        tls = client_context() if tls_files else None
        connecting = asyncio.Semaphore(CONNECTING)
        first_seen, done = asyncio.Semaphore(0), asyncio.Semaphore(0)
        second = {}
        retries = [0]
        for i in range(n):
            tasks.append(asyncio.create_task(subscriber(port, tls, connecting, first_seen, second, done, retries)))
            if i % 500 == 499:
                await asyncio.sleep(0)
        for _ in range(n):
            await asyncio.wait_for(first_seen.acquire(), 300)
        if retries[0]:
            print(f"({retries[0]} connection attempts failed and were retried)", flush=True)
        await asyncio.sleep(1)
        at_1s = rss_kib(server.pid)
        await asyncio.sleep(max(settle - 1, 0))
        after = rss_kib(server.pid)
        doc = '{"version": 2, "pad": "' + "y" * 1000 + '"}'
        second["id"] = hashlib.sha256(doc.encode()).hexdigest()[:32]
        with open(path + ".tmp", "w") as f:
            f.write(doc)
        os.replace(path + ".tmp", path)
        for _ in range(n):
            await asyncio.wait_for(done.acquire(), 120)
        return before, at_1s, after
    finally:
        for t in tasks:
            t.cancel()
        for writer in await asyncio.gather(*tasks, return_exceptions=True):
            if isinstance(writer, asyncio.StreamWriter):
                writer.close()
        server.terminate()
        try:
            # A graceful shutdown ends 10,000 streams at an event boundary;
            # a server still draining after 10 s is killed.
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)
        for name in os.listdir(work):
            os.unlink(os.path.join(work, name))
        os.rmdir(work)


async def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--celer", required=True, action="append",
                   help="a celer binary (a release build); repeat to compare, runs interleave")
    p.add_argument("--subscribers", type=int, default=10000)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--tls", action="store_true", help="HTTPS: TLS 1.3 with a throwaway certificate")
    p.add_argument("--settle", type=float, default=3.0,
                   help="seconds after the last first event before RSS is read (default 3)")
    o = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    n = min(o.subscribers, hard - 200)
    if n < o.subscribers:
        print(f"only {n} subscribers: the open-files limit is {hard}", file=sys.stderr)
    os.sched_setaffinity(0, {1})
    certs = tempfile.mkdtemp(prefix="feed-sse-tls-") if o.tls else None
    tls_files = make_cert(certs) if o.tls else None
    per_sub = {celer: [] for celer in o.celer}
    try:
        for r in range(o.repeats):
            for celer in o.celer:
                before, at_1s, after = await measure(celer, n, tls_files, o.settle)
                each = (after - before) * 1024 / n
                per_sub[celer].append(each)
                print(f"{celer} run {r + 1} ({'https' if o.tls else 'http'}), {n} subscribers: "
                      f"server RSS {before} KiB before, {at_1s} KiB 1 s after, {after} KiB "
                      f"{o.settle:g} s after: {each:.0f} bytes per subscriber "
                      f"({(at_1s - before) * 1024 / n:.0f} at 1 s); every subscriber got version 2",
                      flush=True)
    finally:
        if certs:
            for name in os.listdir(certs):
                os.unlink(os.path.join(certs, name))
            os.rmdir(certs)
    for celer, runs in per_sub.items():
        print(f"median {celer} ({'https' if o.tls else 'http'}, {n} subscribers, {len(runs)} runs): "
              f"{statistics.median(runs):.0f} bytes per subscriber "
              f"(runs: {', '.join(f'{x:.0f}' for x in runs)})")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
