"""The scenarios of `bench/run`: each declares its servers, its loads, its
raw.csv columns and what it checks or adds; driver.py does the rest."""

import gzip as gz
import json
import os
import socket
import subprocess
import time

from . import proc
from .driver import ROOT, Case, fmt, median, medians_table, ratio
from .loadgen import CelerBench, H2load, Wrk
from .peers import (Celer, GoPeer, GoWs, H2o, Nginx, NodeWs, RustPeer, WsFloor, WsRustPeer, apt_install,
                    cargo_build, listen, tool)

# raw.csv of compare and tls (one row per run; the idle columns for compare's idle).
WRK_COLUMNS = ["repeat", "scenario", "server", "connections", "depth", "duration_s", "requests", "req_per_s",
               "p50_us", "p99_us", "errors", "non2xx", "cpu_ticks", "cpu_us_per_req", "cpu_pct", "wrk_ticks",
               "foreign_pct", "contended", "idle_ok", "idle_open", "idle_estab", "rss_before_kib",
               "rss_after_kib", "kib_per_conn"]
WRK_COLS = [("req/s", "req_per_s", 11, 0), ("p50 us", "p50_us", 8, 0), ("p99 us", "p99_us", 8, 0),
            ("CPU us/req", "cpu_us_per_req", 10, 2), ("srv CPU%", "cpu_pct", 8, 0)]
WRK_RATIOS = [("req/s", "req_per_s", 17), ("CPU/req", "cpu_us_per_req", 7), ("p99", "p99_us", 5)]
ERRORS = ("err", 5, lambda rs: str(sum(int(r["errors"] or 0) + int(r["non2xx"] or 0) for r in rs)))
PINNED = "server on CPU 0, {} on CPU 1"


def engine(tls_resumption=True):
    """example-hello-engine, the bare engine, one worker; TLS in the https
    and h2-tls variants."""
    def args(run, variant, port):
        tls = ["--tls-cert", run.cert, "--tls-key", run.key] if variant in ("https", "h2-tls") else []
        if tls and not tls_resumption:
            tls.append("--no-tls-resumption")
        return [*listen(port), "--workers", "1", *tls]
    return Celer("example-hello-engine", "example-hello-engine", "ENGINE_BIN", args, " (the bare engine)")


class Scenario:
    """What every scenario has; a scenario overrides what differs."""

    name = suffix = title = help = ""
    loadgen = Wrk()
    http2 = False
    quick_repeats = None
    reference = "celer"
    head_paths = ("/plaintext",)

    def options(self, parser):
        pass

    def epilog(self):
        return ""

    def install(self, run):
        if not tool(self.loadgen.name):
            apt_install(run, "wrk" if self.loadgen.name == "wrk" else "nghttp2-client")

    def prepare(self, run):
        pass

    def ready(self, run, case, key):
        """Whether server KEY serves CASE yet: True, a text saying what it
        answered, or None to ask curl for a 200."""
        return None

    def curl_args(self, case):
        return ["-k"] if case.scheme == "https" else []

    def load_argv(self, run, case, key, duration):
        lua = os.path.join(run.bench, case.lua) if case.lua else None
        return self.loadgen.argv(run.url(case, key), case.conns, duration, case.headers, lua, case.depth)

    def check(self, run, keys, first_case):
        """After the servers started: record each one's response heads."""
        with open(f"{run.out}/heads.txt", "a") as f:
            for k in keys:
                for path in self.head_paths:
                    c = first_case[k]
                    size = run.curl(c, k, "-o", "/dev/null", "-w", "%{size_header} head + %{size_download} body bytes",
                                    path=path).decode()
                    head = run.curl(c, k, "-D", "-", "-o", "/dev/null", path=path).decode(errors="replace")
                    f.write(f"## {k[0]} ({c.name}) GET {path} ({size})\n{head.replace(chr(13), '')}")

    def row(self, run, case, label, row):
        return {}

    def log_line(self, rep, case, label, r):
        err = "" if f"{r['errors']}{r['non2xx']}" == "00" else f"  errors {r['errors']}, non-2xx {r['non2xx']}"
        return (f"repeat {rep} {case.name:<15} {label:<6} {r['req_per_s']:9.0f} req/s  p50 {r['p50_us']:6.0f} us  "
                f"p99 {r['p99_us']:6.0f} us  CPU {float(r['cpu_us_per_req']):6.2f} us/req ({float(r['cpu_pct']):3.0f}%)"
                f"  others {r['foreign_pct']}%{err}")

    def summary(self, rows):
        return medians_table(rows, PINNED.format("wrk") + ".", WRK_COLS, WRK_RATIOS, ERRORS, self.reference)

    def describe(self, run):
        o = run.opts
        return (f"Each run: {o.duration} s of `{self.loadgen.name}`; {o.repeats} interleaved repeat(s); servers "
                f"pinned to CPU 0 (`taskset -c 0`; nginx master and worker both), the load generator to CPU 1. "
                "Method: bench/README.md.")

    def readme_extra(self, run):
        if not os.path.exists(f"{run.out}/heads.txt"):
            return []
        return ["## Response heads", "", "```", open(f"{run.out}/heads.txt").read().rstrip(), "```", ""]


