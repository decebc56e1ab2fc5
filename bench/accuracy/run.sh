#!/usr/bin/env bash
# Accuracy check of `celer bench` against wrk (issue 4).
#
# 1. Closed loop: the same nginx on loopback serving a small file, driven by
#    wrk and by `celer bench` with the same thread and connection counts,
#    interleaved (the order alternates), REPEATS times; prints each run, the
#    medians and the ratios celer/wrk for req/s (target 0.90-1.10, and >= 1.0
#    means the tool generates at least wrk's load from one core) and p50
#    (target 0.80-1.20).
# 2. Open loop: a server that stalls for 1 s (stall_server.py) driven with
#    --rate must show the stall in p99; the same run in closed loop, for
#    contrast, hides most of it (coordinated omission).
#
# nginx and the stall server are pinned to CPU 0 and the load generators to
# CPU 1 with taskset, as in bench/compare.
#
#   bench/accuracy/run.sh
#   DURATION=10 REPEATS=5 CONNS=100 bench/accuracy/run.sh
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
DURATION=${DURATION:-5}
REPEATS=${REPEATS:-3}
CONNS=${CONNS:-64}
PORT=18089
STALL_PORT=${STALL_PORT:-18090}
RATE=${RATE:-1000}
URL="http://127.0.0.1:$PORT/index.html"

die() { echo "run.sh: $*" >&2; exit 1; }

if ! command -v wrk >/dev/null || ! command -v nginx >/dev/null; then
    [ "$(id -u)" = 0 ] || die "wrk and nginx are needed: apt-get install wrk nginx"
    apt-get update -qq && apt-get install -y -qq wrk nginx >/dev/null
fi
if [ ! -x /usr/bin/time ]; then
    [ "$(id -u)" = 0 ] || die "/usr/bin/time is needed: apt-get install time"
    apt-get install -y -qq time >/dev/null
fi
command -v taskset >/dev/null || die "taskset not found (util-linux)"
command -v python3 >/dev/null || die "python3 not found"
# The interpreter itself, not a wrapper (pyenv shims fork), so that $! is
# the server's pid and killing it stops the server.
PYTHON=$(python3 -c 'import sys; print(sys.executable)')
[ "$(nproc)" -ge 2 ] || die "needs at least 2 CPUs"

(cd "$root" && cargo build --release -q -p celer-bench --example bench)
BENCH="$root/target/release/examples/bench"

tmp=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

wait_port() {
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    die "nothing listens on port $1"
}

mkdir -p "$tmp/www" "$tmp/tmp"
# nginx workers run as an unprivileged user: the files must be readable.
chmod 755 "$tmp" "$tmp/www"
head -c 612 /dev/zero | tr '\0' 'x' >"$tmp/www/index.html"
chmod 644 "$tmp/www/index.html"
taskset -c 0 nginx -p "$tmp/" -c "$here/nginx.conf" -e "$tmp/error.log" &
pids+=($!)
wait_port "$PORT"
status=$(taskset -c 1 "$BENCH" -q --json -n 1 "$URL" | python3 -c 'import json,sys; print(",".join(json.load(sys.stdin)["run"]["status"]))')
[ "$status" = 200 ] || die "nginx answers $status, not 200; see $tmp/error.log"

# wrk prints latencies as 45.00us, 1.23ms, 1.00s or 2.00m; this gives µs.
to_us() {
    awk -v v="$1" 'BEGIN {
        n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
        f = (u == "us") ? 1 : (u == "ms") ? 1e3 : (u == "s") ? 1e6 : (u == "m") ? 6e7 : 0
        printf "%.2f", n * f }'
}

# CPU share of one core the load generator used: (user + sys) / wall.
cpu_share() {
    awk -v d="$DURATION" '/^TIME/ { printf "%.0f%%", ($2 + $3) / d * 100 }' "$tmp/time"
}

