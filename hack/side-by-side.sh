#!/usr/bin/env bash
# The same kubectl sequence run against a real kube-apiserver's own CRD serving and against
# crd-apiserver registered behind it (an APIService), compared command by command. The real
# control plane is built and started apart (/work/shared/kube-apiserver/README.md); it must
# already serve the documentation's CronTab (crontabs.stable.example.com, v1). crd-apiserver
# serves the same definition under another group (stable-ours.example.com); both sides use the
# namespace `definitions-sbs`. Before comparing, only the group (and what is made of it: the
# storage version hash, a body's first bytes quoted in an error, OpenAPI operation IDs and
# tags), uids, timestamps, ages,
# resourceVersions and continue tokens are normalised, and the
# padding of table columns (a longer group name widens them).
# Prints every command with `same` or the difference (native `-`, ours `+`), then the count.
# Usage: PEER_DIR=/work/peer hack/side-by-side.sh [BINARY] [--keep DIR]
#        (default binary: target/debug/crd-apiserver; --keep leaves both transcripts in DIR)
set -euo pipefail
cd "$(dirname "$0")/.."
binary=$(realpath "${1:-target/debug/crd-apiserver}")
keep=""
[ "${2:-}" = "--keep" ] && keep=${3:?--keep needs a directory}
peer=${PEER_DIR:-/work/peer}
export KUBECONFIG=$peer/kubeconfig-admin
NS=definitions-sbs
OURS=stable-ours.example.com
NATIVE=stable.example.com
work=$(mktemp -d)
server=""
created_service=""
cleanup() {
  kubectl delete apiservice "v1.$OURS" --ignore-not-found >/dev/null 2>&1 || true
  [ -n "$created_service" ] && kubectl -n default delete service extension-api --ignore-not-found >/dev/null 2>&1
  kubectl delete namespace "$NS" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  [ -n "$server" ] && kill "$server" 2>/dev/null
  if [ -n "$keep" ]; then mkdir -p "$keep" && cp -r "$work/native" "$work/ours" "$work/log" "$keep/" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT

kubectl get crd "crontabs.$NATIVE" >/dev/null || {
  echo "the peer does not serve crontabs.$NATIVE: kubectl apply -f $peer/manifests/crontab-crd.yaml" >&2
  exit 1
}

# Our copy of the peer's CronTab definition, under our group.
mkdir -p "$work/definitions"
sed -e "s/$NATIVE/$OURS/g" "$peer/manifests/crontab-crd.yaml" > "$work/definitions/crontabs.yaml"
port=$((20000 + RANDOM % 20000))
"$binary" serve --secure-port "$port" --bind-address 127.0.0.1 \
  --tls-cert-file "$peer/pki/backend.crt" --tls-private-key-file "$peer/pki/backend.key" \
  --kubeconfig "$KUBECONFIG" --authentication-kubeconfig "$KUBECONFIG" \
  --authorization-kubeconfig "$KUBECONFIG" \
  --storage "$work/store" --definitions "$work/definitions" >"$work/log" 2>&1 &
server=$!
# kube-aggregator checks the serving certificate against extension-api.default.svc: the peer's
# backend certificate names it, so this Service is shared by everyone registering behind the peer.
if ! kubectl -n default get service extension-api >/dev/null 2>&1; then
  kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata: {name: extension-api, namespace: default}
spec: {type: ExternalName, externalName: localhost}
EOF
  created_service=yes
fi
kubectl apply -f - >/dev/null <<EOF
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1.$OURS}
spec:
  group: $OURS
  version: v1
  groupPriorityMinimum: 1000
  versionPriority: 15
  service: {namespace: default, name: extension-api, port: $port}
  caBundle: $(base64 -w0 "$peer/pki/backend-ca.crt")
EOF
kubectl create namespace "$NS" >/dev/null
deadline=$((SECONDS + 180))
until kubectl get apiservice "v1.$OURS" -o jsonpath='{.status.conditions[?(@.type=="Available")].status}' 2>/dev/null | grep -q True &&
  kubectl get "crontabs.$OURS" -n "$NS" >/dev/null 2>&1; do
  if [ "$SECONDS" -ge "$deadline" ] || ! kill -0 "$server" 2>/dev/null; then
    echo "crd-apiserver did not become available behind the peer:" >&2
    cat "$work/log" >&2
    exit 1
  fi
  sleep 0.2
