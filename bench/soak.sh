#!/usr/bin/env bash
# Soak: a million calls over each transport against one `jrpc serve`,
# checking zero errors and that the server's memory stays flat.
#
#   bash bench/soak.sh [REQUESTS]     # default 1000000
#
# For each transport (TCP, Unix socket, HTTP, WebSocket, and a spawned
# `jrpc serve --stdio`) it runs `jrpc bench -n REQUESTS -c 16 -m 16 add 1 2`,
# fails if any call erred or fewer calls finished than asked, and prints the
# server's resident memory after a warm-up and after each run. Memory is flat
# when it settles after the first runs: the first run grows it (allocator
# arenas, connection buffers), later runs must not keep growing it.
set -euo pipefail
cd "$(dirname "$0")/.."

requests=${1:-1000000}
cargo build -q --release -p jrpc-cli
jrpc=${CARGO_TARGET_DIR:-target}/release/jrpc

work=$(mktemp -d)
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

"$jrpc" serve --tcp 127.0.0.1:0 --unix "$work/soak.sock" --http 127.0.0.1:0 2>"$work/serve.err" &
server_pid=$!
for _ in $(seq 50); do
  grep -q '^jrpc: listening on unix:' "$work/serve.err" 2>/dev/null && break
  sleep 0.1
done
http=$(sed -n 's/^jrpc: listening on \(http:[^ ]*\) .*/\1/p' "$work/serve.err")
ws=${http/http:/ws:}
tcp=$(sed -n 's/^jrpc: listening on \(tcp:[^ ]*\) .*/\1/p' "$work/serve.err")
unix="unix:$work/soak.sock"

rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

# One bench run: soak NAME TARGET, or soak NAME -- COMMAND for stdio.
# Prints a result line; returns non-zero on any error or missing call.
soak() {
  local name=$1
  shift
  local load=(add 1 2 -n "$requests" -c 16 -m 16 -d 1h --json)
  local out
  if [ "$1" = "--" ]; then
    out=$("$jrpc" bench "${load[@]}" "$@")
  else
    out=$("$jrpc" bench "$1" "${load[@]}")
  fi
  python3 - "$name" "$requests" "$out" <<'PY'
import json, sys
name, requests, out = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
errors = sum(out["errors"].values())
lat = out["latency_us"]
print(f"{name:10} {out['ok']:>8} ok {errors:>2} errors {out['requests_per_second']:>8.0f} req/s"
      f"  p50 {lat['p50']} us  p99 {lat['p99']} us  max {lat['max']} us")
sys.exit(0 if errors == 0 and out["ok"] >= requests else 1)
PY
}

"$jrpc" bench "$tcp" add 1 2 -n 20000 -c 16 -m 16 --json >/dev/null
echo "server RSS after warm-up: $(rss_kib "$server_pid") KiB"
failed=0
for target in "tcp $tcp" "unix $unix" "http $http" "websocket $ws" "tcp $tcp" "http $http"; do
  set -- $target
  soak "$1" "$2" || failed=1
  echo "  server RSS: $(rss_kib "$server_pid") KiB"
done
# stdio: the server is the bench's own child, so its memory is not sampled.
soak stdio -- "$jrpc" serve --stdio || failed=1
exit $failed
