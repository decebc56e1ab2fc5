"""The run: options, servers started on CPU 0 and stopped by PID, the
interleaved repeats with the quiet-machine wait and the contention retry, CPU
per request from /proc, the raw.csv rows, the table of medians and ratios,
and the record under bench/runs/. A scenario (scenarios.py) declares what
differs: servers, loads, columns, checks."""

import argparse
import csv
import math
import os
import platform
import resource
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from . import proc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class Case:
    """One load of a scenario: the `scenario` column of raw.csv."""

    name: str
    path: str = "/plaintext"
    conns: int = 64
    depth: int = 1
    headers: tuple = ()
    lua: str = None
    variant: str = ""  # server processes are per (label, variant)
    scheme: str = "http"
    servers: tuple = None  # labels that run it (None: all)
    idle: bool = False  # not a load: the scenario's after() handles it


class Fatal(Exception):
    """A setup error: the message is printed and the run stops (status 2)."""


# ------------------------------------------------------------------- table


def _f(v):
    try:
        v = float(v)
    except (TypeError, ValueError):
        return math.nan
    return v


def median(rows, key):
    vals = [v for v in (_f(r.get(key)) for r in rows) if v == v]
    return statistics.median(vals) if vals else math.nan


def fmt(v, digits=0):
    return "-" if v != v else f"{v:,.{digits}f}"


def ratio(a, b):
    return "-" if a != a or b != b or b == 0 else f"{a / b:.2f}"


def medians_table(rows, intro, cols, ratios, count, reference="celer", width=14):
    """The table of medians per (scenario, server) and REFERENCE's ratios.
    COLS: (header, key, width, digits); RATIOS: (header, key, width);
    COUNT: (header, width, rows -> str), a sum over the repeats."""
    servers = list(dict.fromkeys(r["server"] for r in rows))
    scen = list(dict.fromkeys(r["scenario"] for r in rows))
    have_ref = reference in servers
    width = max([width] + [len(sc) for sc in scen])
    reps = max(int(r["repeat"]) for r in rows)
    out = [f"Medians of {reps} interleaved repeat(s); {intro}"]
    bad = sum(1 for r in rows if r.get("contended") == "1")
    if bad:
        out.append(f"WARNING: {bad} of {len(rows)} runs were disturbed by other processes "
                   f"(column contended in raw.csv).")
    if have_ref:
        out.append(f"{reference}/peer: req/s ratio >1 and CPU ratio <1 favour {reference}.")
    out.append("")
    hdr = f"{'scenario':<{width}} {'server':<6}" + "".join(f" {h:>{w}}" for h, _, w, _ in cols)
    hdr += f" {count[0]:>{count[1]}}"
    if have_ref:
        hdr += "".join(f" {(reference + '/peer ' if i == 0 else '') + h:>{w}}" for i, (h, _, w) in enumerate(ratios))
    out += [hdr, "-" * len(hdr)]
    for sc in scen:
        med = {}
        for sv in servers:
            rs = [r for r in rows if r["scenario"] == sc and r["server"] == sv]
            if rs:
                med[sv] = ({k: median(rs, k) for _, k, _, _ in cols + [(0, k, 0, 0) for _, k, _ in ratios]}, rs)
        for i, (sv, (m, rs)) in enumerate(med.items()):
            line = f"{sc if i == 0 else '':<{width}} {sv:<6}" + "".join(
                f" {fmt(m[k], d):>{w}}" for _, k, w, d in cols)
            line += f" {count[2](rs):>{count[1]}}"
            if have_ref and sv != reference and reference in med:
                ref = med[reference][0]
                line += "".join(f" {ratio(ref[k], m[k]):>{w}}" for _, k, w in ratios)
            out.append(line.rstrip())
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------- run


