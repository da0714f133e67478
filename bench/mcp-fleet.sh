#!/usr/bin/env bash
# MCP beyond one process: three replicas of `jrpc mcp serve --http
# --shared-state` sharing tasks, change notifications and the requestState
# key through a three-node NATS JetStream cluster, behind HAProxy, with
# parts failing under load — on four simulated hosts of this machine:
# network namespaces joined by a bridge in a namespace of its own, with
# addresses from 198.18.0.0/15 (the range reserved for such tests) and no
# route anywhere else.
#
#   host 1  198.18.0.1  NATS node 1 (JetStream)  replica 1 (seeds: nodes 1, 2)
#   host 2  198.18.0.2  NATS node 2 (JetStream)  replica 2 (seeds: nodes 2, 3)
#   host 3  198.18.0.3  NATS node 3 (JetStream)  replica 3 (seeds: nodes 3, 1)
#   host 4  198.18.0.4  HAProxy on :8000 (health checks on /health, sticky
#                       2025-11-25 sessions on Mcp-Session-Id, retries on
#                       connection failures only), and the load:
#     - `jrpc mcp bench` of `add` (read-only: safe to repeat), 8 clients;
#     - three 2025-11-25 sessions (`jrpc mcp bench --protocol-version legacy`:
#       one lands on replica 3, and starts a new session when it dies);
#     - tasks (`sleep` as a task, one every 0.4 s) made through HAProxy and
#       read through it at the end;
#     - a `subscriptions/listen` stream for demo://counter (HAProxy sends it
#       to replica 1), and a `bump` through HAProxy every 0.25 s.
#
# At 1/4 of the run NATS node 1 is killed (SIGKILL: replica 1 reconnects to
# node 2 and must miss no notification); at 1/2 replica 3 is killed (its
# tasks must be reported failed, not left working; calls in flight on it
# that are safe to repeat are sent again).
#
# It prints calls, errors, retried, calls/s each second, p99 per phase,
# tasks completed/failed with their reasons, bumps and notifications; then
# one JSON line of the same. It fails (exit 1) on a failed call of `add`, a
# task left working (or unknown), a notification missed, 2025-11-25
# sessions failing past the calls in flight on the killed replica, or no
# call answered in the last second. Calls that are not safe to repeat (bump,
# task creation) may fail when they were in flight on the killed replica:
# they are counted apart.
#
# Needs root, `ip netns` (iproute2), Debian's nats-server (2.9) and haproxy;
# everything it makes (namespaces, processes, files) is removed when it
# ends, also when interrupted.
#
#   cargo build --release -p jrpc-cli
#   bash bench/mcp-fleet.sh [SECONDS]
#   JRPC=target/debug/jrpc bash bench/mcp-fleet.sh 12    # as CI runs it
#   KEEP=/tmp/fleet bash bench/mcp-fleet.sh             # the logs kept in /tmp/fleet
#   LOG=info KEEP=/tmp/fleet bash bench/mcp-fleet.sh    # the replicas' logs at info
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
lease="${LEASE:-4s}"
jrpc="$(realpath -m "${JRPC:-target/release/jrpc}")"
[ -x "$jrpc" ] || { echo "no $jrpc: cargo build --release -p jrpc-cli (or set JRPC)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench/mcp-fleet.sh makes network namespaces: run it as root" >&2; exit 2; }
command -v ip >/dev/null 2>&1 || { echo "ip (iproute2) not found" >&2; exit 2; }
command -v python3 >/dev/null 2>&1 || { echo "python3 not found" >&2; exit 2; }
nats_server=$(command -v nats-server || echo /usr/sbin/nats-server)
[ -x "$nats_server" ] || { echo "nats-server not found (apt-get install nats-server)" >&2; exit 2; }
haproxy=$(command -v haproxy || echo /usr/sbin/haproxy)
[ -x "$haproxy" ] || { echo "haproxy not found (apt-get install haproxy)" >&2; exit 2; }

# Names of our own (this run's PID in each), so that nothing of anyone
# else's is touched.
source bench/hosts.sh
hosts_up "jmf$$" 4

