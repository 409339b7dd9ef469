#!/usr/bin/env bash
# Runs crd-apiserver's coverage-guided fuzz targets (fuzz/, libFuzzer through cargo-fuzz) on
# the stable toolchain, each for a time budget. Corpora grow in fuzz/corpus/<target> and
# findings land in fuzz/artifacts/<target> (both git-ignored); a finding stops its target with
# the input to replay:  hack/fuzz.sh replay <target> <file>
#
# Usage: hack/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#   targets: write body read cel definition parsers patch http (all by default); 60 seconds by default.
set -euo pipefail
caller="$PWD"
cd "$(dirname "$0")/../fuzz"

if ! command -v cargo-fuzz >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi
# The fuzz crate has its own target directory, so its instrumented build never mixes with
# the main one.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
# Sanitizer "none": instrumentation for coverage only, which stable Rust supports.
fuzz=(cargo fuzz run --sanitizer none --release)
# Limits that make findings of what the server must never do: a hang (10 s per input), or an
# allocation driven by input past 2 GiB.
limits=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1)

if [[ "${1:-}" == "replay" ]]; then
  input="$3"
  [[ "$input" == /* ]] || input="$caller/$input"
  "${fuzz[@]}" "$2" "$input" -- "${limits[@]}"
  exit
fi

seconds="${1:-60}"
shift || true
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(write body read cel definition parsers patch http)
fi
for target in "${targets[@]}"; do
  echo "== fuzz $target for ${seconds}s"
  mkdir -p "corpus/$target"
  seeds=()
  if [[ -d "seeds/$target" ]]; then
    seeds=("seeds/$target")
  fi
  "${fuzz[@]}" "$target" "corpus/$target" "${seeds[@]}" -- -max_total_time="$seconds" "${limits[@]}"
done
