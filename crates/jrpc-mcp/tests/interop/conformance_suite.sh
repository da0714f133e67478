#!/usr/bin/env bash
# Sourced by conformance.sh and conformance_client.sh: installs Node 22 and
# the official MCP conformance suite (pinned) from the npm registry into
# target/mcp-conformance once, puts them on PATH, and sets $dir to that
# folder.
suite_version=0.2.0-alpha.12
dir="${CARGO_TARGET_DIR:-target}/mcp-conformance"
mkdir -p "$dir"
dir=$(realpath "$dir")
installed=$(sed -n 's/.*"version": "\(.*\)".*/\1/p' "$dir/node_modules/@modelcontextprotocol/conformance/package.json" 2>/dev/null || true)
if [ "$installed" != "$suite_version" ] || [ ! -x "$dir/node_modules/.bin/node" ]; then
  (cd "$dir" && npm install --silent --no-audit --no-fund --no-save node@22.23.3 "@modelcontextprotocol/conformance@$suite_version")
fi
export PATH="$dir/node_modules/.bin:$PATH"
