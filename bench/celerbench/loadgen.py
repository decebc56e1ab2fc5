"""The two load generators, wrk (HTTP/1.1) and h2load (HTTP/2): their
command lines, pinned to CPU 1, and the figures read from their output.
Missing figures are NaN (counts 0, strings empty)."""

import json
import re
import subprocess

NAN = float("nan")
_UNITS = {"us": 1.0, "ms": 1000.0, "s": 1_000_000.0, "m": 60_000_000.0}
_BYTES = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}


def _to_us(text):
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    return float(m.group(1)) * _UNITS[m.group(2)] if m else NAN


def _num(text):
    return int(text) if text.isdigit() else NAN


class Wrk:
    """`wrk -t1 --latency` on CPU 1; one output file per run."""

    name = "wrk"
    log_name = "wrk.txt"

    def argv(self, url, conns, duration, headers=(), lua=None, depth=1):
        a = ["taskset", "-c", "1", "wrk", "-t1", f"-c{conns}", f"-d{duration}s", "--latency"]
        for h in headers:
            a += ["-H", h]
        if lua:
            a += ["-s", lua]
        a.append(url)
        if depth > 1:
            a += ["--", str(depth)]
        return a

    def parse(self, text):
        """requests, req_per_s, p50_us, p99_us, errors, non2xx, and the bytes
        read over the seconds wrk ran (for MB/s)."""
        out = {"requests": NAN, "req_per_s": NAN, "p50_us": NAN, "p99_us": NAN,
               "errors": 0, "non2xx": 0, "bytes_read": NAN, "seconds": NAN}
        m = re.search(r"^\s*(\d+) requests in ([\d.]+)(\w+), ([\d.]+)(B|KB|MB|GB|TB) read", text, re.M)
        if m:
            out["requests"] = int(m.group(1))
            out["seconds"] = float(m.group(2)) * _UNITS.get(m.group(3), NAN) / 1e6
            out["bytes_read"] = float(m.group(4)) * _BYTES[m.group(5)]
        m = re.search(r"^Requests/sec:\s*([\d.]+)", text, re.M)
        if m:
            out["req_per_s"] = float(m.group(1))
        for key, pct in (("p50_us", "50"), ("p99_us", "99")):
            m = re.search(rf"^\s*{pct}%\s+(\S+)", text, re.M)
            # With pipelining wrk records one latency sample per batch and
            # can print 0 for its high percentiles: a missing figure.
            if m and _to_us(m.group(1)) != 0:
                out[key] = _to_us(m.group(1))
        m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
        if m:
            out["errors"] = sum(int(x) for x in m.groups())
        m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
        if m:
            out["non2xx"] = int(m.group(1))
        return out

    def log_text(self, text):
        return text

    def version(self):
        out = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout
        return "wrk: " + (out.split()[1] if len(out.split()) > 1 else "?")


class H2load:
    """`h2load -t1 -c C -m S -D SECS` on CPU 1, under a timeout so that a
    wedged server cannot hang the run."""

    name = "h2load"
    log_name = "h2load.txt"

    def argv(self, url, conns, duration, streams=100, tls=False):
        a = ["timeout", "-k", "5", str(duration + 60), "taskset", "-c", "1",
             "h2load", "-t", "1", "-c", str(conns), "-m", str(streams), "-D", str(duration)]
        if tls:
            a.append("--npn-list=h2")
        return a + [url]

    def parse(self, text):
        """h2load's summary: requests that succeeded, req/s, mean and max
        request time (us), the failed/errored/timeout counts, non-2xx
        responses, the application protocol and, over TLS, version and cipher."""
        out = {"requests": NAN, "req_per_s": NAN, "mean_us": NAN, "max_us": NAN, "failed": 0,
               "errored": 0, "timeout": 0, "non2xx": 0, "protocol": "", "tls": "", "cipher": ""}
        m = re.search(r"^finished in\s+[\d.]+\s*\w+,\s*([\d.]+)\s*req/s", text, re.M)
        if m:
            out["req_per_s"] = float(m.group(1))
        m = re.search(r"^requests:\s*(.*)$", text, re.M)
        if m:
            for n, what in re.findall(r"(\d+)\s+(succeeded|failed|errored|timeout)", m.group(1)):
                out["requests" if what == "succeeded" else what] = int(n)
        m = re.search(r"^status codes:\s*(\d+) 2xx,\s*(\d+) 3xx,\s*(\d+) 4xx,\s*(\d+) 5xx", text, re.M)
        if m:
            out["non2xx"] = sum(int(x) for x in m.groups()[1:])
        m = re.search(r"^time for request:\s+(\S+)\s+(\S+)\s+(\S+)", text, re.M)
        if m and out["requests"]:
            out["max_us"], out["mean_us"] = _to_us(m.group(2)), _to_us(m.group(3))
        for key, label in (("protocol", "Application protocol"), ("tls", "TLS Protocol"), ("cipher", "Cipher")):
            m = re.search(rf"^{label}:\s*(\S+)", text, re.M)
            out[key] = m.group(1) if m else ""
        return out

    def log_text(self, text):
        return "".join(line for line in text.splitlines(True)
                       if not line.startswith(("progress: ", "Process Request Failure")))

    def version(self):
        out = subprocess.run(["h2load", "--version"], capture_output=True, text=True).stdout
        ssl = subprocess.run(["openssl", "version"], capture_output=True, text=True).stdout.strip()
        return f"h2load: {out.split()[1] if len(out.split()) > 1 else '?'}, {ssl}"


class CelerBench:
    """`celer bench` in its WebSocket modes (echo, fan-out, idle) on CPU 1,
    under a timeout; its `--json` report is parsed. The scenario builds the
    binary and gives the command line."""

    name = "bench"
    log_name = "celer-bench.txt"
    exe = None

    def parse(self, text):
        """Echo: messages (`requests`), msg/s, p50/p99 round trip, errors and
        bytes read; fan-out: the median time until the last receiver had the
        message, and deliveries (`requests`, for CPU per delivery)."""
        out = {"requests": NAN, "req_per_s": NAN, "p50_us": NAN, "p99_us": NAN, "errors": 0, "bytes": NAN,
               "last_us": NAN, "missing": 0}
        try:
            j = json.loads(text[text.index("{"):])
        except ValueError:
            out["errors"] = 1
            return out
        run = j.get("run")
        if run:
            out.update(requests=run["responses"], req_per_s=run["requests_per_sec"], errors=run["error_total"],
                       bytes=run["bytes"], p50_us=run["latency_us"]["p50"], p99_us=run["latency_us"]["p99"])
        fan = j.get("fanout")
        if fan:
            last = fan.get("median_last_us")
            out.update(last_us=last if last is not None else NAN, missing=fan["missing"],
                       requests=fan["connected"] * fan["complete_rounds"],
                       errors=sum(fan["errors"].values()) + sum(fan["trigger_errors"].values()))
        return out

    def log_text(self, text):
        return text

    def version(self):
        v = subprocess.run([self.exe, "--version"], capture_output=True, text=True).stdout.strip()
        return f"celer bench (WebSocket modes): {v}"