class Compare(Scenario):
    name, suffix, title = "compare", "", "Peer comparison"
    help = ("HTTP/1.1: example-hello (framework) and example-hello-engine (bare engine) against hyper, nginx "
            "and h2o; keep-alive, pipelined, connection per request, idle memory")
    servers = {
        "celer": Celer("example-hello", "example-hello", "CELER_BIN",
                       lambda run, v, port: [*listen(port), "--workers", "1"], " (the framework)"),
        "engine": engine(),
        "hyper": RustPeer("peer-hyper"),
        "nginx": Nginx("nginx.conf.in"),
        "h2o": H2o("h2o.conf.in"),
    }
    cases = [Case("plaintext-64"), Case("plaintext-256", conns=256), Case("json-64", "/json"),
             Case("json-256", "/json", 256), Case("pipeline-16", conns=256, depth=16, lua="pipeline.lua"),
             Case("close", headers=("Connection: close",)), Case("idle", idle=True)]
    columns = WRK_COLUMNS
    head_paths = ("/plaintext", "/json")

    def options(self, p):
        p.add_argument("--idle-conns", type=int, default=10000, metavar="N",
                       help="idle keep-alive connections to hold (default 10000)")

    def epilog(self):
        return ("loads: plaintext-64/-256 and json-64/-256 (keep-alive, 64/256 connections), pipeline-16 (256 "
                "connections, 16 requests per write), close (Connection: close), idle (N idle keep-alive "
                "connections, server RSS before and after, fresh server instance)")

    def after(self, run, case, labels):
        n = min(run.opts.idle_conns, run.nofile - 100)
        if n < run.opts.idle_conns:
            run.log(f"open-file limit is {run.nofile}: holding {n} idle connections instead of {run.opts.idle_conns}")
        for label in labels:
            run.wait_quiet()
            key = (label, "")
            run.start(key, self.cases[0])
            time.sleep(1)
            run.log(f"idle: {label}, opening {n} keep-alive connections")
            r = proc.idle_connections(run.ports[key], n, run.pids[key].pid)
            run.log(f"idle: {label} answered {r['idle_ok']}, still open {r['idle_open']} (server side "
                    f"{r['idle_estab']}), RSS {r['rss_before_kib']} -> {r['rss_after_kib']} KiB, "
                    f"{r['kib_per_conn']} KiB/conn")
            run.add_row({"repeat": 1, "scenario": "idle", "server": label, "connections": n, "depth": 1,
                         "contended": 0, **r})
            run.stop(key)

    def summary(self, rows):
        load = [r for r in rows if r["scenario"] != "idle"]
        idle = [r for r in rows if r["scenario"] == "idle"]
        out = []
        for ref in ("celer", "engine"):
            if ref == "engine":
                if not any(r["server"] == "engine" for r in rows):
                    break
                out.append("The same table with the bare engine (example-hello-engine) as the reference:\n")
            if load:
                out.append(medians_table(load, PINNED.format("wrk") + ".", WRK_COLS, WRK_RATIOS, ERRORS, ref))
            if idle:
                out.append(self.idle_table(idle, ref))
        return "\n".join(out)

    def idle_table(self, idle, reference):
        have_ref = any(r["server"] == reference for r in idle)
        out = [f"Idle keep-alive connections: {max(int(r['connections']) for r in idle)} requested, each sent one "
               "request and read", "the response; 'open' still open on the client and 'estab' established on",
               "the server's port when RSS was sampled (VmRSS summed over the server's processes).", ""]
        hdr = (f"{'server':<6} {'answered':>8} {'open':>6} {'estab':>6} {'RSS before KiB':>14} "
               f"{'RSS after KiB':>13} {'KiB/conn':>8}" + (f" {reference + '/peer':>11}" if have_ref else ""))
        out += [hdr, "-" * len(hdr)]
        ref = median([r for r in idle if r["server"] == reference], "kib_per_conn")
        for r in idle:
            kib = median([r], "kib_per_conn")
            line = (f"{r['server']:<6} {fmt(median([r], 'idle_ok')):>8} {fmt(median([r], 'idle_open')):>6} "
                    f"{fmt(median([r], 'idle_estab')):>6} {fmt(median([r], 'rss_before_kib')):>14} "
                    f"{fmt(median([r], 'rss_after_kib')):>13} {fmt(kib, 2):>8}")
            if have_ref and r["server"] != reference:
                line += f" {ratio(ref, kib):>11}"
            out.append(line)
        return "\n".join(out) + "\n"


