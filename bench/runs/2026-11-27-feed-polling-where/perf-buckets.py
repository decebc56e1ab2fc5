#!/usr/bin/env python3
"""perf-buckets.py PERF_DATA REQUESTS: a `perf record -e cpu-clock` profile
of the server (poll.sh ... perf) in nanoseconds per request, by part:
kernel, ring's AEAD, Celer's TLS record layer, tokio, the HTTP/1 engine,
the http/bytes types, the framework and feed, the allocator, libc, the rest.
REQUESTS is the requests answered while perf recorded (req/s x 4 s)."""
import re
import subprocess
import sys

path, requests = sys.argv[1], float(sys.argv[2])
out = subprocess.run(["perf", "report", "-i", path, "--no-children", "--sort", "dso,sym", "-g", "none",
                      "--percent-limit", "0", "-F", "overhead,sample,period,dso,sym"],
                     capture_output=True, text=True).stdout
PARTS = [("kernel", lambda d, k, s: k == "k"),
         ("TLS AEAD (ring)", lambda d, k, s: "ring" in s or "aes" in s or "ghash" in s),
         ("TLS record layer and stream (Celer)", lambda d, k, s: "tls::" in s),
         ("tokio (tasks, wakers, I/O readiness, timers)", lambda d, k, s: "tokio::" in s or "Sleep" in s),
         ("HTTP/1 engine (parse, encode, connection)", lambda d, k, s: "http1::" in s or "httparse" in s),
         ("http and bytes types", lambda d, k, s: s.startswith("http::") or "bytes::" in s),
         ("framework, feed, handler", lambda d, k, s: "celer::" in s),
         ("allocator", lambda d, k, s: "rjem" in s or "malloc" in s),
         ("libc (send, recv, memcpy)", lambda d, k, s: d.startswith("libc")),
         ("the rest (the floor: all its own code)", lambda d, k, s: True)]
totals, period_ns = {}, 0
for line in out.splitlines():
    m = re.match(r"\s*[\d.]+%\s+\d+\s+(\d+)\s+(\S+)\s+\[(.)\]\s+(.*)", line)
    if not m:
        continue
    period, dso, kind, sym = int(m.group(1)), m.group(2), m.group(3), m.group(4)
    period_ns += period
    for name, match in PARTS:
        if match(dso, kind, sym):
            totals[name] = totals.get(name, 0) + period
            break
print(f"{path}: {period_ns / requests:.0f} ns of CPU per request")
for name, _ in PARTS:
    print(f"  {name:<46} {totals.get(name, 0) / requests:6.0f} ns")
