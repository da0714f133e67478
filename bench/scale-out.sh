#!/usr/bin/env bash
# JSON-RPC across hosts over a NATS cluster, with parts of it failing under
# load, on three simulated hosts of this machine: network namespaces joined
# by a bridge in a namespace of its own, with addresses from 198.18.0.0/15
# (the range reserved for such tests) and no route anywhere else.
#
#   host 1  198.18.0.1  nats-server node 1   jrpc serve --nats (nodes 1, 2)
#   host 2  198.18.0.2  nats-server node 2   jrpc serve --nats (nodes 2, 3)
#   host 3  198.18.0.3  nats-server node 3   jrpc bench --idempotent --retries 5
#
# Scenarios (the first word):
#   kill  at 1/4 of the run the NATS node of host 1 is killed (SIGKILL), at
#         1/2 the jrpc server of host 2 (SIGKILL: a host that died);
#   cut   at 1/4 of the run host 1's link goes down (ip link set eth0 down)
#         for CUT seconds (default 3), then comes back.
# It prints calls, errors, retried calls, calls/s in each second, p99 before
# and after each event, the rate before each event, its lowest after it and
# how long until it was back to 80 % of it; then one JSON line of the same.
# It fails (exit 1) if a call failed, or if no call was answered in the
# last second of the run. Events are timed from when the bench has
# connected (its own clock starts a check call later: milliseconds).
# BENCH_FLAGS adds flags to the bench (e.g. --attempt-timeout 1s).
#
# Needs root, `ip netns` (iproute2) and Debian's nats-server; everything it
# makes (namespaces, processes, files) is removed when it ends, also when
# interrupted.
#
#   cargo build --release -p jrpc-cli
#   bash bench/scale-out.sh [kill|cut] [SECONDS] [CUT]
#   JRPC=target/debug/jrpc bash bench/scale-out.sh kill 12    # as CI runs it
set -euo pipefail
cd "$(dirname "$0")/.."
scenario="${1:-kill}"
seconds="${2:-20}"
cut_for="${3:-3}"
case "$scenario" in kill | cut) ;; *)
  echo "usage: bench/scale-out.sh [kill|cut] [SECONDS] [CUT]" >&2
  exit 2
  ;;
esac
jrpc="$(realpath -m "${JRPC:-target/release/jrpc}")"
[ -x "$jrpc" ] || { echo "no $jrpc: cargo build --release -p jrpc-cli (or set JRPC)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench/scale-out.sh makes network namespaces: run it as root" >&2; exit 2; }
command -v ip >/dev/null 2>&1 || { echo "ip (iproute2) not found" >&2; exit 2; }
command -v python3 >/dev/null 2>&1 || { echo "python3 not found" >&2; exit 2; }
nats_server=$(command -v nats-server || echo /usr/sbin/nats-server)
[ -x "$nats_server" ] || { echo "nats-server not found (apt-get install nats-server)" >&2; exit 2; }

# Names of our own (this run's PID in each), so that nothing of anyone
# else's is touched.
source bench/hosts.sh
hosts_up "jso$$" 3

# The NATS cluster: one node per host, each routing to the other two.
routes="nats://$(address 1):6222,nats://$(address 2):6222,nats://$(address 3):6222"
for i in 1 2 3; do
  ip netns exec "$(ns "$i")" "$nats_server" -n "node$i" -a "$(address "$i")" -p 4222 \
    --cluster_name jrpc --cluster "nats://$(address "$i"):6222" --routes "$routes" \
    > "$work/nats$i.log" 2>&1 &
  nats_pids[i]=$!
  pids+=($!)
done
for i in 1 2 3; do wait_port "$i" 4222; done

# The servers, each knowing two nodes (the rest they learn from them).
seeds() { echo "nats://$(address "$1"):4222,nats://$(address "$2"):4222"; }
ip netns exec "$(ns 1)" "$jrpc" serve --nats "$(seeds 1 2)" --subject demo > /dev/null 2> "$work/serve1.log" &
serve_pids[1]=$!
pids+=($!)
ip netns exec "$(ns 2)" "$jrpc" serve --nats "$(seeds 2 3)" --subject demo > /dev/null 2> "$work/serve2.log" &
serve_pids[2]=$!
pids+=($!)
for i in 1 2; do
  for _ in $(seq 1 200); do grep -qs "listening on" "$work/serve$i.log" && break; sleep 0.05; done
  grep -q "listening on" "$work/serve$i.log" || { cat "$work/serve$i.log" >&2; exit 1; }
done

# The load, from host 3: the target names node 3 and node 1.
first=$(python3 -c "print(round($seconds / 4, 1))")
second=$(python3 -c "print(round($seconds / 2, 1))")
case "$scenario" in
  kill) marks="${first}s,${second}s" ;;
  cut) marks="${first}s,$(python3 -c "print(round($first + $cut_for, 1))")s" ;;
esac
ip netns exec "$(ns 3)" "$jrpc" bench "nats://$(address 3):4222,$(address 1):4222/demo" add 1 2 \
  -c 4 -m 16 -d "${seconds}s" --idempotent --retries 5 --mark "$marks" --json ${BENCH_FLAGS:-} \
  > "$work/bench.json" 2> "$work/bench.log" &
