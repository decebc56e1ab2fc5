#!/bin/bash
# poll.sh celer|floor CELER FLOOR CONNS SECONDS strace|perf|plain [gzip]
# One server pinned to CPU 0 (`celer serve --feed` or the floor with
# --own-records, both HTTPS with the throwaway certificate in DIR), `celer
# bench` on CPU 1 with CONNS keep-alive connections polling the document
# (If-None-Match, or Accept-Encoding: gzip with `gzip`), 4 s of warm-up with a
# 3 s ramp; 5 s in, `strace -f -c` or `perf record -e cpu-clock -g` attaches to
# the server for 4 s. DIR (default: this script's directory) holds doc.json,
# cert.pem and key.pem; the bench's JSON report goes to DIR/bench.json.
ulimit -n 20000
which=$1; celer=$2; floor=$3; conns=$4; dur=$5; mode=$6; enc=${7:-}
dir=${DIR:-$(cd "$(dirname "$0")" && pwd)}
port=$((20000 + RANDOM % 10000))
cd "$dir"
if [ "$which" = celer ]; then
  taskset -c 0 "$celer" serve --feed "doc=file:$dir/doc.json" --listen "tcp://127.0.0.1:$port" --workers 1 \
    --tls-cert cert.pem --tls-key key.pem --no-tls-resumption --max-connections 14000 >srv.log 2>&1 &
  path=/feeds/doc
else
  taskset -c 0 "$floor" "$port" --doc "$dir/doc.json" --sse "doc=$dir/doc.json" --tls cert.pem key.pem --own-records >srv.log 2>&1 &
  path=/doc.json
fi
spid=$!
sleep 1
etag=$(curl -sk -D - -o /dev/null "https://127.0.0.1:$port$path" | grep -i '^etag' | tr -d '\r' | cut -d' ' -f2-)
if [ "$enc" = gzip ]; then hdr="Accept-Encoding: gzip"; else hdr="If-None-Match: $etag"; fi
taskset -c 1 "$celer" bench "https://127.0.0.1:$port$path" -k -t 1 -c "$conns" -d "${dur}s" --warmup 4s --ramp 3s \
  --pid "$spid" --pid-tree --json -q -H "$hdr" > bench.json 2>&1 &
bpid=$!
sleep 5
case $mode in
  strace) timeout -s INT 4 strace -f -c -p "$spid" -o "strace.$which.txt" ;;
  perf) perf record -e cpu-clock -g -p "$spid" -o "perf.$which.data" -- sleep 4 ;;
esac
wait "$bpid"
kill "$spid"; wait "$spid" 2>/dev/null
python3 -c "
import json; j=json.load(open('bench.json')); s=j['run']['server']
print('$which', $conns, round(j['run']['requests_per_sec']), 'req/s', round(s['cores'], 2), 'cores', round(s['cpu_us_per_request'], 2), 'us/req')"
