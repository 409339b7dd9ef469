#!/usr/bin/env bash
# Many definitions: generates N realistic CustomResourceDefinitions (examples/gen_definitions.rs:
# nested schemas with defaults, printer columns, status and scale, three CEL rules each, two
# versions), starts a release build on them, and measures start-up time to /readyz, resident
# memory, discovery and OpenAPI response times (median of 5 over one keep-alive connection;
# the first OpenAPI request builds the document) and the time of one create and one get; then
# the same steps in process, one by one (examples/definitions_bench.rs).
# Usage: hack/bench-definitions.sh [N...]        (default: 1000 5000)
set -euo pipefail
cd "$(dirname "$0")/.."
counts=("${@:-1000 5000}")
# shellcheck disable=SC2206
counts=(${counts[*]})
cargo build --release --quiet --bin crd-apiserver --example gen_definitions --example definitions_bench
target=$(realpath "${CARGO_TARGET_DIR:-target}")
work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{print int($2/1048576)}') GiB"

rss() { ps -o rss= -p "$1" | awk '{print int($1/1024)}'; }
source hack/lib/dev-server.sh

# Median time (ms) and size (bytes) of 5 GETs of URL with ACCEPT over one connection.
timed() {
  local url=$1 accept=${2:-application/json} args=()
  for _ in 1 2 3 4 5 6; do args+=(-o /dev/null "$url"); done
  curl -s -A crd-apiserver-bench --cacert "$certs/serving-ca.crt" --cert "$certs/admin.crt" --key "$certs/admin.key" \
    -H "Accept: $accept" -w '%{time_total} %{size_download}\n' "${args[@]}" |
    tail -n 5 | sort -n | sed -n 3p | awk '{printf "%8.2f ms %9d bytes", $1 * 1000, $2}'
}

for n in "${counts[@]}"; do
  rm -rf "$work/run" && mkdir -p "$work/run"
  "$target/release/examples/gen_definitions" "$work/run/definitions" "$n"
  port=""
  dev_server "$work/run" "$target/release/crd-apiserver" -- --definitions definitions
  certs="$work/run/certs/dev"
  base="https://127.0.0.1:$port"
  echo "== $n definitions ($(du -sk "$work/run/definitions" | cut -f1) KiB of manifests)"
  printf 'start-up to /readyz     %8.2f s\n' "$ready"
  echo "resident memory         $(rss "$server") MiB after start"
  echo "discovery /apis         $(timed "$base/apis")"
  echo "discovery aggregated    $(timed "$base/apis" 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList')"
  echo "discovery group version $(timed "$base/apis/g0.bench.example.com/v1")"
  echo "openapi v2              $(timed "$base/openapi/v2")"
  echo "openapi v3 index        $(timed "$base/openapi/v3")"
  echo "openapi v3 group        $(timed "$base/openapi/v3/apis/g0.bench.example.com/v1")"
  coll="$base/apis/g0.bench.example.com/v1/namespaces/default/widget0s"
  object='{"apiVersion":"g0.bench.example.com/v1","kind":"Widget0","metadata":{"name":"w"},"spec":{"image":"registry/app:1","replicas":2,"containers":[{"name":"main","image":"x"}]}}'
  create=$(curl -s -A crd-apiserver-bench --cacert "$certs/serving-ca.crt" --cert "$certs/admin.crt" --key "$certs/admin.key" \
    -H 'Content-Type: application/json' -o /dev/null -w '%{http_code} %{time_total}' -X POST "$coll" -d "$object")
  echo "one create              $(echo "$create" | awk '{printf "%8.2f ms (HTTP %s, with the TLS handshake)", $2 * 1000, $1}')"
  echo "one get                 $(timed "$coll/w")"
  echo "resident memory         $(rss "$server") MiB after discovery and OpenAPI"
  kill "$server"
  wait "$server" 2>/dev/null || true
  server=""
  echo "-- in process, step by step (examples/definitions_bench.rs):"
  "$target/release/examples/definitions_bench" "$work/run/definitions"
done
