#!/usr/bin/env bash
# Measures the per-request cost of front-proxy authentication (certificate chain check, CN
# check, identity headers) in a release build: checked every time, and as the server does it.
# Usage: hack/bench-auth.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
echo "machine: $(nproc) cores"
cargo run --release --quiet --example authbench -- "${1:-5000}"