class Tls(Scenario):
    name, suffix, title = "tls", "-tls", "HTTPS comparison"
    help = ("HTTPS: example-hello-engine against nginx and Go net/http, keep-alive and one full TLS 1.3 "
            "handshake per request, session resumption off everywhere")
    servers = {"celer": engine(tls_resumption=False), "nginx": Nginx("nginx-tls.conf.in"), "go": GoPeer()}
    cases = [Case("http-keepalive", variant="http", servers=("celer",)),
             Case("https-keepalive", variant="https", scheme="https"),
             Case("https-handshake", variant="https", scheme="https", headers=("Connection: close",))]
    columns = WRK_COLUMNS

    def options(self, p):
        p.add_argument("--key", choices=("ecdsa", "rsa"), default="ecdsa",
                       help="certificate key: ecdsa (P-256, default) or rsa (2048)")
        p.add_argument("--conns", type=int, default=64, metavar="N", help="wrk connections (default 64)")

    def epilog(self):
        return ("loads: http-keepalive (celer in plain HTTP: what TLS costs per request), https-keepalive, "
                "https-handshake (Connection: close: one full handshake per request)")

    def prepare(self, run):
        run.make_cert(run.opts.key)
        for c in self.cases:
            c.conns = run.opts.conns

    def check(self, run, keys, first_case):
        """Every HTTPS server must refuse to resume an offered session."""
        req = b"GET /plaintext HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        with open(f"{run.out}/resumption.txt", "w") as f:
            for k in keys:
                if k[1] != "https":
                    continue
                sess = f"{run.work}/{k[0]}.sess"
                s_client = ["timeout", "10", "openssl", "s_client", "-connect", f"127.0.0.1:{run.ports[k]}",
                            "-servername", "localhost", "-tls1_3", "-ign_eof"]
                subprocess.run(s_client + ["-sess_out", sess], input=req, capture_output=True)
                if not os.path.getsize(sess) if os.path.exists(sess) else True:
                    r = "off (no session issued)"
                else:
                    second = subprocess.run(s_client + ["-sess_in", sess], input=req, capture_output=True).stdout
                    r = "ON" if b"\nReused," in second else "off (offered session not resumed)"
                f.write(f"{k[0]}: resumption {r}\n")
                run.log(f"{k[0]}: TLS session resumption {r}")
                if r == "ON":
                    run.die(f"{k[0]} resumed a session: handshake figures would not be full handshakes")

    def summary(self, rows):
        out = medians_table(rows, PINNED.format("wrk") + ".", WRK_COLS, WRK_RATIOS, ERRORS, self.reference)
        med = lambda sc, sv: median([r for r in rows if r["scenario"] == sc and r["server"] == sv], "cpu_us_per_req")
        out += "\n"
        http, https = med("http-keepalive", "celer"), med("https-keepalive", "celer")
        if http == http and https == https:
            out += f"Celer HTTPS keep-alive CPU/request vs Celer plain HTTP: {https:.2f} / {http:.2f} us = {https / http:.2f}x\n"
        hs = {sv: med("https-handshake", sv) for sv in self.servers}
        hs = {sv: v for sv, v in hs.items() if v == v}
        if hs:
            out += ("Full TLS 1.3 handshakes (resumption off) per server CPU-second: "
                    + ", ".join(f"{sv} {1e6 / v:,.0f}" for sv, v in hs.items()) + "\n")
            out += "".join(f"  celer/{sv}: {hs[sv] / hs['celer']:.2f}x\n" for sv in hs if sv != "celer" and "celer" in hs)
        return out

    def describe(self, run):
        return (super().describe(run) + f" `wrk -t1 -c{run.opts.conns}`; {run.opts.key} certificate; TLS 1.3 "
                "(wrk's OpenSSL default). Session resumption off on every server, checked with openssl s_client:"
                "\n\n```\n" + open(f"{run.out}/resumption.txt").read().rstrip() + "\n```")

    def readme_extra(self, run):
        return []


