#!/usr/bin/env bash
# Writes a development PKI under certs/dev: a serving CA and certificate, a client CA with an
# admin certificate, and a separate front-proxy CA with its client certificate (the
# front-proxy CA must never be the client CA), plus a kubeconfig for https://127.0.0.1:PORT.
# Usage: hack/dev-pki.sh [PORT]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --quiet -- dev-pki --dir certs/dev --port "${1:-8443}"