# The NATS cluster with JetStream: one node per host, each routing to the
# other two; buckets and streams are kept on all three (R3).
routes="nats://$(address 1):6222,nats://$(address 2):6222,nats://$(address 3):6222"
for i in 1 2 3; do
  mkdir -p "$work/js$i"
  ip netns exec "$(ns "$i")" "$nats_server" -n "node$i" -a "$(address "$i")" -p 4222 -js -sd "$work/js$i" \
    --cluster_name jrpc --cluster "nats://$(address "$i"):6222" --routes "$routes" \
    > "$work/nats$i.log" 2>&1 &
  nats_pids[i]=$!
  pids+=($!)
done
for i in 1 2 3; do wait_port "$i" 4222; done
# JetStream elects its meta leader once the nodes see each other.
for _ in $(seq 1 200); do
  grep -qs "JetStream cluster new metadata leader\|Self is new JetStream cluster metadata leader" "$work"/nats*.log && break
  sleep 0.1
done

# The replicas, each allowing the Host its clients name (HAProxy's
# address: a replica refuses Hosts it does not serve, against DNS
# rebinding). The first to start makes the buckets and the stream; the
# others find them. A replica that starts before the cluster is ready is
# started again (bounded).
seeds() { echo "nats://$(address "$1"):4222,nats://$(address "$2"):4222"; }
start_replica() { # i seed-a seed-b
  local i=$1
  for attempt in 1 2 3 4 5 6 7 8 9 10; do
    ip netns exec "$(ns "$i")" "$jrpc" mcp serve --http "$(address "$i"):8000" \
      --shared-state "$(seeds "$2" "$3")" --task-lease "$lease" --allow-host "$(address 4)" \
      --log-level "${LOG:-warn}" > /dev/null 2> "$work/replica$i.log" &
    replica_pids[i]=$!
    pids+=($!)
    for _ in $(seq 1 200); do
      grep -qs "MCP (Streamable HTTP) at" "$work/replica$i.log" && return 0
      kill -0 "${replica_pids[i]}" 2>/dev/null || break
      sleep 0.05
    done
    stop "${replica_pids[i]}"
    sleep 0.5
  done
  cat "$work/replica$i.log" >&2
  exit 1
}
start_replica 1 1 2
start_replica 2 2 3
start_replica 3 3 1

# HAProxy on host 4. Stateless 2026-07-28 requests go round robin; a
# 2025-11-25 session stays on the replica whose response named it
# (Mcp-Session-Id); the listen stream of this test is sent to replica 1
# (X-Fleet-Watch), so that killing replica 3 does not end it. HTTP-level
# retries only on connection failures: a POST that may have run is never
# sent again by the proxy (the client sends again what is safe to).
cat > "$work/haproxy.cfg" <<CFG
global
  maxconn 4096
defaults
  mode http
  timeout connect 1s
  timeout client 5m
  timeout server 5m
frontend mcp
  bind $(address 4):8000
  default_backend replicas
backend replicas
  balance roundrobin
  option httpchk GET /health
  http-check expect status 200
  retry-on conn-failure
  retries 3
  option redispatch 1
  stick-table type string len 64 size 100k expire 30m
  stick on req.hdr(Mcp-Session-Id)
  stick store-response res.hdr(Mcp-Session-Id)
  use-server r1 if { req.hdr(X-Fleet-Watch) -m found }
  default-server check inter 500ms fall 2 rise 2 on-marked-down shutdown-sessions
  server r1 $(address 1):8000
  server r2 $(address 2):8000
  server r3 $(address 3):8000
CFG
ip netns exec "$(ns 4)" "$haproxy" -f "$work/haproxy.cfg" -db > "$work/haproxy.log" 2>&1 &
pids+=($!)
wait_port 4 8000
lb="http://$(address 4):8000/mcp"
for _ in $(seq 1 100); do
  on 4 "$jrpc" mcp call "$lb" add a=1 b=1 > /dev/null 2>&1 && break
  sleep 0.1
done

first=$(python3 -c "print(round($seconds / 4, 1))")
second=$(python3 -c "print(round($seconds / 2, 1))")

# The listen stream, through HAProxy to replica 1.
ip netns exec "$(ns 4)" "$jrpc" mcp watch "$lb" demo://counter -H "X-Fleet-Watch: 1" \
  > "$work/watch.txt" 2> "$work/watch.log" &
watcher=$!
pids+=($!)
for _ in $(seq 1 100); do grep -qs "watching\|listening" "$work/watch.log" && break; sleep 0.05; done
sleep 0.5

