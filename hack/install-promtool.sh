#!/usr/bin/env bash
# Installs promtool, Prometheus' own PromQL parser and rule-test runner, into .tools/bin: the
# dashboard's tests check every query with it. It comes from Debian's `prometheus` package,
# unpacked rather than installed, so that no Prometheus service is set up or started.
# Usage: hack/install-promtool.sh        (does nothing when .tools/bin/promtool already runs)
set -euo pipefail
cd "$(dirname "$0")/.."
tools=.tools
if "$tools/bin/promtool" --version >/dev/null 2>&1; then
  exit 0
fi
mkdir -p "$tools/bin" "$tools/cache/prometheus"
cd "$tools/cache/prometheus"
rm -f prometheus_*.deb
if ! apt-get download prometheus >/dev/null 2>&1; then
  # A fresh machine may have no package lists yet.
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  apt-get download prometheus >/dev/null
fi
rm -rf unpacked
dpkg-deb -x prometheus_*.deb unpacked
cd - >/dev/null
cp "$tools/cache/prometheus/unpacked/usr/bin/promtool" "$tools/bin/promtool"
rm -rf "$tools/cache/prometheus/unpacked"
"$tools/bin/promtool" --version | head -1