class H2(Scenario):
    name, suffix, title = "h2", "-h2", "HTTP/2 comparison"
    help = ("HTTP/2 with h2load: example-hello-engine against hyper, the bare h2 crate, nginx and h2o, "
            "cleartext by prior knowledge (h2c) and over TLS 1.3 (h2-tls)")
    loadgen = H2load()
    http2 = True
    servers = {"celer": engine(), "hyper": RustPeer("peer-hyper", ["--h2c"]), "h2-raw": RustPeer("peer-h2-raw"),
               "nginx": Nginx(lambda v: f"nginx-{v}.conf.in"), "h2o": H2o(lambda v: f"h2o-{v}.conf.in")}
    # The hyper and h2 peers serve cleartext only.
    cases = [Case("h2c", variant="h2c"),
             Case("h2-tls", variant="h2-tls", scheme="https", servers=("celer", "nginx", "h2o"))]
    columns = ["repeat", "scenario", "server", "connections", "streams", "duration_s", "requests", "req_per_s",
               "mean_us", "max_us", "failed", "errored", "timeout", "non2xx", "protocol", "tls", "cipher", "flagged",
               "cpu_ticks", "cpu_us_per_req", "cpu_pct", "h2load_ticks", "foreign_pct", "contended"]

    def options(self, p):
        p.add_argument("--conns", type=int, default=16, metavar="N", help="h2load connections (-c; default 16)")
        p.add_argument("--streams", type=int, default=100, metavar="N",
                       help="concurrent streams per connection (-m; default 100)")

    def prepare(self, run):
        run.make_cert()
        for c in self.cases:
            c.conns = run.opts.conns

    def curl_args(self, case):
        return ["-k", "--http2"] if case.scheme == "https" else ["--http2-prior-knowledge"]

    def load_argv(self, run, case, key, duration):
        return self.loadgen.argv(run.url(case, key), case.conns, duration, run.opts.streams, case.scheme == "https")

    def row(self, run, case, label, r):
        want = "h2c" if case.name == "h2c" else "h2"
        bad = (r["failed"] + r["errored"] + r["timeout"] + r["non2xx"] > 0 or r["protocol"] != want
               or not r["requests"] > 0)
        run.flagged += bad
        return {"streams": run.opts.streams, "flagged": int(bad)}

    def log_line(self, rep, case, label, r):
        flag = (f"  FLAGGED: failed {r['failed']}, errored {r['errored']}, timeout {r['timeout']}, non-2xx "
                f"{r['non2xx']}, protocol '{r['protocol'] or 'none'}'" if r["flagged"] else "")
        return (f"repeat {rep} {case.name:<6} {label:<6} {r['req_per_s']:9.0f} req/s  mean {r['mean_us']:7.0f} us  "
                f"CPU {float(r['cpu_us_per_req']):6.2f} us/req ({float(r['cpu_pct']):3.0f}%)  others {r['foreign_pct']}%{flag}")

    def summary(self, rows):
        r0 = rows[0]
        count = ("failed", 7, lambda rs: str(sum(int(r["failed"] or 0) + int(r["non2xx"] or 0) for r in rs))
                 + (" !" if any(r.get("flagged") == "1" for r in rs) else "  "))
        out = medians_table(rows, f"{PINNED.format('h2load -t1')}; {r0['connections']} connections x "
                            f"{r0['streams']} streams.",
                            [("req/s", "req_per_s", 11, 0), ("mean us", "mean_us", 8, 0), ("max us", "max_us", 8, 0),
                             ("CPU us/req", "cpu_us_per_req", 10, 2), ("srv CPU%", "cpu_pct", 8, 0)],
                            [("req/s", "req_per_s", 17), ("CPU/req", "cpu_us_per_req", 7)], count, width=8)
        n = sum(1 for r in rows if r.get("flagged") == "1")
        if n:
            out = out.replace("\n\n", f"\nWARNING: {n} of {len(rows)} runs had failed (errored, timed-out) or "
                              "non-2xx requests, or did not speak HTTP/2 (marked !; 'failed' sums the requests).\n\n", 1)
        return out

    def describe(self, run):
        tls = {}
        for r in run.rows:
            if r["scenario"] != "h2c":
                tls.setdefault(r["server"], set()).add(f"{r['tls'] or '?'} {r['cipher'] or '?'}")
        return (super().describe(run) + f" `h2load -t1 -c{run.opts.conns} -m{run.opts.streams}`, GET /plaintext. "
                "h2c: cleartext HTTP/2 by prior knowledge; h2-tls: ALPN h2 over TLS, ECDSA P-256 certificate. "
                "TLS as negotiated (from h2load):\n\n"
                + ("\n".join(f"- {sv}: {', '.join(sorted(v))}" for sv, v in tls.items()) or "- (no h2-tls run)"))


class Static(Scenario):
    name, suffix, title = "static", "-static", "Static files"
    help = ("static files: `celer serve --root` against nginx (sendfile) and h2o (file.dir) on a 13-byte, "
            "a 100 KiB and a 100 MiB file; req/s, MB/s, server CPU per request and per byte")
    quick_repeats = 1
    head_paths = ("/small.txt",)
    servers = {"celer": Celer("celer-cli", "celer", "CELER_BIN", lambda run, v, port:
                              ["serve", "--root", run.subst["ROOT"], *listen(port), "--workers", "1"], cwd="."),
               "nginx": Nginx("static.conf.in"), "h2o": H2o("h2o-static.conf.in")}
    cases = [Case("small", "/small.txt"), Case("medium", "/medium.bin"), Case("big", "/big.bin", conns=4)]
    SIZES = {"small": 13, "medium": 100 * 1024, "big": 100 * 1024 * 1024}
    columns = ["repeat", "scenario", "server", "conns", "duration", "size", "requests", "rps", "mb_per_s",
               "server_ticks", "cpu_us_per_req", "cpu_ns_per_byte", "errors", "non2xx", "foreign_pct", "contended"]

    def prepare(self, run):
        files = f"{run.work}/files"
        os.makedirs(files)
        with open(f"{files}/small.txt", "w") as f:
            f.write("Hello, World!")
        for name, size in (("medium.bin", 100 * 1024), ("big.bin", 100 * 1024 * 1024)):
            with open(f"{files}/{name}", "wb") as f:
                f.write(os.urandom(size))
        os.chmod(files, 0o755)
        for name in os.listdir(files):
            os.chmod(f"{files}/{name}", 0o644)
        run.subst["ROOT"] = files

    def check(self, run, keys, first_case):
        super().check(run, keys, first_case)
        for k in keys:  # the page cache holds the big file before the first run
            run.curl(first_case[k], k, "-o", "/dev/null", path="/big.bin")

    def row(self, run, case, label, r):
        b, ticks = r["bytes_read"], r["cpu_ticks"]
        return {"conns": r["connections"], "duration": r["duration_s"], "size": self.SIZES[case.name],
                "rps": r["req_per_s"], "server_ticks": ticks,
                "mb_per_s": f"{b / 1e6 / r['seconds']:.1f}" if b == b else "nan",
                "cpu_ns_per_byte": f"{ticks * 1e9 / proc.CLK_TCK / b:.4f}" if b > 0 else "nan"}

    def log_line(self, rep, case, label, r):
        return super().log_line(rep, case, label, r) + f"  {r['mb_per_s']} MB/s"

    def summary(self, rows):
        return medians_table(rows, PINNED.format("wrk") + ", keep-alive; CPU is the server's per request and "
                             "per byte sent.",
                             [("req/s", "rps", 10, 0), ("MB/s", "mb_per_s", 9, 1),
                              ("CPU us/req", "cpu_us_per_req", 10, 2), ("CPU ns/B", "cpu_ns_per_byte", 9, 4)],
                             [("req/s", "rps", 16), ("MB/s", "mb_per_s", 6), ("CPU/req", "cpu_us_per_req", 7),
                              ("CPU/B", "cpu_ns_per_byte", 6)], ERRORS, width=8)