# The loads.
ip netns exec "$(ns 4)" "$jrpc" mcp bench "$lb" add a=1 b=2 -c 8 -d "${seconds}s" \
  --mark "${first}s,${second}s" --json > "$work/bench.json" 2> "$work/bench.log" &
bench=$!
pids+=($!)
ip netns exec "$(ns 4)" "$jrpc" mcp bench "$lb" echo text=hi -c 3 -d "${seconds}s" --protocol-version legacy \
  --json > "$work/legacy.json" 2> "$work/legacy.log" &
legacy=$!
pids+=($!)
started=$(date +%s.%N)
ip netns exec "$(ns 4)" bash -c '
  end=$(( $(date +%s) + '"$seconds"' ))
  while [ "$(date +%s)" -lt "$end" ]; do
    if id=$("$0" mcp call --task --detach "$1" sleep ms=2500 2>>"$2/tasks.log"); then
      echo "$id" >> "$2/tasks.txt"
    else
      echo failed >> "$2/tasks-refused.txt"
    fi
    sleep 0.4
  done' "$jrpc" "$lb" "$work" &
tasker=$!
pids+=($!)
ip netns exec "$(ns 4)" bash -c '
  end=$(( $(date +%s) + '"$seconds"' ))
  while [ "$(date +%s)" -lt "$end" ]; do
    if value=$("$0" mcp call "$1" bump 2>>"$2/bumps.log"); then
      echo "$value" >> "$2/bumps-ok.txt"
    else
      echo failed >> "$2/bumps-failed.txt"
    fi
    sleep 0.25
  done' "$jrpc" "$lb" "$work" &
bumper=$!
pids+=($!)

events=()
at "$first"
stop "${nats_pids[1]}"
events+=("$first:NATS node 1 killed")
at "$second"
stop "${replica_pids[3]}"
events+=("$second:replica 3 killed")

status=0
wait "$bench" || status=$?
forget "$bench"
legacy_status=0
wait "$legacy" || legacy_status=$?
forget "$legacy"
wait "$tasker" || true
forget "$tasker"
wait "$bumper" || true
forget "$bumper"
if [ "$status" != 0 ] || ! [ -s "$work/bench.json" ]; then
  echo "jrpc mcp bench failed (exit $status):" >&2
  cat "$work/bench.log" >&2
  exit 1
fi
# The last notifications on their way (a change sent while a NATS stream
# elects a new leader arrives seconds late, not never), then the stream ends.
touch "$work/bumps-ok.txt"
for _ in $(seq 1 100); do
  [ "$(grep -c "demo://counter" "$work/watch.txt" || true)" -ge "$(wc -l < "$work/bumps-ok.txt")" ] && break
  sleep 0.1
done
sleep 0.5
stop "$watcher"

# Every task made, read through HAProxy until it has ended: a task of the
# killed replica is failed once its lease lapses.
deadline=$(( $(date +%s) + 30 ))
touch "$work/tasks.txt"
while :; do
  : > "$work/task-states.txt"
  while read -r id; do
    state=$(on 4 "$jrpc" mcp task get "$lb" "$id" 2>/dev/null \
      | python3 -c 'import json,sys; t=json.load(sys.stdin); print(t["status"], t.get("statusMessage",""))' 2>/dev/null \
      || echo "unknown")
    echo "$id $state" >> "$work/task-states.txt"
  done < "$work/tasks.txt"
  grep -qE " (working|input_required|unknown)" "$work/task-states.txt" || break
  [ "$(date +%s)" -lt "$deadline" ] || break
  sleep 1
done

# shellcheck disable=SC2016
python3 - "$work" "$nats_server" "$legacy_status" "${events[@]}" <<'EOF'
import json, os, subprocess, sys

work, nats_server, legacy_status = sys.argv[1], sys.argv[2], int(sys.argv[3])
events = [(float(at), what) for at, what in (e.split(":", 1) for e in sys.argv[4:])]
report = json.load(open(os.path.join(work, "bench.json")))
def lines(name):
    path = os.path.join(work, name)
    return open(path).read().split("\n")[:-1] if os.path.exists(path) else []
timeline = report["timeline"]
errors = sum(v for k, v in report["errors"].items() if k != "http_status")
ms = lambda us: us / 1000

print(f"add through HAProxy: {report['requests']} calls in {report['seconds']:.1f}s, "
      f"{report['ok']} answered, {errors} errors, {report['retried']} retried "
      f"({report['retries']} repeats)")
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
          f"errors {sum(v for k, v in phase['errors'].items() if k != 'http_status')}")

