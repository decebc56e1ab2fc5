"""The `feed` scenario of bench/feed/run: `celer serve --feed` against the Go
seed's service (bench/peers/go-feed) and nginx serving the same file, over
HTTPS keep-alive, conditional (If-None-Match, answered 304) and full (a
50 KiB JSON document, gzip), at 10,000 connections with `celer bench`
(connections ramped during the warm-up, server CPU counted after it) and at
1,000 with wrk; and the SSE fan-out latency of `celer bench --sse` (the
bench rewrites the source file and times each subscriber's receipt of each
version); and the floor (bench/peers/ws-floor with --doc, --sse and --tls:
the least user-space work a poll or a fan-out can take) on the polling
loads, over HTTPS and plain HTTP, and on the SSE loads, for what the kernel
and TLS alone cost at 10,000 connections (decisions 132, 153). It runs on
bench/run's driver (pinning, interleaving, medians, records), with this
scenario added."""

import gzip
import json
import math
import os
import re
import subprocess
import time

from celerbench import proc
from celerbench.driver import Case, fmt
from celerbench.loadgen import Wrk
from celerbench.peers import Celer, Nginx, WsFloor, cargo_build, listen, sh, tool
from celerbench.scenarios import ERRORS, PINNED, WRK_COLUMNS, WRK_COLS, WRK_RATIOS, Scenario
from celerbench.driver import medians_table, median

# Where each server serves the document.
PATHS = {"celer": "/feeds/doc", "base": "/feeds/doc", "go": "/doc.json", "nginx": "/doc.json", "floor": "/doc.json"}


def document():
    """A JSON document of about 50 KiB, shaped like election results."""
    rows = [{"district": f"district {i}", "candidate": f"candidate {i % 7}", "votes": (i * 7919) % 100000,
             "reported": i % 3 != 0} for i in range(560)]
    return json.dumps({"election": "bench", "updated": "2026-11-26T00:00:00Z", "rows": rows}, indent=1)


def small_document():
    """The same shape in about 1 KiB: the SSE fan-out's own cost without
    10,000 copies of 50 KiB to encrypt and copy."""
    rows = [{"district": f"district {i}", "candidate": f"candidate {i % 7}", "votes": (i * 7919) % 100000,
             "reported": i % 3 != 0} for i in range(12)]
    return json.dumps({"election": "bench", "updated": "2026-11-26T00:00:00Z", "rows": rows}, indent=1)


class GoFeed:
    """bench/peers/go-feed: the seed's Go service (net/http, the document in
    memory, re-read every second, gzip made once per version)."""

    def prepare(self, run, _label):
        self.go = tool("go", "/usr/local/go/bin/go")
        if not self.go:
            run.die("go not found (install Go, or leave go out with --only)")
        self.path = os.path.join(run.work, "peer-go-feed")
        run.log("building the Go feed peer")
        return subprocess.run([self.go, "build", "-o", self.path, "."],
                              cwd=os.path.join(run.bench, "peers/go-feed")).returncode == 0

    def argv(self, run, variant, port, _dir):
        return [self.path, "-listen", f"127.0.0.1:{port}", "-cert", run.cert, "-key", run.key,
                "-file", os.path.join(run.subst["ROOT"], "doc.json")]

    def version(self, run):
        return f"{sh([self.go, 'version']).split()[2]} net/http (bench/peers/go-feed)"


class NginxFeed(Nginx):
    """nginx serving the file (ETag from mtime and length, gzip_static with
    a .gz made once), one worker, TLS; its template is in bench/feed/."""

    dir = "../feed"


class FeedFloor(WsFloor):
    """bench/peers/ws-floor as the feed's floor: one thread, raw epoll.
    `--doc`: each poll answered from one of three responses made at start
    (docs/decisions/132-polling-floor.md); `--sse` for both feeds: each
    change of the file read once, its event (and its gzip segment) built
    once and sent in a plain loop; `--tls` with the bench's certificate
    unless the variant is a -plain one, as celer
    (docs/decisions/153-feed-floors-sse-and-tls.md), and `--h2`: HTTP/2 by
    ALPN for the -h2 loads (the HTTP/1.1 clients offer only http/1.1;
    docs/decisions/172-http2-floor.md)."""

    def argv(self, run, variant, port, dir_):
        root = run.subst["ROOT"]
        return super().argv(run, variant, port, dir_) + [
            "--doc", f"{root}/doc.json", "--sse", f"doc={root}/doc.json", "--sse", f"small={root}/small.json",
            *([] if "-plain" in variant else ["--tls", run.cert, run.key, "--h2"]),
            *(["--own-records"] if run.opts.floor_own_records and "-plain" not in variant else [])]

    def version(self, run):
        lock = open(os.path.join(run.bench, self.DIR, "Cargo.lock")).read()
        v = dict(re.findall(r'name = "([^"]+)"\nversion = "([^"]+)"', lock))
        return (f"bench/{self.DIR} peer-ws-floor: libc {v.get('libc')}, rustls {v.get('rustls')} (TLS 1.3; "
                f"handshakes on aws-lc-rs {v.get('aws-lc-rs')}, records on ring {v.get('ring')}, AES-128-GCM), "
                f"flate2 {v.get('flate2')} on zlib-rs "
                f"{v.get('zlib-rs')} (one thread, edge-triggered epoll, inotify; --doc, --sse, --tls, --h2 with an HPACK "
                f"decoder of its own)")


