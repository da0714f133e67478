#!/usr/bin/env bash
# Instructions per call of the jrpc-mcp bench server, counted by callgrind:
# a figure that does not move with the machine's load, unlike CPU time.
#
#   bash bench/mcp-compare/callgrind.sh MODE [CALLS]
#
# MODE: http-2026     `tools/call add` as stateless 2026-07-28 POSTs
#       http-json     `tools/call add` in one 2025-11-25 session, JSON replies
#       http-jsonrpc  a plain JSON-RPC `add` over HTTP (the baseline)
#
# Needs valgrind, and release builds of this bench and of the CLI:
#   cargo build --release -p jrpc-cli
#   cargo build --release --manifest-path bench/mcp-compare/Cargo.toml
# SERVER=PATH and JRPC=PATH take other builds (of another commit, say) to
# compare two back to back; KEEP=FILE keeps callgrind's output there (for
# callgrind_annotate).
# The count includes the server's start-up and shutdown (under 1 % at
# 4000 calls). The load is `jrpc bench`, 4 connections with one call in
# flight each (a session's calls share one connection: ids are unique only
# per connection).
set -euo pipefail

mode=${1:?usage: callgrind.sh http-2026|http-json|http-jsonrpc [CALLS]}
calls=${2:-4000}
root=$(cd "$(dirname "$0")/../.." && pwd)
server="${SERVER:-$root/bench/mcp-compare/target/release/jrpc-mcp-compare}"
jrpc="${JRPC:-$root/target/release/jrpc}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out" \
  "$server" serve jrpc-mcp "$mode" >"$out/url" 2>/dev/null &
pid=$!
for _ in $(seq 300); do
  [ -s "$out/url" ] && break
  sleep 0.1
done
url=$(cat "$out/url")
accept='Accept: application/json, text/event-stream'
case "$mode" in
  http-jsonrpc)
    "$jrpc" bench "$url" add 1 2 -n "$calls" -c 4 -m 1 ;;
  http-2026)
    params='{"name":"add","arguments":{"a":1,"b":2},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}'
    "$jrpc" bench "$url" tools/call --raw "$params" -H "$accept" \
      -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: add' \
      -n "$calls" -c 4 -m 1 ;;
  http-json)
    init='{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}'
    session=$(curl -s -D - -o /dev/null -X POST "$url" -H 'Content-Type: application/json' -H "$accept" -d "$init" \
      | tr -d '\r' | sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: //p')
    curl -s -o /dev/null -X POST "$url" -H 'Content-Type: application/json' -H "$accept" \
      -H "Mcp-Session-Id: $session" -H 'MCP-Protocol-Version: 2025-11-25' \
      -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
    "$jrpc" bench "$url" tools/call --raw '{"name":"add","arguments":{"a":1,"b":2}}' -H "$accept" \
      -H "Mcp-Session-Id: $session" -H 'MCP-Protocol-Version: 2025-11-25' \
      -n "$calls" -c 1 -m 1 ;;
  *)
    echo "unknown mode: $mode" >&2
    kill "$pid"
    exit 2 ;;
esac
kill "$pid"
wait "$pid" || true
total=$(callgrind_annotate "$out/callgrind.out" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
echo "$mode: $((total / calls)) instructions per call"
if [ -n "${KEEP:-}" ]; then cp "$out/callgrind.out" "$KEEP"; fi
