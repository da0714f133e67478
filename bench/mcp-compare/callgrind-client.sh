#!/usr/bin/env bash
# Instructions per call of jrpc-mcp's *client* (or of jrpc's plain HTTP
# client, for `http-jsonrpc`), counted by callgrind: the bench process
# itself runs under callgrind and drives a jrpc-mcp server that it starts
# as a child, natively (valgrind does not follow children).
#
#   bash bench/mcp-compare/callgrind-client.sh MODE [CALLS]
#
# MODE: http-2026, http-json, http-sse, stdio, stdio-2026, http-jsonrpc.
# The figure is the process's total over CALLS calls plus the bench's 500
# warm-up calls, divided by both: it includes connecting and the bench's
# own loop (a few hundred instructions a call), the same for every mode.
# 4 calls in flight. BENCH=PATH takes another build of the bench (of
# another commit, say) to compare two back to back.
# Needs valgrind and a release build of the bench:
#   cargo build --release --manifest-path bench/mcp-compare/Cargo.toml
set -euo pipefail

mode=${1:?usage: callgrind-client.sh MODE [CALLS]}
calls=${2:-4000}
root=$(cd "$(dirname "$0")/../.." && pwd)
bench="${BENCH:-$root/bench/mcp-compare/target/release/jrpc-mcp-compare}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out" \
  "$bench" --runs 1 --calls "$calls" --in-flight 4 --only "$mode" --server jrpc-mcp --client jrpc-mcp \
  >/dev/null 2>"$out/log" || { cat "$out/log" >&2; exit 1; }
total=$(callgrind_annotate "$out/callgrind.out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
echo "$mode client: $((total / (calls + 500))) instructions per call"
