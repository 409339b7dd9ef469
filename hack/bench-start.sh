#!/usr/bin/env bash
# A start with many definitions, fresh and again (issue 32): for each given release binary, in
# turn, starts it on DEFINITIONS_DIR with a new store (the fresh start: every definition checked
# and its accepted form recorded), stops it with SIGTERM, and starts it again on the same store
# (the restart: the store's records read back, the files compared with them). Reports seconds to
# /readyz, resident memory at ready and its peak, the store's size, and the CPU seconds (user +
# system) the server used until ready: on a loaded machine the steadier measure of work.
# Usage: hack/bench-start.sh DEFINITIONS_DIR BINARY...
set -euo pipefail
cd "$(dirname "$0")/.."
definitions=$(realpath "$1")
shift
work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
source hack/lib/dev-server.sh
memory() { awk '/VmRSS/{rss=int($2/1024)} /VmHWM/{hwm=int($2/1024)} END{printf "rss %5d MiB (peak %5d)", rss, hwm}' "/proc/$1/status"; }
cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat"; }
echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{print int($2/1048576)}') GiB; $(date -u +%FT%TZ)"
echo "definitions: $definitions ($(find "$definitions" -type f | wc -l) files, $(du -sh "$definitions" | cut -f1))"
for binary in "$@"; do
  run="$work/run" && rm -rf "$run" && mkdir -p "$run"
  port=""
  echo "== $binary"
  for start in fresh restart; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    dev_server "$run" "$binary" -- --definitions "$definitions"
    printf '%-8s ready %6.2f s  cpu %6.2f s  %s  load %s\n' "$start" "$ready" "$(cpu "$server")" "$(memory "$server")" "$load"
    kill -TERM "$server" && wait "$server" || true
    server=""
    echo "         store $(du -sm "$run" | cut -f1) MB after"
  done
done