run_wrk() {
    local out rps p50
    out=$(/usr/bin/time -o "$tmp/time" -f "TIME %U %S" \
        taskset -c 1 wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency "$URL")
    rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
    p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
    echo "$rps $(to_us "$p50") $(cpu_share)"
}

run_celer() {
    local out
    out=$(/usr/bin/time -o "$tmp/time" -f "TIME %U %S" \
        taskset -c 1 "$BENCH" -q --json -t1 -c"$CONNS" -d"${DURATION}s" "$URL" |
        python3 -c 'import json,sys; r=json.load(sys.stdin)["run"]; print("%.2f %.2f" % (r["requests_per_sec"], r["latency_us"]["p50"]))')
    echo "$out $(cpu_share)"
}

echo "nginx $(nginx -v 2>&1 | sed 's/.*\///'), $(wrk -v 2>&1 | head -1 | awk '{print $1, $2}'), celer bench $(cd "$root" && git rev-parse --short HEAD)"
echo "closed loop: -t1 -c$CONNS -d${DURATION}s $URL, nginx on CPU 0, load generator on CPU 1, $REPEATS repeats"
taskset -c 1 wrk -t1 -c"$CONNS" -d1s "$URL" >/dev/null # warm-up
printf '%-8s %-6s %14s %12s %10s\n' repeat tool req/s p50_us client_cpu
results="$tmp/results"
for rep in $(seq "$REPEATS"); do
    if [ $((rep % 2)) = 1 ]; then order="wrk celer"; else order="celer wrk"; fi
    for tool in $order; do
        read -r rps p50 cpu < <("run_$tool")
        printf '%-8s %-6s %14s %12s %10s\n' "$rep" "$tool" "$rps" "$p50" "$cpu"
        echo "$tool $rps $p50" >>"$results"
    done
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
med = {t: [statistics.median(float(r[i]) for r in rows if r[0] == t) for i in (1, 2)] for t in ("wrk", "celer")}
rps = med["celer"][0] / med["wrk"][0]
p50 = med["celer"][1] / med["wrk"][1]
print(f"median req/s: wrk {med['wrk'][0]:.0f}, celer {med['celer'][0]:.0f}, ratio {rps:.3f} (target 0.90-1.10)"
      f" {'ok' if 0.9 <= rps <= 1.1 else 'OUT OF RANGE'}")
print(f"median p50:   wrk {med['wrk'][1]:.1f}us, celer {med['celer'][1]:.1f}us, ratio {p50:.3f} (target 0.80-1.20)"
      f" {'ok' if 0.8 <= p50 <= 1.2 else 'OUT OF RANGE'}")
PY

# Open loop: the server stalls for 1 s, 2 s after the first request.
stall_run() {
    taskset -c 0 "$PYTHON" "$here/stall_server.py" "$STALL_PORT" 2 1 &
    local pid=$!
    wait_port "$STALL_PORT"
    taskset -c 1 "$BENCH" -q --json -t1 -c16 -d6s "$@" "http://127.0.0.1:$STALL_PORT/" |
        python3 -c 'import json,sys; r=json.load(sys.stdin)["run"]; l=r["latency_us"]; print("%.1f %.1f %d" % (l["p50"]/1e3, l["p99"]/1e3, r["responses"]))'
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
echo
echo "open loop: a server stalling 1 s in a 6 s run, 16 connections, CPU 0 / CPU 1"
# Command substitution waits for stall_run to stop its server.
out=$(stall_run --rate "$RATE")
read -r p50 p99 n <<<"$out"
verdict=$(awk -v p="$p99" 'BEGIN { print (p >= 500) ? "ok" : "MISSED" }')
echo "--rate $RATE: p50 ${p50}ms, p99 ${p99}ms over $n responses (the stall must show: p99 >= 500ms) $verdict"
out=$(stall_run)
read -r p50 p99 n <<<"$out"
echo "closed loop, for contrast: p50 ${p50}ms, p99 ${p99}ms over $n responses (coordinated omission hides the stall)"
