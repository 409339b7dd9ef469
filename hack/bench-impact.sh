#!/usr/bin/env bash
# Impact analysis throughput: N CronTabs of about 1 KiB in a sled store, analysed against the
# CronTab with one CEL rule added (examples/impact_bench.rs, release build); prints objects per
# second of wall time and per CPU-second, the peak resident memory and the load average. The
# peak memory grows with the store up to sled's page cache (256 MiB, the server's default), so
# the store of N objects and one of N/10 are also analysed with a 16 MiB cache: the scan's own
# memory does not grow with the number of objects (it reads them page by page).
# Usage: hack/bench-impact.sh [OBJECTS]   (default 200000)
set -euo pipefail
cd "$(dirname "$0")/.."
objects=${1:-200000}
cargo build --release --quiet --example impact_bench
target=$(realpath "${CARGO_TARGET_DIR:-target}")
work=$(mktemp -d "${TMPDIR:-/tmp}/impact-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
bench="$target/release/examples/impact_bench"
echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{print int($2/1048576)}') GiB; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
"$bench" fill "$work/small" $((objects / 10)) 37
echo "small store, 16 MiB sled cache (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
"$bench" bench "$work/small" 16
rm -rf "$work/small"
"$bench" fill "$work/data" "$objects" 37
for run in 1 2 3; do
  echo "run $run (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
  "$bench" bench "$work/data"
done
echo "16 MiB sled cache (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
"$bench" bench "$work/data" 16
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