class Gzip(Scenario):
    name, suffix, title = "gzip", "-gzip", "gzip on the fly"
    help = ("gzip on the fly: Celer's compression middleware (examples/compress) against nginx's `gzip on` "
            "at the same level, a ~50 KiB HTML page")
    quick_repeats = 1
    head_paths = ("/page",)
    servers = {"celer": Celer("example-compress", "example-compress", "CELER_BIN", lambda run, v, port:
                              [*listen(port), "--workers", "1", "--level", str(run.opts.level),
                               "--page", f"{run.subst['ROOT']}/page.html"]),
               "nginx": Nginx("gzip.conf.in")}
    cases = [Case("page", "/page", headers=("Accept-Encoding: gzip",))]
    columns = ["repeat", "server", "level", "connections", "duration_s", "requests", "req_per_s", "p50_us",
               "p99_us", "errors", "non2xx", "cpu_ticks", "cpu_us_per_req", "foreign_pct", "body_bytes"]

    def options(self, p):
        p.add_argument("--level", type=int, choices=range(1, 10), default=1, metavar="N",
                       help="gzip level for both servers, 1..9 (default 1, nginx's default)")
        p.add_argument("--conns", type=int, default=64, metavar="N", help="wrk connections (default 64)")

    def prepare(self, run):
        rows, n, size = [], 1, 0
        while size < 50 * 1024:  # ~50 KiB of HTML, the same bytes for both servers
            n = (n * 6364136223846793005 + 1442695040888963407) % 2**64
            row = (f'<tr><td class="id">{len(rows)}</td><td>item {n >> 40}</td>'
                   f'<td>{"ok" if n & 1 else "late"}</td></tr>\n')
            rows.append(row)
            size += len(row)
        self.page = f"{run.work}/page.html"
        with open(self.page, "w") as f:
            f.write("<!DOCTYPE html><html><head><title>items</title></head><body><table>\n")
            f.writelines(rows)
            f.write("</table></body></html>\n")
        os.chmod(self.page, 0o644)
        run.subst.update(ROOT=run.work, LEVEL=run.opts.level)
        self.cases[0].conns = run.opts.conns

    def check(self, run, keys, first_case):
        """Both must send gzip that decodes to the page."""
        super().check(run, keys, first_case)
        self.bytes = {}
        for k in keys:
            body = run.curl(first_case[k], k, "-H", "Accept-Encoding: gzip")
            try:
                ok = gz.decompress(body) == open(self.page, "rb").read()
            except OSError:
                ok = False
            if not ok:
                run.die(f"{k[0]}'s answer to /page is not gzip that decodes to the page")
            self.bytes[k[0]] = len(body)
        run.log(f"page {os.path.getsize(self.page)} bytes; gzip level {run.opts.level}: "
                + ", ".join(f"{sv} {n} bytes" for sv, n in self.bytes.items()))

    def row(self, run, case, label, r):
        return {"level": run.opts.level, "body_bytes": self.bytes[label]}

    def summary(self, rows):
        return medians_table(rows, PINNED.format("wrk") + f"; gzip level {rows[0]['level']}, "
                             f"{rows[0]['connections']} connections.",
                             [("req/s", "req_per_s", 10, 0), ("CPU us/req", "cpu_us_per_req", 10, 2),
                              ("p99 us", "p99_us", 8, 0), ("body bytes", "body_bytes", 10, 0)],
                             [("req/s", "req_per_s", 16), ("CPU/req", "cpu_us_per_req", 7),
                              ("size", "body_bytes", 5)], ERRORS, width=8)


