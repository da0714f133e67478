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
export CHROMIUM="${CHROMIUM:-$(command -v chromium || true)}"
if [ -z "$CHROMIUM" ]; then
  echo "chromium not found: install Debian's chromium (apt-get install chromium) or set CHROMIUM" >&2
  exit 1
fi
dir="${CARGO_TARGET_DIR:-target}/playground-browser"
mkdir -p "$dir"
dir=$(realpath "$dir")
if [ ! -d "$dir/node_modules/playwright-core" ] || [ ! -x "$dir/node_modules/.bin/node" ]; then
  (cd "$dir" && npm install --silent --no-audit --no-fund --no-save node@22.23.3 playwright-core@1.65.1)
fi
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
