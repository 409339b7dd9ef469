#!/usr/bin/env bash
# Instructions per write of the admission step with one matching ValidatingAdmissionPolicy
# against the same rule as x-kubernetes-validations (and the step with no configuration),
# counted by valgrind's callgrind over examples/admission_bench.rs's measured loops (release
# build, in process; deterministic, unlike timings on a shared machine).
# Usage: hack/callgrind-admission.sh [STEP...]
#   STEP: vap, schema, none, hooks10, hooks100 (10/100 non-matching webhook configurations), map;
#   default: vap schema none hooks10 hooks100
set -euo pipefail
cd "$(dirname "$0")/.."
target=$(realpath "${CARGO_TARGET_DIR:-target}")
cargo build --release --quiet --example admission_bench
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
probes=200000 # PROBES in the example
for step in "${@:-vap schema none hooks10 hooks100}"; do
  for s in $step; do
    if [ "$s" = schema ]; then toggle='admission_bench::schema_rule_loop'; else toggle='admission_bench::admission_step_loop'; fi
    valgrind --tool=callgrind --toggle-collect="$toggle" --callgrind-out-file="$work/$s.out" \
      "$target/release/examples/admission_bench" 0 "$s" >/dev/null 2>"$work/$s.log"
    total=$(callgrind_annotate "$work/$s.out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
    printf '%-8s %7d instructions per write\n' "$s" $((total / probes))
  done
done
