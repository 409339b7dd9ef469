#!/usr/bin/env bash
# Times two builds of the server side by side with the same clients (this tree's `load` and
# `watchload`), so that a regression shows as a ratio: list (2,000 and 10,000 CronTabs, one
# connection), get and create (one and eight connections), watch fan-out (100 watchers).
# Each round starts each build on a fresh sled store in turn (BASE, then NEW), ROUNDS times;
# the figures per build are medians over its rounds: p50 latency and the server's CPU time
# per request (utime + stime), each with its ratio NEW/BASE.
# Usage: hack/bench-compare.sh BASE_BINARY NEW_BINARY [SECONDS_PER_PHASE] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 BASE_BINARY NEW_BINARY [SECONDS] [ROUNDS]" >&2; exit 2; }
base=$(realpath "$1") new=$(realpath "$2") seconds="${3:-5}" rounds="${4:-3}"
ulimit -n 65536 2>/dev/null || true
cargo build --release --quiet --example load --example watchload
target=$(realpath "${CARGO_TARGET_DIR:-target}")
results=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$results"' EXIT
source hack/lib/dev-server.sh
echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{print int($2/1048576)}') GiB; ${seconds}s per phase, ${rounds} rounds; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "base: $base"
echo "new:  $new"

# One round of every phase against `binary`; lines "phase p50_ms rate" appended to FILE.
run_round() {
  local binary=$1 file=$2 work
  work=$(mktemp -d)
  cp -r manifests "$work/"
  port=""
  dev_server "$work" "$binary"
  local tls=(--port "$port" --ca "$work/certs/dev/serving-ca.crt" --cert "$work/certs/dev/admin.crt" --key "$work/certs/dev/admin.key")
  local cpu=(--cpu-of "server=$server")
  {
    for objects in 2000 10000; do
      "$target"/release/examples/load "${tls[@]}" "${cpu[@]}" --connections 1 --seconds "$seconds" --phases list --list-objects "$objects"
    done
    "$target"/release/examples/load "${tls[@]}" "${cpu[@]}" --connections 1 --seconds "$seconds" --phases create,get
    "$target"/release/examples/load "${tls[@]}" "${cpu[@]}" --connections 8 --seconds "$seconds" --phases create,get
    "$target"/release/examples/watchload "${tls[@]}" --watchers 100 --writes 200
  } | awk '
    /^fanout/ { for (i = 1; i <= NF; i++) if ($i ~ /^p50=/) { sub("p50=", "", $i); sub("ms", "", $i); print "fanout/100", $i, "-", "-" } next }
    { name = $1; p50 = ""; rate = ""; cpu = "-"
      for (i = 2; i <= NF; i++) {
        if ($i ~ /^conns=/) { c = $i; sub("conns=", "", c); name = name "/c" c }
        if ($i ~ /^rate=/) { r = $i; sub("rate=", "", r); if (r == "") r = $(i + 1); sub("/s", "", r); rate = r }
        if ($i ~ /^p50=/) { p = $i; sub("p50=", "", p); if (p == "") p = $(i + 1); sub("ms", "", p); p50 = p }
        if ($i ~ /^server=/) { u = $i; sub("server=", "", u); sub("us", "", u); cpu = u }
      }
      if (p50 != "") print name, p50, rate, cpu }' >> "$file"
  kill "$server"; wait "$server" 2>/dev/null || true; server=""
  rm -rf "$work"
}

for round in $(seq "$rounds"); do
  run_round "$base" "$results/base"
  run_round "$new" "$results/new"
  echo "round $round done; load $(cut -d' ' -f1-3 /proc/loadavg)"
done

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf '%-14s %12s %12s %8s %14s %14s %8s\n' phase "base p50 ms" "new p50 ms" new/base "base cpu/req" "new cpu/req" new/base
for phase in $(awk '{ print $1 }' "$results/base" | awk '!seen[$0]++'); do
  b=$(awk -v p="$phase" '$1 == p { print $2 }' "$results/base" | median)
  n=$(awk -v p="$phase" '$1 == p { print $2 }' "$results/new" | median)
  printf '%-14s %12.2f %12.2f %8.2f' "$phase" "$b" "$n" "$(echo "$n / $b" | bc -l)"
  if [ "$(awk -v p="$phase" '$1 == p { print $4; exit }' "$results/base")" = "-" ]; then
    echo
    continue
  fi
  b=$(awk -v p="$phase" '$1 == p { print $4 }' "$results/base" | median)
  n=$(awk -v p="$phase" '$1 == p { print $4 }' "$results/new" | median)
  printf ' %12.0fus %12.0fus %8.2f\n' "$b" "$n" "$(echo "$n / $b" | bc -l)"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
