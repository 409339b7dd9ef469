#!/usr/bin/env bash
# The crash campaign (issue 11): kill -9 of the release server at a random moment under
# concurrent creates, updates and deletes, N rounds, every acknowledged write checked after
# each restart (hack/crash-campaign.py says how).
# Usage: hack/crash-campaign.sh [ROUNDS] [crash-campaign.py flags, e.g. --backend etcd --seed 7]
#        SERVER=path/to/crd-apiserver to use another build
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-100}"
[ $# -gt 0 ] && shift
if [ -z "${SERVER:-}" ]; then
  cargo build --release --quiet --features etcd --bin crd-apiserver
  SERVER="$(realpath "${CARGO_TARGET_DIR:-target}")/release/crd-apiserver"
fi
exec python3 hack/crash-campaign.py --server "$SERVER" --rounds "$rounds" "$@"
