#!/usr/bin/env python3
"""Helpers for bench/compare (Python 3 standard library only).

Subcommands:
  freeport                      print a free TCP port on 127.0.0.1
  tree PID                      print PID and all its descendants, one a line
  cputicks PID                  utime+stime (+cutime+cstime) in clock ticks,
                                summed over PID and all its descendants
  rss PID                       VmRSS in KiB summed over PID and descendants
  wrk FILE                      parse wrk --latency output: prints
                                requests,req_per_s,p50_us,p99_us,errors,non2xx
  idle PORT N PID               hold N idle keep-alive connections against
                                127.0.0.1:PORT (each sends one request and
                                reads the response), sample the server's RSS
                                before and after; prints one CSV fragment:
                                answered,still_open,server_established,
                                rss_before_kib,rss_after_kib,kib_per_conn
  run PID OUT CMD...            run CMD (wrk) with stdout+stderr to OUT, and
                                print server_ticks,client_ticks,foreign_pct:
                                the CPU ticks of server PID (and descendants)
                                and of CMD over the run (plus 0.5 s after it,
                                while the server closes the connections), and
                                the CPU share of everything else on the
                                machine, in % of one CPU
  quiet MAXWAIT PCT             wait (up to MAXWAIT s) until the machine's CPU
                                use over 0.5 s is below PCT % of one CPU and no
                                compiler runs; exit 1 if it never was
  summary CSV [REFERENCE]       print the table of medians and ratios
  h2load FILE                   parse h2load output: prints
                                succeeded,req_per_s,mean_us,max_us,failed,
                                errored,timeout,non2xx,protocol,tls,cipher
  summary-h2 CSV [REFERENCE]    bench/compare-h2's table of medians and ratios
"""

import asyncio
import csv
import os
import re
import socket
import statistics
import subprocess
import sys
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------- processes


def descendants(pid):
    """PID and every live descendant (threads are not separate entries)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [int(pid)]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def cputicks(pid):
    total = 0
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields[0] is field 3 (state); utime, stime, cutime, cstime are
        # fields 14..17 of proc(5), so indexes 11..14 here. For a process
        # (thread-group leader) they cover all of its threads.
        total += sum(int(x) for x in fields[11:15])
    return total


def machine_busy_ticks():
    """Non-idle CPU ticks of the whole machine since boot (all CPUs)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return user + nice + system + irq + softirq + steal


def _self_ticks():
    t = os.times()
    return (t.user + t.system) * CLK_TCK


def run_measured(pid, out, cmd):
    me0 = _self_ticks()
    m0 = machine_busy_ticks()
    s0 = cputicks(pid)
    w0 = time.monotonic()
    with open(out, "wb") as f:
        child = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
        _, _, usage = os.wait4(child.pid, 0)
    time.sleep(0.5)  # the server closes the client's connections: part of the work
    s1 = cputicks(pid)
    m1 = machine_busy_ticks()
    wall = time.monotonic() - w0
    me1 = _self_ticks()
    client = (usage.ru_utime + usage.ru_stime) * CLK_TCK
    foreign = (m1 - m0) - (s1 - s0) - client - (me1 - me0)
    pct = max(0.0, foreign) * 100 / CLK_TCK / wall
    print(f"{s1 - s0},{client:.0f},{pct:.1f}")


def _compilers_running():
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as f:
                    if f.read().strip() in ("rustc", "cc1", "cc1plus"):
                        return True
            except OSError:
                pass
    return False


def wait_quiet(maxwait, pct):
    start = time.monotonic()
    told = False
    while True:
        m0 = machine_busy_ticks()
        me0 = _self_ticks()
        time.sleep(0.5)
        busy = (machine_busy_ticks() - m0 - (_self_ticks() - me0)) * 100 / CLK_TCK / 0.5
        compiling = _compilers_running()
        if busy < pct and not compiling:
            return 0
        if not told:
            top = subprocess.run(["ps", "-eo", "pcpu,comm", "--sort=-pcpu"],
                                 capture_output=True, text=True).stdout.splitlines()[1:4]
            what = ", ".join(" ".join(line.split()[::-1]) + "%" for line in top)
            why = "a compiler is running" if compiling else f"{busy:.0f}% of a CPU in use"
            print(f"machine busy ({why}; top: {what}); waiting", file=sys.stderr)
            told = True
        if time.monotonic() - start > maxwait:
            return 1


