#!/usr/bin/env bash
# Throughput of two release builds of the server (e.g. before and after a change to the store's
# sync, or to instrumentation): requests per second over 1 and 8 HTTPS connections for each
# phase, each build on a fresh sled store in the same directory tree, alternating builds round
# by round so that machine noise falls on both alike.
# Usage: [PHASES=create,get] hack/bench-commit.sh BEFORE_BINARY AFTER_BINARY [ROUNDS] [SECONDS_PER_PHASE]
#        (PHASES defaults to create, the group-commit path)
set -euo pipefail
cd "$(dirname "$0")/.."
before=$(realpath "$1") after=$(realpath "$2") rounds="${3:-3}" seconds="${4:-5}" phases="${PHASES:-create}"
cargo build --release --quiet --example load
target=$(realpath "${CARGO_TARGET_DIR:-target}")
source hack/lib/dev-server.sh
echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{print int($2/1048576)}') GiB;" \
  "store on $(df -T "${TMPDIR:-/tmp}" | awk 'NR==2 {print $2}'); ${seconds}s per phase"
server=""
results=$(mktemp)
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -f "$results"' EXIT
for round in $(seq "$rounds"); do
  for build in before after; do
    binary=${!build}
    work=$(mktemp -d)
    cp -r manifests "$work/"
    unset port
    dev_server "$work" "$binary"
    tls=(--port "$port" --ca "$work/certs/dev/serving-ca.crt" --cert "$work/certs/dev/admin.crt" --key "$work/certs/dev/admin.key")
    for conns in 1 8; do
      lines=$("$target"/release/examples/load "${tls[@]}" --connections "$conns" --seconds "$seconds" --phases "$phases")
      while read -r line; do
        echo "round $round $build: $line"
        echo "$build $conns $(awk '{print $1}' <<<"$line") $(sed -n 's/.*rate= *\([0-9.]*\)\/s.*/\1/p' <<<"$line")" >>"$results"
      done <<<"$lines"
    done
    kill "$server"; wait "$server" 2>/dev/null || true; server=""
    rm -rf "$work"
  done
done
# Medians per phase, build and connection count, and after/before.
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for phase in ${phases//,/ }; do
  for conns in 1 8; do
    b=$(awk -v c="$conns" -v p="$phase" '$1 == "before" && $2 == c && $3 == p {print $4}' "$results" | median)
    a=$(awk -v c="$conns" -v p="$phase" '$1 == "after" && $2 == c && $3 == p {print $4}' "$results" | median)
    echo "$phase connections=$conns median requests/s: before $b, after $a, after/before $(echo "scale=3; $a / $b" | bc)"
  done
done
