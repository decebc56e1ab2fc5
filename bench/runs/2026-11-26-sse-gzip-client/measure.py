"""The load generator's CPU time per SSE delivery, gzip-coded vs uncompressed.

    cargo build --release -p celer-bench --examples
    python3 bench/runs/2026-11-26-sse-gzip-client/measure.py SUBSCRIBERS REPEATS [OUT.jsonl]

Each run: a fresh `sse_server` example (taskset -c 0) publishing bench/feed's
50 KiB document, `celer bench --sse SUBSCRIBERS -t 1` (the `bench` example,
taskset -c 1) with --rounds 4 and with --rounds 16, uncompressed and with
-H 'Accept-Encoding: gzip'; the client's CPU time (user + system, from
getrusage of the child) of the 16-round run minus the 4-round one, over the
deliveries between them, cancels the subscribing. Modes interleave, their
order reversed every other repeat. With NOCACHE_BENCH=<a build whose
segment cache always answers `Outcome::Continuous`> a third mode,
gzip-nocache, has every subscriber inflate its own copy.
"""
import json, os, resource, statistics, subprocess, sys, tempfile, time

root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path[:0] = [f"{root}/bench/feed", f"{root}/bench"]
import feed  # noqa: E402

subs, repeats = int(sys.argv[1]), int(sys.argv[2])
out_path = sys.argv[3] if len(sys.argv) > 3 else None
work = tempfile.mkdtemp(prefix="sse-gzip-")
doc = f"{work}/doc.json"
with open(doc, "w") as f:
    f.write(feed.document())
bench = os.environ.get("BENCH", f"{root}/target/release/examples/bench")
server = f"{root}/target/release/examples/sse_server"
modes = [("plain", bench, False), ("gzip", bench, True)]
if os.environ.get("NOCACHE_BENCH"):
    modes.append(("gzip-nocache", os.environ["NOCACHE_BENCH"], True))
ROUNDS = (4, 16)
rows, port = [], 19000
log = open(out_path, "w") if out_path else None
for rep in range(repeats):
    order = [(m, r) for m in modes for r in ROUNDS]
    if rep % 2:
        order.reverse()
    for (mode, exe, gzip), rounds in order:
        port += 1
        srv = subprocess.Popen(["taskset", "-c", "0", server, str(port), doc])
        time.sleep(0.3)
        argv = ["taskset", "-c", "1", exe, f"http://127.0.0.1:{port}/events", "--sse", str(subs), "--sse-file",
                doc, "--rounds", str(rounds), "-t", "1", "--ramp", "2s", "--timeout", "20s", "--json", "-q"]
        if gzip:
            argv += ["-H", "Accept-Encoding: gzip"]
        env = dict(os.environ, NOCACHE="1") if mode == "gzip-nocache" else os.environ
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(argv, capture_output=True, text=True, env=env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        srv.kill()
        srv.wait()
        try:
            j = json.loads(done.stdout)["sse"]
        except (ValueError, KeyError):
            print("no report:", done.stdout[-300:], done.stderr[-300:], flush=True)
            continue
        lat = j.get("latency_us") or {}
        r = {"repeat": rep, "mode": mode, "rounds": rounds, "subscribers": subs,
             "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
             "user_s": after.ru_utime - before.ru_utime, "deliveries": lat.get("count", 0),
             "ready": j["ready"], "p50_us": lat.get("p50"), "p99_us": lat.get("p99"), "missing": j["missing"],
             "lost": j["lost"], "errors": j["errors"], "gzip": j.get("gzip")}
        rows.append(r)
        print(json.dumps(r), flush=True)
        if log:
            log.write(json.dumps(r) + "\n")
print()
per = {}
for mode, _, _ in modes:
    vals = []
    for rep in range(repeats):
        got = {r["rounds"]: r for r in rows if r["repeat"] == rep and r["mode"] == mode}
        lo, hi = got.get(ROUNDS[0]), got.get(ROUNDS[1])
        if lo and hi and hi["deliveries"] > lo["deliveries"]:
            vals.append((hi["cpu_s"] - lo["cpu_s"]) / (hi["deliveries"] - lo["deliveries"]) * 1e6)
    per[mode] = statistics.median(vals) if vals else float("nan")
    print(f"{mode:<13} client CPU per delivery: {[round(v, 2) for v in vals]} us, median {per[mode]:.2f} us")
for mode in per:
    if mode != "plain":
        print(f"{mode} / plain = {per[mode]:.2f} / {per['plain']:.2f} us = {per[mode] / per['plain']:.2f}x")
subprocess.run(["rm", "-rf", work])
