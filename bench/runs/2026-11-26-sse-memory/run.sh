#!/usr/bin/env bash
# The run behind docs/decisions/141: RSS per SSE subscriber of
# `celer serve --feed` at 10,000 subscribers, plain and TLS, before and
# after (runs interleaved, fresh server each, medians of 3), then the
# instructions per keep-alive and pipelined request of the same two
# binaries. BEFORE and AFTER are release builds of `celer` (see README.md).
set -uo pipefail
cd "$(git rev-parse --show-toplevel)"
BEFORE=${1:?before binary}
AFTER=${2:?after binary}
OUT=bench/runs/2026-11-26-sse-memory
ulimit -n "$(ulimit -Hn)"
${BENCH_PAUSE:-true}
trap '${BENCH_RESUME:-true}' EXIT
echo "started $(date -u)"
python3 bench/feed/sse_memory.py --celer "$BEFORE" --celer "$AFTER" --subscribers 10000 --repeats 3 \
    | tee "$OUT/sse_memory_plain.txt"
python3 bench/feed/sse_memory.py --celer "$BEFORE" --celer "$AFTER" --subscribers 10000 --repeats 3 --tls \
    | tee "$OUT/sse_memory_tls.txt"
# bench/instructions starts `BIN --listen ...`: a copy inserts `serve`
# (as bench/runs/2026-11-25-tls-fixes did). The hello case is a 13-byte
# file from --root, answered by the framework's files service.
ROOT=$(mktemp -d /tmp/sse-memory-root.XXXXXX)
printf 'Hello, World!' >"$ROOT/plaintext"
sed -e 's|"$bin" --listen|"$bin" serve --listen|; s|"$bin" --help 2>/dev/null|"$bin" serve --help 2>/dev/null|' \
    bench/instructions >"$ROOT/instructions-serve"
chmod +x "$ROOT/instructions-serve"
for round in 1 2; do
    for depth in 16 1; do
        "$ROOT/instructions-serve" --depth $depth --arg --root --arg "$ROOT" "$BEFORE" "$AFTER" \
            | tee -a "$OUT/instructions.txt"
    done
done
rm -rf "$ROOT"
echo "finished $(date -u)"
