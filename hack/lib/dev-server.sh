# Sourced by the benchmark scripts: starts the server in development mode and waits for it.
#
#   dev_server DIR COMMAND... [-- FLAG...]
#
# runs `COMMAND serve --dev` (COMMAND: the binary, possibly behind a wrapper such as valgrind)
# in DIR on a loopback port, with the extra serve FLAGs, its stderr appended to DIR/log. Sets
# `port` (chosen once, kept across restarts), `server` (the pid) and `ready` (seconds until
# /readyz answered ok). Gives up, showing the log, if the server is not ready in 120 s.
dev_server() {
  local dir=$1 command=() flags=() started
  shift
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do command+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  flags=("$@")
  port=${port:-$((20000 + RANDOM % 20000))}
  started=$(date +%s.%N)
  (cd "$dir" && exec "${command[@]}" serve --dev --secure-port "$port" --bind-address 127.0.0.1 "${flags[@]}" \
    >/dev/null 2>>"$dir/log") &
  server=$!
  local deadline=$((SECONDS + 120))
  until curl -sk "https://127.0.0.1:$port/readyz" 2>/dev/null | grep -q ok; do
    if [ "$SECONDS" -ge "$deadline" ] || ! kill -0 "$server" 2>/dev/null; then
      echo "the server did not become ready:" >&2
      cat "$dir/log" >&2
      return 1
    fi
    sleep 0.02
  done
  ready=$(echo "$(date +%s.%N) - $started" | bc)
}

# The allocator's options as the image sets them (the Dockerfile's `ENV MIMALLOC_*` lines), so
# that benchmarks measure what deployments run; a value already in the environment wins.
while read -r name value; do
  [ -n "${!name+set}" ] || export "$name=$value"
done < <(sed -n 's/^ENV \(MIMALLOC_[A-Z_]*\)=\(.*\)$/\1 \2/p' "$(dirname "${BASH_SOURCE[0]}")/../../Dockerfile")
