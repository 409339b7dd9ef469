#!/usr/bin/env bash
# Instructions per request, counted by valgrind's callgrind (deterministic, unlike timings on a
# shared machine): runs a release build under callgrind, then counts N creates, N gets and a
# few lists of 2,000 objects, then deletes N of the objects it created, each over one keep-alive
# connection (curl), TLS included.
# Usage: hack/callgrind-requests.sh [BINARY] [N]      (BINARY: a crd-apiserver release build)
# SERVE_FLAGS="--storage-backend=etcd3 --etcd-servers=..." measures another backend.
set -euo pipefail
cd "$(dirname "$0")/.."
target=$(realpath "${CARGO_TARGET_DIR:-target}")
binary="${1:-$target/release/crd-apiserver}"
n="${2:-200}"
[ -n "${1:-}" ] || cargo build --release --quiet --bin crd-apiserver
work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
cp -r manifests "$work/"
source hack/lib/dev-server.sh
port=$((20000 + RANDOM % 20000))
# shellcheck disable=SC2086 # SERVE_FLAGS is a list of flags
start() { dev_server "$work" "$@" "$binary" -- ${SERVE_FLAGS:-}; }
certs="$work/certs/dev"
client=(curl -s -A crd-apiserver-bench --cacert "$certs/serving-ca.crt" --cert "$certs/admin.crt" --key "$certs/admin.key")
coll="https://127.0.0.1:$port/apis/stable.example.com/v1/namespaces/bench/crontabs"
body() { echo "{\"apiVersion\":\"stable.example.com/v1\",\"kind\":\"CronTab\",\"metadata\":{\"name\":\"$1\",\"labels\":{\"app\":\"bench\"}},\"spec\":{\"cronSpec\":\"*/5 * * * *\",\"image\":\"registry.example.com/team/cron-runner:1.2.3\",\"replicas\":3}}"; }
creates() { # creates objects $1..$2 over one connection
  local args=()
  for i in $(seq "$1" "$2"); do
    [ "$i" = "$1" ] || args+=(--next "${client[@]:1}")
    args+=(-o /dev/null -H 'Content-Type: application/json' -X POST -d "$(body "c$i")" "$coll")
  done
  "${client[@]}" "${args[@]}"
}
# The objects the lists read, created before measuring.
start
creates 1 2000
kill "$server"; wait "$server" 2>/dev/null || true
start valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/callgrind.%p"
measure() { # measure NAME COUNT COMMAND...: instructions per request of COMMAND
  local name=$1 count=$2 after
  shift 2
  callgrind_control -z "$server" >/dev/null
  callgrind_control -i on "$server" >/dev/null
  "$@"
  callgrind_control -i off "$server" >/dev/null
  callgrind_control -d "$server" >/dev/null
  sleep 1
  after=$(callgrind_annotate "$(ls -t "$work"/callgrind.* | head -1)" 2>/dev/null |
    awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  printf '%-10s %9d instructions per request (%d requests)\n' "$name" $((after / count)) "$count"
}
gets=()
for i in $(seq 1 "$n"); do gets+=(-o /dev/null "$coll/c$((i % 2000 + 1))"); done
lists=()
for i in 1 2 3 4 5; do lists+=(-o /dev/null "$coll"); done
deletes=()
for i in $(seq 3001 $((3000 + n))); do deletes+=(-o /dev/null -X DELETE "$coll/c$i"); done
echo "binary: $binary (TLS handshake included once per measurement)"
# The first read of a resource loads its cache on etcd: not a request's cost.
"${client[@]}" -o /dev/null "$coll/c1"
measure create "$n" creates 3001 $((3000 + n))
measure get "$n" "${client[@]}" "${gets[@]}"
measure delete "$n" "${client[@]}" "${deletes[@]}"
measure list2000 5 "${client[@]}" "${lists[@]}"
