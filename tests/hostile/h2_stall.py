#!/usr/bin/env python3
"""Stalled HTTP/2 streams (issue: memory per stalled connection).

Each attacking connection sets SETTINGS_INITIAL_WINDOW_SIZE to 0, opens
128 streams for one large file and never reads again. The server may send
response heads but no data; what it holds meanwhile is the attack's cost.
This script measures it from /proc (VmRSS of the server's processes, nginx
master and worker summed): resident memory before, during, and for a
minute after the attack (whether freed memory goes back to the system).

    tests/hostile/h2_stall.py --quick           # CI: 10 connections, 10 MiB file, celer only
    tests/hostile/h2_stall.py                   # 100 connections, 100 MiB file, celer and nginx
    tests/hostile/h2_stall.py --json FILE ...   # also write the figures as JSON

Exit status 1 when celer holds more than --max-per-conn (2 MiB) per
connection, or (long mode, nginx present) more than 1.5x nginx's figure,
or (long mode) when its RSS is not back within 2x of the baseline a
minute after the attack ended.
"""

import argparse
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def attack(port, conns, streams, path):
    """Opens the stalled connections; returns their sockets (kept open)."""
    socks = []
    for _ in range(conns):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        out = [common.PREFACE, common.settings(initial_window_size=0)]
        for i in range(streams):
            out.append(common.frame(common.HEADERS, common.END_HEADERS | common.END_STREAM,
                                    2 * i + 1, common.get_headers(path)))
        s.sendall(b"".join(out))
        socks.append(s)
    return socks


def warm(port, path):
    """A few ordinary requests, so the baseline includes a used server."""
    for _ in range(20):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(f"HEAD {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            while s.recv(65536):
                pass


def small_requests(port, n):
    """n keep-alive requests for a small file: traffic after the attack."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        req = b"GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\n"
        for _ in range(n):
            s.sendall(req)
            got = b""
            while b"\r\n\r\n" not in got or not got.endswith(b"small"):
                chunk = s.recv(65536)
                if not chunk:
                    return
                got += chunk


def measure(server, conns, streams, path, settle, recovery):
    warm(server.port, path)
    time.sleep(0.5)
    baseline = server.rss()
    socks = attack(server.port, conns, streams, path)
    time.sleep(settle)
    during = server.rss()
    alive = server.proc.poll() is None
    for s in socks:
        s.close()
    ended = time.monotonic()
    samples = []
    back_after = None
    if recovery:
        while time.monotonic() - ended < recovery:
            small_requests(server.port, 50)
            rss = server.rss()
            t = round(time.monotonic() - ended, 1)
            samples.append((t, rss))
            if back_after is None and rss <= 2 * baseline:
                back_after = t
            time.sleep(1)
    return {
        "server": server.name,
        "connections": conns,
        "streams": streams,
        "baseline_rss": baseline,
        "attack_rss": during,
        "per_connection": (during - baseline) / conns,
        "alive": alive,
        "after_rss": samples[-1][1] if samples else None,
        "back_within_2x_after_s": back_after,
        "samples": samples,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="CI size: 10 connections, 10 MiB, no nginx")
    ap.add_argument("--conns", type=int)
    ap.add_argument("--streams", type=int, default=128)
    ap.add_argument("--file-mib", type=int)
    ap.add_argument("--settle", type=float, default=3.0, help="seconds between attack and probe")
    ap.add_argument("--recovery", type=float, help="seconds of RSS sampling after the attack")
    ap.add_argument("--max-per-conn", type=float, default=2.0, help="MiB per connection allowed")
    ap.add_argument("--no-nginx", action="store_true")
    ap.add_argument("--celer-env", action="append", default=[], metavar="K=V",
                    help="environment for celer (e.g. _RJEM_MALLOC_CONF=...)")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    conns = args.conns or (10 if args.quick else 100)
    size = (args.file_mib or (10 if args.quick else 100)) << 20
    recovery = args.recovery if args.recovery is not None else (0 if args.quick else 60)
    work = common.workdir()
    root = os.path.join(work, "root")
    os.makedirs(root)
    with open(os.path.join(root, "big.bin"), "wb") as f:
        f.truncate(size)
    with open(os.path.join(root, "small.txt"), "w") as f:
        f.write("small")
    env = dict(os.environ)
    for kv in args.celer_env:
        k, _, v = kv.partition("=")
        env[k] = v
    results = []
    runs = [("celer", lambda: common.start_celer(root, work, ["--log-level", "error"], env=env, cpu=0))]
    if not args.quick and not args.no_nginx:
        runs.append(("nginx", lambda: common.start_nginx(root, work, cpu=0)))
    for name, start in runs:
        server = start()
        if server is None:
            print(f"h2_stall: {name} not installed, skipped")
            continue
        try:
            r = measure(server, conns, args.streams, "/big.bin", args.settle, recovery)
        finally:
            server.stop()
        results.append(r)
        print(f"h2_stall: {name}: {conns} conns x {args.streams} streams of {size >> 20} MiB: "
              f"baseline {common.mib(r['baseline_rss']):.1f} MiB, attack {common.mib(r['attack_rss']):.1f} MiB, "
              f"{common.mib(r['per_connection']):.3f} MiB per connection"
              + (f"; a minute later {common.mib(r['after_rss']):.1f} MiB, within 2x of baseline after "
                 f"{r['back_within_2x_after_s']} s" if r["samples"] else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    failed = []
    by = {r["server"]: r for r in results}
    c = by.get("celer")
    if c is None:
        failed.append("celer did not run")
    else:
        if not c["alive"]:
            failed.append("celer died under the attack")
        if c["per_connection"] > args.max_per_conn * (1 << 20):
            failed.append(f"celer holds {common.mib(c['per_connection']):.2f} MiB per stalled connection "
                          f"(limit {args.max_per_conn} MiB)")
        n = by.get("nginx")
        if n is not None and c["per_connection"] > 1.5 * max(n["per_connection"], 1):
            failed.append(f"celer per connection is {c['per_connection'] / max(n['per_connection'], 1):.2f}x nginx's")
        if recovery and c["back_within_2x_after_s"] is None:
            failed.append("celer RSS not back within 2x of baseline in the recovery window")
    for f in failed:
        print(f"h2_stall: FAIL: {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
