#!/usr/bin/env bash
# How this run was measured: callgrind instructions per request of
# `celer serve --root` (a 13-byte file, one worker) with jemalloc's old
# settings and the new ones, on the same binary (the environment overrides
# the compiled-in `malloc_conf`), keep-alive (depth 1) and pipelined (depth
# 16); then short interleaved wrk runs, server on CPU 0 and wrk on CPU 1.
#
#   bench/runs/2026-11-25-harden-alloc/measure.sh target/release/celer
#   WRK_ONLY=1 ROUNDS=5 bench/runs/2026-11-25-harden-alloc/measure.sh target/release/celer
set -euo pipefail
BIN=${1:?celer binary}
OLD="background_thread:false,dirty_decay_ms:10000,muzzy_decay_ms:0"
NEW="background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0"
ROOT=$(mktemp -d /tmp/alloc-root.XXXXXX)
trap 'rm -rf "$ROOT"' EXIT
printf 'Hello, World!' > "$ROOT/hello.txt"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 200); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $1), timeout=1)" 2>/dev/null && return; sleep 0.1; done; }
client() { # port n depth
python3 - "$1" "$2" "$3" <<'PY'
import socket, sys
port, n, depth = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
s = socket.create_connection(("127.0.0.1", port), timeout=60)
req = b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\n\r\n" * depth
for _ in range(n // depth):
    s.sendall(req)
    buf, seen = b"", 0
    while seen < depth:
        chunk = s.recv(65536)
        if not chunk:
            sys.exit("closed")
        buf += chunk
        seen = buf.count(b"HTTP/1.1 200")
PY
}
total() { # conf n depth
    local out p vpid
    out=$(mktemp /tmp/callgrind.XXXXXX); p=$(port)
    _RJEM_MALLOC_CONF=$1 valgrind --tool=callgrind --callgrind-out-file="$out" "$BIN" serve --root "$ROOT" \
        --listen "tcp://127.0.0.1:$p" --workers 1 --log-level error >/dev/null 2>&1 &
    vpid=$!
    wait_port "$p"; client "$p" "$2" "$3"
    kill -TERM "$vpid"; wait "$vpid" 2>/dev/null || true
    callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/{gsub(",","",$1); print $1}'
    rm -f "$out"*
}
for depth in 1 16; do
    [ -n "${WRK_ONLY:-}" ] && break
    for name in old new; do
        conf=$OLD; [ $name = new ] && conf=$NEW
        small=$(total "$conf" 2000 "$depth"); large=$(total "$conf" 18000 "$depth")
        echo "callgrind $name depth=$depth instructions/request=$(( (large - small) / 16000 ))"
    done
done
if command -v wrk >/dev/null; then
    for round in $(seq "${ROUNDS:-3}"); do
        for name in old new; do
            conf=$OLD; [ $name = new ] && conf=$NEW
            p=$(port)
            _RJEM_MALLOC_CONF=$conf taskset -c 0 "$BIN" serve --root "$ROOT" --listen "tcp://127.0.0.1:$p" \
                --workers 1 --log-level error >/dev/null 2>&1 &
            spid=$!; wait_port "$p"
            ka=$(taskset -c 1 wrk -t1 -c32 -d5s "http://127.0.0.1:$p/hello.txt" | awk '/Requests\/sec/{print $2}')
            pl=$(taskset -c 1 wrk -t1 -c32 -d5s -s "$(dirname "$0")/../../pipeline.lua" "http://127.0.0.1:$p/hello.txt" -- 16 \
                | awk '/Requests\/sec/{print $2}')
            kill -TERM "$spid"; wait "$spid" 2>/dev/null || true
            echo "wrk round=$round $name keep-alive=$ka pipelined=$pl"
        done
    done
fi