done

# Input files of the sequence, for group $1, into directory $2.
write_inputs() {
  local g=$1 d=$2
  mkdir -p "$d"
  cat > "$d/ct1.yaml" <<EOF
apiVersion: $g/v1
kind: CronTab
metadata: {name: ct1, labels: {app: one, watch: "yes"}}
spec: {cronSpec: "* * * * */5", image: img-1, replicas: 1}
EOF
  sed -e 's/ct1/ct2/; s/img-1/img-2/; s/app: one/app: two/' "$d/ct1.yaml" > "$d/ct2.yaml"
  sed -e 's/ct1/ct3/; s/img-1/img-3/; s/app: one/app: three/' "$d/ct1.yaml" > "$d/ct3.yaml"
  cat > "$d/bad-type.yaml" <<EOF
apiVersion: $g/v1
kind: CronTab
metadata: {name: bad-type}
spec: {cronSpec: 5, image: [x], replicas: "three"}
EOF
  cat > "$d/unknown-field.yaml" <<EOF
apiVersion: $g/v1
kind: CronTab
metadata: {name: unknown-field}
spec: {image: img-u, bogus: 1, nested: {deeper: true}}
EOF
  cat > "$d/apply-ct4.yaml" <<EOF
apiVersion: $g/v1
kind: CronTab
metadata: {name: ct4, labels: {app: four}}
spec: {image: img-4, replicas: 4}
EOF
  sed -e 's/img-4/img-4b/; s/replicas: 4/replicas: 5/' "$d/apply-ct4.yaml" > "$d/apply-ct4-other.yaml"
  sed -e 's/replicas: 4/replicas: 4, bogus: x/' "$d/apply-ct4.yaml" > "$d/apply-ct4-bogus.yaml"
  cat > "$d/bad-name.yaml" <<EOF
apiVersion: $g/v1
kind: CronTab
metadata: {name: Bad_Name}
spec: {image: img-b}
EOF
  cat > "$d/wrong-kind.yaml" <<EOF
apiVersion: $g/v1
kind: CronTabs
metadata: {name: wrong-kind}
spec: {image: img-k}
EOF
  printf '{"apiVersion":"%s/v1","kind":"CronTab","metadata":{"name":"raw1"},"spec":{"image":"r"}}' "$g" > "$d/raw1.json"
  printf '{"apiVersion":"%s/v1","kind":"CronTab","metadata":{"name":"raw2"},"spec":{"image":' "$g" > "$d/truncated.json"
  printf '{"apiVersion":"%s/v1","kind":"CronTab","metadata":{"name":"raw3"},"spec":{"image":"x",}}' "$g" > "$d/trailing-comma.json"
  printf '{"apiVersion":"%s/v1","kind":"CronTab","metadata":{"name":"raw4"},"spec":{"replicas":1e400}}' "$g" > "$d/huge-number.json"
  printf 'apiVersion: %s/v1\nkind: CronTab\nmetadata: {name: raw5}\nspec: {replicas: 1e400}\n' "$g" > "$d/huge-number.yaml"
  printf '{"apiVersion":"%s/v1","kind":"CronTab","metadata":{"name":"raw6","namespace":"other"},"spec":{}}' "$g" > "$d/other-namespace.json"
  printf '{"apiVersion":"%s/v1","kind":"CronTab","metadata":{"name":"raw7"},"spec":{"replicas":1.5}}' "$g" > "$d/fraction.json"
}

