#!/usr/bin/env bash
# The etcd backend beside etcd itself and beside sled, in one run on one machine: creates, gets
# and deletes (of the objects just created) over 1, 8 and 32 HTTPS connections, lists of 2,000
# objects, watch fan-out, against the release server on sled and on etcd (a fresh single-member
# etcd on loopback ports, fsync on, as deployed), once with every read going to etcd
# (--watch-cache=false) and once answered by the watch-fed cache, back to back; then etcd's own
# rate for the same operations (examples/etcd_load: conditional puts, gets, conditional deletes,
# 2,000-key ranges) at the same concurrency with values the size the server stores; then the
# cache's resident memory per object (examples/etcd_cache_memory). Each create, get and delete
# phase also prints the CPU time the server, etcd and the client spent per request (/proc): on a
# machine of few cores they share them, so that a rate follows from what each spends.
# With PIN=1, etcd runs on CPU 0 and everything else (the server, its clients, etcd's own
# client) on CPU 1: as deployed, where etcd has machines of its own, so that the rates compare
# what each path costs rather than how the server and etcd split two cores.
# Usage: hack/bench-etcd.sh [SECONDS_PER_PHASE]   (SERVERS="sled etcd-direct etcd" by default)
set -euo pipefail
ulimit -n 65536 2>/dev/null || true
cd "$(dirname "$0")/.."
seconds="${1:-5}"
command -v etcd >/dev/null || { echo "etcd is required (Debian: apt-get install etcd-server)" >&2; exit 1; }
cargo build --release --quiet --features etcd --bin crd-apiserver --example load --example watchload --example etcd_load --example etcd_cache_memory
target=$(realpath "${CARGO_TARGET_DIR:-target}")
binary="$target/release/crd-apiserver"
work=$(mktemp -d)
server="" etcd_pid=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; [ -n "$etcd_pid" ] && kill "$etcd_pid" 2>/dev/null; rm -rf "$work"' EXIT
source hack/lib/dev-server.sh
etcd_cpu=() rest_cpu=()
[ -z "${PIN:-}" ] || { etcd_cpu=(taskset -c 0); rest_cpu=(taskset -c 1); }
echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{print int($2/1048576)}') GiB; ${seconds}s per phase; $(etcd --version | head -1)${PIN:+; pinned: etcd on CPU 0, the rest on CPU 1}"

client_port=$((40000 + RANDOM % 10000)); peer_port=$((client_port + 1))
endpoint="http://127.0.0.1:$client_port"
"${etcd_cpu[@]}" etcd --data-dir "$work/etcd" --listen-client-urls "$endpoint" --advertise-client-urls "$endpoint" \
  --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-cluster "default=http://127.0.0.1:$peer_port" >"$work/etcd.log" 2>&1 &
etcd_pid=$!

run_server() { # sled | etcd-direct | etcd
  local dir="$work/$1"
  mkdir -p "$dir" && cp -r manifests "$dir/"
  unset port
  case "$1" in
    etcd-direct) dev_server "$dir" "${rest_cpu[@]}" "$binary" -- --storage-backend=etcd3 --etcd-servers="$endpoint" \
      --etcd-compaction-interval=0 --etcd-prefix=/bench-direct --watch-cache=false ;;
    etcd) dev_server "$dir" "${rest_cpu[@]}" "$binary" -- --storage-backend=etcd3 --etcd-servers="$endpoint" \
      --etcd-compaction-interval=0 --etcd-prefix=/bench-cached ;;
    *) dev_server "$dir" "${rest_cpu[@]}" "$binary" ;;
  esac
  tls=(--port "$port" --ca "$dir/certs/dev/serving-ca.crt" --cert "$dir/certs/dev/admin.crt" --key "$dir/certs/dev/admin.key")
  case "$1" in
    etcd-direct) echo "== crd-apiserver on etcd, --watch-cache=false (every read from etcd)" ;;
    etcd) echo "== crd-apiserver on etcd, reads from the watch-fed cache" ;;
    *) echo "== crd-apiserver on $1" ;;
  esac
  echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  for conns in 1 8 32; do
    "${rest_cpu[@]}" "$target"/release/examples/load "${tls[@]}" --connections "$conns" --seconds "$seconds" --phases create,get,delete \
      --cpu-of "server=$server,etcd=$etcd_pid"
  done
  for conns in 1 8; do
    "${rest_cpu[@]}" "$target"/release/examples/load "${tls[@]}" --connections "$conns" --seconds "$seconds" --phases list --list-objects 2000
  done
  for watchers in 1 100 1000; do
    "${rest_cpu[@]}" "$target"/release/examples/watchload "${tls[@]}" --watchers "$watchers" --writes 200
  done
  echo "server resident memory: $(ps -o rss= -p "$server" | awk '{print int($1/1024)}') MiB"
  kill "$server"; wait "$server" 2>/dev/null || true; server=""
}

for name in ${SERVERS:-sled etcd-direct etcd}; do
  run_server "$name"
done
echo "== etcd itself"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
sample=/bench-cached/
case " ${SERVERS:-etcd} " in *" etcd "*) ;; *) sample=/bench-direct/ ;; esac
for conns in 1 8 32; do
  "${rest_cpu[@]}" "$target"/release/examples/etcd_load --endpoint "$endpoint" --connections "$conns" --seconds "$seconds" \
    --sample-prefix "$sample" --cpu-of "etcd=$etcd_pid"
done
echo "== the cache's memory"
"$target"/release/examples/etcd_cache_memory --endpoint "$endpoint" --objects 20000 --value-bytes 1400
