#!/usr/bin/env bash
# Starts the tests' authorization server (authorization_server.mjs, on the
# npm package oidc-provider, pinned), installing it into
# target/authorization-server once; Node 22 comes from the conformance
# suite's install (conformance_suite.sh).
#
#   bash crates/jrpc-mcp/tests/interop/authorization_server.sh [--port N]
#
# Prints `issuer http://127.0.0.1:PORT` once listening.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../../.."
oidc_version=9.13.3
source crates/jrpc-mcp/tests/interop/conformance_suite.sh >&2
as_dir="${CARGO_TARGET_DIR:-target}/authorization-server"
mkdir -p "$as_dir"
as_dir=$(realpath "$as_dir")
installed=$(sed -n 's/.*"version": "\(.*\)".*/\1/p' "$as_dir/node_modules/oidc-provider/package.json" 2>/dev/null || true)
if [ "$installed" != "$oidc_version" ]; then
  (cd "$as_dir" && npm install --silent --no-audit --no-fund --no-save "oidc-provider@$oidc_version") >&2
fi
# The script is run from beside its modules, so that its import resolves.
cp "$here/authorization_server.mjs" "$as_dir/authorization_server.mjs"
exec node "$as_dir/authorization_server.mjs" "$@"
