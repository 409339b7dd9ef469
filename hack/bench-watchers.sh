#!/usr/bin/env bash
# Measures what watches that never read cost the server (issue 29): a release server on a
# fresh sled store holding 50 CronTabs of 20 KB (1 MB), then WATCHERS watches that never read,
# in three shapes, two rounds each (examples/watchmem.rs): from the initial state on HTTP/1.1
# (one TLS connection per watch), from now on HTTP/1.1, and from the initial state on HTTP/2
# (500 streams per connection, as client-go multiplexes). Prints the server's resident memory
# before, while the watches are open, after they are closed, and after 2,000 gets served then.
# The server runs with the image's allocator options (hack/lib/dev-server.sh).
# Usage: hack/bench-watchers.sh [WATCHERS]
#        SERVER=path/to/crd-apiserver hack/bench-watchers.sh   (another build of the server)
set -euo pipefail
cd "$(dirname "$0")/.."
watchers="${1:-10000}"
ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -gt $((watchers + 512)) ] || { echo "need an open-file limit above $((watchers + 512))" >&2; exit 1; }
cargo build --release --quiet --bin crd-apiserver --example watchmem
target=$(realpath "${CARGO_TARGET_DIR:-target}")
binary="${SERVER:-$target/release/crd-apiserver}"
work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
cp -r manifests "$work/"
source hack/lib/dev-server.sh
dev_server "$work" "$binary"
echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{print int($2/1048576)}') GiB; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "server: $binary; allocator: $(env | grep ^MIMALLOC_ | sort | tr "\n" " ")"
tls=(--port "$port" --ca "$work/certs/dev/serving-ca.crt" --cert "$work/certs/dev/admin.crt" --key "$work/certs/dev/admin.key")
for shape in "" "--from-now" "--http2"; do
  # shellcheck disable=SC2086
  "$target"/release/examples/watchmem "${tls[@]}" --server-pid "$server" --watchers "$watchers" $shape
done
echo "server resident memory at the end: $(ps -o rss= -p "$server" | awk '{print int($1/1024)}') MiB; load $(cut -d' ' -f1-3 /proc/loadavg)"
