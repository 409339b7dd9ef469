#!/usr/bin/env bash
# The memory peak of each amplifying request shape of hack/attack.py (JSON patch copies, adds
# and moves, merge patches, apply configurations, YAML bodies, an HTTP/2 header flood), each
# sent to a fresh release server so that no shape inherits another's retained memory. Prints
# the case | expected | answer rows with the server's resident memory before and its peak.
# Usage: hack/patch-peaks.sh        SERVER=path/to/crd-apiserver to measure another build
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${SERVER:-}" ]; then
  cargo build --release --quiet --bin crd-apiserver
  SERVER="$(realpath "${CARGO_TARGET_DIR:-target}")/release/crd-apiserver"
fi
source hack/lib/dev-server.sh
work=""
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; [ -n "$work" ] && rm -rf "$work"' EXIT
echo "server: $SERVER"
echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{print int($2/1048576)}') GiB"
printf '%-34s | %-30s | %s\n' case expected answer
for shape in "40 doublings of an array" "40 doublings of an object" \
  "11 copies of 256 KiB" "10,000 adds" "10,000 moves" "merge patch, 1.5M numbers" "apply YAML, 1.5M numbers" "YAML create, 1.5M numbers" "1M empty objects" "150,000 labels" \
  "180,000 finalizers" "billion laughs" "4 MB indexed headers"; do
  work=$(mktemp -d)
  cp -r manifests "$work/"
  unset port
  dev_server "$work" "$SERVER" -- -v=3
  CASES="$shape" python3 hack/attack.py "$port" "$work/certs/dev" "$server" "$work/data" | { grep -v "^server resident" || true; }
  kill "$server"; wait "$server" 2>/dev/null || true; server=""
  rm -rf "$work"; work=""
done
