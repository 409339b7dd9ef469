#!/usr/bin/env bash
# Measures create/get/list throughput and latency of a release build over 1 and 8 HTTPS
# connections (client certificate, HTTP/1.1 keep-alive), against a fresh sled store.
# Usage: hack/bench.sh [SECONDS_PER_PHASE]
#        SERVER=path/to/crd-apiserver hack/bench.sh   (another build of the server, to compare)
set -euo pipefail
ulimit -n 65536 2>/dev/null || true
cd "$(dirname "$0")/.."
seconds="${1:-5}"
cargo build --release --quiet --bin crd-apiserver --example load --example watchload
target=$(realpath "${CARGO_TARGET_DIR:-target}")
binary="${SERVER:-$target/release/crd-apiserver}"
work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
cp -r manifests "$work/"
source hack/lib/dev-server.sh
dev_server "$work" "$binary"
echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{print int($2/1048576)}') GiB; ${seconds}s per phase"
tls=(--port "$port" --ca "$work/certs/dev/serving-ca.crt" --cert "$work/certs/dev/admin.crt" --key "$work/certs/dev/admin.key")
for conns in 1 8; do
  "$target"/release/examples/load "${tls[@]}" --connections "$conns" --seconds "$seconds" --phases create,get
done
for objects in 2000 10000; do
  for conns in 1 8; do
    "$target"/release/examples/load "${tls[@]}" --connections "$conns" --seconds "$seconds" --phases list --list-objects "$objects"
    "$target"/release/examples/load "${tls[@]}" --connections "$conns" --seconds "$seconds" --phases list --list-objects "$objects" --table
  done
done
for watchers in 1 100 1000; do
  "$target"/release/examples/watchload "${tls[@]}" --watchers "$watchers" --writes 200
done
echo "server resident memory: $(ps -o rss= -p "$server" | awk '{print int($1/1024)}') MiB"
