#!/usr/bin/env bash
# Two builds of `jrpc serve` under the same load, in alternated pairs:
# throughput after/before, with the order swapped every other pair so that
# neither build always runs first.
#
#   bash bench/compare/serve-pairs.sh BEFORE_JRPC AFTER_JRPC [tcp|ws] [PAIRS]
#
# Each server runs on core 0 (`--tcp` and `--http` on free ports), the load
# (`jrpc bench URL add 1 2 -c 16 -m 64 -d 4s`, of the AFTER build) on
# core 1. Prints requests/s of both and their ratio per pair.
set -euo pipefail

before=${1:?usage: serve-pairs.sh BEFORE_JRPC AFTER_JRPC [tcp|ws] [PAIRS]}
after=${2:?usage: serve-pairs.sh BEFORE_JRPC AFTER_JRPC [tcp|ws] [PAIRS]}
proto=${3:-tcp}
pairs=${4:-6}

rate() {
  local bin=$1 out pid target
  out=$(mktemp)
  taskset -c 0 "$bin" serve --tcp 127.0.0.1:0 --http 127.0.0.1:0 2>"$out" &
  pid=$!
  for _ in $(seq 100); do grep -q "ws://" "$out" && break; sleep 0.05; done
  sleep 0.3
  case "$proto" in
    tcp) target=$(grep -o 'tcp://[0-9.:]*' "$out" | head -1) ;;
    ws) target=$(grep -o 'ws://[0-9.:/]*' "$out" | head -1) ;;
    *) echo "unknown transport: $proto" >&2; kill "$pid"; exit 2 ;;
  esac
  taskset -c 1 "$after" bench "$target" add 1 2 -c 16 -m 64 -d 4s --json 2>/dev/null |
    python3 -c 'import json,sys; print(round(json.load(sys.stdin)["requests_per_second"]))'
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  rm -f "$out"
}

for i in $(seq "$pairs"); do
  if [ $((i % 2)) = 0 ]; then
    b=$(rate "$before"); a=$(rate "$after")
  else
    a=$(rate "$after"); b=$(rate "$before")
  fi
  echo "$proto pair $i: before $b after $a ratio $(python3 -c "print(round($a / $b, 2))")"
done
