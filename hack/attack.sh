#!/usr/bin/env bash
# The attack campaign against a release build, as a table of case | expected | answer:
# patch amplification, path and continue-token tricks, selectors, over-long requests, a
# spoofed front proxy, slowloris (hack/attack.py); then kill -9 crash rounds and a full disk.
# Usage: hack/attack.sh [CRASH_ROUNDS]      SERVER=path/to/crd-apiserver to attack another build
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
if [ -z "${SERVER:-}" ]; then
  cargo build --release --quiet --bin crd-apiserver
  SERVER="$(realpath "${CARGO_TARGET_DIR:-target}")/release/crd-apiserver"
fi
source hack/lib/dev-server.sh
work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill -9 "$server" 2>/dev/null; rm -rf "$work"' EXIT
cp -r manifests "$work/"
flags=()
# Builds that know the flag get a short header timeout, so slowloris is judged in seconds.
"$SERVER" serve --help | grep -q -- --http-header-read-timeout && flags=(--http-header-read-timeout 5s)
# Every request logged (-v=3): the front-proxy rows read the user the server believed from it.
flags+=(-v=3)
dev_server "$work" "$SERVER" -- "${flags[@]}"
echo "server: $SERVER"
echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{print int($2/1048576)}') GiB"
printf '%-34s | %-30s | %s\n' case expected answer
python3 hack/attack.py "$port" "$work/certs/dev" "$server" "$work/data"

certs="$work/certs/dev"
curl_api() { curl -s --cacert "$certs/serving-ca.crt" --cert "$certs/admin.crt" --key "$certs/admin.key" "$@"; }
collection="https://127.0.0.1:$port/apis/stable.example.com/v1/namespaces/default/crontabs"
body() { printf '{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"%s"},"spec":{"image":"x"}}' "$1"; }

# Crash rounds: four writers creating one object after another, kill -9 at a random moment
# (1 to 3 s in), restart, and check that every acknowledged create is there.
lost=0 acknowledged=0
for round in $(seq "$rounds"); do
  : >"$work/acked"
  writers=()
  for w in 1 2 3 4; do
    (for i in $(seq 100000); do
       name="r$round-$w-$i"
       code=$(curl_api -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
         --data "$(body "$name")" "$collection" || true)
       [ "$code" = 201 ] && echo "$name" >>"$work/acked"
     done) &
    writers+=($!)
  done
  sleep "$((RANDOM % 3 + 1)).$((RANDOM % 10))"
  kill -9 "$server"; wait "$server" 2>/dev/null || true
  kill "${writers[@]}" 2>/dev/null; wait "${writers[@]}" 2>/dev/null || true
  dev_server "$work" "$SERVER" -- "${flags[@]}"
  present=$(curl_api "$collection" | python3 -c 'import json,sys; print("\n".join(o["metadata"]["name"] for o in json.load(sys.stdin)["items"]))')
  while read -r name; do
    acknowledged=$((acknowledged + 1))
    grep -qx "$name" <<<"$present" || lost=$((lost + 1))
  done <"$work/acked"
done
printf '%-34s | %-30s | %s\n' "kill -9 during creates, $rounds rounds" "0 acknowledged writes lost" \
  "$lost of $acknowledged acknowledged creates lost"
kill "$server"; wait "$server" 2>/dev/null || true; server=""

# A full disk: the store on a 32 MiB tmpfs in a private mount namespace, filled up.
mkdir -p "$work/full/data"
cp -r manifests "$work/full/"
unset port
dev_server "$work/full" unshare --mount --propagation private sh -c \
  'mount -t tmpfs -o size=32m tmpfs data && exec "$0" "$@"' "$SERVER"
collection="https://127.0.0.1:$port/apis/stable.example.com/v1/namespaces/default/crontabs"
certs="$work/full/certs/dev"
root="/proc/$server/root$work/full/data"
dd if=/dev/zero of="$root/filler" bs=1M 2>/dev/null || true
answers=""
for i in $(seq 50); do
  code=$(curl_api -o "$work/answer" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    --data "$(body "full-$i")" "$collection")
  if [ "$code" != 201 ]; then answers="$code $(head -c 120 "$work/answer")"; break; fi
done
readyz_full=$(curl -s -o /dev/null -w '%{http_code}' -k "https://127.0.0.1:$port/readyz")
rm -f "$root/filler"
sleep 2
readyz_after=$(curl -s -o /dev/null -w '%{http_code}' -k "https://127.0.0.1:$port/readyz")
after=$(curl_api -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
  --data "$(body after-space)" "$collection")
printf '%-34s | %-30s | %s\n' "full disk" "507, readyz 500, recovers" \
  "write: ${answers:-none refused}; readyz while full $readyz_full, after freeing $readyz_after; create after $after"
kill "$server"; wait "$server" 2>/dev/null || true; server=""