def rss_kib(pid):
    total = 0
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total


# --------------------------------------------------------------------- wrk

_UNITS = {"us": 1.0, "ms": 1000.0, "s": 1_000_000.0, "m": 60_000_000.0}


def _to_us(text):
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    if not m:
        return float("nan")
    return float(m.group(1)) * _UNITS[m.group(2)]


def parse_wrk(path):
    text = open(path, errors="replace").read()
    requests = rps = p50 = p99 = float("nan")
    errors = non2xx = 0
    m = re.search(r"^\s*(\d+) requests in", text, re.M)
    if m:
        requests = int(m.group(1))
    m = re.search(r"^Requests/sec:\s*([\d.]+)", text, re.M)
    if m:
        rps = float(m.group(1))
    m = re.search(r"^\s*50%\s+(\S+)", text, re.M)
    if m:
        p50 = _to_us(m.group(1))
    m = re.search(r"^\s*99%\s+(\S+)", text, re.M)
    if m:
        p99 = _to_us(m.group(1))
    # With pipelining wrk records one latency sample per batch and can print
    # 0 for its high percentiles: a missing figure, not a zero.
    if p50 == 0:
        p50 = float("nan")
    if p99 == 0:
        p99 = float("nan")
    m = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text
    )
    if m:
        errors = sum(int(x) for x in m.groups())
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if m:
        non2xx = int(m.group(1))
    return requests, rps, p50, p99, errors, non2xx


# ------------------------------------------------------------------ h2load


def parse_h2load(path):
    """h2load's summary: requests that succeeded, req/s, mean and max request
    time (us), the failed/errored/timeout counts, non-2xx responses, the
    application protocol (h2, h2c) and, over TLS, the TLS version and cipher.
    Missing figures are NaN (counts 0, strings empty)."""
    text = open(path, errors="replace").read()
    nan = float("nan")
    out = {"succeeded": nan, "req_per_s": nan, "mean_us": nan, "max_us": nan,
           "failed": 0, "errored": 0, "timeout": 0, "non2xx": 0, "protocol": "", "tls": "", "cipher": ""}
    m = re.search(r"^finished in\s+[\d.]+\s*\w+,\s*([\d.]+)\s*req/s", text, re.M)
    if m:
        out["req_per_s"] = float(m.group(1))
    m = re.search(r"^requests:\s*(.*)$", text, re.M)
    if m:
        for n, what in re.findall(r"(\d+)\s+(total|started|done|succeeded|failed|errored|timeout)", m.group(1)):
            if what in ("succeeded", "failed", "errored", "timeout"):
                out[what] = int(n)
    m = re.search(r"^status codes:\s*(\d+) 2xx,\s*(\d+) 3xx,\s*(\d+) 4xx,\s*(\d+) 5xx", text, re.M)
    if m:
        out["non2xx"] = sum(int(x) for x in m.groups()[1:])
    m = re.search(r"^time for request:\s+(\S+)\s+(\S+)\s+(\S+)", text, re.M)
    if m:
        out["max_us"] = _to_us(m.group(2))
        out["mean_us"] = _to_us(m.group(3))
    m = re.search(r"^Application protocol:\s*(\S+)", text, re.M)
    if m:
        out["protocol"] = m.group(1)
    m = re.search(r"^TLS Protocol:\s*(\S+)", text, re.M)
    out["tls"] = m.group(1) if m else ""
    m = re.search(r"^Cipher:\s*(\S+)", text, re.M)
    out["cipher"] = m.group(1) if m else ""
    if not out["succeeded"]:  # nothing answered: no latency to speak of
        out["mean_us"] = out["max_us"] = nan
    return out


H2_SCENARIO_ORDER = ["h2c", "h2-tls"]
H2_SERVER_ORDER = ["celer", "hyper", "h2-raw", "nginx", "h2o"]