NAN = float("nan")


def rt(run):
    """The prefix that runs a server or the load generator at SCHED_RR
    priority 1 with --realtime: on a machine shared with builds, ordinary
    processes get a sliver of each CPU and 10,000 handshakes time out."""
    return ["chrt", "-r", "1"] if run.opts.realtime else []


def celer_args(run, v, port):
    """`celer serve` with both feeds; TLS unless the variant is a -plain
    one (the polling loads' http-plain; the sse loads pass their name:
    sse-plain, sse-plain-gzip, ...)."""
    return ["serve", "--feed", f"doc=file:{run.subst['ROOT']}/doc.json",
            "--feed", f"small=file:{run.subst['ROOT']}/small.json", *listen(port), "--workers", "1",
            *([] if "-plain" in v else ["--tls-cert", run.cert, "--tls-key", run.key, "--no-tls-resumption"]),
            "--max-connections", str(run.opts.conns + 2000)]


class Realtime:
    """A server of the scenario, started under `rt`."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def argv(self, run, variant, port, dir_):
        return rt(run) + self.inner.argv(run, variant, port, dir_)


class FeedLoad:
    """The two load generators of this scenario: `celer bench` (JSON report)
    for the 10,000-connection loads, wrk for the 1,000-connection ones; the
    figures are read from whichever ran."""

    name = "load"
    log_name = "load.txt"
    exe = None
    wrk = Wrk()

    def parse(self, text):
        """wrk's figures, or celer bench's: requests and latency after the
        warm-up, connections set up and failed (warm-up included), and the
        server CPU celer bench read from /proc over the measured part; or
        h2load's, with the server CPU bench/feed/h2load-cpu read over
        h2load's measured part."""
        if "Requests/sec" in text:
            return {**self.wrk.parse(text), "tool": "wrk"}
        if '{"h2load"' in text:
            return self.parse_h2load(text)
        out = {"requests": NAN, "req_per_s": NAN, "p50_us": NAN, "p99_us": NAN, "errors": 0, "non2xx": 0,
               "setup_ok": 0, "setup_failed": 0, "server_cpu_us": NAN, "server_cores": NAN, "tool": "celer-bench"}
        try:
            run = json.loads(text[text.index("{"):])["run"]
        except (ValueError, KeyError):
            out["errors"] = 1
            return out
        server = run.get("server") or {}
        out.update(requests=run["responses"], req_per_s=run["requests_per_sec"],
                   p50_us=run["latency_us"]["p50"], p99_us=run["latency_us"]["p99"], errors=run["error_total"],
                   non2xx=sum(n for code, n in run["status"].items() if int(code) >= 400),
                   setup_ok=run["connections_set_up"], setup_failed=sum(run["setup_errors"].values()),
                   server_cpu_us=server.get("cpu_us_per_request") or NAN, server_cores=server.get("cores") or NAN)
        return out

    @staticmethod
    def parse_h2load(text):
        """bench/feed/h2load-cpu's report. A request h2load counts as failed,
        errored or timed out, or answered 4xx/5xx, is an error; so is an
        application protocol other than the one asked for (the -h2 loads
        must speak h2, the others http/1.1)."""
        j = json.loads(text[text.index('{"h2load"'):].splitlines()[0])["h2load"]
        proto = re.search(r"Application protocol: (\S+)", text)
        out = {"requests": j["requests"], "req_per_s": j["req_per_s"], "p50_us": NAN, "p99_us": NAN,
               "errors": j["failed"] + j["errored"] + j["timeout"], "non2xx": j["status"]["4xx"] + j["status"]["5xx"],
               "setup_ok": 0, "setup_failed": 0, "server_cpu_us": j["server_cpu_us"],
               "server_cores": j["server_cores"], "tool": "h2load", "proto": proto.group(1) if proto else "?"}
        return out

    def log_text(self, text):
        return text

    def version(self):
        v = subprocess.run([self.exe, "--version"], capture_output=True, text=True).stdout.strip()
        return f"celer bench ({v}) at 10,000 connections; {self.wrk.version()} at 1,000"


FEED_COLUMNS = WRK_COLUMNS + ["tool", "proto", "load_ticks", "cpu_us_per_req_run", "setup_ok", "setup_failed", "sse_ready",
                              "doc_bytes", "sse_p50_us", "sse_p99_us", "sse_max_us", "sse_last_us", "sse_missing",
                              "sse_lost", "bytes_per_sub", "sse_cpu_us", "sse_gzip", "sse_inflated"]

