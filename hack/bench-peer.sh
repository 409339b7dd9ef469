#!/usr/bin/env bash
# Issue 32's experiment: thousands of definitions served by crd-apiserver behind kube-apiserver,
# and what each side pays (hack/peer_experiment.py says what is measured).
#
#   hack/bench-peer.sh DEFINITIONS_DIR [BINARY]      with the real control plane: PEER_DIR (default
#       /work/peer) built and started by ../shared/kube-apiserver (kas_up); runs once per mode of
#       MODES (default "slices whole"): slices = one Service per group version (each APIService's
#       OpenAPI v2 download and /apis fetch get its group version's part), group-slices = one
#       Service per group (as the chart made them before), whole = one Service for all (the whole
#       documents per APIService: takes kube-apiserver to 8-16 GiB, never on a shared peer).
#       BINARY defaults to target/release/crd-apiserver.
#   hack/bench-peer.sh --double                       the same path, reduced, against the
#       control-plane double (CI runs it as the test tests/peer_experiment.rs).
#
# Never restarts the peer: it only creates Services and APIServices labelled
# crd-apiserver.io/bench=peer and deletes them at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --double ]; then
  cargo test --release --test peer_experiment -- --nocapture 2>&1 | grep '^BENCH' | sed 's/^BENCH //'
  exit
fi
definitions=$(realpath "${1:?usage: hack/bench-peer.sh DEFINITIONS_DIR [BINARY] | --double}")
binary=$(realpath "${2:-target/release/crd-apiserver}")
export PEER_DIR=${PEER_DIR:-/work/peer}
KAS_RUN=${KAS_RUN:-$(dirname "$(mktemp -u)")/kas-run}
kas_pid=$(cat "$KAS_RUN/kas.pid")
kubectl=${KC:-$(dirname "$(readlink -f "$(command -v kubectl)")")/kubectl.1.33}
"$kubectl" --kubeconfig "$PEER_DIR/kubeconfig-admin" get --raw /readyz >/dev/null
echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{print int($2/1048576)}') GiB; $(date -u +%FT%TZ)"
echo "crd-apiserver: $binary ($(git rev-parse --short HEAD)); kube-apiserver: $("$kubectl" --kubeconfig "$PEER_DIR/kubeconfig-admin" version -o json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])') pid $kas_pid"
echo "definitions: $definitions ($(find "$definitions" -type f | wc -l) files, $(du -sh "$definitions" | cut -f1))"
for mode in ${MODES:-slices whole}; do
  echo
  case $mode in
    slices) services=version ;;
    group-slices) services=group ;;
    whole) services=one ;;
    *) echo "unknown mode $mode (slices, group-slices, whole)" >&2; exit 2 ;;
  esac
  # HEAP_PROFILE=FILE: kube-apiserver's heap profile 60 s after the APIServices were created, to FILE.<mode>.
  # SERVER_FLAGS="--openapi-v2=empty ...": extra flags for crd-apiserver serve.
  server_flags=()
  for flag in ${SERVER_FLAGS:-}; do server_flags+=(--server-flag="$flag"); done
  python3 hack/peer_experiment.py --services "$services" --kas-pid "$kas_pid" --kubectl "$kubectl" \
    ${HEAP_PROFILE:+--heap-profile "$HEAP_PROFILE.$mode"} "${server_flags[@]}" "$definitions" "$binary"
done
