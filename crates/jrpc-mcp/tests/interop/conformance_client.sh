#!/usr/bin/env bash
# The official MCP conformance suite's client scenarios against
# examples/mcp_conformance_client.rs (McpClient alone): the 2025-11-25 and
# the 2026-07-28 requirement sets, every scenario but the authorization ones
# (`auth/`, the authorization issue's), which are given to the suite as
# expected failures. Fails when any other scenario fails, scored or not.
#
#   bash crates/jrpc-mcp/tests/interop/conformance_client.sh PATH/TO/mcp_conformance_client
#
# Installs Node 22 and the suite (pinned) from the npm registry into
# target/mcp-conformance, as conformance.sh does.
set -euo pipefail
cd "$(dirname "$0")/../../../.."

client=$(realpath "$1")
source crates/jrpc-mcp/tests/interop/conformance_suite.sh
conformance() { node "$dir/node_modules/.bin/conformance" "$@"; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
for revision in 2025-11-25 2026-07-28; do
  # The authorization scenarios of this set: failures the suite expects.
  {
    echo "client:"
    conformance list --client --requirements "$revision" |
      sed -n 's/^ *- \(auth\/[^ ]*\).*$/  - \1/p' | sort -u
  } > "$work/expected-$revision.yml"
  out="$work/out-$revision.txt"
  status=0
  (cd "$work" && conformance client --command "$client" --requirements "$revision" \
    --expected-failures "$work/expected-$revision.yml") > "$out" 2>&1 || status=$?
  echo "== client scenarios, requirements $revision (auth/ excluded)"
  sed -n '/=== SUITE SUMMARY ===/,/^Total/p' "$out" | grep -v ' auth/' || true
  # Every scenario that is not an authorization one must pass, scored or not.
  if sed -n '/=== SUITE SUMMARY ===/,$p' "$out" | grep '✗' | grep -vq 'auth/'; then
    status=1
  fi
  if [ "$status" -ne 0 ]; then
    tail -n 150 "$out" >&2
    failed=1
  fi
done
exit "$failed"
