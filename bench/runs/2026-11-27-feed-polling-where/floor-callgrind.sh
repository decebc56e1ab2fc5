#!/bin/bash
# floor-callgrind.sh FLOOR N 'If-None-Match: "..."': the floor (--own-records)
# under callgrind answering N keep-alive polls on one HTTPS connection, with
# bench/instructions' client (depth 1), the output in DIR/callgrind.floor.N.
# The floor takes its port as an argument, not --listen, so bench/instructions
# cannot start it itself. Run with N = 2000 and 18000, then
# `bench/callgrind-diff DIR/callgrind.floor.2000 DIR/callgrind.floor.18000 16000`.
floor=$1; n=$2; hdr=$3
dir=${DIR:-$(cd "$(dirname "$0")" && pwd)}
here=$(cd "$(dirname "$0")/../../.." && pwd)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.floor.$n" "$floor" "$port" --doc "$dir/doc.json" \
  --tls "$dir/cert.pem" "$dir/key.pem" --own-records >/dev/null 2>&1 &
v=$!
for _ in $(seq 100); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), timeout=1)" 2>/dev/null && break; sleep 0.2; done
sed -n '/^    python3 - "\$1"/,/^PY$/p' "$here/bench/instructions" | sed '1d;$d' > "$dir/client.py"
python3 "$dir/client.py" "$port" "$n" 1 /doc.json 1 "$hdr"$'\r\n'
kill -TERM "$v"; wait "$v"
