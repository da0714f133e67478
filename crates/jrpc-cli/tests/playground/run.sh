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
. "$here/../browser_env.sh"
dir="$browser_dir"
# An ES module finds its packages beside itself, not through NODE_PATH.
cp "$here/browser.mjs" "$dir/browser.mjs"
PATH="$dir/node_modules/.bin:$PATH" timeout 300 node "$dir/browser.mjs" "$jrpc" "$example" ${screenshot:+"$screenshot"}
