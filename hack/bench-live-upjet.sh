#!/usr/bin/env bash
# Live changes among many real definitions: starts a release build on a copy of DIR (the
# upjet AWS provider's 2,065 CRDs by default) and measures (hack/live_upjet.py) how long after
# one definition file is replaced (a served version added, then taken away) the change is
# served, and its group's OpenAPI v2 slice has a new entity tag; and that the other groups'
# slices and discovery keep theirs.
# Usage: hack/bench-live-upjet.sh [DIR] [FILE] [ROUNDS]
#        (default: /work/data/upjet-aws-crds ec2.aws.upbound.io_vpcs.yaml 10)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-/work/data/upjet-aws-crds}
file=${2:-ec2.aws.upbound.io_vpcs.yaml}
rounds=${3:-10}
[ -n "${SKIP_BUILD:-}" ] || cargo build --release --quiet --bin crd-apiserver
binary=${BINARY:-$(realpath "${CARGO_TARGET_DIR:-target}")/release/crd-apiserver}
work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{print int($2/1048576)}') GiB, load average $(cut -d' ' -f1-3 /proc/loadavg)"
source hack/lib/dev-server.sh
mkdir -p "$work/run"
cp -r "$dir" "$work/run/definitions"
echo "$(ls "$work/run/definitions" | wc -l) definition files"
dev_server "$work/run" "$binary" -- --definitions definitions
echo "start-up to /readyz $(printf '%.2f' "$ready") s"
certs="$work/run/certs/dev"
python3 hack/live_upjet.py --port "$port" --cert "$certs/admin.crt" --key "$certs/admin.key" \
  --file "$work/run/definitions/$file" --rounds "$rounds"
echo "-- the server's own times (file event to swap):"
grep -o 'since_file_event=[^ ]*' "$work/run/log" | tr '\n' ' '; echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
