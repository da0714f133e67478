#!/usr/bin/env bash
# Runs every fuzz target for a short while, starting from the seed corpus.
#
#   fuzz/run.sh [SECONDS]    seconds per target, default 30
#
# Needs the nightly toolchain; without it this prints a note and succeeds.
# Installs cargo-fuzz when it is missing. Exits non-zero when any target
# finds a crash; the crashing input is kept in fuzz/artifacts/<target>/.
# New corpus entries go to a temporary directory, never into the repository.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds="${1:-30}"
# A fixed seed keeps CI runs alike; FUZZ_SEED=0 lets libFuzzer pick one
# (explore by hand with it).
seed="${FUZZ_SEED:-1}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -eq 0 ]; then
    echo "usage: fuzz/run.sh [SECONDS]" >&2
    exit 2
fi

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz/run.sh: no nightly toolchain (cargo +nightly); skipping the fuzz targets"
    exit 0
fi

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz/run.sh: installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

targets=(parse_frame router_handle codec_ndjson codec_content_length)

work="$(mktemp -d "${TMPDIR:-/tmp}/jrpc-fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# Build every target once up front, so that a build failure is reported as
# such and not as a crash.
cargo +nightly fuzz build

failed=()
for target in "${targets[@]}"; do
    corpus="$work/corpus/$target"
    mkdir -p "$corpus"
    cp fuzz/corpus/"$target"/* "$corpus"/
    echo "=== $target: ${seconds}s"
    # libFuzzer reports every new input; keep that in a log, shown on failure.
    if cargo +nightly fuzz run "$target" "$corpus" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 -seed="$seed" \
        > "$work/$target.log" 2>&1; then
        :
    else
        failed+=("$target")
        tail -n 60 "$work/$target.log"
    fi
done

echo
echo "=== summary"
for target in "${targets[@]}"; do
    runs="$(grep -E '^stat::number_of_executed_units:' "$work/$target.log" | awk '{print $2}' | tail -n 1)"
    status=ok
    for f in "${failed[@]+"${failed[@]}"}"; do
        [ "$f" = "$target" ] && status=FAILED
    done
    printf '%-22s %-7s %s execs\n' "$target" "$status" "${runs:-?}"
done

if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz/run.sh: crashes in: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
    exit 1
fi
