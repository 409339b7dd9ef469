#!/usr/bin/env bash
# Measures server-side apply throughput and latency of a release build over 1 and 8 HTTPS
# connections (client certificate, HTTP/1.1 keep-alive), against a fresh sled store: applies
# that create CronTabs, applies that change a field, applies that change nothing, merge
# patches for comparison; then the field manager alone, in process.
# Usage: hack/bench-apply.sh [SECONDS_PER_PHASE]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-5}"
target="$(realpath -m "${CARGO_TARGET_DIR:-target}")"
cargo build --release --quiet --bin crd-apiserver --example apply_bench --example fieldmanager_bench
work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
cp -r manifests "$work/"
source hack/lib/dev-server.sh
dev_server "$work" "$target/release/crd-apiserver"
echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{print int($2/1048576)}') GiB; ${seconds}s per phase"
for conns in 1 8; do
  "$target/release/examples/apply_bench" --port "$port" --ca "$work/certs/dev/serving-ca.crt" \
    --cert "$work/certs/dev/admin.crt" --key "$work/certs/dev/admin.key" \
    --connections "$conns" --seconds "$seconds"
done
"$target/release/examples/fieldmanager_bench"
echo "server resident memory: $(ps -o rss= -p "$server" | awk '{print int($1/1024)}') MiB"
