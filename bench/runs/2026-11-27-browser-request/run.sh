#!/usr/bin/env bash
# run.sh BIN OUT: instructions per request of /plaintext, /s/plaintext and
# /m/plaintext of examples/hello-secure, for two requests (the minimal one:
# Host and the session's Cookie; Chrome's navigation: its thirteen other
# fields too, bench/headers/chrome-navigation) over HTTP/1.1 pipelined ×16,
# keep-alive, HTTPS keep-alive, and HTTP/2 in the clear (h2c) and over TLS
# (h2), one stream at a time and 16 × 100.
# One line per count: REQUEST PROTOCOL PATH INSTRUCTIONS.
set -euo pipefail
cd "$(dirname "$0")/../../.."
BIN=$1; OUT=$2; : >"$OUT"
for shape in minimal chrome; do
  HF=(); [ "$shape" = chrome ] && HF=(--header-file bench/headers/chrome-navigation)
  for proto in "pipelined:--depth 16" "keep-alive:--depth 1" "https:--depth 1 --tls" \
               "h2c-1:--h2 --conns 1 --streams 1" "h2c-16x100:--h2" \
               "h2-1:--h2 --tls --conns 1 --streams 1" "h2-16x100:--h2 --tls"; do
    for p in /plaintext /s/plaintext /m/plaintext; do
      # shellcheck disable=SC2086 # the protocol's flags split on purpose
      r=$(bench/instructions ${proto#*:} "${HF[@]}" --header-from /bench/cookie --path "$p" "$BIN" | tail -1)
      echo "$shape ${proto%%:*} $p ${r##*=}" | tee -a "$OUT"
    done
  done
done
