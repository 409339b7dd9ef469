#!/usr/bin/env bash
# Live definitions among many: generates N definitions (examples/gen_definitions.rs) plus the
# seed CronTab, starts a release build on them, and measures (examples/live_reload_bench.rs)
# how long after a definition file is replaced the change is served (a served version added
# or removed, seen by polling its collection every millisecond), alone and under a get load,
# and the get load's p50/p99 while idle and while a definition changes every half second.
# Usage: hack/bench-live-definitions.sh [N] [SECONDS]        (default: 1000 10)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000}
seconds=${2:-10}
cargo build --release --quiet --bin crd-apiserver --example gen_definitions --example live_reload_bench
target=$(realpath "${CARGO_TARGET_DIR:-target}")
work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{print int($2/1048576)}') GiB, load average $(cut -d' ' -f1-3 /proc/loadavg)"
source hack/lib/dev-server.sh

mkdir -p "$work/run"
"$target/release/examples/gen_definitions" "$work/run/definitions" "$n"
cp manifests/examples/crontabs.yaml "$work/run/definitions/"
dev_server "$work/run" "$target/release/crd-apiserver" -- --definitions definitions
certs="$work/run/certs/dev"
echo "== $((n + 1)) definitions served; start-up to /readyz $(printf '%.2f' "$ready") s"
"$target/release/examples/live_reload_bench" --port "$port" --ca "$certs/serving-ca.crt" \
  --cert "$certs/admin.crt" --key "$certs/admin.key" --file "$work/run/definitions/widget$((n / 2)).json" \
  --seconds "$seconds"
echo "-- the server's reload lines (file event to swap):"
grep -c "serving the changed definition" "$work/run/log" | sed 's/^/reloads logged: /'
