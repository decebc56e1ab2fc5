#!/bin/bash
# split.sh SERVER LOAD RATE: one feed server pinned to CPU 0 (SERVER: celer,
# with CELER=PATH, or go, with GO=PATH to bench/peers/go-feed's binary),
# 10,000 HTTPS keep-alive connections polling with If-None-Match from CPU 1
# (LOAD: cb, `celer bench` closed loop when RATE is 0, else open loop at
# RATE req/s; h2, `h2load --h1` closed loop, RATE ignored). 12 s warm-up,
# then over 14 s: the server's user and system CPU per request, the
# voluntary context switches (sleeps) of server and client per 100
# requests, and the machine's TCP segments and delayed ACKs (nstat) per
# request. DIR holds doc.json, cert.pem and key.pem.
set -e
server=$1; load=$2; rate=$3; conns=10000; dur=20; warm=12
cd "${DIR:?DIR holds doc.json, cert.pem, key.pem}"
ulimit -n 65536 2>/dev/null || true
port=$((20000 + RANDOM % 10000))
if [ "$server" = go ]; then
  GOMAXPROCS=1 taskset -c 0 "${GO:?}" -listen 127.0.0.1:$port -cert cert.pem -key key.pem -file "$PWD/doc.json" >srv.log 2>&1 &
  path=/doc.json
else
  taskset -c 0 "${CELER:?}" serve --feed "doc=file:$PWD/doc.json" --listen "tcp://127.0.0.1:$port" --workers 1 \
    --tls-cert cert.pem --tls-key key.pem --no-tls-resumption --max-connections 14000 >srv.log 2>&1 &
  path=/feeds/doc
fi
spid=$!
sleep 1
url="https://127.0.0.1:$port$path"
etag=$(curl -sk -D - -o /dev/null "$url" | grep -i '^etag' | tr -d '\r' | cut -d' ' -f2-)
if [ "$load" = cb ]; then
  R=(); [ "$rate" != 0 ] && R=(-R "$rate")
  taskset -c 1 "${CELER:?}" bench "$url" -k -t 1 -c $conns -d ${dur}s --warmup ${warm}s --ramp 8s "${R[@]}" \
    -H "If-None-Match: $etag" -q --json > load.out 2>&1 &
else
  taskset -c 1 h2load --h1 -t 1 -c $conns -m 1 -D $dur --warm-up-time $warm -H "If-None-Match: $etag" "$url" > load.out 2>&1 &
fi
lpid=$!
cpu() { set -- $(sed 's/.*) //' /proc/$spid/stat); echo "${12} ${13}"; }
sleeps() { local n=0; for f in /proc/$1/task/*/status; do n=$((n + $(awk '/^voluntary_ctxt/{print $2}' "$f"))); done; echo $n; }
sleep $((warm + 3))
read -r u1 s1 < <(cpu); t1=$(date +%s.%N); sc1=$(sleeps $spid); lc1=$(sleeps $lpid)
nstat -n >/dev/null
sleep $((dur - 6))
read -r u2 s2 < <(cpu); t2=$(date +%s.%N); sc2=$(sleeps $spid); lc2=$(sleeps $lpid)
nstat > nstat.out || true
wait $lpid || true
kill $spid; wait $spid 2>/dev/null || true
if [ "$load" = h2 ]; then
  rate=$(grep -o "requests: [0-9]*" load.out | awk "{print \$2/$dur}")
elif [ "$rate" = 0 ]; then
  rate=$(grep -o '"requests_per_sec": *[0-9.]*' load.out | grep -o '[0-9.]*$')
fi
segs=$(awk '/^TcpOutSegs/{print $2}' nstat.out); dack=$(awk '/^TcpExtDelayedACKs /{print $2}' nstat.out)
python3 -c "
w = $t2 - $t1; n = $rate * w; tick = 1e6 / $(getconf CLK_TCK)
print('$server $load %.0f req/s: user %.2f sys %.2f total %.2f us/req; sleeps per 100 req: server %.2f client %.2f; '
      'TCP segments %.2f, delayed ACKs %.2f per request' % ($rate, ($u2 - $u1) * tick / n, ($s2 - $s1) * tick / n,
      ($u2 - $u1 + $s2 - $s1) * tick / n, ($sc2 - $sc1) * 100 / n, ($lc2 - $lc1) * 100 / n,
      ${segs:-0} / n, ${dack:-0} / n))"
