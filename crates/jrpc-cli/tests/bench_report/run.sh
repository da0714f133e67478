#!/usr/bin/env bash
# `jrpc bench --report` pages in a real browser: a short load run against
# `jrpc serve` written as a page, a second as JSON, both compared on a
# third page; each opened in Debian's chromium, headless, driven by
# playwright-core (npm, pinned; the playground test's copy), which checks
# that the plots are drawn and that the page fetches nothing.
#
#   bash crates/jrpc-cli/tests/bench_report/run.sh PATH/TO/jrpc [SCREENSHOT.png]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../../.."

jrpc=$(realpath "$1")
screenshot=${2:+$(realpath -m "$2")}
. "$here/../browser_env.sh"
dir="$browser_dir"
work=$(mktemp -d)
log="$work/serve.log"
"$jrpc" serve --http 127.0.0.1:0 2>"$log" &
server=$!
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
url=""
for _ in $(seq 100); do
  url=$(grep -o 'http://[0-9.:]*' "$log" | head -1 || true)
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "jrpc serve did not start: $(cat "$log")" >&2; exit 1; }
"$jrpc" bench "$url" add 1 2 -c 2 -m 4 -d 3s --report "$work/one.html" >/dev/null
"$jrpc" bench "$url" sum 1 2 3 -c 4 -m 2 -d 2s --json >"$work/two.json"
"$jrpc" bench --compare "$work/one.html" "$work/two.json" --report "$work/both.html"
cp "$here/page.mjs" "$dir/bench-page.mjs"
PATH="$dir/node_modules/.bin:$PATH" timeout 120 node "$dir/bench-page.mjs" "$work/one.html" "$work/both.html" ${screenshot:+"$screenshot"}