class Run:
    """One invocation of `bench/run SCENARIO`."""

    def __init__(self, scenario, opts, argv, prog):
        self.sc, self.opts, self.argv, self.prog = scenario, opts, argv, prog
        self.root, self.bench = ROOT, os.path.join(ROOT, "bench")
        self.pids, self.ports, self.procs, self.rows = {}, {}, {}, []
        self.subst, self.cert, self.key = {}, "", ""
        self.contended = self.flagged = 0
        self.quiet_max = float(os.environ.get("QUIET_WAIT_MAX", 1200))
        self.quiet_pct = float(os.environ.get("QUIET_PCT", 10))
        self.contended_pct = float(os.environ.get("CONTENDED_PCT", 10))
        self.retries = int(os.environ.get("CONTENDED_RETRIES", 2))
        self.record_done, self.started = False, 0

    # -------------------------------------------------------------- helpers

    def log(self, msg):
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    def die(self, msg):
        raise Fatal(msg)

    def make_cert(self, key="ecdsa"):
        """A throwaway certificate for localhost and 127.0.0.1."""
        self.cert, self.key = f"{self.work}/cert.pem", f"{self.work}/key.pem"
        newkey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"] if key == "ecdsa" else ["-newkey", "rsa:2048"]
        r = subprocess.run(["openssl", "req", "-x509", *newkey, "-nodes", "-days", "2", "-subj", "/CN=localhost",
                            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                            "-keyout", self.key, "-out", self.cert], capture_output=True)
        if r.returncode:
            self.die("openssl could not make a certificate")
        os.chmod(self.cert, 0o644)
        os.chmod(self.key, 0o644)

    def url(self, case, key):
        return f"{case.scheme}://127.0.0.1:{self.ports[key]}{case.path}"

    def curl(self, case, key, *args, path=None):
        """curl against a server, as the scenario speaks to it."""
        url = f"{case.scheme}://127.0.0.1:{self.ports[key]}{path or case.path}"
        argv = ["curl", "-s", "--max-time", "5", *self.sc.curl_args(case), *args, url]
        return subprocess.run(argv, capture_output=True).stdout

    def wait_quiet(self):
        proc.wait_quiet(self.quiet_max, self.quiet_pct, self.log)

    # -------------------------------------------------------------- servers

    def start(self, key, case):
        """Starts server KEY = (label, variant) on CPU 0 and waits until it
        answers CASE's request."""
        label, variant = key
        port = proc.freeport()
        self.started += 1
        d = os.path.join(self.work, f"{self.started}-{label}-{variant or 'main'}")
        os.makedirs(d)
        argv = self.procs[label].argv(self, variant, port, d)
        out = open(f"{d}/out.log", "wb")
        p = subprocess.Popen(["taskset", "-c", "0", *argv], stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
        self.pids[key], self.ports[key] = p, port
        want = "200 2" if self.sc.http2 else "200"
        got = ""
        for _ in range(100):
            got = self.sc.ready(self, case, key)
            if got is True:
                return
            if got is None:
                got = self.curl(case, key, "-o", "/dev/null", "-w", "%{http_code} %{http_version}").decode()
                if got == want or (not self.sc.http2 and got.startswith("200 ")):
                    return
            if p.poll() is not None:
                break
            time.sleep(0.1)
        logs = "".join(open(os.path.join(d, f), errors="replace").read() for f in os.listdir(d) if f.endswith(".log"))
        self.die(f"{label} did not answer {case.path} on port {port} (last: '{got or 'no answer'}'); "
                 f"its output:\n{logs}")

    def stop(self, key):
        p = self.pids.pop(key, None)
        if p is None:
            return
        p.terminate()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    # ----------------------------------------------------------------- load

    def run_one(self, rep, case, label):
        key = (label, case.variant)
        p = self.pids[key]
        duration = self.opts.duration
        argv = self.sc.load_argv(self, case, key, duration)
        f = f"{self.work}/load.out"
        for attempt in range(self.retries + 1):
            self.wait_quiet()
            if p.poll() is not None:
                self.log(f"{label} ({case.name}, pid {p.pid}) is gone; skipping")
                return
            sticks, cticks, foreign = proc.measured_run(p.pid, f, argv)
            contended = foreign > self.contended_pct
            if not contended:
                break
            self.log(f"repeat {rep} {case.name} {label}: other processes used {foreign}% of a CPU during the run; "
                     + ("keeping it, marked contended" if attempt == self.retries else "running it again"))
        self.contended += contended
        lg = self.sc.loadgen
        text = open(f, errors="replace").read()
        with open(f"{self.out}/{lg.log_name}", "a") as log:
            log.write(f"### repeat {rep}, {case.name}, {label}: {shlex.join(argv)}\n{lg.log_text(text)}\n")
        r = lg.parse(text)
        req = _f(r["requests"])
        row = {"repeat": rep, "scenario": case.name, "server": label, "connections": case.conns,
               "depth": case.depth, "duration_s": duration, "cpu_ticks": sticks,
               "cpu_us_per_req": f"{sticks * 1e6 / proc.CLK_TCK / req:.3f}" if req > 0 else "nan",
               "cpu_pct": f"{sticks * 100 / proc.CLK_TCK / duration:.1f}",
               f"{lg.name}_ticks": cticks, "foreign_pct": foreign, "contended": int(contended), **r}
        row.update(self.sc.row(self, case, label, row))
        self.add_row(row)
        self.log(self.sc.log_line(rep, case, label, row))

    def add_row(self, row):
        self.rows.append({k: str(row.get(k, "")) for k in ["scenario"] + self.sc.columns})
        self.csv.writerow(row)
        self.csv_file.flush()

    # ------------------------------------------------------------------ main

    def main(self):
        sc, o = self.sc, self.opts
        if (os.cpu_count() or 1) < 2:
            self.die("needs at least 2 CPUs (server on CPU 0, the load generator on CPU 1)")
        for t in ("taskset", "curl", "openssl"):
            if not shutil.which(t):
                self.die(f"{t} not found")
        sc.install(self)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        self.nofile = hard
        self.work = tempfile.mkdtemp(prefix=f"celer-bench-{sc.name}.")
        os.chmod(self.work, 0o755)
        # The servers and loads asked for, in the scenario's order.
        labels = [s for s in sc.servers if not o.only or s in o.only]
        cases = [c for c in sc.cases if not o.loads or c.name in o.loads]
        self.procs = {}
        for label in labels:
            if sc.servers[label].prepare(self, label):
                self.procs[label] = sc.servers[label]
            elif label == sc.reference:
                self.log(f"{label} could not be built: running the peers alone, without ratios")
            else:
                self.die(f"{label} could not be built or installed")
        labels = [s for s in labels if s in self.procs]
        runs = lambda c: [s for s in labels if c.servers is None or s in c.servers]
        keys = list(dict.fromkeys((s, c.variant) for c in cases if not c.idle for s in runs(c)))
        if not keys and not any(c.idle for c in cases):
            self.die("nothing to run")
        sc.prepare(self)
        # The record.
        if o.no_record:
            self.out = f"{self.work}/record"
        else:
            base = os.path.join(self.bench, "runs", o.record or
                                f"{time.strftime('%F')}-{socket.gethostname().split('.')[0]}{sc.suffix}")
            self.out, n = base, 2
            while os.path.exists(self.out):
                self.out, n = f"{base}-{n}", n + 1
        os.makedirs(self.out)
        self.csv_file = open(f"{self.out}/raw.csv", "w", newline="")
        self.csv = csv.DictWriter(self.csv_file, sc.columns, extrasaction="ignore", restval="", lineterminator="\n")
        self.csv.writeheader()
        n_runs = sum(len(runs(c)) for c in cases if not c.idle) * o.repeats
        self.log(f"servers: {' '.join(labels)}; loads: {' '.join(c.name for c in cases)}; "
                 f"{o.duration}s x {o.repeats} repeats; about {n_runs * (o.duration + 2) // 60 + 1} min")
        start = time.time()
        first_case = {k: next(c for c in cases if not c.idle and (k[0], c.variant) == k and k[0] in runs(c))
                      for k in keys}
        for k in keys:
            self.start(k, first_case[k])
        sc.check(self, keys, first_case)
        if keys:
            self.wait_quiet()
            self.log("warming up each server (1 s, not recorded)")
            for k in keys:
                subprocess.run(sc.load_argv(self, first_case[k], k, 1), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        for rep in range(1, o.repeats + 1):
            # Rotate the server order every repeat: no server always runs
            # first, or right after the same neighbour.
            order = labels[(rep - 1) % len(labels):] + labels[:(rep - 1) % len(labels)]
            for c in cases:
                if not c.idle:
                    for label in order:
                        if label in runs(c):
                            self.run_one(rep, c, label)
        for k in keys:
            self.stop(k)
        for c in cases:
            if c.idle:
                sc.after(self, c, runs(c))
        self.elapsed = time.time() - start
        self.csv_file.close()
        summary = sc.summary(self.rows) if self.rows else "no runs\n"
        with open(f"{self.out}/summary", "w") as f:
            f.write(summary)
        self.write_readme(labels, summary)
        self.record_done = True
        print("\n" + summary)
        self.log(f"recorded in {os.path.relpath(self.out, ROOT)}" if not o.no_record else "not recorded (--no-record)")

    def write_readme(self, labels, summary):
        sc = self.sc
        cmd = shlex.join([*self.prog.split(), *self.argv])
        env = " ".join(f"{k}={os.environ[k]}" for k in ("CELER_BIN", "ENGINE_BIN", "CELER_CLI", "QUIET_WAIT_MAX", "QUIET_PCT",
                                                         "CONTENDED_PCT", "CONTENDED_RETRIES") if os.environ.get(k))
        osr = dict(line.rstrip().split("=", 1) for line in open("/etc/os-release") if "=" in line)
        cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
        mem = int(open("/proc/meminfo").readline().split()[1]) / 1048576
        lines = [f"# {sc.title}, {time.strftime('%F')} on {socket.gethostname().split('.')[0]}", "",
                 f"Command (from the repository root, took {int(self.elapsed) // 60} min {int(self.elapsed) % 60} s):",
                 "", "```", (env + " " if env else "") + cmd, "```", "", sc.describe(self), "",
                 "## Machine", "", f"- kernel: {' '.join(platform.uname()[i] for i in (0, 2, 4))}",
                 f"- CPU: {cpu}, {os.cpu_count()} CPUs online", f"- memory: {mem:.1f} GiB",
                 f"- OS: {osr.get('PRETTY_NAME', '?').strip(chr(34))}", "", "## Versions", ""]
        lines += [f"- {label}: {self.procs[label].version(self)}" for label in labels]
        lines += [f"- {sc.loadgen.version()}", ""]
        if sc.reference not in labels:
            lines += [f"{sc.reference} was not part of this run, so there are no ratios.", ""]
        if self.contended:
            lines += [f"**{self.contended} run(s) were disturbed by other processes on this machine** even after "
                      f"{self.retries} retries (more than {self.contended_pct:g}% of a CPU; columns `foreign_pct` and "
                      "`contended` in raw.csv); treat those figures with suspicion.", ""]
        if self.flagged:
            lines += [f"**{self.flagged} run(s) had failed requests or spoke the wrong protocol "
                      "(flagged in raw.csv).**", ""]
        lines += ["## Summary", "", "```", summary.rstrip("\n"), "```", ""]
        lines += sc.readme_extra(self)
        files = sorted(os.listdir(self.out))
        lines += ["Files: " + ", ".join(f"`{f}`" for f in files + ["README.md"] if f != "README.md") + ".", ""]
        with open(f"{self.out}/README.md", "w") as f:
            f.write("\n".join(lines))

    def cleanup(self):
        for k in list(self.pids):
            self.stop(k)
        if not self.opts.no_record and not self.record_done and getattr(self, "out", None):
            shutil.rmtree(self.out, ignore_errors=True)  # no half-written record
        if getattr(self, "work", None):
            shutil.rmtree(self.work, ignore_errors=True)


# --------------------------------------------------------------------- CLI


def _list(text):
    return [x for x in text.split(",") if x]


def _positive(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return int(text)


def main(argv, scenarios, prog=None):
    """Runs `bench/run SCENARIO ...`; PROG names a scenario's own script
    (bench/feed/run) where it is run through one, for its help, its
    errors and the command its record gives."""
    top = argparse.ArgumentParser(prog="bench/run", description="Celer against its peers on this machine: servers pinned to CPU 0, the load generator to CPU 1, interleaved repeats, medians and ratios, server CPU per request from /proc; recorded under bench/runs/.",
                                  formatter_class=argparse.RawDescriptionHelpFormatter,
                                  epilog="scenarios:\n" + "\n".join(f"  {s.name:<8} {s.help}" for s in scenarios))
    top.add_argument("scenario", choices=[s.name for s in scenarios])
    if not argv or argv[0] not in [s.name for s in scenarios]:
        top.parse_args(argv[:1])  # prints the help, or names the error
    sc = next(s for s in scenarios if s.name == argv[0])
    prog = prog or f"bench/run {sc.name}"
    p = argparse.ArgumentParser(prog=prog, description=sc.help,
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=sc.epilog())
    p.add_argument("--quick", action="store_true",
                   help=f"3 s per run{', 1 repeat' if sc.quick_repeats else ''}: a smoke run")
    p.add_argument("--duration", type=_positive, default=10, metavar="SECS", help="seconds per run (default 10)")
    p.add_argument("--repeats", type=_positive, default=3, metavar="N", help="interleaved repeats (default 3)")
    p.add_argument("--only", type=_list, metavar="A,B", help=f"servers to run (default all: {','.join(sc.servers)})")
    p.add_argument("--loads", type=_list, metavar="A,B",
                   help=f"loads to run (default all: {','.join(c.name for c in sc.cases)})")
    p.add_argument("--celer-bin", metavar="PATH", help="the binary to run as celer instead of building it")
    p.add_argument("--no-record", action="store_true", help="print the table only; write nothing under bench/runs/")
    p.add_argument("--record", metavar="NAME", help="record in bench/runs/NAME (default <date>-<host>"
                   f"{sc.suffix}, numbered when taken)")
    p.add_argument("--summarize", metavar="RAW_CSV", help="print the table of a recorded raw.csv and exit")
    sc.options(p)
    o = p.parse_args(argv[1:])
    if o.summarize:
        try:
            rows = list(csv.DictReader(open(o.summarize)))
        except OSError as e:
            p.error(f"--summarize: {e}")
        if not rows or any(c not in rows[0] for c in sc.columns):
            p.error(f"--summarize: {o.summarize} is not a raw.csv of {sc.name} (columns: {', '.join(sc.columns)})")
        for r in rows:
            r.setdefault("scenario", sc.cases[0].name)
        print(sc.summary(rows))
        return 0
    if o.quick:
        o.duration = 3
        o.repeats = sc.quick_repeats or o.repeats
    for what, given, known in (("server", o.only, sc.servers), ("load", o.loads, [c.name for c in sc.cases])):
        for x in given or ():
            if x not in known:
                p.error(f"unknown {what} '{x}' (known: {', '.join(known)})")
    run = Run(sc, o, argv[1:], prog)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    try:
        run.main()
    except Fatal as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        run.cleanup()
    return 0
