#!/usr/bin/env bash
# Benchmarks the full write-path validation (release build): objects/s for the
# documentation's CronTab and for a large schema. Usage: hack/bench-schema.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo run --quiet --release --example bench-schema -- "$@"
