#!/usr/bin/env bash
# Measures CEL validation throughput in a release build (objects per second).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --quiet --release --example cel_bench