def summary_h2(path, reference="celer"):
    """The table of bench/compare-h2: medians over the repeats per (scenario,
    server), the failed requests summed over them, and REFERENCE's ratios."""
    rows = list(csv.DictReader(open(path)))
    if not rows:
        print("no runs")
        return
    servers = sorted({r["server"] for r in rows}, key=lambda s: _order(s, H2_SERVER_ORDER))
    scen = sorted({r["scenario"] for r in rows}, key=lambda s: _order(s, H2_SCENARIO_ORDER))
    have_ref = reference in servers
    reps = max(int(r["repeat"]) for r in rows)
    r0 = rows[0]
    out = [f"Medians of {reps} interleaved repeat(s); server on CPU 0, h2load -t1 on CPU 1; "
           f"{r0['connections']} connections x {r0['streams']} streams."]
    bad = sum(1 for r in rows if r.get("contended") == "1")
    if bad:
        out.append(f"WARNING: {bad} of {len(rows)} runs were disturbed by other processes "
                   f"(column contended in raw.csv).")
    failed_runs = sum(1 for r in rows if r.get("flagged") == "1")
    if failed_runs:
        out.append(f"WARNING: {failed_runs} of {len(rows)} runs had failed (errored, timed-out) or "
                   f"non-2xx requests, or did not speak HTTP/2 (marked !; 'failed' sums the requests).")
    if have_ref:
        out.append(f"{reference}/peer: req/s ratio >1 and CPU ratio <1 favour {reference}.")
    out.append("")
    hdr = (f"{'scenario':<8} {'server':<6} {'req/s':>11} {'mean us':>8} {'max us':>8} "
           f"{'CPU us/req':>10} {'srv CPU%':>8} {'failed':>7}")
    if have_ref:
        hdr += f" {reference + '/peer req/s':>17} {'CPU/req':>7}"
    out.append(hdr)
    out.append("-" * len(hdr))
    for sc in scen:
        med = {}
        for sv in servers:
            rs = [r for r in rows if r["scenario"] == sc and r["server"] == sv]
            if not rs:
                continue
            med[sv] = {k: _med(rs, k) for k in ("req_per_s", "mean_us", "max_us", "cpu_us_per_req", "cpu_pct")}
            # h2load's "failed" includes its "errored" and "timeout"; a
            # non-2xx response counts as succeeded there.
            med[sv]["failed"] = sum(int(r["failed"] or 0) + int(r["non2xx"] or 0) for r in rs)
            med[sv]["flag"] = any(r.get("flagged") == "1" for r in rs)
        first = True
        for sv, m in med.items():
            line = (f"{sc if first else '':<8} {sv:<6} {_fmt(m['req_per_s']):>11} "
                    f"{_fmt(m['mean_us']):>8} {_fmt(m['max_us']):>8} "
                    f"{_fmt(m['cpu_us_per_req'], 2):>10} {_fmt(m['cpu_pct']):>8} "
                    f"{str(m['failed']) + (' !' if m['flag'] else '  '):>7}")
            if have_ref and sv != reference and reference in med:
                ref = med[reference]
                line += (f" {_ratio(ref['req_per_s'], m['req_per_s']):>17}"
                         f" {_ratio(ref['cpu_us_per_req'], m['cpu_us_per_req']):>7}")
            out.append(line.rstrip())
            first = False
    out.append("")
    print("\n".join(out))


# -------------------------------------------------------------------- idle


async def _one_conn(port, sem, request):
    async with sem:
        loop = asyncio.get_running_loop()
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            await asyncio.wait_for(loop.sock_connect(s, ("127.0.0.1", port)), 10)
            await loop.sock_sendall(s, request)
            buf = b""
            deadline = time.monotonic() + 10
            while True:
                end = buf.find(b"\r\n\r\n")
                if end >= 0:
                    head = buf[:end].decode("latin-1").lower()
                    if not head.startswith("http/1.1 200"):
                        raise OSError("status: " + head.split("\r\n", 1)[0])
                    m = re.search(r"\r\ncontent-length:\s*(\d+)", head)
                    if m and len(buf) >= end + 4 + int(m.group(1)):
                        return s
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("response")
                chunk = await asyncio.wait_for(loop.sock_recv(s, 4096), left)
                if not chunk:
                    raise OSError("closed before the response was complete")
                buf += chunk
        except (OSError, asyncio.TimeoutError) as e:
            s.close()
            return e