bench=$!
pids+=($!)
# The bench's clock starts once its four connections are up (and one check
# call made): the events are timed from then.
for _ in $(seq 1 1000); do
  [ "$(on 3 ss -Htn state established '( dport = :4222 )' | wc -l)" -ge 4 ] && break
  sleep 0.01
done
started=$(date +%s.%N)
events=()
case "$scenario" in
  kill)
    at "$first"
    stop "${nats_pids[1]}"
    events+=("$first:NATS node of host 1 killed")
    at "$second"
    stop "${serve_pids[2]}"
    events+=("$second:jrpc server of host 2 killed")
    ;;
  cut)
    at "$first"
    ip -n "${hosts[0]}" link set eth0 down
    events+=("$first:host 1's link down")
    pause "$cut_for"
    ip -n "${hosts[0]}" link set eth0 up
    events+=("$(python3 -c "print(round($first + $cut_for, 1))"):host 1's link up")
    ;;
esac
status=0
wait "$bench" || status=$?
forget "$bench"
if [ "$status" != 0 ] || ! [ -s "$work/bench.json" ]; then
  echo "jrpc bench failed (exit $status):" >&2
  cat "$work/bench.log" >&2
  exit 1
fi

# shellcheck disable=SC2016
python3 - "$work/bench.json" "$scenario" "$nats_server" "${events[@]}" <<'EOF'
import json, statistics, subprocess, sys

report = json.load(open(sys.argv[1]))
scenario, nats_server = sys.argv[2], sys.argv[3]
events = [(float(at), what) for at, what in (e.split(":", 1) for e in sys.argv[4:])]
timeline = report["timeline"]
errors = sum(report["errors"].values())
ms = lambda us: us / 1000

print(f"scenario {scenario}: {report['requests']} calls in {report['seconds']:.1f}s, "
      f"{report['ok']} answered, {errors} errors, {report['retried']} retried "
      f"({report['retries']} retries)")
print("calls/s each second:")
start = 0.0
for second in timeline:
    marks = [what for at, what in events if start <= at < second["second"]]
    note = f"   <- {'; '.join(marks)}" if marks else ""
    print(f"  {start:5.1f}-{second['second']:5.1f}s {second['requests'] / (second['second'] - start):9.0f}"
          f"  retried {second['retried']:4}  errors {second['errors']}{note}")
    start = second["second"]
print("latency by phase:")
for phase in report["phases"]:
    l = phase["latency_us"]
    print(f"  {phase['from']:5.1f}-{phase['to']:5.1f}s  {phase['requests']:8} calls  "
          f"p50 {ms(l['p50']):.2f} ms  p99 {ms(l['p99']):.2f} ms  max {ms(l['max']):.2f} ms  "
          f"errors {sum(phase['errors'].values())}")

# Each event against the rate just before it: the median of the whole
# seconds since the previous event (the run's first second, connections
# warming up, left out when there are others); how far the rate fell in the
# seconds after it, and how long until a whole second was at 80 % of it again.
whole = []
start = 0.0
for second in timeline:
    if second["second"] - start >= 0.99:
        whole.append((start, second["second"], second["requests"] / (second["second"] - start)))
    start = second["second"]
recovery = []
previous = 0.0
for n, (at, what) in enumerate(events):
    before = [rate for s, e, rate in whole if s >= previous and e <= at]
    before = before[1:] if previous == 0.0 and len(before) > 1 else before
    baseline = statistics.median(before) if before else 0.0
    following = events[n + 1][0] if n + 1 < len(events) else float("inf")
    after = [(s, e, rate) for s, e, rate in whole if s >= at]
    lowest = min((rate for s, e, rate in after if s < following), default=None)
    back = next((round(e - at, 1) for s, e, rate in after if rate >= 0.8 * baseline), None)
    recovery.append({"at": at, "event": what, "rate_before": round(baseline),
                     "lowest_rate_after": None if lowest is None else round(lowest),
                     "back_to_80_percent_after_s": back})
    told = f"back to 80 % within {back}s" if back is not None else "not back to 80 % by the end"
    print(f"after '{what}' at {at}s: {baseline:.0f}/s before, "
          f"{lowest or 0:.0f}/s at the lowest, {told}")
    previous = at

last = timeline[-1] if timeline else {"requests": 0}
version = subprocess.run([nats_server, "--version"], capture_output=True, text=True).stdout.split()[-1]
print(json.dumps({
    "scenario": scenario,
    "nats_server": version,
    "calls": report["requests"],
    "ok": report["ok"],
    "errors": errors,
    "retried": report["retried"],
    "retries": report["retries"],
    "seconds": round(report["seconds"], 2),
    "calls_per_second": [s["requests"] for s in timeline],
    "phases": [{"from": p["from"], "to": p["to"], "calls": p["requests"],
                "p99_ms": ms(p["latency_us"]["p99"]), "max_ms": ms(p["latency_us"]["max"])}
               for p in report["phases"]],
    "recovery": recovery,
}))
failed = []
if errors:
    failed.append(f"{errors} calls failed")
if report["ok"] != report["requests"]:
    failed.append("not every call was answered")
if last["requests"] == 0:
    failed.append("no call was answered in the last second")
if failed:
    print("FAILED: " + "; ".join(failed), file=sys.stderr)
    sys.exit(1)
EOF