# The sequence: one command a line, $G the group, $R the resource (crontabs.$G), $A the API
# path prefix of the namespace. `rv` is remembered between commands (a watch starts there).
commands() {
  cat <<'EOF'
kubectl api-resources --api-group=$G
kubectl get --raw /apis/$G | jq -S .
kubectl get --raw /apis/$G/v1 | jq -S .
kubectl explain $R
kubectl explain $R.spec
kubectl explain $R.spec.replicas
kubectl get $R
kubectl get $R -o json
kubectl apply -f ct1.yaml
kubectl create -f ct2.yaml
kubectl create -f ct2.yaml
kubectl create -f ct3.yaml --dry-run=server -o yaml
kubectl get $R ct3
kubectl get $R
kubectl get $R -o wide --show-labels
kubectl get $R -o name
kubectl get $R ct1 -o yaml
kubectl get $R ct1 -o json
kubectl get $R ct1 -o jsonpath='{.spec.image} {.metadata.generation}'
kubectl get $R -o custom-columns=NAME:.metadata.name,IMAGE:.spec.image,REPLICAS:.spec.replicas
kubectl describe $R ct1
kubectl get $R nothere
kubectl get $R ct1 nothere
kubectl get $R -l app=one
kubectl get $R -l 'app in (one,two)' -o name
kubectl get $R -l 'app notin (one)' -o name
kubectl get $R -l '!app' -o name
kubectl get $R -l 'app=='
kubectl get $R -l 'a b c'
kubectl get $R --field-selector metadata.name=ct2 -o name
kubectl get $R --field-selector metadata.namespace=$NS -o name
kubectl get $R --field-selector metadata.name!=ct2 -o name
kubectl get $R --field-selector spec.image=img-1
kubectl get $R --field-selector status.phase=x
kubectl get $R --chunk-size=1 -o name
kubectl get --raw "$A/$P?limit=1" | jq -S '.metadata | del(.resourceVersion, .continue)'
kubectl get --raw "$A/$P?limit=1&continue=bogus"
kubectl get --raw "$A/$P?limit=-1" | jq -S '.items | length'
kubectl get --raw "$A/$P?resourceVersion=0" | jq -S '.items | length'
kubectl get --raw "$A/$P?resourceVersion=abc"
kubectl get --raw "$A/$P?resourceVersionMatch=Exact"
kubectl get --raw "$A/$P?resourceVersionMatch=NotOlderThan"
kubectl get --raw "$A/$P?resourceVersionMatch=Bogus&resourceVersion=1"
kubectl get --raw "$A/$P?timeoutSeconds=abc"
kubectl get --raw "$A/$P?watch=maybe&timeoutSeconds=1"
kubectl get --raw "$A/$P?labelSelector=a%20b"
kubectl get --raw "$A/$P?fieldSelector=spec.image%3Dx"
kubectl get --raw "$A/$P?dryRun=All"
kubectl get --raw "$A/$P/ct1?resourceVersion=abc"
kubectl get --raw "$A/$P/ct1/status"
kubectl get --raw "$A/$P/ct1/scale"
kubectl get --raw "$A/$P/ct1/bogus"
kubectl get --raw "/apis/$G/v1/$P" | jq -S '[.items[] | select(.metadata.namespace=="definitions-sbs") | .metadata.name]'
kubectl get --raw "/apis/$G/v1/namespaces/nowhere/$P" | jq -S .items
kubectl get --raw "/apis/$G/v1/namespaces/nowhere/$P/ct1"
kubectl get --raw "/apis/$G/v2/namespaces/$NS/$P"
kubectl get --raw "/apis/$G/v1/namespaces/$NS/others"
kubectl get --raw "/apis/$G/v1/$P/ct1"
kubectl get $R -n nowhere
kubectl create -f ct3.yaml -n nowhere
kubectl label $R ct1 tier=gold
kubectl label $R ct1 tier=silver
kubectl label $R ct1 tier=silver --overwrite
kubectl label $R ct1 'bad label=x'
kubectl label $R ct1 tier-
kubectl annotate $R ct1 note='hello world'
kubectl annotate $R ct1 note=again
kubectl annotate $R ct1 note=again --overwrite
kubectl get $R ct1 -o jsonpath='{.metadata.labels} {.metadata.annotations} {.metadata.generation}'
kubectl patch $R ct1 --type=merge -p '{"spec":{"replicas":2}}'
kubectl patch $R ct1 --type=merge -p '{"spec":{"replicas":2}}'
kubectl patch $R ct1 --type=json -p '[{"op":"replace","path":"/spec/image","value":"img-1b"}]'
kubectl patch $R ct1 --type=json -p '[{"op":"remove","path":"/spec/nothere"}]'
kubectl patch $R ct1 --type=json -p '[{"op":"test","path":"/spec/image","value":"other"}]'
kubectl patch $R ct1 --type=json -p '[{"op":"bogus","path":"/spec"}]'
kubectl patch $R ct1 --type=json -p '{"op":"add"}'
kubectl patch $R ct1 --type=strategic -p '{"spec":{"replicas":3}}'
kubectl patch $R ct1 --type=merge -p '{"spec":{"replicas":"three"}}'
kubectl patch $R ct1 --type=merge -p '{"spec":{"replicas":null}}'
kubectl patch $R ct1 --type=merge -p '{"metadata":{"name":"renamed"}}'
kubectl patch $R ct1 --type=merge -p '{"metadata":{"resourceVersion":"1"}}'
kubectl patch $R ct1 --type=merge -p '{"metadata":{"uid":"00000000-0000-0000-0000-000000000000"}}'
kubectl patch $R ct1 --type=merge -p '{"kind":"Other"}'
kubectl patch $R ct1 --type=merge -p '{"apiVersion":"v1"}'
kubectl patch $R ct1 --type=merge -p 'not json'
kubectl patch $R ct1 --type=merge -p '{"spec":{"bogus":1}}'
kubectl patch $R nothere --type=merge -p '{"spec":{"replicas":2}}'
kubectl patch $R ct1 --type=merge -p '{"spec":{"replicas":7}}' --dry-run=server -o jsonpath='{.spec.replicas}'
kubectl get $R ct1 -o jsonpath='{.spec} {.metadata.generation}'
kubectl get $R ct1 -o json | jq '.spec.image="img-1c"' | kubectl replace -f -
kubectl get $R ct1 -o json | jq '.metadata.resourceVersion="1"' | kubectl replace -f -
kubectl get $R ct1 -o json | jq 'del(.metadata.resourceVersion) | .spec.image="img-1d"' | kubectl replace -f -
kubectl get $R ct1 -o json | jq '.metadata.name="other"' | kubectl replace -f - 2>&1 | head -3
kubectl replace -f ct3.yaml
kubectl get $R ct1 -o jsonpath='{.spec} {.metadata.generation}'
kubectl create -f bad-type.yaml 2>&1 | sort
kubectl create -f unknown-field.yaml --validate=strict
kubectl create -f unknown-field.yaml --validate=warn --dry-run=server -o jsonpath='{.spec}'
kubectl create -f unknown-field.yaml --validate=ignore --dry-run=server -o jsonpath='{.spec}'
kubectl create -f bad-name.yaml
kubectl create -f wrong-kind.yaml
kubectl create -f wrong-kind.yaml --validate=false
kubectl apply --server-side -f apply-ct4.yaml
kubectl apply --server-side -f apply-ct4.yaml
kubectl apply --server-side -f apply-ct4-other.yaml --field-manager=other
kubectl apply --server-side -f apply-ct4-other.yaml --field-manager=other --force-conflicts
kubectl get $R ct4 -o json | jq -S '[.metadata.managedFields[] | {manager, operation, fieldsV1}]'
kubectl apply --server-side -f apply-ct4-bogus.yaml --validate=strict
kubectl apply --server-side -f apply-ct4-bogus.yaml --validate=warn
kubectl apply --server-side -f apply-ct4-bogus.yaml --validate=false
kubectl apply --server-side -f bad-type.yaml 2>&1 | sort
kubectl apply -f apply-ct4.yaml
kubectl apply -f apply-ct4-other.yaml
kubectl get $R ct4 -o jsonpath='{.spec} {.metadata.generation}'
kubectl apply --server-side -f ct1.yaml --dry-run=server -o jsonpath='{.spec}'
kubectl diff -f apply-ct4.yaml | grep '^[-+] ' | grep -v -e generation -e resourceVersion -e time:
kubectl create --raw "$A/$P" -f raw1.json | jq -S '.metadata.name, .spec'
kubectl create --raw "$A/$P" -f raw1.json
kubectl create --raw "$A/$P" -f truncated.json
kubectl create --raw "$A/$P" -f trailing-comma.json
kubectl create --raw "$A/$P" -f huge-number.json
kubectl create --raw "$A/$P" -f fraction.json
kubectl create --raw "$A/$P" -f other-namespace.json
kubectl create --raw "/apis/$G/v1/namespaces/Bad_NS/$P" -f raw1.json
kubectl create --raw "/apis/$G/v1/$P" -f raw1.json
kubectl create --raw "$A/$P?dryRun=Maybe" -f raw1.json
kubectl create --raw "$A/$P?dryRun=All&dryRun=Maybe" -f raw1.json
kubectl create --raw "$A/$P?fieldValidation=Bogus" -f raw1.json
kubectl create --raw "$A/$P?fieldManager=$(printf 'x%.0s' $(seq 1 200))" -f raw1.json
kubectl create --raw "$A/$P/raw9" -f raw1.json
curl -sk --cert $PEER_DIR/pki/admin.crt --key $PEER_DIR/pki/admin.key -X POST -H 'Content-Type: application/yaml' --data-binary @huge-number.yaml "https://127.0.0.1:6443$A/$P" | jq -S 'del(.metadata)'
curl -sk --cert $PEER_DIR/pki/admin.crt --key $PEER_DIR/pki/admin.key -X POST -H 'Content-Type: application/yaml' --data-binary $'a: b\n c' "https://127.0.0.1:6443$A/$P" | jq -S 'del(.metadata)'
curl -sk --cert $PEER_DIR/pki/admin.crt --key $PEER_DIR/pki/admin.key -X POST -H 'Content-Type: text/plain' --data-binary @raw1.json "https://127.0.0.1:6443$A/$P" | jq -S 'del(.metadata)'
curl -sk --cert $PEER_DIR/pki/admin.crt --key $PEER_DIR/pki/admin.key -X POST -H 'Content-Type: application/json' --data-binary '' "https://127.0.0.1:6443$A/$P" | jq -S 'del(.metadata)'
curl -sk --cert $PEER_DIR/pki/admin.crt --key $PEER_DIR/pki/admin.key -X PUT -H 'Content-Type: application/json' --data-binary @raw1.json "https://127.0.0.1:6443$A/$P/ct1" | jq -S 'del(.metadata)'
curl -sk --cert $PEER_DIR/pki/admin.crt --key $PEER_DIR/pki/admin.key -X PATCH -H 'Content-Type: application/json' --data-binary '{}' "https://127.0.0.1:6443$A/$P/ct1" | jq -S 'del(.metadata)'
curl -sk --cert $PEER_DIR/pki/admin.crt --key $PEER_DIR/pki/admin.key -X PATCH -H 'Content-Type: application/apply-patch+yaml' --data-binary @ct1.yaml "https://127.0.0.1:6443$A/$P/ct1" | jq -S 'del(.metadata)'
curl -sk --cert $PEER_DIR/pki/admin.crt --key $PEER_DIR/pki/admin.key -X DELETE -H 'Content-Type: application/json' --data-binary '{"preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}' "https://127.0.0.1:6443$A/$P/ct2" | jq -S 'del(.metadata)'
curl -sk --cert $PEER_DIR/pki/admin.crt --key $PEER_DIR/pki/admin.key -X DELETE -H 'Content-Type: application/json' --data-binary '{"propagationPolicy":"Sideways"}' "https://127.0.0.1:6443$A/$P/ct2" | jq -S 'del(.metadata)'
curl -sk --cert $PEER_DIR/pki/admin.crt --key $PEER_DIR/pki/admin.key -X DELETE -H 'Content-Type: application/json' --data-binary '{"gracePeriodSeconds":-5}' "https://127.0.0.1:6443$A/$P/ct2" | jq -S 'del(.metadata)'
curl -sk --cert $PEER_DIR/pki/admin.crt --key $PEER_DIR/pki/admin.key "https://127.0.0.1:6443$A/$P/ct1" -H 'Accept: application/json;as=Table;v=v1;g=meta.k8s.io' | jq -S '.columnDefinitions, [.rows[].cells[0]]'
curl -sk --cert $PEER_DIR/pki/admin.crt --key $PEER_DIR/pki/admin.key "https://127.0.0.1:6443$A/$P/ct1" -H 'Accept: application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io' | jq -S '.kind, .apiVersion, .metadata.name'
curl -sk --cert $PEER_DIR/pki/admin.crt --key $PEER_DIR/pki/admin.key "https://127.0.0.1:6443$A/$P" -H 'Accept: application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io' | jq -S '.kind, .apiVersion, [.items[].metadata.name]'
curl -sk --cert $PEER_DIR/pki/admin.crt --key $PEER_DIR/pki/admin.key "https://127.0.0.1:6443$A/$P/ct1" -H 'Accept: application/xml' | jq -S 'del(.metadata)'
curl -sk --cert $PEER_DIR/pki/admin.crt --key $PEER_DIR/pki/admin.key "https://127.0.0.1:6443$A/$P/ct1" -H 'Accept: application/yaml' | grep -v -e resourceVersion -e uid: -e Timestamp -e time: | head -12
curl -sk --cert $PEER_DIR/pki/admin.crt --key $PEER_DIR/pki/admin.key "https://127.0.0.1:6443$A/$P?watch=1&continue=x&timeoutSeconds=1" | jq -S 'del(.metadata)'
curl -sk --cert $PEER_DIR/pki/admin.crt --key $PEER_DIR/pki/admin.key "https://127.0.0.1:6443$A/$P?watch=1&sendInitialEvents=true&timeoutSeconds=1" | jq -S 'del(.metadata)'
curl -sk --cert $PEER_DIR/pki/admin.crt --key $PEER_DIR/pki/admin.key "https://127.0.0.1:6443$A/$P?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&timeoutSeconds=1" | jq -S 'del(.metadata)'
curl -sk --cert $PEER_DIR/pki/admin.crt --key $PEER_DIR/pki/admin.key "https://127.0.0.1:6443$A/$P?sendInitialEvents=true" | jq -S 'del(.metadata)'
curl -sk --cert $PEER_DIR/pki/admin.crt --key $PEER_DIR/pki/admin.key "https://127.0.0.1:6443$A/$P?watch=1&timeoutSeconds=1&resourceVersion=1&resourceVersionMatch=Exact" | jq -S 'del(.metadata)'
kubectl --kubeconfig $PEER_DIR/kubeconfig-alice get $R
kubectl --kubeconfig $PEER_DIR/kubeconfig-alice get $R ct1
kubectl --kubeconfig $PEER_DIR/kubeconfig-alice create -f ct3.yaml
kubectl --kubeconfig $PEER_DIR/kubeconfig-alice delete $R ct1
kubectl --kubeconfig $PEER_DIR/kubeconfig-alice get $R --watch --request-timeout=1s
kubectl auth can-i list $R
kubectl auth can-i list $R --as=alice
kubectl get $R --sort-by=.spec.image -o name
echo remembered the newest revision
kubectl label $R ct2 watch=no --overwrite
kubectl patch $R ct1 --type=merge -p '{"spec":{"image":"img-w2"}}'
kubectl patch $R ct1 --type=merge -p '{"metadata":{"labels":{"watch":"no"}}}'
kubectl patch $R ct1 --type=merge -p '{"metadata":{"labels":{"watch":"yes"}}}'
kubectl get --raw "$A/$P?watch=1&resourceVersion=$rv&timeoutSeconds=2&labelSelector=watch%3Dyes" | jq -c '[.type, .object.metadata.name // .object.message, .object.spec.image, .object.metadata.labels.watch]'
kubectl get --raw "$A/$P?watch=1&resourceVersion=$rv&timeoutSeconds=2&fieldSelector=metadata.name%3Dct1" | jq -c '[.type, .object.metadata.name // .object.message, .object.spec.image, .object.metadata.labels.watch]'
kubectl get --raw "$A/$P?watch=1&resourceVersion=$rv&timeoutSeconds=2" | jq -c '[.type, .object.metadata.name // .object.message, .object.spec.image, .object.metadata.labels.watch]'
kubectl get --raw "$A/$P?watch=1&resourceVersion=$rv&timeoutSeconds=2&labelSelector=watch%3Dyes&allowWatchBookmarks=true" | jq -c '[.type, .object.metadata.name // .object.message, .object.spec.image, .object.metadata.labels.watch]'
kubectl get --raw "$A/$P/ct1?watch=1&timeoutSeconds=1" | jq -c '[.kind, .metadata.name]' 
kubectl get --raw "/apis/$G/v1/watch/namespaces/$NS/$P?resourceVersion=$rv&timeoutSeconds=1&fieldSelector=metadata.name%3Dct2" | jq -c '[.type, .object.metadata.name // .object.message, .object.metadata.labels.watch]'
kubectl get --raw "/apis/$G/v1/watch/namespaces/$NS/$P/ct2?resourceVersion=$rv&timeoutSeconds=1" | jq -c '[.type, .object.metadata.name // .object.message, .object.metadata.labels.watch]'
kubectl get --raw "/openapi/v3/apis/$G/v1" | jq -S '.components.schemas | keys'
kubectl get --raw "/openapi/v3/apis/$G/v1" | jq -S '.components.schemas' 
kubectl get --raw "/openapi/v3/apis/$G/v1" | jq -S '.paths | keys'
kubectl get --raw "/openapi/v3/apis/$G/v1" | jq -S '.paths' 
kubectl get --raw "/openapi/v3/apis/$G/v1" | jq -S 'del(.paths, .components)'
kubectl get --raw /openapi/v2 | jq -S '.definitions | with_entries(select(.key | startswith("$RG.v1."))) | map_values(del(."x-kubernetes-group-version-kind"))'
kubectl delete $R ct3
kubectl delete $R ct3
kubectl delete $R ct2 --dry-run=server
kubectl get $R -o name
kubectl delete $R -l app=two
kubectl delete $R ct1 --grace-period=0 --force
kubectl get $R -o name
kubectl delete $R --all
kubectl get $R
kubectl delete $R --all
EOF
}

