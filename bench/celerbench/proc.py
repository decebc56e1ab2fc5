"""What the driver reads from /proc: CPU ticks and RSS of a process tree, the
machine's busy time, a measured load run, the quiet-machine wait, and the
idle-connection client."""

import asyncio
import os
import re
import socket
import subprocess
import sys
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def freeport():
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    """utime+stime+cutime+cstime in clock ticks over PID and its descendants."""
    total = 0
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields[0] is field 3 (state) of proc(5); utime, stime, cutime and
        # cstime are fields 14..17, indexes 11..14 here. For a thread-group
        # leader they cover all of its threads.
        total += sum(int(x) for x in fields[11:15])
    return total


def rss_kib(pid):
    """VmRSS in KiB summed over PID and its descendants."""
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


def machine_busy_ticks():
    """Non-idle CPU ticks of the whole machine since boot (all CPUs)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return user + nice + system + irq + softirq + steal


def _self_ticks():
    t = os.times()
    return (t.user + t.system) * CLK_TCK


def measured_run(pid, out_path, argv):
    """Runs ARGV (the load generator) with its output to OUT_PATH; returns
    (server ticks, client ticks, foreign %): the CPU ticks of server PID and
    its descendants over the run plus 0.5 s after it (the server closes the
    client's connections: part of the work), the client's ticks, and the CPU
    used by everything else on the machine, in % of one CPU."""
    me0, m0, s0, w0 = _self_ticks(), machine_busy_ticks(), cputicks(pid), time.monotonic()
    with open(out_path, "wb") as f:
        child = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT)
        _, _, usage = os.wait4(child.pid, 0)
    time.sleep(0.5)
    s1, m1, wall, me1 = cputicks(pid), machine_busy_ticks(), time.monotonic() - w0, _self_ticks()
    client = (usage.ru_utime + usage.ru_stime) * CLK_TCK
    foreign = (m1 - m0) - (s1 - s0) - client - (me1 - me0)
    return s1 - s0, round(client), round(max(0.0, foreign) * 100 / CLK_TCK / wall, 1)


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


def wait_quiet(maxwait, pct, log):
    """Waits (up to MAXWAIT s) until the machine's CPU use over 0.5 s is below
    PCT % of one CPU and no compiler runs; False if it never was."""
    start, told = time.monotonic(), False
    while True:
        m0, me0 = machine_busy_ticks(), _self_ticks()
        time.sleep(0.5)
        busy = (machine_busy_ticks() - m0 - (_self_ticks() - me0)) * 100 / CLK_TCK / 0.5
        compiling = _compilers_running()
        if busy < pct and not compiling:
            return True
        if not told:
            top = subprocess.run(["ps", "-eo", "pcpu,comm", "--sort=-pcpu"],
                                 capture_output=True, text=True).stdout.splitlines()[1:4]
            what = ", ".join(" ".join(line.split()[::-1]) + "%" for line in top)
            why = "a compiler is running" if compiling else f"{busy:.0f}% of a CPU in use"
            log(f"machine busy ({why}; top: {what}); waiting")
            told = True
        if time.monotonic() - start > maxwait:
            log(f"machine still busy after {maxwait:.0f}s; going on")
            return False


# ------------------------------------------------------ idle connections


async def _one_conn(port, sem, request):
    async with sem:
        loop = asyncio.get_running_loop()
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            await asyncio.wait_for(loop.sock_connect(s, ("127.0.0.1", port)), 10)
            await loop.sock_sendall(s, request)
            buf, deadline = b"", time.monotonic() + 10
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


def _server_established(port):
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
        return True  # open, nothing to read: an idle connection
    except OSError:
        return False
    return bool(data)  # b"" means the server closed it


async def _idle(port, n, pid):
    request = b"GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    before = rss_kib(pid)
    sem = asyncio.Semaphore(200)  # stay well inside every listen backlog
    results = await asyncio.gather(*(_one_conn(port, sem, request) for _ in range(n)))
    socks = [r for r in results if isinstance(r, socket.socket)]
    kinds = {}
    for e in results:
        if not isinstance(e, socket.socket):
            kinds[repr(e)[:80]] = kinds.get(repr(e)[:80], 0) + 1
    for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])[:5]:
        print(f"idle: {v} connection(s) failed: {k}", file=sys.stderr)
    time.sleep(2)  # let the server settle (free per-request state, timers)
    after = rss_kib(pid)
    open_now = sum(1 for s in socks if _still_open(s))
    estab = _server_established(port)
    for s in socks:
        s.close()
    per = (after - before) / len(socks) if socks else float("nan")
    return {"idle_ok": len(socks), "idle_open": open_now, "idle_estab": estab,
            "rss_before_kib": before, "rss_after_kib": after, "kib_per_conn": f"{per:.3f}"}


def idle_connections(port, n, pid):
    """Holds N idle keep-alive connections against 127.0.0.1:PORT (each sent
    one request and read the response) and samples server PID's RSS before
    and after; the client runs on CPU 1."""
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {1})
    try:
        return asyncio.run(_idle(port, n, pid))
    finally:
        os.sched_setaffinity(0, old)