legacy = {}
try:
    legacy = json.load(open(os.path.join(work, "legacy.json")))
except (OSError, ValueError):
    pass
legacy_errors = sum(v for k, v in legacy.get("errors", {}).items() if k != "http_status")
legacy_last = (legacy.get("timeline") or [{"requests": 0}])[-1]["requests"]
print(f"2025-11-25 sessions (echo): {legacy.get('requests', 0)} calls, {legacy.get('ok', 0)} answered, "
      f"{legacy_errors} errors (calls in flight on the killed replica; the next starts a new session)")

states = {}
reasons = {}
for line in lines("task-states.txt"):
    parts = line.split(" ", 2)
    status = parts[1] if len(parts) > 1 else "unknown"
    states[status] = states.get(status, 0) + 1
    if status not in ("completed",):
        reason = parts[2] if len(parts) > 2 else ""
        reasons[(status, reason)] = reasons.get((status, reason), 0) + 1
refused = len(lines("tasks-refused.txt"))
print(f"tasks: {len(lines('tasks.txt'))} made ({refused} creations failed), " +
      ", ".join(f"{n} {s}" for s, n in sorted(states.items())))
why = {}
for line in lines("tasks.log"):
    line = line.strip()
    # The CLI's one-line failures, and the message or data of an error it
    # printed as JSON.
    said = line.startswith("jrpc: ") and not line.startswith("jrpc: task ")
    if said or line.startswith('"message"') or line.startswith('"data"'):
        why[line] = why.get(line, 0) + 1
for line, n in sorted(why.items(), key=lambda kv: -kv[1]):
    print(f"  creation failed {n}x: {line[:200]}")
for (status, reason), n in sorted(reasons.items()):
    print(f"  {n} {status}: {reason}")

bumps_ok, bumps_failed = len(lines("bumps-ok.txt")), len(lines("bumps-failed.txt"))
notified = len([l for l in lines("watch.txt") if "demo://counter" in l])
print(f"bumps: {bumps_ok} answered, {bumps_failed} failed (not safe to repeat); "
      f"notifications on the listen stream (replica 1): {notified}")

last = timeline[-1] if timeline else {"requests": 0}
version = subprocess.run([nats_server, "--version"], capture_output=True, text=True).stdout.split()[-1]
print(json.dumps({
    "nats_server": version,
    "calls": report["requests"], "ok": report["ok"], "errors": errors,
    "retried": report["retried"], "repeats": report["retries"],
    "seconds": round(report["seconds"], 2),
    "calls_per_second": [s["requests"] for s in timeline],
    "phases": [{"from": p["from"], "to": p["to"], "calls": p["requests"],
                "p99_ms": ms(p["latency_us"]["p99"]), "max_ms": ms(p["latency_us"]["max"])}
               for p in report["phases"]],
    "legacy": {"calls": legacy.get("requests", 0), "ok": legacy.get("ok", 0), "errors": legacy_errors},
    "tasks": {"made": len(lines("tasks.txt")), "creation_failed": refused, **states},
    "bumps": {"ok": bumps_ok, "failed": bumps_failed}, "notifications": notified,
}))
failed = []
if errors:
    failed.append(f"{errors} calls of add (safe to repeat) failed")
if report["ok"] != report["requests"]:
    failed.append("not every call of add was answered")
if last["requests"] == 0:
    failed.append("no call was answered in the last second")
for status in ("working", "input_required", "unknown"):
    if states.get(status):
        failed.append(f"{states[status]} tasks {status} after the run")
if not lines("tasks.txt"):
    failed.append("no task was made")
if notified < bumps_ok:
    failed.append(f"{bumps_ok - notified} notifications missed ({bumps_ok} bumps answered, {notified} heard)")
if legacy_status != 0 or legacy_last == 0:
    failed.append("2025-11-25 sessions stopped working")
if legacy_errors > 10:
    failed.append(f"{legacy_errors} calls of 2025-11-25 sessions failed (only those in flight on the killed replica may)")
if failed:
    print("FAILED: " + "; ".join(failed), file=sys.stderr)
    sys.exit(1)
EOF
