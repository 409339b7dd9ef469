#!/usr/bin/env bash
# Runs Kubernetes' own test tables (reference data kept outside the repository, by default in
# ../shared/conformance) through crd-apiserver's schema engine and prints pass rates.
# Usage: hack/conformance.sh [DIR] [-v]
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo run --quiet --example conformance -- "$@"
