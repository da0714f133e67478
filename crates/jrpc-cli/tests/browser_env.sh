# Sourced by the browser tests (playground/run.sh, bench_report/run.sh):
# finds Debian's chromium (or $CHROMIUM) and installs node and
# playwright-core (npm, pinned) once into $browser_dir, shared by both.
export CHROMIUM="${CHROMIUM:-$(command -v chromium || true)}"
if [ -z "$CHROMIUM" ]; then
  echo "chromium not found: install Debian's chromium (apt-get install chromium) or set CHROMIUM" >&2
  exit 1
fi
browser_dir="${CARGO_TARGET_DIR:-target}/playground-browser"
mkdir -p "$browser_dir"
browser_dir=$(realpath "$browser_dir")
if [ ! -d "$browser_dir/node_modules/playwright-core" ] || [ ! -x "$browser_dir/node_modules/.bin/node" ]; then
  (cd "$browser_dir" && npm install --silent --no-audit --no-fund --no-save node@22.23.3 playwright-core@1.65.1)
fi
