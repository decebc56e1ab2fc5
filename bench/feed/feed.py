"""The `feed` scenario of bench/feed/run: `celer serve --feed` against the Go
seed's service (bench/peers/go-feed) and nginx serving the same file, over
HTTPS keep-alive, conditional (If-None-Match, answered 304) and full (a
50 KiB JSON document, gzip). It runs on bench/run's driver (pinning,
interleaving, medians, records), with this scenario added."""

import gzip
import json
import os
import subprocess

from celerbench.driver import Case
from celerbench.peers import Celer, Nginx, listen, sh, tool
from celerbench.scenarios import ERRORS, PINNED, WRK_COLUMNS, WRK_COLS, WRK_RATIOS, Scenario
from celerbench.driver import medians_table, median

# Where each server serves the document.
PATHS = {"celer": "/feeds/doc", "go": "/doc.json", "nginx": "/doc.json"}


def document():
    """A JSON document of about 50 KiB, shaped like election results."""
    rows = [{"district": f"district {i}", "candidate": f"candidate {i % 7}", "votes": (i * 7919) % 100000,
             "reported": i % 3 != 0} for i in range(560)]
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


class Feed(Scenario):
    name, suffix, title = "feed", "-feed", "Live feed"
    help = ("the live feed over HTTPS keep-alive: `celer serve --feed` against the Go seed's service and nginx "
            "serving the same file; conditional requests (304) and full ones (50 KiB JSON, gzip)")
    servers = {
        "celer": Celer("celer-cli", "celer", "CELER_BIN", lambda run, v, port: [
            "serve", "--feed", f"doc=file:{run.subst['ROOT']}/doc.json", *listen(port), "--workers", "1",
            "--tls-cert", run.cert, "--tls-key", run.key, "--no-tls-resumption"], cwd="."),
        "go": GoFeed(),
        "nginx": NginxFeed("nginx-feed.conf.in"),
    }
    cases = [Case("conditional", variant="https", scheme="https"),
             Case("full-gzip", variant="https", scheme="https", headers=("Accept-Encoding: gzip",))]
    columns = WRK_COLUMNS
    head_paths = ()

    def options(self, p):
        p.add_argument("--conns", type=int, default=10000, metavar="N",
                       help="wrk keep-alive connections (default 10000)")

    def epilog(self):
        return ("loads: conditional (If-None-Match with the server's current ETag: every answer a 304), "
                "full-gzip (Accept-Encoding: gzip, the 50 KiB document compressed)")

    def prepare(self, run):
        run.make_cert("ecdsa")
        root = f"{run.work}/feed"
        os.makedirs(root)
        doc = document().encode()
        with open(f"{root}/doc.json", "wb") as f:
            f.write(doc)
        with open(f"{root}/doc.json.gz", "wb") as f:
            f.write(gzip.compress(doc, 9))
        os.chmod(root, 0o755)
        for name in os.listdir(root):
            os.chmod(f"{root}/{name}", 0o644)
        run.subst["ROOT"] = root
        self.etags = {}
        for c in self.cases:
            c.conns = min(run.opts.conns, run.nofile - 200)

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
        url = f"https://127.0.0.1:{run.ports[key]}{PATHS[key[0]]}"
        headers = list(case.headers)
        if case.name == "conditional":
            headers.append(f"If-None-Match: {self.etags[key[0]]}")
        return self.loadgen.argv(url, case.conns, duration, headers)

    def summary(self, rows):
        out = medians_table(rows, PINNED.format("wrk") + ", HTTPS keep-alive (TLS 1.3, resumption off).",
                            WRK_COLS, WRK_RATIOS, ERRORS, self.reference)
        med = lambda sc, sv: median([r for r in rows if r["scenario"] == sc and r["server"] == sv],
                                    "cpu_us_per_req")
        out += "\nIssue 19's targets (server CPU per request, celer / peer):\n"
        for sc, peer, target in (("conditional", "go", 0.33), ("conditional", "nginx", 0.8),
                                 ("full-gzip", "go", 0.33)):
            c, p = med(sc, "celer"), med(sc, peer)
            if c == c and p == p and p > 0:
                verdict = "met" if c / p <= target else "NOT met"
                out += f"  {sc:<12} celer/{peer}: {c:.2f} / {p:.2f} us = {c / p:.2f}x (target <= {target}x: {verdict})\n"
        return out

    def describe(self, run):
        return (super().describe(run) + f" `wrk -t1 -c{self.cases[0].conns}` over HTTPS (TLS 1.3, ECDSA P-256), "
                "keep-alive; the document is a 50 KiB JSON file (gzip: about 6 KiB).")