normalise() {
  sed -E \
    -e "s/$OURS/$NATIVE/g" -e "s/com.example.stable-ours/com.example.stable/g" \
    -e "s/StableOursExampleCom/StableExampleCom/g; s/stableOursExampleCom/stableExampleCom/g" \
    -e 's/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/<uid>/g' \
    -e 's/[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z/<time>/g' \
    -e 's/("?resourceVersion"?: ?)"[0-9]+"/\1"<rv>"/g' \
    -e 's/(resourceVersion=)[0-9]+/\1<rv>/g' \
    -e 's/(Resource Version: +)[0-9]+/\1<rv>/' \
    -e 's/("storageVersionHash": )"[^"]*"/\1"<hash of the group>"/' \
    -e 's/\(\{"apiVersion":"stable[^ ]* \.\.\.\)/(<the body'"'"'s first bytes> ...)/' \
    -e 's/\([0-9a-f]{40,} \.\.\.\)/(<the body'"'"'s first bytes in hex> ...)/' \
    -e 's/("?continue"?: ?)"[^"]+"/\1"<continue>"/g' \
    -e 's/(^|[[:space:]])[0-9]+(s|m[0-9]*s?|h[0-9]*m?)([[:space:]]|$)/\1<age>\3/g' \
    -e 's/   */  /g'
}

