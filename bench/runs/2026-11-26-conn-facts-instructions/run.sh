#!/usr/bin/env bash
set -uo pipefail
cd "$(git rev-parse --show-toplevel)"
"$PAUSE"
trap '"$RESUME"' EXIT
(cd examples && cargo build --release -q -p example-hello) || exit 1
cp target/release/example-hello /tmp/ci-bench/example-hello-branch
git checkout -q --detach b3ba434 || exit 1
(cd examples && cargo build --release -q -p example-hello); rc=$?
cp target/release/example-hello /tmp/ci-bench/example-hello-main
git checkout -q newcomer-rest
[ $rc = 0 ] || exit 1
echo "built $(date)"
for depth in 16 1; do
  for round in 1 2; do
    bench/instructions --depth $depth /tmp/ci-bench/example-hello-main /tmp/ci-bench/example-hello-branch
  done
done
echo "finished $(date)"
