#!/usr/bin/env bash
# Measures the per-request cost of front-proxy authentication (certificate chain check, CN
# check, identity headers), in release mode.
# Usage: hack/bench-auth.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release --lib auth::requestheader::tests::bench -- --ignored --nocapture 2>&1 | grep "per request"