# run_side GROUP NAME: the whole sequence against one side; output of command N in NAME/N.
run_side() {
  local G=$1 dir=$work/$2 n=0 line rv=""
  local R=crontabs.$G P=crontabs A=/apis/$1/v1/namespaces/$NS RG
  RG=$(echo "$G" | tr . '\n' | tac | paste -sd.)
  write_inputs "$G" "$dir/in"
  cd "$dir/in"
  while IFS= read -r line; do
    n=$((n + 1))
    (export PEER_DIR=$peer G R P A NS RG rv; eval "kubectl() { command kubectl -n $NS \"\$@\"; }; $line") >"$dir/$n" 2>&1 || echo "exit status $?" >>"$dir/$n"
    # The newest object's revision, not the list's: the list's is etcd's, which other users of
    # the peer move, and kube-apiserver's watch cache only learns it from an event of this
    # resource (the peer's etcd 3.4 has no progress notifications to tell it sooner).
    case $line in echo\ remembered*) rv=$(kubectl -n "$NS" get "$R" -o json | jq -r '[.items[].metadata.resourceVersion | tonumber] | max') ;; esac
  done < <(commands)
  cd - >/dev/null
}

run_side "$NATIVE" native
run_side "$OURS" ours
n=0 same=0
echo "# crd-apiserver ($(git describe --always --dirty)) behind kube-apiserver $(kubectl version -o json 2>/dev/null | jq -r .serverVersion.gitVersion) vs its own CRD serving; $(date -u +%F)"
echo
while IFS= read -r line; do
  n=$((n + 1))
  echo "\$ $line"
  if diff <(normalise <"$work/native/$n") <(normalise <"$work/ours/$n") >"$work/diff"; then
    same=$((same + 1))
    echo "  same"
  else
    diff -u <(normalise <"$work/native/$n") <(normalise <"$work/ours/$n") | tail -n +4 | sed 's/^/  /' || true
  fi
done < <(commands)
echo
echo "$same of $n commands gave identical output"
