#!/usr/bin/env bash
# Shows which sync system calls stand behind acknowledged writes: runs the development server
# under strace, makes N creates one after another (each is a group-commit batch of its own,
# so each acknowledgement needs a sync of its own), and counts the calls. With every write
# durable, syncfs (or fsync/fdatasync) calls >= N.
# Usage: hack/durability-syscalls.sh [N]        SERVER=path/to/crd-apiserver to test another build
set -euo pipefail
cd "$(dirname "$0")/.."
creates="${1:-300}"
command -v strace >/dev/null || { echo "strace is needed (apt-get install strace)" >&2; exit 1; }
if [ -z "${SERVER:-}" ]; then
  cargo build --quiet --bin crd-apiserver
  SERVER="$(realpath "${CARGO_TARGET_DIR:-target}")/debug/crd-apiserver"
fi
work=$(mktemp -d)
server=""
# The server runs under strace, which only detaches when killed: end the traced server too.
trap '[ -n "$server" ] && kill $(cat /proc/"$server"/task/"$server"/children 2>/dev/null) "$server" 2>/dev/null; rm -rf "$work"' EXIT
cp -r manifests "$work/"
source hack/lib/dev-server.sh
dev_server "$work" strace -f -qq -e trace=fsync,fdatasync,syncfs,sync_file_range,msync -o "$work/trace" "$SERVER"
certs=(--cacert "$work/certs/dev/serving-ca.crt" --cert "$work/certs/dev/admin.crt" --key "$work/certs/dev/admin.key")
url="https://127.0.0.1:$port/apis/stable.example.com/v1/namespaces/default/crontabs"
before=$(wc -l < "$work/trace")
acknowledged=0
for i in $(seq 1 "$creates"); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "${certs[@]}" -H 'Content-Type: application/json' -X POST "$url" \
    -d "{\"apiVersion\":\"stable.example.com/v1\",\"kind\":\"CronTab\",\"metadata\":{\"name\":\"c$i\"},\"spec\":{\"cronSpec\":\"* * * * */5\",\"image\":\"i\"}}")
  [ "$code" = 201 ] && acknowledged=$((acknowledged + 1))
done
tail -n +"$((before + 1))" "$work/trace" > "$work/during"
count() { grep -c "$1(" "$work/during" || true; }
echo "acknowledged creates:  $acknowledged (one at a time)"
echo "syncfs:                $(count syncfs)"
echo "fsync:                 $(count 'fsync')"
echo "fdatasync:             $(count fdatasync)"
echo "sync_file_range:       $(count sync_file_range)"
syncs=$(( $(count syncfs) + $(count '[^a]fsync') + $(count fdatasync) ))
if [ "$syncs" -ge "$acknowledged" ] && [ "$acknowledged" -gt 0 ]; then
  echo "every acknowledged write was preceded by a sync to stable storage"
else
  echo "FEWER SYNCS ($syncs) THAN ACKNOWLEDGED WRITES ($acknowledged)"
  exit 1
fi
