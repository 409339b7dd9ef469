#!/usr/bin/env bash
# What recording a request's metrics costs per request, in process (release build): the
# steps the filters and the handler add to a get, against the same loop without them, on one
# thread and on two threads recording into one series. Throughput before/after on the wire:
# PHASES=create,get hack/bench-commit.sh BEFORE AFTER.
# Usage: hack/bench-metrics.sh [REQUESTS]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --example metrics_bench
target=$(realpath "${CARGO_TARGET_DIR:-target}")
echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{print int($2/1048576)}') GiB"
"$target"/release/examples/metrics_bench "$@"
