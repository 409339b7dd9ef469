#!/usr/bin/env bash
# The version lifecycle of the Kubernetes documentation's CronTab, as a user runs it against the
# development server: store in v1beta1, add v1 as the storage version (live, no restart), read
# in both, create a new object, update the first, drop v1beta1 from the file too early (refused,
# shown in `kubectl get serveddefinitions`), and see it accepted once the built-in migration
# took v1beta1 out of storedVersions. Prints every command and what it printed (the transcript
# in hack/results/issue10-walkthrough.md).
# Usage: hack/issue10-walkthrough.sh [BINARY]      (default: target/debug/crd-apiserver)
set -euo pipefail
cd "$(dirname "$0")/.."
binary=$(realpath "${1:-target/debug/crd-apiserver}")
work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
source hack/lib/dev-server.sh

# `run CMD...`: prints the command as a user types it, then what it printed (stdout and stderr).
run() {
  echo "\$ $*"
  (cd "$work" && eval "$@") 2>&1 || true
  echo
}

crontab_definition() { # VERSIONS_YAML
  cat <<EOF
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: crontabs, singular: crontab, kind: CronTab, shortNames: [ct]}
  versions:
$1
EOF
}
version() { # NAME STORAGE [EXTRA]
  cat <<EOF
  - name: $1
    served: true
    storage: $2${3:+
    $3}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              cronSpec: {type: string}
              image: {type: string}
              replicas: {type: integer}
EOF
}

mkdir -p "$work/definitions"
crontab_definition "$(version v1beta1 true)" > "$work/definitions/crontabs.yaml"
crontab_definition "$(version v1beta1 false 'deprecated: true')
$(version v1 true)" > "$work/both.yaml"
crontab_definition "$(version v1 true)" > "$work/v1-only.yaml"
cat > "$work/my-crontab.yaml" <<EOF
apiVersion: stable.example.com/v1beta1
kind: CronTab
metadata:
  name: my-new-cron-object
spec:
  cronSpec: "* * * * */5"
  image: my-awesome-cron-image
EOF
sed -e 's,v1beta1,v1,' -e 's,my-new-cron-object,my-second-cron-object,' "$work/my-crontab.yaml" > "$work/my-second-crontab.yaml"
# Many more objects, so that the migration takes a few seconds at the rate given below.
for i in $(seq -w 1 600); do
  echo "---"
  echo "{apiVersion: stable.example.com/v1beta1, kind: CronTab, metadata: {name: batch-$i}, spec: {image: batch}}"
done > "$work/batch.yaml"

dev_server "$work" "$binary" -- --definitions definitions --storage-migration-rate=100
export KUBECONFIG=$work/certs/dev/kubeconfig
echo "# crd-apiserver serve --dev --definitions definitions --storage-migration-rate=100   (ready in $(printf '%.1f' "$ready") s)"
echo "# export KUBECONFIG=certs/dev/kubeconfig"
echo

echo "## 1. The storage version is v1beta1; objects are stored in it"
run cat definitions/crontabs.yaml
run kubectl apply -f my-crontab.yaml
run kubectl create -f batch.yaml "| tail -n 1"
run kubectl get serveddefinitions
run "kubectl get sdef crontabs.stable.example.com -o jsonpath='{.status.storedVersions}{\"\\n\"}'"

echo "## 2. v1 is added as the storage version (identical schemas): the file is edited, no restart"
run diff -u definitions/crontabs.yaml both.yaml
run cp both.yaml definitions/crontabs.yaml
sleep 1
run "kubectl api-versions | grep stable"
run "kubectl get sdef crontabs.stable.example.com -o jsonpath='{.status.storedVersions} {.status.migration.state}{\"\\n\"}'"

echo "## 3. The first object read in v1beta1, then in v1: identical but for apiVersion"
run kubectl get crontabs.v1beta1.stable.example.com my-new-cron-object -o yaml "> in-v1beta1.yaml"
run kubectl get crontabs.v1.stable.example.com my-new-cron-object -o yaml "> in-v1.yaml"
run diff in-v1beta1.yaml in-v1.yaml

echo "## 4. A new object is stored in v1"
run kubectl apply -f my-second-crontab.yaml

echo "## 5. The first object is updated: it is written in v1"
run kubectl label crontab my-new-cron-object step=5

echo "## Removing v1beta1 from the file before the migration is done is refused"
run cp v1-only.yaml definitions/crontabs.yaml
sleep 1
run kubectl get serveddefinitions
run "kubectl get sdef crontabs.stable.example.com -o jsonpath='{.status.lastReloadError}{\"\\n\"}'"
run "grep 'storedVersions\\[0\\]' log | head -n 1 | cut -c 1-400"
run kubectl get crontabs.v1beta1.stable.example.com my-new-cron-object -o name

echo "## The built-in migration rewrites what is left in v1beta1; v1beta1 then leaves storedVersions"
run "kubectl get sdef crontabs.stable.example.com -o jsonpath='{.status.migration}{\"\\n\"}'"
for _ in $(seq 1 60); do
  state=$(kubectl get sdef crontabs.stable.example.com -o jsonpath='{.status.storedVersions}' 2>/dev/null || true)
  [ "$state" = '["v1"]' ] && break
  sleep 0.5
done
sleep 2
run "kubectl get sdef crontabs.stable.example.com -o jsonpath='{.status.storedVersions}{\"\\n\"}{.status.objectsPerVersion}{\"\\n\"}{.status.migration}{\"\\n\"}'"
echo "## ...and the file that dropped it, refused until now, is served: no second edit"
run kubectl get serveddefinitions
run "kubectl get sdef crontabs.stable.example.com -o jsonpath='{.spec.versions[*].name} lastReloadError={.status.lastReloadError}{\"\\n\"}'"
run "kubectl api-versions | grep stable"
run kubectl get crontabs.v1beta1.stable.example.com my-new-cron-object
run kubectl get crontabs my-new-cron-object my-second-cron-object -o "custom-columns=NAME:.metadata.name,VERSION:.apiVersion,GENERATION:.metadata.generation,LABELS:.metadata.labels"
run "grep -E 'left status.storedVersions|serving the changed definition|storage-version migration: rewriting' log | cut -c 1-300"