def server_established(port):
    """Established TCP sockets whose local port is PORT (the server's side)."""
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if parts[3] == "01" and int(parts[1].rsplit(":", 1)[1], 16) == port:
                        n += 1
        except OSError:
            continue
    return n


def _still_open(s):
    try:
        data = s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return True  # open, nothing to read: what an idle connection looks like
    except OSError:
        return False
    return bool(data)  # b"" means the server closed it


async def _idle(port, n, pid):
    request = b"GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    before = rss_kib(pid)
    sem = asyncio.Semaphore(200)  # stay well inside every listen backlog
    results = await asyncio.gather(*(_one_conn(port, sem, request) for _ in range(n)))
    socks = [r for r in results if isinstance(r, socket.socket)]
    errs = [r for r in results if not isinstance(r, socket.socket)]
    if errs:
        kinds = {}
        for e in errs:
            kinds[repr(e)[:80]] = kinds.get(repr(e)[:80], 0) + 1
        for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])[:5]:
            print(f"idle: {v} connection(s) failed: {k}", file=sys.stderr)
    time.sleep(2)  # let the server settle (free per-request state, timers)
    after = rss_kib(pid)
    open_now = sum(1 for s in socks if _still_open(s))
    estab = server_established(port)
    for s in socks:
        s.close()
    per = (after - before) / len(socks) if socks else float("nan")
    print(f"{len(socks)},{open_now},{estab},{before},{after},{per:.3f}")


# ----------------------------------------------------------------- summary

SCENARIO_ORDER = ["plaintext-64", "plaintext-256", "json-64", "json-256",
                  "pipeline-16", "close", "idle"]
SERVER_ORDER = ["celer", "engine", "hyper", "nginx", "h2o"]


def _order(value, order):
    return (order.index(value) if value in order else len(order), value)


def _med(rows, key):
    vals = []
    for r in rows:
        try:
            v = float(r[key])
        except (KeyError, ValueError):
            continue
        if v == v:  # not NaN
            vals.append(v)
    return statistics.median(vals) if vals else float("nan")


def _fmt(v, digits=0):
    if v != v:
        return "-"
    return f"{v:,.{digits}f}"


def _ratio(a, b):
    if a != a or b != b or b == 0:
        return "-"
    return f"{a / b:.2f}"


