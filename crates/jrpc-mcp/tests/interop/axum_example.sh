#!/usr/bin/env bash
# examples/mcp_in_axum.rs, driven from outside: the app's own route answers,
# and the official MCP Python SDK runs its whole session (every mode) against
# the MCP endpoint the app mounts at /api/mcp.
#
#   bash axum_example.sh PATH/TO/examples/mcp_in_axum PATH/TO/python-with-mcp
set -euo pipefail

example=${1:?usage: axum_example.sh EXAMPLE PYTHON}
python=${2:?usage: axum_example.sh EXAMPLE PYTHON}
here=$(cd "$(dirname "$0")" && pwd)
log=$(mktemp)
"$example" 127.0.0.1:0 2>"$log" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
url=
for _ in $(seq 200); do
  url=$(sed -n 's/^MCP at \(http:[^ ]*\)$/\1/p' "$log")
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "mcp_in_axum did not say where it listens:" >&2; cat "$log" >&2; exit 1; }
hello=${url%/api/mcp}/hello
"$python" - "$hello" <<'PY'
import sys, urllib.request
body = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()
assert "own route" in body, body
print("the app's own route answers beside the MCP endpoint")
PY
"$python" "$here/python_client.py" --url "$url"
kill "$pid"
wait "$pid" 2>/dev/null || true
