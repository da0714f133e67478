#!/usr/bin/env bash
# Instructions per call of a bench/compare server, counted by callgrind: a
# figure that does not move with the machine's load, unlike CPU time.
#
#   bash bench/compare/callgrind.sh http|tcp|ws|raw-http|raw-ws|raw-line [SECONDS] [JRPC_COMPARE]
#
# http: `jrpc-compare serve jrpc` (HttpServer) under `load http PORT 4 1 S`
# tcp:  `jrpc-compare serve jrpc-tcp` (Server) under `load line PORT 4 64 S`
# ws:   `jrpc-compare serve jrpc` (its WebSocket) under `load ws PORT 4 64 S`
# raw-http, raw-ws, raw-line: the ceilings (hyper, a WebSocket server and a
# line server answering a constant reply) under the same loads.
# JRPC_COMPARE defaults to this bench's release build; give another build
# (of another commit) to compare two back to back. Needs valgrind. The
# count includes start-up and shutdown; prints instructions per reply.
set -euo pipefail

mode=${1:?usage: callgrind.sh http|tcp|ws|raw-http|raw-ws|raw-line [SECONDS] [JRPC_COMPARE]}
seconds=${2:-8}
root=$(cd "$(dirname "$0")" && pwd)
bin=${3:-$root/target/release/jrpc-compare}
case "$mode" in
  http) kind=jrpc; load=(http 4 1) ;;
  tcp) kind=jrpc-tcp; load=(line 4 64) ;;
  ws) kind=jrpc; load=(ws 4 64) ;;
  raw-http) kind=raw-http; load=(http 4 1) ;;
  raw-ws) kind=raw-ws; load=(ws 4 64) ;;
  raw-line) kind=raw-line; load=(line 4 64) ;;
  *) echo "unknown mode: $mode" >&2; exit 2 ;;
esac
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out" \
  "$bin" serve "$kind" >"$out/port" 2>/dev/null &
pid=$!
for _ in $(seq 300); do
  grep -q PORT "$out/port" 2>/dev/null && break
  sleep 0.1
done
port=$(sed -n 's/^PORT //p' "$out/port")
"$bin" load "${load[0]}" "$port" "${load[1]}" "${load[2]}" "$seconds" >"$out/load"
kill "$pid"
wait "$pid" 2>/dev/null || true
# The load prints its rate over the seconds it ran.
rate=$(awk '{print $1}' "$out/load" | head -1)
replies=$(awk -v r="$rate" -v s="$seconds" 'BEGIN{printf "%d", r*s}')
total=$(callgrind_annotate "$out/callgrind.out" 2>/dev/null | sed -n 's/^\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)
echo "$mode: $total instructions, $replies replies, $((total / replies)) per reply ($(cat "$out/load"))"
