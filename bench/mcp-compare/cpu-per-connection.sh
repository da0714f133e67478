#!/usr/bin/env bash
# Server CPU per call when every call comes on a connection of its own (as
# an MCP client that opens a connection per call makes a server work): the
# accept, the HTTP/1.1 connection, the request and the close, user and
# kernel time together, beside raw hyper's floor measured in the same run.
#
#   bash bench/mcp-compare/cpu-per-connection.sh [ROUNDS] [CALLS]
#
# Each round runs, one after the other so that they see the same load on
# this shared machine: raw hyper answering a constant reply (bench/compare's
# `serve raw-http`), jrpc's HTTP server answering a plain JSON-RPC `add`,
# and jrpc-mcp answering `tools/call add` as a stateless 2026-07-28 POST.
# The server runs pinned to core 0, the load
# (bench/mcp-compare/connection_per_call.py, `Connection: close`) on core 1;
# the server's CPU is the sum of its threads' time on a core
# (/proc/PID/task/*/schedstat, nanoseconds) before and after the load.
# Prints each round and the medians, with each jrpc figure's ratio to raw
# hyper's of its round. Needs Linux (taskset, /proc), python3, and release
# builds of both benches:
#   cargo build --release --manifest-path bench/mcp-compare/Cargo.toml
#   cargo build --release --manifest-path bench/compare/Cargo.toml
# SERVER names another build of jrpc-mcp-compare (of another commit), to
# compare two.
set -euo pipefail

rounds=${1:-5}
calls=${2:-5000}
root=$(cd "$(dirname "$0")/../.." && pwd)
mcp="${SERVER:-$root/bench/mcp-compare/target/release/jrpc-mcp-compare}"
compare="$root/bench/compare/target/release/jrpc-compare"
load="$root/bench/mcp-compare/connection_per_call.py"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Nanoseconds the process's threads have spent on a core so far.
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%d", s }'; }

# Prints the server's CPU per call, in µs, for one run of MODE.
run() {
  local mode=$1 pid url t0 t1
  : >"$out/addr"
  case "$mode" in
    raw-hyper) taskset -c 0 "$compare" serve raw-http >"$out/addr" 2>/dev/null & ;;
    *) taskset -c 0 "$mcp" serve jrpc-mcp "$mode" >"$out/addr" 2>/dev/null & ;;
  esac
  pid=$!
  for _ in $(seq 300); do
    [ -s "$out/addr" ] && break
    sleep 0.1
  done
  case "$mode" in
    raw-hyper) url="http://127.0.0.1:$(sed -n 's/^PORT //p' "$out/addr")/" ;;
    *) url=$(head -1 "$out/addr") ;;
  esac
  local body='{"jsonrpc":"2.0","id":1,"method":"add","params":[1,2]}' headers=()
  if [ "$mode" = http-2026 ]; then
    local params='{"name":"add","arguments":{"a":1,"b":2},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}'
    body="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":$params}"
    headers=('Accept: application/json, text/event-stream' 'MCP-Protocol-Version: 2026-07-28'
      'Mcp-Method: tools/call' 'Mcp-Name: add')
  fi
  # A few hundred calls first, so that start-up is not counted.
  taskset -c 1 python3 "$load" "$url" 300 "$body" "${headers[@]}"
  t0=$(cpu_ns "$pid")
  taskset -c 1 python3 "$load" "$url" "$calls" "$body" "${headers[@]}"
  t1=$(cpu_ns "$pid")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  awk -v d=$((t1 - t0)) -v n="$calls" 'BEGIN { printf "%.1f", d / 1e3 / n }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

for i in $(seq "$rounds"); do
  raw=$(run raw-hyper)
  plain=$(run http-jsonrpc)
  modern=$(run http-2026)
  echo "round $i: raw hyper $raw µs, jrpc add $plain µs ($(ratio "$plain" "$raw")×), jrpc-mcp http-2026 $modern µs ($(ratio "$modern" "$raw")×)"
  echo "$raw" >>"$out/raw"
  ratio "$plain" "$raw" >>"$out/plain"
  echo >>"$out/plain"
  ratio "$modern" "$raw" >>"$out/modern"
  echo >>"$out/modern"
done
echo "medians: raw hyper $(median <"$out/raw") µs; ratio to it: jrpc add $(median <"$out/plain")×, jrpc-mcp http-2026 $(median <"$out/modern")×"
