#!/usr/bin/env bash
# Instructions per call of a server answering one request per connection
# (as an MCP client that opens a connection per call makes it do): the
# accept, the HTTP/1.1 connection, the request and the close, counted by
# callgrind beside raw hyper's floor.
#
#   bash bench/mcp-compare/callgrind-per-connection.sh MODE [CALLS]
#
# MODE: raw-hyper     hyper answering every request with a constant reply
#                     (bench/compare's `serve raw-http`): the floor
#       http-jsonrpc  jrpc's HTTP server, a plain JSON-RPC `add`
#       http-2026     jrpc-mcp, `tools/call add` as a stateless POST
# The load (bench/mcp-compare/connection_per_call.py) sends each request
# on a connection of its own with `Connection: close`. The count includes
# the server's start-up and shutdown (well under 1 % at 2000 calls).
# Needs valgrind, python3 and release builds of both benches:
#   cargo build --release --manifest-path bench/mcp-compare/Cargo.toml
#   cargo build --release --manifest-path bench/compare/Cargo.toml
set -euo pipefail

mode=${1:?usage: callgrind-per-connection.sh raw-hyper|http-jsonrpc|http-2026 [CALLS]}
calls=${2:-2000}
root=$(cd "$(dirname "$0")/../.." && pwd)
mcp="${SERVER:-$root/bench/mcp-compare/target/release/jrpc-mcp-compare}"
compare="$root/bench/compare/target/release/jrpc-compare"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

case "$mode" in
  raw-hyper) command=("$compare" serve raw-http) ;;
  http-jsonrpc | http-2026) command=("$mcp" serve jrpc-mcp "$mode") ;;
  *) echo "unknown mode: $mode" >&2; exit 2 ;;
esac
valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out" "${command[@]}" >"$out/addr" 2>/dev/null &
pid=$!
for _ in $(seq 300); do
  [ -s "$out/addr" ] && break
  sleep 0.1
done
sleep 0.5
case "$mode" in
  raw-hyper) url="http://127.0.0.1:$(sed -n 's/^PORT //p' "$out/addr")/" ;;
  *) url=$(head -1 "$out/addr") ;;
esac
load="$root/bench/mcp-compare/connection_per_call.py"
case "$mode" in
  raw-hyper | http-jsonrpc)
    python3 "$load" "$url" "$calls" '{"jsonrpc":"2.0","id":1,"method":"add","params":[1,2]}' ;;
  http-2026)
    params='{"name":"add","arguments":{"a":1,"b":2},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}'
    python3 "$load" "$url" "$calls" "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":$params}" \
      'Accept: application/json, text/event-stream' 'MCP-Protocol-Version: 2026-07-28' \
      'Mcp-Method: tools/call' 'Mcp-Name: add' ;;
esac
kill "$pid"
wait "$pid" || true
total=$(callgrind_annotate "$out/callgrind.out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
echo "$mode, a connection per call: $((total / calls)) instructions per call"
