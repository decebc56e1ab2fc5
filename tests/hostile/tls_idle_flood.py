#!/usr/bin/env python3
"""Idle TLS handshake flood with a curl probe.

Opens RATE TCP connections a second to an HTTPS server, each sending one
byte of a TLS record header and then nothing, for DURATION seconds, while
curl fetches a page every PROBE_INTERVAL seconds. A server that caps
pending handshakes by pausing its listener stops answering the probes; one
that sheds idle handshakes answers them all.

  tests/hostile/tls_idle_flood.py --ci --celer target/debug/celer
      a few seconds against a `celer serve --self-signed` it starts itself
      with --max-tls-handshakes 64, so that 4 s of flood (600 connections)
      pass the cap many times over; exits 1 unless every probe got a
      response (generous client timeout)
  tests/hostile/tls_idle_flood.py --port 8443 --duration 30 --json out.json
      the long run against a server already listening (celer, nginx...):
      prints and records the probe latencies, asserts nothing
"""

import argparse
import asyncio
import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0,
                   help="port of a running HTTPS server (or the one --celer starts)")
    p.add_argument("--celer", metavar="BIN",
                   help="start `BIN serve --self-signed` on a free port and stop it at the end")
    p.add_argument("--rate", type=float, default=150, help="idle connections opened a second")
    p.add_argument("--duration", type=float, default=30, help="seconds of flood")
    p.add_argument("--probe-interval", type=float, default=2, help="seconds between probes")
    p.add_argument("--probe-timeout", type=float, default=2,
                   help="curl --max-time for one probe, seconds")
    p.add_argument("--ci", action="store_true",
                   help="short run (4 s, a probe every 0.5 s, 10 s client timeout) that exits 1 "
                        "unless every probe got a response")
    p.add_argument("--json", metavar="FILE", help="write the figures here")
    args = p.parse_args()
    if args.ci:
        args.duration = 4
        args.probe_interval = 0.5
        args.probe_timeout = 10
    if not args.celer and not args.port:
        p.error("give --port of a running server, or --celer BIN to start one")
    return args


def free_port(host):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def start_celer(binary, host, extra):
    port = free_port(host)
    proc = subprocess.Popen(
        [binary, "serve", "--self-signed", "--listen", f"tcp://{host}:{port}", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"tls_idle_flood: {binary} serve exited with {proc.returncode}")
        try:
            socket.create_connection((host, port), timeout=1).close()
            return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    sys.exit(f"tls_idle_flood: {binary} serve did not listen on {port} within 30 s")


class Flood:
    """Opens idle connections at a fixed rate; counts what the server did."""

    def __init__(self, host, port, rate):
        self.host, self.port, self.rate = host, port, rate
        self.opened = 0
        self.failed = 0
        self.closed_by_server = 0
        self.tasks = set()

    async def one(self):
        try:
            reader, writer = await asyncio.open_connection(self.host, self.port)
        except OSError:
            self.failed += 1
            return
        self.opened += 1
        try:
            # The first byte of a handshake record, then silence.
            writer.write(b"\x16")
            await writer.drain()
            data = await reader.read(1024)
            if data == b"":
                self.closed_by_server += 1
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            writer.transport.abort()

    async def run(self, duration):
        start = time.monotonic()
        n = 0
        while True:
            due = start + n / self.rate
            now = time.monotonic()
            if due - start >= duration:
                break
            if due > now:
                await asyncio.sleep(due - now)
            task = asyncio.create_task(self.one())
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            n += 1

    async def stop(self):
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def probe(host, port, timeout):
    """One curl request: (answered, seconds, status)."""
    proc = await asyncio.create_subprocess_exec(
        "curl", "-sk", "-o", "/dev/null", "--max-time", str(timeout),
        "-w", "%{http_code} %{time_total}", f"https://{host}:{port}/",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    out, _ = await proc.communicate()
    code, seconds = (out.decode().split() + ["000", "0"])[:2]
    return code != "000", float(seconds), code


async def main_async(args, port):
    flood = Flood(args.host, port, args.rate)
    flooding = asyncio.create_task(flood.run(args.duration))
    probes = []
    start = time.monotonic()
    # The first probe after a second of flood, the last before it ends.
    k = 1
    while True:
        at = start + min(1.0, args.probe_interval) + (k - 1) * args.probe_interval
        if at - start >= args.duration:
            break
        await asyncio.sleep(max(0.0, at - time.monotonic()))
        probes.append(await probe(args.host, port, args.probe_timeout))
        k += 1
    await flooding
    await flood.stop()
    return flood, probes


def main():
    args = parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    server, port = None, args.port
    if args.celer:
        extra = ["--max-tls-handshakes", "64"] if args.ci else []
        server, port = start_celer(args.celer, args.host, extra)
    try:
        flood, probes = asyncio.run(main_async(args, port))
    finally:
        if server:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
    answered = [p for p in probes if p[0]]
    latencies_ms = sorted(round(p[1] * 1000, 1) for p in answered)
    figures = {
        "rate_per_s": args.rate,
        "duration_s": args.duration,
        "idle_connections_opened": flood.opened,
        "idle_connections_refused": flood.failed,
        "idle_connections_closed_by_server": flood.closed_by_server,
        "probes": len(probes),
        "probes_answered": len(answered),
        "probe_timeout_s": args.probe_timeout,
        "probe_ms": latencies_ms,
        "probe_ms_median": statistics.median(latencies_ms) if latencies_ms else None,
        "probe_ms_max": max(latencies_ms) if latencies_ms else None,
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    if args.ci and (not probes or len(answered) != len(probes)):
        print(f"tls_idle_flood: {len(probes) - len(answered)} of {len(probes)} probes "
              "got no response", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
