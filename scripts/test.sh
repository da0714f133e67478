#!/usr/bin/env bash
# The whole test suite, from a fresh clone: the README's test command, and
# what CI runs after its format and lint checks.
#
#   bash scripts/test.sh
#
# Needs a Rust toolchain and python3. What else the suite needs it installs
# on Debian (as root, with apt-get), saying what and why; elsewhere it
# names what is missing and stops:
#   nats-server, mosquitto, rabbitmq-server  the broker tests start each
#                                            broker as a process of their own
#   python3-venv                             the MCP interop suite installs the
#                                            official Python SDK in a venv
#   npm                                      the OpenRPC validator, the MCP
#                                            conformance suite and the
#                                            playground's browser driver
#                                            (all pinned, under target/)
#   chromium, fonts-dejavu-core              the playground test drives the
#                                            page in headless Chromium
#   haproxy                                  the MCP conformance suite through
#                                            a load balancer in front of three
#                                            replicas sharing state
#   curl                                     the `jrpc mcp login` test's
#                                            browser ($BROWSER)
# Then: cargo test --workspace, every example, the OpenRPC validator, the
# playground, the MCP interop suites and the MCP conformance suite.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    echo "cargo not found: install a Rust toolchain (https://rustup.rs) first" >&2
    exit 1
  fi
fi
command -v python3 >/dev/null 2>&1 || {
  echo "python3 not found: install it first" >&2
  exit 1
}

step() { echo "== $*"; }

# Each missing package, with why the suite needs it.
missing=()
why=()
need() {
  missing+=("$1")
  why+=("$1: $2")
}
for program in nats-server mosquitto; do
  command -v "$program" >/dev/null 2>&1 || [ -x "/usr/sbin/$program" ] ||
    need "$program" "the broker tests start it as a process of their own"
done
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || command -v rabbitmq-server >/dev/null 2>&1 ||
  need rabbitmq-server "the broker tests start it as a process of their own"
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 ||
  need python3-venv "the MCP interop suite installs the official Python SDK in a venv"
command -v npm >/dev/null 2>&1 ||
  need npm "the OpenRPC validator, the MCP conformance suite and the playground's browser driver come from npm"
command -v chromium >/dev/null 2>&1 ||
  need chromium "the playground test drives the page in headless Chromium"
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] ||
  need haproxy "the MCP conformance suite runs through HAProxy in front of three replicas sharing state"
command -v curl >/dev/null 2>&1 ||
  need curl "the jrpc mcp login test follows the authorization redirects with it (its \$BROWSER)"
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] ||
  need fonts-dejavu-core "the playground's screenshot needs a font"
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    step "installing what the suite needs (Debian packages)"
    printf '   %s\n' "${why[@]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "the suite needs what this machine lacks; install it (on Debian: apt-get install ${missing[*]}):" >&2
    printf '  %s\n' "${why[@]}" >&2
    exit 1
  fi
fi

step "cargo test --workspace (compiling takes most of the time on a fresh clone)"
cargo test --workspace --locked

step "examples (built by the tests above; each runs end to end and exits)"
for example in logging_and_rate_limit custom_layer callback custom_transport http_client caller_generic typed_methods typed_service readme; do
  cargo run -q --locked --example "$example" >/dev/null
done
target_dir="${CARGO_TARGET_DIR:-target}"
# The MCP benchmark, briefly: it must run end to end.
cargo run -q --locked --example mcp_bench -- "$target_dir/debug/jrpc" 200 4 >/dev/null

step "OpenRPC: rpc.discover of jrpc serve and a typed router, through the OpenRPC project's validator (npm, pinned)"
bash crates/jrpc-cli/tests/openrpc/validate.sh "$target_dir/debug/jrpc"

step "playground: the page in headless Chromium (playwright-core from npm, pinned)"
cargo build -q --locked --example playground
bash crates/jrpc-cli/tests/playground/run.sh "$target_dir/debug/jrpc" "$target_dir/debug/examples/playground"

step "jrpc bench --report: the pages in headless Chromium (plots drawn, nothing fetched)"
bash crates/jrpc-cli/tests/bench_report/run.sh "$target_dir/debug/jrpc"

step "MCP interop: the official Python SDK (pinned) as a client of jrpc mcp serve, over stdio and Streamable HTTP"
# A virtual environment at $1 of its own, with the pinned packages "${@:2}".
venv_with() {
  [ -x "$1/bin/python" ] || python3 -m venv "$1"
  "$1/bin/pip" install --quiet --disable-pip-version-check "${@:2}"
}
venv="$target_dir/mcp-venv"
venv_with "$venv" "mcp==2.3.0"
"$venv/bin/python" crates/jrpc-mcp/tests/interop/python_client.py "$target_dir/debug/jrpc"
step "MCP interop: the Python SDK against MCP mounted in an axum app (examples/mcp_in_axum.rs)"
bash crates/jrpc-mcp/tests/interop/axum_example.sh "$target_dir/debug/examples/mcp_in_axum" "$venv/bin/python"
step "MCP interop: jrpc mcp list/call/read/prompt against a server built with the Python SDK, over stdio and HTTP"
"$venv/bin/python" crates/jrpc-mcp/tests/interop/cli_against_python.py "$target_dir/debug/jrpc"
step "MCP interop: McpClient (examples/mcp_client_checks.rs) against the Python SDK server, dual-era and pinned to each era, over stdio and HTTP"
"$venv/bin/python" crates/jrpc-mcp/tests/interop/client_against_python.py "$target_dir/debug/examples/mcp_client_checks"

step "OAuth with real parts: oidc-provider (npm, pinned) as the authorization server of jrpc mcp serve --oauth-issuer; the Python SDK's OAuth client and jrpc mcp login through it"
"$venv/bin/python" crates/jrpc-mcp/tests/interop/oauth_interop.py "$target_dir/debug/jrpc"
step "DPoP: proofs made with PyJWT (pinned) against jrpc mcp serve --oauth-dpop require --oauth-dpop-nonce, hostile ones refused"
jose_venv="$target_dir/jose-venv"
venv_with "$jose_venv" "pyjwt[crypto]==2.10.1"
"$jose_venv/bin/python" crates/jrpc-mcp/tests/interop/dpop_interop.py "$target_dir/debug/jrpc"

step "MCP conformance: the official suite's server scenarios (npm, pinned) against jrpc mcp serve --http --conformance"
bash crates/jrpc-mcp/tests/interop/conformance.sh "$target_dir/debug/jrpc"
step "MCP conformance: the same scenarios through HAProxy in front of three replicas sharing state through NATS JetStream"
bash crates/jrpc-mcp/tests/interop/conformance_fleet.sh "$target_dir/debug/jrpc"
step "MCP conformance: the suite's client scenarios (both requirement sets, every auth/ extension, the Skills client scenarios) against examples/mcp_conformance_client.rs"
bash crates/jrpc-mcp/tests/interop/conformance_client.sh "$target_dir/debug/examples/mcp_conformance_client"

step "all passed"