# The SSE loads, in report order; the -gzip ones ask for a gzip-coded stream
# (decision 148).
SSE_LOADS = ("sse", "sse-small", "sse-plain", "sse-small-plain",
             "sse-gzip", "sse-small-gzip", "sse-plain-gzip", "sse-small-plain-gzip")
GZIP = ("Accept-Encoding: gzip",)


class Feed(Scenario):
    name, suffix, title = "feed", "-feed", "Live feed"
    help = ("the live feed over HTTPS keep-alive: `celer serve --feed` against the Go seed's service and nginx "
            "serving the same file; conditional requests (304) and full ones (50 KiB JSON, gzip) at 10,000 "
            "connections (celer bench) and 1,000 (wrk); SSE fan-out latency and RSS per subscriber (celer)")
    servers = {
        "celer": Realtime(Celer("celer-cli", "celer", "CELER_BIN", celer_args, cwd=".")),
        "go": Realtime(GoFeed()),
        "nginx": Realtime(NginxFeed("nginx-feed.conf.in")),
        "floor": Realtime(FeedFloor()),
        # A second celer to compare a change against, in the same run: the
        # binary CELER_BASE_BIN names (the sse loads and the two celer-bench
        # polling loads).
        **({"base": Realtime(Celer("celer-cli", "celer", "CELER_BASE_BIN", celer_args, cwd="."))}
           if os.environ.get("CELER_BASE_BIN") else {}),
    }
    tls = ("celer", "go", "nginx")
    # The floor over TLS on the two celer-bench polling loads (decision 153),
    # and on every SSE load.
    tls_floor = tls + ("floor",)
    sse = ("celer", "base", "floor")
    cases = [Case("conditional", variant="https", scheme="https", servers=tls_floor + ("base",)),
             Case("full-gzip", variant="https", scheme="https", headers=("Accept-Encoding: gzip",),
                  servers=tls_floor + ("base",)),
             Case("conditional-wrk", variant="https", scheme="https", servers=tls),
             Case("full-gzip-wrk", variant="https", scheme="https", headers=("Accept-Encoding: gzip",),
                  servers=tls),
             # The same two polling loads with h2load (issue 19 names it beside
             # celer bench): over HTTP/1.1 (`h2load --h1`) and over HTTP/2, one
             # stream at a time per connection; server CPU counted over h2load's
             # measured part (bench/feed/h2load-cpu). The floor speaks both
             # (decision 172).
             Case("conditional-h2load", variant="https", scheme="https", servers=tls_floor + ("base",)),
             Case("full-gzip-h2load", variant="https", scheme="https", headers=("Accept-Encoding: gzip",),
                  servers=tls_floor + ("base",)),
             Case("conditional-h2", variant="https", scheme="https", servers=tls_floor + ("base",)),
             Case("full-gzip-h2", variant="https", scheme="https", headers=("Accept-Encoding: gzip",),
                  servers=tls_floor + ("base",)),
             # The seed's own load: each of the connections polling about
             # once a second (the feed's refresh interval), `celer bench -R`
             # open loop, so that no server is saturated (decision 163).
             Case("conditional-paced", variant="https", scheme="https", servers=tls_floor + ("base",)),
             Case("full-gzip-paced", variant="https", scheme="https", headers=("Accept-Encoding: gzip",),
                  servers=tls_floor + ("base",)),
             Case("conditional-plain", variant="http-plain", scheme="http", servers=("celer", "floor")),
             Case("full-gzip-plain", variant="http-plain", scheme="http", headers=("Accept-Encoding: gzip",),
                  servers=("celer", "floor")),
             Case("sse", variant="https", scheme="https", idle=True, servers=sse),
             Case("sse-small", variant="https", scheme="https", idle=True, servers=sse),
             Case("sse-plain", variant="http", scheme="http", idle=True, servers=sse),
             Case("sse-small-plain", variant="http", scheme="http", idle=True, servers=sse),
             Case("sse-gzip", variant="https", scheme="https", idle=True, headers=GZIP, servers=sse),
             Case("sse-small-gzip", variant="https", scheme="https", idle=True, headers=GZIP,
                  servers=sse),
             Case("sse-plain-gzip", variant="http", scheme="http", idle=True, headers=GZIP,
                  servers=sse),
             Case("sse-small-plain-gzip", variant="http", scheme="http", idle=True, headers=GZIP,
                  servers=sse)]
    columns = FEED_COLUMNS
    head_paths = ()
    loadgen = FeedLoad()

    def options(self, p):
        p.add_argument("--conns", type=int, default=10000, metavar="N",
                       help="celer bench keep-alive connections (default 10000)")
        p.add_argument("--ramp", type=int, default=8, metavar="SECS",
                       help="celer bench opens its connections evenly over this long, within the warm-up, and "
                            "each sends its first request when the ramp ends; keep it under the servers' limit "
                            "for a connection that sends nothing (celer's head timeout: 10 s) (default 8)")
        p.add_argument("--warmup", type=int, default=11, metavar="SECS",
                       help="celer bench's unmeasured warm-up, the ramp included; server CPU is counted after "
                            "it (default 11)")
        p.add_argument("--paced-rate", type=int, default=0, metavar="REQ/S",
                       help="the -paced loads' open-loop rate in total (default: one request per connection "
                            "per second)")
        p.add_argument("--wrk-conns", type=int, default=1000, metavar="N",
                       help="wrk keep-alive connections of the -wrk loads (default 1000)")
        p.add_argument("--subscribers", type=int, default=10000, metavar="N",
                       help="sse: subscribers (default 10000)")
        p.add_argument("--updates", type=int, default=10, metavar="K",
                       help="sse: updates of the source file per repeat (default 10)")
        p.add_argument("--floor-own-records", action="store_true",
                       help="the floor over TLS frames its records itself after the handshake (ring's AES-128-GCM "
                            "on the keys rustls hands over, sealed in place, one send), not through rustls's "
                            "buffered connection: the TLS floor with the least user-space work (decision 153)")
        p.add_argument("--realtime", action="store_true",
                       help="run the servers and the load generator at SCHED_RR priority 1 (chrt; root), for a "
                            "machine busy with other work: server CPU per request is CPU time either way, but "
                            "starved servers time out handshakes and starved clients measure their own waits")

    def epilog(self):
        return ("loads: conditional and full-gzip with `celer bench` at --conns connections (If-None-Match with "
                "the server's current ETag, every answer a 304; or Accept-Encoding: gzip, the 50 KiB document "
                "compressed), the connections opened over --ramp during --warmup and server CPU per request "
                "counted after it; conditional-wrk and full-gzip-wrk, the same with `wrk -t1` at --wrk-conns "
                "(server CPU over the whole run); conditional-h2load and full-gzip-h2load, the same two at --conns with "
                "`h2load --h1 -t1 -m1` (its --warm-up-time is --warmup; server CPU over its measured part, "
                "bench/feed/h2load-cpu), conditional-paced and full-gzip-paced, the celer bench loads open loop at "
                "--paced-rate (default: one request per connection per second), and conditional-h2 and full-gzip-h2 with `h2load -t1 -m1` over HTTP/2 "
                "(celer, Go, nginx and the floor, decision 172); the floor (bench/peers/ws-floor --doc --tls, decision 153) runs "
                "conditional and full-gzip beside celer, Go and nginx; sse (celer and the floor: the Go service and nginx have no event "
                "stream): `celer bench --sse` with --subscribers subscribers to /feeds/doc/events, the bench "
                "rewriting doc.json --updates times and timing each subscriber's receipt of each version from "
                "the write (p50, p99, max), the server's RSS per subscriber and CPU per delivery, a fresh "
                "server each repeat; sse-small, the same with a 1.4 KiB document (/feeds/small): the fan-out's "
                "own cost without 10,000 copies of 50 KiB to seal and send; sse-plain and sse-small-plain, "
                "the same two over plain HTTP (the server started without a certificate); the -gzip variants of "
                "the four ask for the stream gzip-coded (-H 'Accept-Encoding: gzip'; celer bench inflates each "
                "distinct segment once, decision 148; a server that sends it uncompressed is flagged)")

    def install(self, run):
        from celerbench.peers import apt_install
        if not tool("wrk"):
            apt_install(run, "wrk")
        if not tool("h2load") and any(c.name.endswith(("-h2load", "-h2")) for c in self.cases):
            apt_install(run, "nghttp2-client")
        exe = run.opts.celer_bin or os.environ.get("CELER_BIN") or cargo_build(run, run.root, "celer-cli", "celer")
        if not exe:
            run.die("the celer CLI (celer bench) did not build")
        self.loadgen.exe = exe

    def prepare(self, run):
        run.make_cert("ecdsa")
        root = f"{run.work}/feed"
        os.makedirs(root)
        doc = document().encode()
        with open(f"{root}/doc.json", "wb") as f:
            f.write(doc)
        with open(f"{root}/doc.json.gz", "wb") as f:
            f.write(gzip.compress(doc, 9))
        with open(f"{root}/small.json", "w") as f:
            f.write(small_document())
        os.chmod(root, 0o755)
        for name in os.listdir(root):
            os.chmod(f"{root}/{name}", 0o644)
        run.subst["ROOT"] = root
        self.etags = {}
        if run.opts.warmup < run.opts.ramp:
            run.die(f"--warmup ({run.opts.warmup}) must cover --ramp ({run.opts.ramp})")
        for c in self.cases:
            want = (run.opts.wrk_conns if c.name.endswith("-wrk") else
                    run.opts.subscribers if c.name.startswith("sse") else run.opts.conns)
            c.conns = min(want, run.nofile - 200)
            if c.conns < want:
                run.log(f"open-file limit is {run.nofile}: {c.name} with {c.conns} connections, not {want}")

    def ready(self, run, case, key):
        head = run.curl(case, key, "-D", "-", "-o", "/dev/null", path=PATHS[key[0]]).decode(errors="replace")
        if " 200" not in head.split("\r\n", 1)[0]:
            return head.split("\r\n", 1)[0] or "no answer"
        return True

    def check(self, run, keys, first_case):
        """Each server's current ETag of the uncompressed document, and its
        heads, recorded; the gzip answers must decode to the document."""
        with open(f"{run.out}/heads.txt", "a") as f:
            for k in keys:
                path = PATHS[k[0]]
                head = run.curl(first_case[k], k, "-D", "-", "-o", "/dev/null", path=path).decode(errors="replace")
                etag = next((line.split(":", 1)[1].strip() for line in head.split("\r\n")
                             if line.lower().startswith("etag:")), None)
                if not etag:
                    run.die(f"{k[0]} sent no ETag")
                self.etags[k[0]] = etag
                gz_head = run.curl(first_case[k], k, "-D", "-", "-o", "/dev/null", "-H", "Accept-Encoding: gzip",
                                   path=path).decode(errors="replace")
                body = run.curl(first_case[k], k, "--compressed", "-H", "Accept-Encoding: gzip", path=path)
                if body != document().encode():
                    run.die(f"{k[0]}: the gzip answer does not decode to the document")
                not_modified = run.curl(first_case[k], k, "-o", "/dev/null", "-w", "%{http_code}",
                                        "-H", f"If-None-Match: {etag}", path=path).decode()
                if not_modified != "304":
                    run.die(f"{k[0]}: If-None-Match with its own ETag answered {not_modified}, not 304")
                f.write(f"## {k[0]} GET {path}\n{head.replace(chr(13), '')}"
                        f"## {k[0]} GET {path} (Accept-Encoding: gzip)\n{gz_head.replace(chr(13), '')}")

    def curl_args(self, case):
        return ["-k"]

    def load_argv(self, run, case, key, duration):
        url = f"{case.scheme}://127.0.0.1:{run.ports[key]}{PATHS[key[0]]}"
        headers = list(case.headers)
        o = run.opts
        if case.name.startswith("conditional"):
            headers.append(f"If-None-Match: {self.etags[key[0]]}")
        if case.name.endswith("-wrk"):
            argv = self.loadgen.wrk.argv(url, case.conns, duration, headers)
            return argv[:3] + rt(run) + argv[3:]
        if case.name.endswith(("-h2load", "-h2")):
            # The driver's 1-second warm-up of each server: 1,000
            # connections, a 1-second warm-up of h2load's own.
            conns, warmup = (min(case.conns, o.wrk_conns), 1) if duration == 1 else (case.conns, o.warmup)
            argv = ["timeout", "-k", "5", str(duration + warmup + 120), "taskset", "-c", "1", *rt(run),
                    os.path.join(run.bench, "feed/h2load-cpu"), "--pid", str(run.pids[key].pid), "--",
                    "h2load", *(["--h1"] if case.name.endswith("-h2load") else []), "-t", "1", "-c", str(conns),
                    "-m", "1", "-D", str(duration), "--warm-up-time", str(warmup)]
            for h in headers:
                argv += ["-H", h]
            return argv + [url]
        # The driver's 1-second warm-up of each server: a short run at the
        # -wrk load's size, no ramp.
        conns, ramp, warmup = (min(case.conns, o.wrk_conns), 0, 0) if duration == 1 else (case.conns, o.ramp, o.warmup)
        argv = ["timeout", "-k", "5", str(duration + warmup + 120), "taskset", "-c", "1", *rt(run), self.loadgen.exe,
                "bench", url, "-k", "-t", "1", "-c", str(conns), "-d", f"{duration}s", "--warmup", f"{warmup}s",
                "--ramp", f"{ramp}s", "--pid", str(run.pids[key].pid), "--pid-tree", "--json", "-q"]
        if case.name.endswith("-paced"):
            argv += ["-R", str(o.paced_rate or conns)]
        for h in headers:
            argv += ["-H", h]
        return argv

    def row(self, run, case, label, r):
        """celer bench's server CPU per request (after the warm-up) is the
        figure; the driver's (over the whole invocation, handshakes and
        warm-up included) is kept as cpu_us_per_req_run."""
        bad = r.get("errors") or r.get("non2xx") or r.get("setup_failed")
        run.flagged += bool(bad)
        if r.get("tool") == "h2load":
            want = "h2" if case.name.endswith("-h2") else "http/1.1"
            if r.get("proto") != want:
                run.log(f"{label}: {case.name} spoke {r.get('proto')}, not {want}")
                run.flagged += 1
        if r.get("tool") not in ("celer-bench", "h2load"):
            return {}
        cores = r.get("server_cores", NAN)
        return {"cpu_us_per_req_run": r["cpu_us_per_req"], "cpu_us_per_req": f"{r['server_cpu_us']:.3f}",
                "cpu_pct": f"{cores * 100:.1f}", "duration_s": run.opts.duration}

    def log_line(self, rep, case, label, r):
        extra = ""
        if r.get("tool") == "h2load":
            extra = f"  {r.get('proto')}, whole-run CPU {float(r['cpu_us_per_req']):.2f} us/req"
        if r.get("tool") == "celer-bench":
            extra = f"  set up {r['setup_ok']}, failed {r['setup_failed']}, whole-run CPU {float(r['cpu_us_per_req_run']):.2f} us/req"
        return (f"repeat {rep} {case.name:<16} {label:<6} {r['req_per_s']:>9,.0f} req/s  CPU "
                f"{float(r['cpu_us_per_req']):6.2f} us/req  errors {r['errors']}  others {r['foreign_pct']}%{extra}")

    def after(self, run, case, labels):
        """sse: a fresh celer per repeat, `celer bench --sse` against it."""
        o = run.opts
        for rep in range(1, o.repeats + 1):
            # With a base build, the order rotates each repeat.
            for label in labels[(rep - 1) % len(labels):] + labels[:(rep - 1) % len(labels)]:
                key = (label, case.name)
                run.start(key, case if case.scheme == "http" else self.cases[0])
                time.sleep(1)
                pid = run.pids[key].pid
                feed = "small" if case.name.startswith("sse-small") else "doc"
                url = f"{case.scheme}://127.0.0.1:{run.ports[key]}/feeds/{feed}/events"
                argv = ["timeout", "-k", "5", str(o.ramp + 60 + 12 * o.updates), "taskset", "-c", "1", *rt(run),
                        self.loadgen.exe, "bench", url, "-k", "-t", "1", "--sse", str(case.conns), "--sse-file",
                        os.path.join(run.subst["ROOT"], f"{feed}.json"), "--rounds", str(o.updates), "--ramp",
                        f"{o.ramp}s", "--pid", str(pid), "--pid-tree", "--json", "-q",
                        *[a for h in case.headers for a in ("-H", h)]]
                run.wait_quiet()
                run.log(f"sse: repeat {rep}, {label}, {case.conns} subscribers, {o.updates} updates")
                f = f"{run.work}/sse.out"
                sticks, cticks, foreign = proc.measured_run(pid, f, argv)
                text = open(f, errors="replace").read()
                with open(f"{run.out}/{self.loadgen.log_name}", "a") as log:
                    log.write(f"### repeat {rep}, sse, {label}: {' '.join(argv)}\n{text}\n")
                run.stop(key)
                try:
                    j = json.loads(text[text.index("{"):])["sse"]
                except (ValueError, KeyError):
                    run.log(f"sse: {label}: celer bench gave no report: {text.strip()[-300:]}")
                    run.flagged += 1
                    continue
                lat = j.get("latency_us") or {}
                server = j.get("server") or {}
                gz = j.get("gzip") or {}
                r = {"repeat": rep, "scenario": case.name, "server": label, "connections": case.conns,
                     "tool": "celer-bench", "sse_ready": j["ready"], "doc_bytes": j["document_bytes"],
                     "sse_p50_us": lat.get("p50", ""), "sse_p99_us": lat.get("p99", ""),
                     "sse_max_us": lat.get("max", ""), "sse_last_us": j.get("median_last_us") or "",
                     "sse_missing": j["missing"], "sse_lost": sum(j["lost"].values()),
                     "errors": sum(j["errors"].values()),
                     "bytes_per_sub": f"{j['bytes_per_subscriber']:.0f}" if j.get("bytes_per_subscriber") is not None else "",
                     "sse_cpu_us": server.get("cpu_us_per_request") or "", "cpu_ticks": sticks, "load_ticks": cticks,
                     "foreign_pct": foreign, "contended": int(foreign > run.contended_pct),
                     "sse_gzip": gz.get("streams", 0), "sse_inflated": gz.get("inflated", "")}
                run.flagged += bool(r["errors"] or r["sse_missing"] or r["sse_lost"])
                if case.headers and not r["sse_gzip"]:
                    run.log(f"sse: {label}: {case.name} asked for gzip and got an uncompressed stream "
                            "(a server without gzip-coded event streams)")
                    run.flagged += 1
                run.add_row(r)
                run.log(f"sse: {label} ready {j['ready']}/{case.conns}, p50 {fmt(float(r['sse_p50_us'] or 'nan'))} us, "
                        f"p99 {fmt(float(r['sse_p99_us'] or 'nan'))} us, max {fmt(float(r['sse_max_us'] or 'nan'))} us, "
                        f"missing {j['missing']}, lost {r['sse_lost']}, {r['bytes_per_sub'] or '-'} B/subscriber")

    def summary(self, rows):
        out = ""
        for suffix, intro in (("", PINNED.format("celer bench") + ", HTTPS keep-alive (TLS 1.3, resumption off); "
                                   "connections opened during the warm-up, server CPU per request counted after it."),
                              ("-wrk", PINNED.format("wrk -t1") + ", HTTPS keep-alive (TLS 1.3, resumption off); "
                                       "server CPU over the whole run (connections' handshakes included)."),
                              ("-paced", PINNED.format("celer bench -t1 -R") + ", HTTPS keep-alive, open loop: "
                                         "each connection polls about once a second (the rate is the number of "
                                         "connections), so no server is saturated; server CPU after the warm-up."),
                              ("-h2load", PINNED.format("h2load --h1 -t1 -m1") + ", HTTPS keep-alive over HTTP/1.1 "
                                          "(TLS 1.3, resumption off); server CPU per request counted over h2load's "
                                          "measured part (bench/feed/h2load-cpu), after its warm-up."),
                              ("-h2", PINNED.format("h2load -t1 -m1") + ", HTTPS over HTTP/2 (one stream at a time "
                                      "per connection); server CPU as for h2load --h1."),
                              ("-plain", PINNED.format("celer bench") + ", plain HTTP keep-alive, celer and the floor "
                                         "(bench/peers/ws-floor --doc); as the first table otherwise.")):
            part = [r for r in rows if r["scenario"] in ("conditional" + suffix, "full-gzip" + suffix)]
            if part:
                conns = part[0]["connections"]
                out += medians_table(part, f"{conns} connections; " + intro, WRK_COLS, WRK_RATIOS, ERRORS,
                                     self.reference, width=15) + "\n"
        load = [r for r in rows if not r["scenario"].startswith("sse")]
        if load and any(r.get("setup_ok") for r in load):
            out += "Connections set up by celer bench (warm-up included) / failed, per run:\n"
            for r in load:
                if r.get("tool") == "celer-bench" or (not r.get("tool") and r.get("setup_ok")):
                    out += (f"  repeat {r['repeat']} {r['scenario']:<12} {r['server']:<6} {r['setup_ok']:>6} / "
                            f"{r['setup_failed'] or 0}\n")
            out += "\n"
        med = lambda sc, sv: median([r for r in rows if r["scenario"] == sc and r["server"] == sv], "cpu_us_per_req")
        out += "Issue 19's targets (server CPU per request, celer / peer):\n"
        for suffix in ("", "-wrk", "-paced", "-h2load", "-h2"):
            for sc, peer, target in (("conditional", "go", 0.33), ("conditional", "nginx", 0.8),
                                     ("full-gzip", "go", 0.33)):
                c, p = med(sc + suffix, "celer"), med(sc + suffix, peer)
                if c == c and p == p and p > 0:
                    verdict = "met" if c / p <= target else "NOT met"
                    out += (f"  {sc + suffix:<20} celer/{peer}: {c:.2f} / {p:.2f} us = {c / p:.2f}x "
                            f"(target <= {target}x: {verdict})\n")
        for sc in [s + suffix for suffix in ("", "-paced", "-h2load", "-h2") for s in ("conditional", "full-gzip")]:
            b, g, c = med(sc, "base"), med(sc, "go"), med(sc, "celer")
            if b == b and c == c and b > 0:
                out += (f"  {sc:<20} celer/base (CELER_BASE_BIN): {c:.2f} / {b:.2f} us = {c / b:.2f}x"
                        + (f"; base/go {b / g:.2f}x" if g == g and g > 0 else "") + "\n")
        floor_lines = ""
        for sc in [s + suffix for suffix in ("", "-paced", "-h2load", "-h2") for s in ("conditional", "full-gzip")]:
            f, g, c = med(sc, "floor"), med(sc, "go"), med(sc, "celer")
            if f == f and g == g and g > 0:
                floor_lines += (f"  {sc:<20} floor over HTTPS / Go over HTTPS: {f:.2f} / {g:.2f} us = {f / g:.2f}x "
                                f"({'below' if f / g <= 0.33 else 'ABOVE'} the 0.33x target)\n")
            if f == f and c == c and f > 0:
                floor_lines += f"  {sc:<20} celer/floor, both HTTPS: {c:.2f} / {f:.2f} us = {c / f:.2f}x\n"
        for sc in ("conditional", "full-gzip"):
            f, g, c = med(sc + "-plain", "floor"), med(sc, "go"), med(sc + "-plain", "celer")
            if f == f and g == g and g > 0:
                floor_lines += (f"  {sc:<16} floor over plain HTTP / Go over HTTPS: {f:.2f} / {g:.2f} us = {f / g:.2f}x "
                                f"({'below' if f / g <= 0.33 else 'ABOVE'} the 0.33x target)\n")
            if f == f and c == c and f > 0:
                floor_lines += f"  {sc + '-plain':<16} celer/floor, both plain HTTP: {c:.2f} / {f:.2f} us = {c / f:.2f}x\n"
        if floor_lines:
            out += ("The floor (decisions 132, 153, 172): the least user-space work a poll takes, over HTTPS (one "
                    "rustls connection per socket opening each request and sealing each answer; over HTTP/2 also "
                    "one HPACK decode per request, the answers encoded once without a dynamic table) and over "
                    "plain HTTP:\n" + floor_lines)
        p99s = {}
        who = {"celer": "", "base": " (base build, CELER_BASE_BIN)",
               "floor": " (the floor: bench/peers/ws-floor --sse, decision 153)"}
        for name, server in [(n, s) for n in SSE_LOADS for s in ("celer", "base", "floor")]:
            sse = [r for r in rows if r["scenario"] == name and r["server"] == server]
            if not sse:
                continue
            num = lambda r, k: float(r[k]) if r.get(k) not in (None, "") else NAN
            out += (f"\n{name}{who[server]}: SSE fan-out (celer bench --sse; the Go service and nginx have no event stream), "
                    "from the write of the source file to the receipt of the new version, over subscribers x "
                    "updates; a fresh server per repeat:\n\n")
            hdr = (f"{'repeat':>6} {'ready':>6} {'doc B':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} "
                   f"{'last ms':>8} {'missing':>7} {'lost':>5} {'B/sub':>7} {'CPU us/deliv':>12}")
            out += hdr + "\n" + "-" * len(hdr) + "\n"
            for r in sse:
                out += (f"{r['repeat']:>6} {r['sse_ready']:>6} {r['doc_bytes']:>7} {fmt(num(r, 'sse_p50_us') / 1e3, 1):>8} "
                        f"{fmt(num(r, 'sse_p99_us') / 1e3, 1):>8} {fmt(num(r, 'sse_max_us') / 1e3, 1):>8} "
                        f"{fmt(num(r, 'sse_last_us') / 1e3, 1):>8} {r['sse_missing']:>7} {r['sse_lost']:>5} "
                        f"{r['bytes_per_sub'] or '-':>7} {fmt(num(r, 'sse_cpu_us'), 2):>12}\n")
            p99 = median(sse, "sse_p99_us")
            p99s[name, server] = p99
            per = median(sse, "bytes_per_sub")
            out += (f"  median p99 {fmt(p99 / 1e3, 1)} ms (target <= 100 ms: {'met' if p99 <= 100e3 else 'NOT met'}); "
                    f"median RSS per subscriber {fmt(per)} B" + (" (a floor's, no target)\n" if server == "floor" else
                                                                 f" (target <= 4096 B: {'met' if per <= 4096 else 'NOT met'})\n"))
        for name in SSE_LOADS[:4]:
            if (name, "celer") in p99s and (name + "-gzip", "celer") in p99s:
                c, g = p99s[name, "celer"], p99s[name + "-gzip", "celer"]
                out += (f"\n{name}-gzip / {name}: median p99 gzip-coded / uncompressed = {g / 1e3:.1f} / "
                        f"{c / 1e3:.1f} ms = {g / c:.2f}x")
        for name in SSE_LOADS:
            if (name, "celer") in p99s and (name, "base") in p99s:
                c, b = p99s[name, "celer"], p99s[name, "base"]
                out += f"\n{name}: median p99 celer / base = {c / 1e3:.1f} / {b / 1e3:.1f} ms = {c / b:.2f}x"
        floors = [name for name in SSE_LOADS if (name, "floor") in p99s]
        if floors:
            out += ("\n\nThe SSE floor (decision 153): the least user-space work the fan-out takes (one event built "
                    "once, a plain send loop; over TLS sealed per subscriber), against issue 19's p99 <= 100 ms:\n")
            for name in floors:
                f = p99s[name, "floor"]
                out += (f"  {name:<20} floor median p99 {f / 1e3:.1f} ms "
                        f"({'within' if f <= 100e3 else 'OVER'} the 100 ms target)")
                if (name, "celer") in p99s and f > 0:
                    c = p99s[name, "celer"]
                    out += f"; celer/floor {c / 1e3:.1f} / {f / 1e3:.1f} ms = {c / f:.2f}x"
                out += "\n"
        return out

    def case(self, name):
        return next(c for c in self.cases if c.name == name)

    def describe(self, run):
        o = run.opts
        return (f"Each run: {o.duration} s measured; {o.repeats} interleaved repeat(s); servers pinned to CPU 0 "
                "(`taskset -c 0`; nginx master and worker both), the load generator to CPU 1. Method: "
                f"bench/README.md. conditional and full-gzip: `celer bench -t1 -c{self.case('conditional').conns}` over HTTPS "
                f"(TLS 1.3, ECDSA P-256), keep-alive (the -plain loads: the same over plain HTTP, celer and the floor), connections opened over {o.ramp} s within a {o.warmup} s "
                "warm-up (each sends its first request when the ramp ends), server CPU from /proc (`--pid --pid-tree`) after the warm-up; the -wrk loads: "
                f"`wrk -t1 -c{self.case('conditional-wrk').conns}`, server CPU over the whole run; the -h2load and -h2 loads: "
                f"`h2load -t1 -m1 -c{self.case('conditional-h2').conns}` (`--h1` for -h2load) with a {o.warmup} s "
                "warm-up (all connections opened at its start), server CPU over h2load's measured part. The document is a 50 KiB "
                f"JSON file (gzip: about 4.5 KiB). sse: {self.case('sse').conns} subscribers, {o.updates} updates "
                "per repeat, the bench writing the file (rename over it) with its CLOCK_REALTIME in a field.")
