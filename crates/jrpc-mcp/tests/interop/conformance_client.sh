#!/usr/bin/env bash
# The official MCP conformance suite's client scenarios against
# examples/mcp_conformance_client.rs (McpClient alone): the 2025-11-25 and
# the 2026-07-28 requirement sets, every scenario, the authorization ones
# (`auth/`) included with the client credentials extension
# (`auth/client-credentials-basic`, `auth/client-credentials-jwt`). The other
# authorization extensions the sets run (enterprise-managed authorization,
# DPoP, workload identity federation) are not implemented: given to the
# suite as expected failures. Fails when any other scenario fails, scored or
# not.
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
unimplemented="auth/enterprise-managed-authorization auth/dpop auth/dpop-nonce auth/wif-jwt-bearer"
for revision in 2025-11-25 2026-07-28; do
  # The extensions jrpc does not implement: failures the suite expects.
  {
    echo "client:"
    for scenario in $unimplemented; do echo "  - $scenario"; done
  } > "$work/expected-$revision.yml"
  out="$work/out-$revision.txt"
  status=0
  (cd "$work" && conformance client --command "$client" --requirements "$revision" \
    --expected-failures "$work/expected-$revision.yml") > "$out" 2>&1 || status=$?
  echo "== client scenarios, requirements $revision (not implemented: $unimplemented)"
  sed -n '/=== SUITE SUMMARY ===/,/^Total/p' "$out" || true
  # Every other scenario must pass, scored or not.
  pattern=$(echo "$unimplemented" | sed 's/ /|/g')
  if sed -n '/=== SUITE SUMMARY ===/,$p' "$out" | grep '✗' | grep -Evq "($pattern)( |:|$)"; then
    status=1
  fi
  # The authorization scenarios must have run: 14 (2025-11-25) or 25
  # (2026-07-28), and the two client credentials ones.
  ran=$(sed -n '/=== SUITE SUMMARY ===/,/^Total/p' "$out" | grep -c '^✓ auth/' || true)
  want=$([ "$revision" = 2025-11-25 ] && echo 16 || echo 27)
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
