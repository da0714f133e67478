#!/usr/bin/env bash
# The playground in a real browser: Debian's chromium, headless, driven by
# playwright-core (npm, pinned), against `jrpc serve` and the `playground`
# example. Pass a path as the third argument to save a screenshot of the
# page after `subtract 42 23` (docs/playground.png is made this way).
#
#   bash crates/jrpc-cli/tests/playground/run.sh PATH/TO/jrpc PATH/TO/examples/playground [SCREENSHOT.png]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../../.."

jrpc=$(realpath "$1")
example=$(realpath "$2")
screenshot=${3:+$(realpath -m "$3")}
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
# An ES module finds its packages beside itself, not through NODE_PATH.
cp "$here/browser.mjs" "$dir/browser.mjs"
PATH="$dir/node_modules/.bin:$PATH" timeout 300 node "$dir/browser.mjs" "$jrpc" "$example" ${screenshot:+"$screenshot"}
