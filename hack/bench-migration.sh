#!/usr/bin/env bash
# Storage-version migration: N CronTabs stored in v1beta1 are rewritten into v1 by the built-in
# migrator (None conversion, no rate limit) on one worker thread while a writer updates random
# objects by compare-and-swap; prints objects/s and resident memory before, during and after,
# and checks that no user write was lost or overwritten (examples/migration_bench.rs).
# Usage: hack/bench-migration.sh [OBJECTS] [USER_WRITES_PER_SECOND] [SLED_CACHE_MIB]   (default 200000 500 256)
set -euo pipefail
cd "$(dirname "$0")/.."
objects=${1:-200000}
writes=${2:-500}
cache=${3:-256}
cargo build --release --quiet --example migration_bench
target=$(realpath "${CARGO_TARGET_DIR:-target}")
echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{print int($2/1048576)}') GiB"
"$target/release/examples/migration_bench" "$objects" "$writes" "${TMPDIR:-/tmp}" "$cache"
