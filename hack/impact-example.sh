#!/usr/bin/env bash
# The README's impact example: 10,000 CronTabs (manifests/examples/crontabs.yaml) of which 37
# have 7 replicas, in a stopped server's sled store; then `crd-apiserver impact` of the CronTab
# with `maximum: 5` on replicas (hack/impact/crontabs-maximum-5.yaml), as a table and as JSON.
# Usage: hack/impact-example.sh [OBJECTS] [EXCEEDING]   (default 10000 37)
set -euo pipefail
cd "$(dirname "$0")/.."
objects=${1:-10000}
exceeding=${2:-37}
cargo build --quiet --bin crd-apiserver --example impact_bench
target=$(realpath "${CARGO_TARGET_DIR:-target}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$target/debug/examples/impact_bench" fill "$work/data" "$objects" "$exceeding"
set +e
(
  set -x
  "$target/debug/crd-apiserver" impact hack/impact/crontabs-maximum-5.yaml \
    --storage "$work/data" --definitions manifests/examples/crontabs.yaml -o wide
)
echo "exit code: $?"
"$target/debug/crd-apiserver" impact hack/impact/crontabs-maximum-5.yaml \
  --storage "$work/data" --definitions manifests/examples/crontabs.yaml -o json > "$work/report.json"
echo "exit code: $?; -o json: $(wc -c < "$work/report.json") bytes, failing in v1: $(python3 -c \
  'import json,sys; print(json.load(open(sys.argv[1]))["versions"][0]["failing"])' "$work/report.json")"
