#!/usr/bin/env bash
# Thousands of definitions, side by side (issue 32): starts each given release binary, one after
# the other, on the same definitions directory (each with a fresh store) and reports seconds to
# /readyz, resident memory at ready, the time and size of aggregated discovery, the whole
# /openapi/v2, the v3 index and 20 group-version documents (what `kubectl explain` reads), and
# resident memory after them. With --slices it also asks /openapi/v2 once per group as
# kube-aggregator's per-APIService download does with one Service per group (TLS server name
# `<name>-<suffix>.crd-apiserver.svc`, api::openapi::slices) and reports the total bytes and
# time: what the aggregator downloads and parses for every group once; a binary without slices
# answers each with the whole document.
# Usage: hack/bench-scale.sh [--slices] DEFINITIONS_DIR BINARY...
set -euo pipefail
cd "$(dirname "$0")/.."
slices=""
if [ "${1:-}" = --slices ]; then slices=1; shift; fi
definitions=$(realpath "$1")
shift
work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
source hack/lib/dev-server.sh
rss() { awk '/VmRSS/{print int($2/1024)}' "/proc/$1/status"; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
# CPU seconds (user + system) the process used so far: less at the mercy of the machine's load.
cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat"; }
echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{print int($2/1048576)}') GiB; $(date -u +%FT%TZ)"
echo "definitions: $definitions ($(find "$definitions" -type f | wc -l) files, $(du -sh "$definitions" | cut -f1))"

get() { # URL [ACCEPT]: "seconds bytes" of one GET
  curl -s -A crd-apiserver-bench --cacert "$certs/serving-ca.crt" --cert "$certs/admin.crt" --key "$certs/admin.key" \
    -H "Accept: ${2:-application/json}" -o /dev/null -w '%{time_total} %{size_download}\n' "$1"
}

for binary in "$@"; do
  run="$work/run" && rm -rf "$run" && mkdir -p "$run"
  port=""
  echo "== $binary"
  echo "load before: $(load)"
  dev_server "$run" "$binary" -- --definitions "$definitions"
  certs="$run/certs/dev"
  base="https://127.0.0.1:$port"
  printf 'ready                 %8.2f s\n' "$ready"
  echo "rss at ready          $(rss "$server") MiB, cpu $(cpu "$server") s"
  echo "discovery aggregated  $(get "$base/apis" 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList' | awk '{printf "%8.2f s %10d bytes", $1, $2}')"
  echo "openapi v2 (whole)    $(get "$base/openapi/v2" | awk '{printf "%8.2f s %10d bytes", $1, $2}')"
  echo "openapi v2 again      $(get "$base/openapi/v2" | awk '{printf "%8.2f s %10d bytes", $1, $2}')"
  index=$(curl -s -A crd-apiserver-bench --cacert "$certs/serving-ca.crt" --cert "$certs/admin.crt" --key "$certs/admin.key" "$base/openapi/v3")
  echo "openapi v3 index      $(get "$base/openapi/v3" | awk '{printf "%8.2f s %10d bytes", $1, $2}')"
  urls=$(echo "$index" | python3 -c 'import json,sys; p=json.load(sys.stdin)["paths"]; print("\n".join([v["serverRelativeURL"] for k,v in sorted(p.items()) if k.startswith("apis/")][:20]))')
  total=0
  for url in $urls; do
    total=$(echo "$total + $(get "$base$url" | cut -d' ' -f1)" | bc)
  done
  printf 'openapi v3 x20        %8.2f s\n' "$total"
  echo "rss after             $(rss "$server") MiB, cpu $(cpu "$server") s (discovery, v2, v3 index, 20 v3 documents)"
  if [ -n "$slices" ]; then
    groups=$(echo "$index" | python3 -c 'import json,sys; print("\n".join(sorted({k.split("/")[1] for k in json.load(sys.stdin)["paths"] if k.startswith("apis/")})))')
    started=$(date +%s.%N) count=0 bytes=0
    for group in $groups; do
      name="crd-apiserver-$(printf %s "$group" | sha256sum | cut -c1-10).crd-apiserver.svc"
      size=$(curl -s -A crd-apiserver-bench --cacert "$certs/serving-ca.crt" --cert "$certs/admin.crt" --key "$certs/admin.key" \
        -k --resolve "$name:$port:127.0.0.1" -o /dev/null -w '%{size_download}' "https://$name:$port/openapi/v2")
      count=$((count + 1)) bytes=$((bytes + size))
    done
    printf 'v2 per group          %8.2f s %10d bytes (%d downloads, one per group)\n' \
      "$(echo "$(date +%s.%N) - $started" | bc)" "$bytes" "$count"
    echo "rss after slices      $(rss "$server") MiB"
  fi
  echo "load after: $(load)"
  kill "$server"
  wait "$server" 2>/dev/null || true
  server=""
done