def summary(path, reference="celer"):
    rows = list(csv.DictReader(open(path)))
    load = [r for r in rows if r["scenario"] != "idle"]
    idle = [r for r in rows if r["scenario"] == "idle"]
    out = []
    servers = sorted({r["server"] for r in rows}, key=lambda s: _order(s, SERVER_ORDER))
    have_ref = reference in servers
    if load:
        scen = sorted({r["scenario"] for r in load}, key=lambda s: _order(s, SCENARIO_ORDER))
        reps = max(int(r["repeat"]) for r in load)
        out.append(f"Medians of {reps} interleaved repeat(s); server on CPU 0, wrk on CPU 1.")
        bad = sum(1 for r in load if r.get("contended") == "1")
        if bad:
            out.append(f"WARNING: {bad} of {len(load)} runs were disturbed by other processes "
                       f"(column contended in raw.csv).")
        if have_ref:
            out.append(f"{reference}/peer: req/s ratio >1 and CPU ratio <1 favour {reference}.")
        out.append("")
        hdr = (f"{'scenario':<14} {'server':<6} {'req/s':>11} {'p50 us':>8} {'p99 us':>8} "
               f"{'CPU us/req':>10} {'srv CPU%':>8} {'err':>5}")
        if have_ref:
            hdr += f" {reference + '/peer req/s':>17} {'CPU/req':>7} {'p99':>5}"
        out.append(hdr)
        out.append("-" * len(hdr))
        for sc in scen:
            med = {}
            for sv in servers:
                rs = [r for r in load if r["scenario"] == sc and r["server"] == sv]
                if not rs:
                    continue
                med[sv] = {k: _med(rs, k) for k in
                           ("req_per_s", "p50_us", "p99_us", "cpu_us_per_req", "cpu_pct")}
                med[sv]["err"] = sum(int(r["errors"] or 0) + int(r["non2xx"] or 0) for r in rs)
            first = True
            for sv, m in med.items():
                line = (f"{sc if first else '':<14} {sv:<6} {_fmt(m['req_per_s']):>11} "
                        f"{_fmt(m['p50_us']):>8} {_fmt(m['p99_us']):>8} "
                        f"{_fmt(m['cpu_us_per_req'], 2):>10} {_fmt(m['cpu_pct']):>8} {m['err']:>5}")
                if have_ref and sv != reference and reference in med:
                    ref = med[reference]
                    line += (f" {_ratio(ref['req_per_s'], m['req_per_s']):>17}"
                             f" {_ratio(ref['cpu_us_per_req'], m['cpu_us_per_req']):>7}"
                             f" {_ratio(ref['p99_us'], m['p99_us']):>5}")
                out.append(line)
                first = False
        out.append("")
    if idle:
        n = max(int(r["connections"]) for r in idle)
        out.append(f"Idle keep-alive connections: {n} requested, each sent one request and read")
        out.append("the response; 'open' still open on the client and 'estab' established on")
        out.append("the server's port when RSS was sampled (VmRSS summed over the server's processes).")
        out.append("")
        hdr = (f"{'server':<6} {'answered':>8} {'open':>6} {'estab':>6} {'RSS before KiB':>14} "
               f"{'RSS after KiB':>13} {'KiB/conn':>8}")
        if have_ref:
            hdr += f" {reference + '/peer':>11}"
        out.append(hdr)
        out.append("-" * len(hdr))
        byserver = {}
        for sv in servers:
            rs = [r for r in idle if r["server"] == sv]
            if rs:
                byserver[sv] = rs
        for sv, rs in byserver.items():
            kib = _med(rs, "kib_per_conn")
            line = (f"{sv:<6} {_fmt(_med(rs, 'idle_ok')):>8} {_fmt(_med(rs, 'idle_open')):>6} "
                    f"{_fmt(_med(rs, 'idle_estab')):>6} "
                    f"{_fmt(_med(rs, 'rss_before_kib')):>14} {_fmt(_med(rs, 'rss_after_kib')):>13} "
                    f"{_fmt(kib, 2):>8}")
            if have_ref and sv != reference and reference in byserver:
                line += f" {_ratio(_med(byserver[reference], 'kib_per_conn'), kib):>11}"
            out.append(line)
        out.append("")
    print("\n".join(out))


# -------------------------------------------------------------------- main


def main(argv):
    if not argv:
        print(__doc__)
        return 2
    cmd, args = argv[0], argv[1:]
    if cmd == "freeport":
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            print(s.getsockname()[1])
    elif cmd == "tree":
        print("\n".join(str(p) for p in descendants(args[0])))
    elif cmd == "cputicks":
        print(cputicks(args[0]))
    elif cmd == "rss":
        print(rss_kib(args[0]))
    elif cmd == "wrk":
        print(",".join(str(x) for x in parse_wrk(args[0])))
    elif cmd == "idle":
        asyncio.run(_idle(int(args[0]), int(args[1]), args[2]))
    elif cmd == "run":
        run_measured(args[0], args[1], args[2:])
    elif cmd == "quiet":
        return wait_quiet(float(args[0]), float(args[1]))
    elif cmd == "summary":
        summary(args[0], *(args[1:2]))
    elif cmd == "h2load":
        r = parse_h2load(args[0])
        print(",".join(str(r[k]) for k in ("succeeded", "req_per_s", "mean_us", "max_us", "failed",
                                          "errored", "timeout", "non2xx", "protocol", "tls", "cipher")))
    elif cmd == "summary-h2":
        summary_h2(args[0], *(args[1:2]))
    else:
        print(f"unknown subcommand {cmd!r}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
