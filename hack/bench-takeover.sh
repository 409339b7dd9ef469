#!/usr/bin/env bash
# A takeover of N small objects (default 100,000) from the control-plane double into a release
# server (sled): how long writes were frozen and objects/s, as `crd-apiserver takeover`
# reports them. Release build of the server and of the test; appends to
# hack/results/bench-takeover.txt.
#   hack/bench-takeover.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
export TAKEOVER_OBJECTS="${1:-100000}"
out=hack/results/bench-takeover.txt
{
  echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(git rev-parse --short HEAD) objects=$TAKEOVER_OBJECTS nproc=$(nproc) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  cargo test --release --test takeover bench_takeover -- --exact --nocapture 2>&1 | grep '^BENCH' | sed 's/^BENCH //'
} | tee -a "$out"
