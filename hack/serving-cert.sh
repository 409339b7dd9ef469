#!/usr/bin/env bash
# Without cert-manager: a CA (kept across runs, 5 years) and a serving certificate (one year) for
# crd-apiserver.NAMESPACE.svc under DIR, with openssl alone; then the Secret the StatefulSet
# mounts and the APIServices with their caBundle (written by the released binary's `manifests`
# when it is on PATH or given as $CRD_APISERVER, else by editing manifests/40-apiservices.yaml).
# Apply the two files it names.
#
# Rotation: run it again before the certificate expires (see its end date with
# `openssl x509 -enddate -noout -in DIR/serving.crt`) and apply the Secret. The CA is the same,
# so the APIServices need no change, and the server picks up the new certificate within a
# minute without a restart.
#
# Usage: hack/serving-cert.sh [NAMESPACE] [DIR]   (defaults: crd-apiserver, certs/cluster)
set -euo pipefail
cd "$(dirname "$0")/.."
namespace=${1:-crd-apiserver}
dir=${2:-certs/cluster}
host="crd-apiserver.${namespace}.svc"
mkdir -p "$dir"
umask 077

if [[ ! -s "$dir/ca.key" || ! -s "$dir/ca.crt" ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1826 \
    -subj "/CN=crd-apiserver-serving-ca" -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -subj "/CN=${host}" -keyout "$work/serving.key" -out "$work/serving.csr" 2>/dev/null
cat >"$work/ext.cnf" <<EOF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:${host},DNS:${host}.cluster.local,DNS:crd-apiserver.${namespace},DNS:crd-apiserver
EOF
openssl x509 -req -in "$work/serving.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
  -days 365 -extfile "$work/ext.cnf" -out "$work/serving.crt" 2>/dev/null
mv "$work/serving.key" "$dir/serving.key"
mv "$work/serving.crt" "$dir/serving.crt"
rm -f "$dir/ca.srl"

b64() { base64 <"$1" | tr -d '\n'; }
cat >"$dir/serving-secret.yaml" <<EOF
apiVersion: v1
kind: Secret
type: kubernetes.io/tls
metadata:
  name: crd-apiserver-serving
  namespace: ${namespace}
data:
  tls.crt: $(b64 "$dir/serving.crt")
  tls.key: $(b64 "$dir/serving.key")
  ca.crt: $(b64 "$dir/ca.crt")
EOF

binary=${CRD_APISERVER:-$(command -v crd-apiserver || true)}
if [[ -n "$binary" ]]; then
  "$binary" manifests --definitions manifests/examples --namespace "$namespace" --ca-bundle "$dir/ca.crt" \
    | awk 'BEGIN { RS = "\n---\n"; ORS = "\n---\n" } /kind: APIService/' >"$dir/apiservices.yaml"
else
  ca_bundle=$(b64 "$dir/ca.crt")
  sed -e "s|^  service:|  caBundle: ${ca_bundle}\n  service:|" \
    -e "s|namespace: crd-apiserver|namespace: ${namespace}|" \
    -e "/cert-manager.io\/inject-ca-from/d; /^  annotations:$/d" \
    manifests/40-apiservices.yaml >"$dir/apiservices.yaml"
fi
echo "kubectl apply -f $dir/serving-secret.yaml -f $dir/apiservices.yaml"
