#!/usr/bin/env bash
# Many objects: loads N small CronTabs (default 1,000,000) into a fresh sled store with
# concurrent creates, then measures resident memory, restart time, a paginated list of all
# of them (limit=500), gets, and watches started from now (examples/objectbench.rs).
# Usage: hack/bench-objects.sh [N] [CONNECTIONS] [STORAGE_CACHE_MB]
set -euo pipefail
ulimit -n 65536 2>/dev/null || true
cd "$(dirname "$0")/.."
n="${1:-1000000}"
connections="${2:-64}"
cache_mb="${3:-256}"
cargo build --release --quiet --bin crd-apiserver --example objectbench
target=$(realpath "${CARGO_TARGET_DIR:-target}")
work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
cp -r manifests "$work/"
source hack/lib/dev-server.sh
start_server() { dev_server "$work" "$target/release/crd-apiserver" -- --storage-cache-mb "$cache_mb"; }
rss() { ps -o rss= -p "$server" | awk '{print int($1/1024)}'; }

echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{print int($2/1048576)}') GiB; $n objects, $connections connections, --storage-cache-mb $cache_mb"
start_server
tls=(--port "$port" --ca "$work/certs/dev/serving-ca.crt" --cert "$work/certs/dev/admin.crt" --key "$work/certs/dev/admin.key")
bench="$target/release/examples/objectbench"
"$bench" "${tls[@]}" load "$n" "$connections"
echo "resident memory after load: $(rss) MiB; store on disk: $(du -sm "$work/data" | cut -f1) MiB"
kill "$server"
wait "$server" 2>/dev/null || true
start_server
printf 'restart to /readyz: %.2f s\n' "$ready"
echo "resident memory after restart: $(rss) MiB"
"$bench" "${tls[@]}" list 500
echo "resident memory after the list: $(rss) MiB"
"$bench" "${tls[@]}" get 2000 "$n"
"$bench" "${tls[@]}" watch 20
echo "resident memory at the end: $(rss) MiB"
