#!/usr/bin/env bash
# Runs the tests' OAuth 2.1 authorization server (oidc_as.mjs, on the npm
# package oidc-provider, pinned here), installing it into
# ${CARGO_TARGET_DIR:-target}/oidc-as once. Node 22 is the one the
# conformance suite's install brings (conformance_suite.sh).
#
#   bash crates/jrpc-mcp/tests/interop/oidc_as.sh [--port N]
#
# Prints `issuer http://127.0.0.1:PORT` on stdout once listening (install
# chatter goes to stderr); serves until SIGTERM or SIGINT.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../../.."
oidc_version=9.13.3
source crates/jrpc-mcp/tests/interop/conformance_suite.sh >&2
as_dir="${CARGO_TARGET_DIR:-target}/oidc-as"
mkdir -p "$as_dir"
as_dir=$(realpath "$as_dir")
install() {
  installed=$(sed -n 's/.*"version": "\(.*\)".*/\1/p' "$as_dir/node_modules/oidc-provider/package.json" 2>/dev/null || true)
  if [ "$installed" != "$oidc_version" ]; then
    (cd "$as_dir" && npm install --silent --no-audit --no-fund --no-save "oidc-provider@$oidc_version") >&2
  fi
}
# One install at a time when tests start several servers at once.
if command -v flock >/dev/null; then
  exec 9>"$as_dir/.install.lock"
  flock 9
  install
  flock -u 9
  exec 9>&-
else
  install
fi
# ES modules ignore NODE_PATH: the script runs from beside the modules, so
# that its `import 'oidc-provider'` resolves. Copied under a name of its
# own and renamed into place, so that servers starting together never run
# a half-written copy.
script="$as_dir/oidc_as.mjs"
tmp=$(mktemp "$as_dir/.oidc_as.XXXXXX")
cp "$here/oidc_as.mjs" "$tmp"
mv -f "$tmp" "$script"
exec node "$script" "$@"
