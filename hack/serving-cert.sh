#!/usr/bin/env bash
# Without cert-manager: makes a CA and a serving certificate for
# crd-apiserver.crd-apiserver.svc under certs/cluster, writes the Secret the StatefulSet mounts
# and the APIServices with their caBundle filled in. Apply the two files it prints.
# Usage: hack/serving-cert.sh
set -euo pipefail
cd "$(dirname "$0")/.."
dir=certs/cluster
cargo run --release --quiet -- dev-pki --dir "$dir" >/dev/null
kubectl create secret tls crd-apiserver-serving --namespace crd-apiserver \
  --cert="$dir/serving.crt" --key="$dir/serving.key" --dry-run=client -o yaml >"$dir/serving-secret.yaml"
ca_bundle=$(base64 <"$dir/serving-ca.crt" | tr -d '\n')
sed "s|^  service:|  caBundle: ${ca_bundle}\n  service:|" manifests/40-apiservices.yaml >"$dir/apiservices.yaml"
echo "kubectl apply -f $dir/serving-secret.yaml -f $dir/apiservices.yaml"
