#!/usr/bin/env bash
# Runs Kubernetes' CEL test cases (../shared/conformance/cel_validation.json or
# cel_cost_and_compile.json, kept beside the repository, not in it) through the cel module and
# prints the pass rate.
# Usage: hack/cel-conformance.sh [path/to/cel_validation.json] [-v]
set -euo pipefail
cd "$(dirname "$0")/.."
cases="${1:-../shared/conformance/cel_validation.json}"
shift || true
cargo run --quiet --release --example cel_conformance -- "$cases" "$@"
