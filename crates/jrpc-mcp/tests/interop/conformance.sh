#!/usr/bin/env bash
# The official MCP conformance suite's server scenarios against
# `jrpc mcp serve --http 127.0.0.1:0 --conformance`.
#
#   bash crates/jrpc-mcp/tests/interop/conformance.sh PATH/TO/jrpc [SUITE]
#
# SUITE is the suite's own: active (default), all or pending. Installs Node 22
# and the suite (pinned) from the npm registry into target/mcp-conformance;
# fails when any scenario fails.
set -euo pipefail
cd "$(dirname "$0")/../../../.."

jrpc=$(realpath "$1")
suite=${2:-active}
dir="${CARGO_TARGET_DIR:-target}/mcp-conformance"
mkdir -p "$dir"
dir=$(realpath "$dir")
if [ ! -x "$dir/node_modules/.bin/conformance" ] || [ ! -x "$dir/node_modules/.bin/node" ]; then
  (cd "$dir" && npm install --silent --no-audit --no-fund --no-save node@22.23.3 @modelcontextprotocol/conformance@0.1.16)
fi
export PATH="$dir/node_modules/.bin:$PATH"

log=$(mktemp)
"$jrpc" mcp serve --http 127.0.0.1:0 --conformance 2>"$log" &
server=$!
trap 'kill "$server" 2>/dev/null || true; rm -f "$log"' EXIT
url=
for _ in $(seq 100); do
  url=$(sed -n 's/^jrpc: MCP (Streamable HTTP) at \(.*\)$/\1/p' "$log")
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "jrpc mcp serve --http did not start" >&2; cat "$log" >&2; exit 1; }

# The suite writes its results into the working directory.
work=$(mktemp -d)
(cd "$work" && node "$dir/node_modules/.bin/conformance" server --url "$url" --suite "$suite") > "$work/out.txt" 2>&1 && status=0 || status=$?
sed -n '/=== SUMMARY ===/,$p' "$work/out.txt"
if [ "$status" -ne 0 ]; then
  tail -n 80 "$work/out.txt" >&2
fi
rm -rf "$work"
exit "$status"
