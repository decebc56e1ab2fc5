#!/usr/bin/env python3
"""RSS per SSE subscriber of `celer serve --feed`: starts the server (pinned
to CPU 0) on a small file feed, opens N SSE subscribers from CPU 1 that each
read the current version, and reports the server's RSS before and after,
per subscriber; then changes the file and checks that every subscriber got
the new version. The latency of that fan-out is not measured here (a Python
client would measure itself).

    bench/feed/sse_memory.py --celer target/release/celer [--subscribers 10000]
"""

import argparse
import asyncio
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def subscriber(port, first_seen, second_id, done):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /feeds/doc/events HTTP/1.1\r\nHost: b\r\nAccept: text/event-stream\r\n\r\n")
    await writer.drain()
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


async def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--celer", required=True, help="the celer binary (a release build)")
    p.add_argument("--subscribers", type=int, default=10000)
    o = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    n = min(o.subscribers, hard - 200)
    os.sched_setaffinity(0, {1})
    work = tempfile.mkdtemp(prefix="feed-sse-")
    path = os.path.join(work, "doc.json")
    with open(path, "w") as f:
        f.write('{"version": 1, "pad": "' + "x" * 1000 + '"}')
    port = free_port()
    server = subprocess.Popen(["taskset", "-c", "0", o.celer, "serve", "--listen", f"tcp://127.0.0.1:{port}",
                               "--workers", "1", "--feed", f"doc=file:{path}", "--max-connections", str(n + 100)],
                              stderr=subprocess.PIPE, text=True)
    try:
        server.stderr.readline()
        time.sleep(0.5)
        before = rss_kib(server.pid)
        first_seen, done = asyncio.Semaphore(0), asyncio.Semaphore(0)
        second = {}
        tasks = []
        for i in range(n):
            tasks.append(asyncio.create_task(subscriber(port, first_seen, second, done)))
            if i % 500 == 499:
                await asyncio.sleep(0)
        for _ in range(n):
            await asyncio.wait_for(first_seen.acquire(), 60)
        await asyncio.sleep(1)
        after = rss_kib(server.pid)
        print(f"subscribers {n}: server RSS {before} KiB before, {after} KiB after, "
              f"{(after - before) * 1024 / n:.0f} bytes per subscriber")
        doc = '{"version": 2, "pad": "' + "y" * 1000 + '"}'
        import hashlib
        second["id"] = hashlib.sha256(doc.encode()).hexdigest()[:32]
        with open(path + ".tmp", "w") as f:
            f.write(doc)
        os.replace(path + ".tmp", path)
        for _ in range(n):
            await asyncio.wait_for(done.acquire(), 60)
        print(f"every subscriber got version 2 ({second['id']})")
        for t in tasks:
            t.cancel()
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
