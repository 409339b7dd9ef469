#!/usr/bin/env bash
# What the same unread watches cost the real kube-apiserver (issue 29's reference figure): runs
# examples/watchmem (hack/bench-watchers.sh's client) against a kube-apiserver built and started
# by ../shared/kube-apiserver (kas_up; PEER_DIR, default /work/peer), over its own CronTab CRD
# (crontabs.stable.example.com with spec.image) in the namespace watchmem: 50 CronTabs of 20 KB,
# then WATCHERS watches on HTTP/1.1 from the initial state that never read, two rounds.
# Start it on a freshly started kube-apiserver: Go keeps the heap a previous run grew.
# HTTP/2 is not measured here: Go's server stops opening streams once unread streams hold the
# connection's flow-control window, so the client waits for streams that never open.
# Usage: hack/bench-watchers-peer.sh [WATCHERS]
set -euo pipefail
cd "$(dirname "$0")/.."
watchers="${1:-10000}"
export PEER_DIR=${PEER_DIR:-/work/peer}
KAS_RUN=${KAS_RUN:-$(dirname "$(mktemp -u)")/kas-run}
kas_pid=$(cat "$KAS_RUN/kas.pid")
kubectl=(kubectl --kubeconfig "$PEER_DIR/kubeconfig-admin")
ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -gt $((watchers + 512)) ] || { echo "need an open-file limit above $((watchers + 512))" >&2; exit 1; }
cargo build --release --quiet --example watchmem
target=$(realpath "${CARGO_TARGET_DIR:-target}")
"${kubectl[@]}" get crd crontabs.stable.example.com >/dev/null
"${kubectl[@]}" get namespace watchmem >/dev/null 2>&1 || "${kubectl[@]}" create namespace watchmem >/dev/null
echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{print int($2/1048576)}') GiB; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "server: kube-apiserver $("${kubectl[@]}" version -o json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])') pid $kas_pid"
"$target"/release/examples/watchmem --port 6443 --ca "$PEER_DIR/pki/ca.crt" --cert "$PEER_DIR/pki/admin.crt" \
  --key "$PEER_DIR/pki/admin.key" --server-pid "$kas_pid" --watchers "$watchers"
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
