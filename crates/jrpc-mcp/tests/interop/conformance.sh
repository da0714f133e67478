#!/usr/bin/env bash
# The official MCP conformance suite's server scenarios against ONE
# `jrpc mcp serve --http 127.0.0.1:0 --conformance` endpoint, which speaks both
# revisions:
#
#   1. the 2025-11-25 requirement set (initialize sessions),
#   2. the 2026-07-28 requirement set (stateless requests), failing also when
#      a scenario it runs without scoring (the pending ones, the tasks
#      extension) fails,
#   3. the tasks extension's scenarios, one by one.
#
#   bash crates/jrpc-mcp/tests/interop/conformance.sh PATH/TO/jrpc
#   bash crates/jrpc-mcp/tests/interop/conformance.sh --url URL   # an endpoint already serving
#                                                                 # --conformance (a fleet)
#
# Installs Node 22 and the suite (pinned) from the npm registry into
# target/mcp-conformance; fails when any check fails.
set -euo pipefail
cd "$(dirname "$0")/../../../.."

source crates/jrpc-mcp/tests/interop/conformance_suite.sh

log=$(mktemp)
work=$(mktemp -d)
if [ "$1" = "--url" ]; then
  url=$2
  trap 'rm -rf "$log" "$work"' EXIT
else
  jrpc=$(realpath "$1")
  # Starts `jrpc mcp serve --http` with "$@" (in $server, its URL in $url).
  serve() {
    "$jrpc" mcp serve --http 127.0.0.1:0 "$@" 2>"$log" &
    server=$!
    url=
    for _ in $(seq 100); do
      url=$(sed -n 's/^jrpc: MCP (Streamable HTTP) at \(.*\)$/\1/p' "$log")
      [ -n "$url" ] && break
      sleep 0.1
    done
    [ -n "$url" ] || { echo "jrpc mcp serve --http $* did not start" >&2; cat "$log" >&2; exit 1; }
  }
  trap 'kill "$server" 2>/dev/null || true; rm -rf "$log" "$work"' EXIT
  serve --conformance
fi

failed=0
# Runs the suite with "$@" (in $work, where it writes its results); prints its
# summary, and everything on failure.
run() {
  local out="$work/out.txt" status=0
  (cd "$work" && node "$dir/node_modules/.bin/conformance" server --url "$url" "$@") > "$out" 2>&1 || status=$?
  # A requirement set ends with a summary, one scenario with its count.
  sed -n '/=== SUMMARY ===/,$p' "$out"
  grep -E '^Passed: ' "$out" || true
  # A scenario run but not scored still has to pass.
  if [ "$status" -eq 0 ] && sed -n '/Not scored/,$p' "$out" | grep -q '✗'; then
    status=1
  fi
  if [ "$status" -ne 0 ]; then
    tail -n 120 "$out" >&2
    failed=1
  fi
}

echo "-- requirements 2025-11-25"
run --requirements 2025-11-25
echo "-- requirements 2026-07-28"
run --requirements 2026-07-28
for scenario in tasks-lifecycle tasks-capability-negotiation tasks-wire-fields tasks-request-state-removal \
  tasks-mrtr-input tasks-request-headers tasks-dispatch-and-envelope tasks-status-notifications \
  tasks-required-task-error tasks-mrtr-composition; do
  echo "-- $scenario"
  run --scenario "$scenario"
done
# The Skills extension (SEP-2640): its scenarios belong to no requirement
# set, and skip every check a server does not give them something to look
# at, so a skipped check fails here. Against the conformance fixture, and
# (when this script started the server) against a folder of skills served
# with --skills.
skills() {
  for scenario in sep-2640-skills-enumeration sep-2640-skills-manifest sep-2640-skills-directory; do
    echo "-- $scenario${1:+ ($1)}"
    run --scenario "$scenario"
    if grep -q "SKIPPED" "$work/out.txt"; then
      echo "$scenario: a check was skipped:" >&2
      grep "SKIPPED" "$work/out.txt" >&2
      failed=1
    fi
  done
}
skills
if [ -n "${jrpc:-}" ]; then
  kill "$server" 2>/dev/null || true
  serve --skills crates/jrpc-mcp/tests/fixtures/skills
  skills "--skills crates/jrpc-mcp/tests/fixtures/skills"
fi
exit "$failed"
