#!/usr/bin/env bash
# Measures what admission costs on the write path, in a release build, in process: create
# throughput with no admission configuration (the path before admission, plus one index probe),
# with 10 and 100 webhook configurations that do not match, and with one matching
# ValidatingAdmissionPolicy; the admission step alone per write; and one rule as a policy against
# the same rule as x-kubernetes-validations.
# Usage: hack/bench-admission.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
echo "machine: $(nproc) cores"
cargo run --release --quiet --example admission_bench -- "${1:-3}"
