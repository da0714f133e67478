#!/usr/bin/env bash
# Server CPU per call of a stateless 2026-07-28 `tools/call add` against a
# plain JSON-RPC `add`, both over HTTP, measured alternately in pairs so
# that each pair sees the same load on this shared machine.
#
#   bash bench/mcp-compare/cpu-pairs.sh [PAIRS] [CALLS]
#
# Each run starts the bench server pinned to core 0, drives it with
# `jrpc bench -c 4 -m 1` pinned to core 1, and reads the server's user and
# system time from /proc before and after. Prints each pair's figures and
# ratio, then the medians. Needs Linux (taskset, /proc), and release builds:
#   cargo build --release -p jrpc-cli
#   cargo build --release --manifest-path bench/mcp-compare/Cargo.toml
# SERVER=PATH takes another build of the bench server (of another commit).
set -euo pipefail

pairs=${1:-8}
calls=${2:-50000}
root=$(cd "$(dirname "$0")/../.." && pwd)
server="${SERVER:-$root/bench/mcp-compare/target/release/jrpc-mcp-compare}"
jrpc="$root/target/release/jrpc"
tick=$(getconf CLK_TCK)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Prints the server's CPU time per call, in µs, for one run of MODE.
run() {
  local mode=$1 pid url t0 t1
  : >"$out/url"
  taskset -c 0 "$server" serve jrpc-mcp "$mode" >"$out/url" 2>/dev/null &
  pid=$!
  for _ in $(seq 300); do
    [ -s "$out/url" ] && break
    sleep 0.1
  done
  url=$(cat "$out/url")
  t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  case "$mode" in
    http-jsonrpc)
      taskset -c 1 "$jrpc" bench "$url" add 1 2 -n "$calls" -c 4 -m 1 >/dev/null ;;
    http-2026)
      local params='{"name":"add","arguments":{"a":1,"b":2},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}'
      taskset -c 1 "$jrpc" bench "$url" tools/call --raw "$params" \
        -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' \
        -H 'Mcp-Method: tools/call' -H 'Mcp-Name: add' -n "$calls" -c 4 -m 1 >/dev/null ;;
  esac
  t1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  awk -v d=$((t1 - t0)) -v hz="$tick" -v n="$calls" 'BEGIN { printf "%.1f", d / hz * 1e6 / n }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

for i in $(seq "$pairs"); do
  modern=$(run http-2026)
  plain=$(run http-jsonrpc)
  ratio=$(awk -v a="$modern" -v b="$plain" 'BEGIN { printf "%.2f", a / b }')
  echo "pair $i: http-2026 $modern µs, http-jsonrpc $plain µs, ratio $ratio"
  echo "$modern" >>"$out/modern"
  echo "$plain" >>"$out/plain"
  echo "$ratio" >>"$out/ratio"
done
echo "medians: http-2026 $(median <"$out/modern") µs, http-jsonrpc $(median <"$out/plain") µs; median ratio $(median <"$out/ratio")"
