#!/usr/bin/env bash
# OpenRPC documents jrpc produces, validated by the OpenRPC project's own
# validator (`validateOpenRPCDocument` of @open-rpc/schema-utils-js, which
# holds the official meta-schema), fetched pinned from the npm registry:
# - what `rpc.discover` answers on `jrpc serve` (the demo methods, described
#   by hand);
# - the document of the `typed_methods` example (schemas derived by
#   schemars, a recursive type among them);
# and, so the check is known to bite, a broken copy that must fail.
#
#   bash crates/jrpc-cli/tests/openrpc/validate.sh PATH/TO/jrpc
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../../.."

jrpc=$(realpath "$1")
dir="${CARGO_TARGET_DIR:-target}/openrpc-validate"
mkdir -p "$dir"
dir=$(realpath "$dir")
if [ ! -d "$dir/node_modules/@open-rpc/schema-utils-js" ] || [ ! -x "$dir/node_modules/.bin/node" ]; then
  (cd "$dir" && npm install --silent --no-audit --no-fund --no-save node@22.23.3 @open-rpc/schema-utils-js@2.2.1)
fi
export PATH="$dir/node_modules/.bin:$PATH"

"$jrpc" call rpc.discover -- "$jrpc" serve --stdio > "$dir/serve.json"
cargo run -q --locked --example typed_methods -- document > "$dir/typed.json"
NODE_PATH="$dir/node_modules" node "$here/validate.js" "$dir/serve.json" "$dir/typed.json"
