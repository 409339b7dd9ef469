#!/usr/bin/env bash
# Impact analysis throughput: N CronTabs of about 1 KiB in a sled store, analysed against the
# CronTab with one CEL rule added (examples/impact_bench.rs, release build); prints objects per
# second of wall time and per CPU-second, the peak resident memory and the load average.
# Usage: hack/bench-impact.sh [OBJECTS]   (default 200000)
set -euo pipefail
cd "$(dirname "$0")/.."
objects=${1:-200000}
cargo build --release --quiet --example impact_bench
target=$(realpath "${CARGO_TARGET_DIR:-target}")
work=$(mktemp -d "${TMPDIR:-/tmp}/impact-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{print int($2/1048576)}') GiB; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
"$target/release/examples/impact_bench" fill "$work/data" "$objects" 37
for run in 1 2 3; do
  echo "run $run (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
  "$target/release/examples/impact_bench" bench "$work/data"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