WS_COLUMNS = ["repeat", "scenario", "server", "connections", "message_bytes", "duration_s", "requests", "req_per_s",
              "p50_us", "p99_us", "errors", "bytes", "bytes_per_msg", "last_us", "missing", "cpu_ticks",
              "cpu_us_per_req", "cpu_pct", "bench_ticks", "foreign_pct", "contended", "idle_ok", "idle_open",
              "rss_before_kib", "rss_after_kib", "bytes_per_conn"]


class Ws(Scenario):
    name, suffix, title = "ws", "-ws", "WebSocket comparison"
    help = ("WebSocket with `celer bench`: example-ws-echo against tokio-tungstenite, fastwebsockets, Go "
            "gorilla/websocket and Node ws (fastwebsockets: echo only, no broadcast); echo, idle sockets, broadcast fan-out, permessage-deflate; "
            "and the floor (bench/peers/ws-floor: raw epoll, least user-space work; echo and fan-out only, never the best peer)")
    loadgen = CelerBench()
    reference = "celer"
    servers = {
        "celer": Celer("example-ws-echo", "example-ws-echo", "CELER_BIN",
                       lambda run, v, port: [*listen(port), "--workers", "1"], " (the framework, one worker)"),
        "tungst": WsRustPeer("peer-tungstenite-echo"),
        "fastws": WsRustPeer("peer-fastwebsockets-echo"),
        "gorilla": GoWs(),
        "nodews": NodeWs(),
        "nodews-nct": NodeWs(context_takeover=False),
        "floor": WsFloor(),
    }
    # The floor (docs/decisions/069) is measured beside the peers to state
    # the echo and fan-out targets against what the kernel alone costs; it
    # is never "the best peer".
    floor = "floor"
    # nodews-nct (Node ws answering server_no_context_takeover) runs the
    # permessage-deflate loads only: the context-takeover comparison.
    base = ("celer", "tungst", "fastws", "gorilla", "nodews")
    deflaters = ("celer", "nodews", "nodews-nct")
    cases = [Case("echo", "/echo", 256, servers=base + ("floor",)),
             Case("deflate", "/echo", 64, servers=base + ("nodews-nct",)),
             Case("fanout", "/broadcast", servers=("celer", "tungst", "gorilla", "nodews", "floor")),
             Case("idle", "/echo", idle=True, servers=base),
             Case("deflate-idle", "/echo", idle=True, servers=deflaters)]
    columns = WS_COLUMNS
    # The deflate loads' messages: 64 JSON documents of at most 4 KiB
    # (bench/messages/make-users.py), one per line, sent in turn.
    message_file = os.path.join(ROOT, "bench", "messages", "users-4k.jsonl")

    def options(self, p):
        p.add_argument("--idle-conns", type=int, default=10000, metavar="N",
                       help="idle WebSockets to hold (default 10000)")
        p.add_argument("--fanout-conns", type=int, default=9999, metavar="N",
                       help="fan-out receivers (default 9999: with the publisher's connection, 10,000 sockets, "
                            "Celer's default limit per route and per server)")
        p.add_argument("--rounds", type=int, default=10, metavar="K", help="fan-out messages per run (default 10)")
        p.add_argument("--deflate-conns", type=int, default=1000, metavar="N",
                       help="deflate-idle: WebSockets that each echo one JSON document with permessage-deflate, "
                            "then idle (default 1000)")

    def epilog(self):
        return ("loads: echo (64-byte messages, 256 connections), deflate (the JSON documents of "
                "bench/messages/users-4k.jsonl in turn, at most 4 KiB each, permessage-deflate offered, 64 "
                "connections), fanout (one 100-byte message to N receivers, K rounds), idle (N idle "
                "WebSockets, server RSS before and while idle, fresh server instance), deflate-idle (N WebSockets "
                "that each echoed one of those documents with permessage-deflate, then idle: what a used "
                "connection's compression state costs)")

    def install(self, run):
        exe = os.environ.get("CELER_CLI") or cargo_build(run, run.root, "celer-cli", "celer")
        if not exe:
            run.die("the celer CLI (celer bench) did not build")
        self.loadgen.exe = exe

    def prepare(self, run):
        for c in self.cases:
            if c.name == "fanout":
                c.conns = run.opts.fanout_conns
            if c.name == "idle":
                c.conns = run.opts.idle_conns

    def ready(self, run, case, key):
        req = (f"GET {case.path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").encode()
        try:
            with socket.create_connection(("127.0.0.1", run.ports[key]), timeout=2) as s:
                s.sendall(req)
                head = s.recv(4096).decode(errors="replace")
        except OSError as e:
            return str(e)
        return True if head.startswith("HTTP/1.1 101") else head.split("\r\n")[0]

    def check(self, run, keys, first_case):
        pass

    def bench(self, run, url, *args, timeout=180):
        return ["timeout", "-k", "5", str(timeout), "taskset", "-c", "1", self.loadgen.exe, "bench", url,
                *map(str, args), "--json", "-q"]

    def load_argv(self, run, case, key, duration):
        url = f"ws://127.0.0.1:{run.ports[key]}{case.path}"
        if case.name == "fanout":
            return self.bench(run, url, "--fanout", case.conns, "--rounds", 1 if duration == 1 else run.opts.rounds,
                              "--message-size", 100)
        if case.name == "deflate":
            what = ["--deflate", "--message-file", self.message_file]
        else:
            what = ["--message-size", 64]
        return self.bench(run, url, "-c", case.conns, "-d", f"{duration}s", *what, timeout=duration + 120)

    def mean_message(self):
        with open(self.message_file, "rb") as f:
            lines = [l.rstrip(b"\r") for l in f.read().split(b"\n") if l.rstrip(b"\r")]
        return round(sum(map(len, lines)) / len(lines))

    def row(self, run, case, label, r):
        bad = r["errors"] or r["missing"]
        run.flagged += bool(bad)
        size = {"echo": 64, "deflate": self.mean_message(), "fanout": 100}[case.name]
        per = r["bytes"] / r["requests"] if r["requests"] and r["requests"] > 0 and r["bytes"] == r["bytes"] else None
        return {"message_bytes": size, "bytes_per_msg": f"{per:.1f}" if per else ""}

    def log_line(self, rep, case, label, r):
        err = f"  errors {r['errors']}, missing {r['missing']}" if r["errors"] or r["missing"] else ""
        if case.name == "fanout":
            what = f"last arrival {r['last_us']:9.0f} us  deliveries {r['requests']}"
        else:
            what = f"{r['req_per_s']:9.0f} msg/s  p99 {r['p99_us']:6.0f} us  {r['bytes_per_msg'] or '-':>7} B/msg"
        return (f"repeat {rep} {case.name:<8} {label:<7} {what}  CPU {float(r['cpu_us_per_req']):6.2f} us/msg "
                f"({float(r['cpu_pct']):3.0f}%)  others {r['foreign_pct']}%{err}")

    def after(self, run, case, labels):
        want = run.opts.deflate_conns if case.name == "deflate-idle" else run.opts.idle_conns
        n = min(want, (run.nofile - 200) // 2)
        if n < want:
            run.log(f"open-file limit is {run.nofile}: holding {n} idle WebSockets instead of {want}")
        extra = ["--deflate", "--message-file", self.message_file] if case.name == "deflate-idle" else []
        for label in labels:
            run.wait_quiet()
            key = (label, "")
            run.start(key, self.cases[0])
            time.sleep(1)
            pid = run.pids[key].pid
            run.log(f"{case.name}: {label}, opening {n} WebSockets")
            argv = self.bench(run, f"ws://127.0.0.1:{run.ports[key]}{case.path}", "--hang", n, "--pid", pid,
                              "--pid-tree", "-d", "3s", *extra)
            out = subprocess.run(argv, capture_output=True, text=True)
            with open(f"{run.out}/{self.loadgen.log_name}", "a") as log:
                log.write(f"### {case.name}, {label}: {' '.join(argv)}\n{out.stdout}{out.stderr}\n")
            try:
                h = json.loads(out.stdout[out.stdout.index("{"):])["hang"]
            except (ValueError, KeyError):
                run.log(f"idle: {label}: celer bench gave no report: {out.stderr.strip()[-300:]}")
                run.stop(key)
                continue
            per = h.get("bytes_per_idle_connection")
            r = {"idle_ok": h["established"], "idle_open": h["alive_at_end"],
                 "rss_before_kib": (h.get("rss_before") or 0) // 1024, "rss_after_kib": (h.get("rss_during") or 0) // 1024,
                 "bytes_per_conn": f"{per:.0f}" if per is not None else ""}
            run.log(f"{case.name}: {label} established {r['idle_ok']}, alive at the end {r['idle_open']}, RSS "
                    f"{r['rss_before_kib']} -> {r['rss_after_kib']} KiB, {r['bytes_per_conn']} bytes/socket")
            run.add_row({"repeat": 1, "scenario": case.name, "server": label, "connections": n, "contended": 0,
                         "errors": sum(h["errors"].values()), **r})
            run.stop(key)

    def summary(self, rows):
        load = [r for r in rows if r["scenario"] not in ("idle", "deflate-idle")]
        idle = [r for r in rows if r["scenario"] == "idle"]
        used = [r for r in rows if r["scenario"] == "deflate-idle"]
        out = []
        cols = [("msg/s", "req_per_s", 9, 0), ("p99 us", "p99_us", 8, 0), ("CPU us/msg", "cpu_us_per_req", 10, 2),
                ("B/msg", "bytes_per_msg", 7, 0), ("last us", "last_us", 8, 0)]
        ratios = [("msg/s", "req_per_s", 15), ("CPU/msg", "cpu_us_per_req", 7), ("last", "last_us", 5)]
        err = ("err", 5, lambda rs: str(sum(int(float(r["errors"] or 0)) + int(float(r["missing"] or 0)) for r in rs)))
        if load:
            out.append(medians_table(load, PINNED.format("celer bench") + "; fanout: CPU per delivery, "
                                     "'last' = median over rounds of the time until the last receiver had "
                                     "the message.", cols, ratios, err, self.reference, width=8))
        for rs, title in ((idle, "Idle WebSockets (celer bench --hang, VmRSS of the server's processes):"),
                          (used, "WebSockets that each echoed one JSON document with permessage-deflate, then idle "
                                 "(celer bench --hang --deflate --message-file, VmRSS of the server's processes):")):
            if not rs:
                continue
            hdr = f"{'server':<10} {'sockets':>8} {'alive':>6} {'RSS before KiB':>14} {'RSS idle KiB':>12} {'B/socket':>8}"
            out += [title, "", hdr, "-" * len(hdr)]
            out += [f"{r['server']:<10} {r['idle_ok']:>8} {r['idle_open']:>6} {r['rss_before_kib']:>14} "
                    f"{r['rss_after_kib']:>12} {r['bytes_per_conn'] or '-':>8}" for r in rs]
            out.append("")
        out.append(self.targets(load, idle, used))
        return "\n".join(out)

    def targets(self, load, idle, used=()):
        """Issue 14's four targets, as ratios within this run."""
        med = lambda sc, sv, k: median([r for r in load if r["scenario"] == sc and r["server"] == sv], k)
        fl = self.floor
        peers = [s for s in dict.fromkeys(r["server"] for r in load + idle) if s not in ("celer", fl)]
        out = ["Targets (ratios within this run):"]
        cpu = {s: med("echo", s, "cpu_us_per_req") for s in ["celer", fl] + peers}
        cpu = {s: 1e6 / v for s, v in cpu.items() if v == v and v > 0}
        best = max((s for s in cpu if s in peers), key=cpu.get, default=None)
        if "celer" in cpu and best:
            out.append(f"- echo, messages per server CPU-second: celer {cpu['celer']:,.0f}, best peer {best} "
                       f"{cpu[best]:,.0f}: {cpu['celer'] / cpu[best]:.2f}x (target >= 1.2x)")
        if fl in cpu and best:
            x = cpu[fl] / cpu[best]
            line = (f"- echo against the floor: floor {cpu[fl]:,.0f} msg per server CPU-second = {x:.2f}x best peer "
                    f"{best}")
            if "celer" in cpu:
                line += f"; celer = {cpu['celer'] / cpu[fl]:.2f}x floor"
            out.append(line + f"; the target (>= 1.2x {best}) is {1.2 / x:.2f}x floor"
                       + (" (beyond the floor)" if x < 1.2 else ""))
        if idle:
            out.append("- idle, bytes of server RSS per socket (target <= 2048 for celer): "
                       + ", ".join(f"{r['server']} {r['bytes_per_conn'] or '-'}" for r in idle))
        last = {s: med("fanout", s, "last_us") for s in ["celer", fl] + peers}
        last = {s: v for s, v in last.items() if v == v and v > 0}
        best = min((s for s in last if s in peers), key=last.get, default=None)
        if "celer" in last and best:
            out.append(f"- fan-out, time until the last receiver: celer {last['celer']:,.0f} us, best peer {best} "
                       f"{last[best]:,.0f} us: {last['celer'] / last[best]:.2f}x (target <= 0.5x)")
        if fl in last and best:
            x = last[fl] / last[best]
            line = (f"- fan-out against the floor: floor's last arrival {last[fl]:,.0f} us = {x:.2f}x best peer "
                    f"{best}'s (target asks <= 0.5x)")
            if "celer" in last:
                line += f"; celer = {last['celer'] / last[fl]:.2f}x floor"
            out.append(line + f"; the target (<= 0.5x {best}) is {0.5 / x:.2f}x floor"
                       + (" (beyond the floor)" if x > 0.5 else ""))
        mem = {r["server"]: r["bytes_per_conn"] for r in used}
        for s in ["celer"] + peers:
            b, c = med("deflate", s, "bytes_per_msg"), med("deflate", s, "cpu_us_per_req")
            if b == b:
                line = (f"- deflate, JSON documents of up to 4 KiB (mean {self.mean_message():,} bytes): {s} {b:,.0f} "
                        f"bytes on the wire per echoed message, {c:.2f} us server CPU per message")
                if mem.get(s):
                    line += f", {float(mem[s]):,.0f} bytes of server RSS per used idle socket"
                out.append(line)
        return "\n".join(out) + "\n"

    def describe(self, run):
        o = run.opts
        return (f"Each run: {o.duration} s of `celer bench` (fan-out: {o.rounds} rounds to {o.fanout_conns} "
                f"receivers; idle: {o.idle_conns} sockets); {o.repeats} interleaved repeat(s); servers pinned to "
                "CPU 0 (`taskset -c 0`), one thread each, `celer bench` to CPU 1. Method: bench/README.md.")


SCENARIOS = [Compare(), Gzip(), H2(), Static(), Tls(), Ws()]
