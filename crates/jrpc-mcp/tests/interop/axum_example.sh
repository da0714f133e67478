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
# The app says where it listens once it is bound; should it die right
# after, say so with its log rather than with a refused connection.
"$python" - "$hello" <<'PY' || { echo "mcp_in_axum (pid $pid, $(kill -0 "$pid" 2>/dev/null && echo alive || echo gone)):" >&2; cat "$log" >&2; exit 1; }
import sys, time, urllib.error, urllib.request
for attempt in range(50):
    try:
        body = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()
        break
    except urllib.error.URLError as e:
        if attempt == 49:
            raise
        time.sleep(0.1)
assert "own route" in body, body
print("the app's own route answers beside the MCP endpoint")
PY
"$python" "$here/python_client.py" --url "$url"
kill "$pid"
wait "$pid" 2>/dev/null || true
