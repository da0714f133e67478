#!/usr/bin/env bash
# The official MCP conformance suite's client scenarios against
# examples/mcp_conformance_client.rs (McpClient alone): the 2025-11-25 and
# the 2026-07-28 requirement sets, every scenario, the authorization ones
# (`auth/`) included with every authorization extension the sets run (client
# credentials, DPoP, workload identity federation, enterprise-managed
# authorization), and the Skills extension's client scenarios. Nothing is
# expected to fail: fails when any scenario fails, scored or not.
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
  out="$work/out-$revision.txt"
  status=0
  (cd "$work" && conformance client --command "$client" --requirements "$revision") > "$out" 2>&1 || status=$?
  echo "== client scenarios, requirements $revision"
  sed -n '/=== SUITE SUMMARY ===/,/^Total/p' "$out" || true
  # Every scenario must pass, scored or not: nothing is expected to fail.
  if sed -n '/=== SUITE SUMMARY ===/,$p' "$out" | grep -q '✗'; then
    status=1
  fi
  # The authorization scenarios must have run: 20 (2025-11-25) or 31
  # (2026-07-28), the extensions' (client credentials, DPoP, workload
  # identity, enterprise-managed) included.
  ran=$(sed -n '/=== SUITE SUMMARY ===/,/^Total/p' "$out" | grep -c '^✓ auth/' || true)
  want=$([ "$revision" = 2025-11-25 ] && echo 20 || echo 31)
  if [ "$ran" -ne "$want" ]; then
    echo "expected $want authorization scenarios to pass, $ran did" >&2
    status=1
  fi
  if [ "$status" -ne 0 ]; then
    tail -n 150 "$out" >&2
    failed=1
  fi
done
# The Skills extension's client scenarios belong to no requirement set: run
# one by one, each check passed (none skipped).
for scenario in sep-2640-client-no-prefetch sep-2640-client-verify-digest sep-2640-client-verify-size \
  sep-2640-client-verify-frontmatter; do
  out="$work/out-$scenario.txt"
  status=0
  (cd "$work" && conformance client --command "$client" --scenario "$scenario") > "$out" 2>&1 || status=$?
  echo "== $scenario"
  grep -E '^Passed: ' "$out" || true
  if grep -q "SKIPPED" "$out" || ! grep -qE '^Passed: ([0-9]+)/\1, 0 failed' "$out"; then
    status=1
  fi
  if [ "$status" -ne 0 ]; then
    tail -n 60 "$out" >&2
    failed=1
  fi
done
exit "$failed"
