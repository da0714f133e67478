#!/usr/bin/env bash
# The official MCP conformance suite's server scenarios (as conformance.sh
# runs them: both requirement sets and every tasks scenario) through HAProxy
# in front of THREE replicas of `jrpc mcp serve --http --conformance
# --shared-state nats://...`, sharing one `nats-server -js`: every
# multi-round-trip request and task may reach a different replica on each
# of its requests, and 2025-11-25 sessions stay on theirs (sticky on
# Mcp-Session-Id).
#
#   bash crates/jrpc-mcp/tests/interop/conformance_fleet.sh PATH/TO/jrpc
#
# Needs Debian's nats-server and haproxy; binds 127.0.0.1 only; stops what
# it started and removes its files when it ends.
set -euo pipefail
cd "$(dirname "$0")/../../../.."

jrpc=$(realpath "$1")
nats_server=$(command -v nats-server || echo /usr/sbin/nats-server)
haproxy=$(command -v haproxy || echo /usr/sbin/haproxy)
[ -x "$nats_server" ] || { echo "nats-server not found (apt-get install nats-server)" >&2; exit 2; }
[ -x "$haproxy" ] || { echo "haproxy not found (apt-get install haproxy)" >&2; exit 2; }

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do { wait "$pid"; } 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

nats_port=$(free_port)
"$nats_server" -js -a 127.0.0.1 -p "$nats_port" -sd "$work/js" > "$work/nats.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do (echo > "/dev/tcp/127.0.0.1/$nats_port") 2>/dev/null && break; sleep 0.05; done

backends=""
for i in 1 2 3; do
  "$jrpc" mcp serve --http 127.0.0.1:0 --conformance --shared-state "nats://127.0.0.1:$nats_port" \
    2> "$work/replica$i.log" > /dev/null &
  pids+=($!)
  url=
  for _ in $(seq 200); do
    url=$(sed -n 's/^jrpc: MCP (Streamable HTTP) at \(.*\)$/\1/p' "$work/replica$i.log")
    [ -n "$url" ] && break
    sleep 0.05
  done
  [ -n "$url" ] || { echo "replica $i did not start" >&2; cat "$work/replica$i.log" >&2; exit 1; }
  authority=${url#http://}
  authority=${authority%/mcp}
  backends+="  server r$i $authority check inter 500ms"$'\n'
done

lb_port=$(free_port)
cat > "$work/haproxy.cfg" <<CFG
global
  maxconn 1024
defaults
  mode http
  timeout connect 1s
  timeout client 5m
  timeout server 5m
frontend mcp
  bind 127.0.0.1:$lb_port
  default_backend replicas
backend replicas
  balance roundrobin
  option httpchk GET /health
  retry-on conn-failure
  retries 3
  option redispatch 1
  stick-table type string len 64 size 10k expire 30m
  stick on req.hdr(Mcp-Session-Id)
  stick store-response res.hdr(Mcp-Session-Id)
$backends
CFG
"$haproxy" -f "$work/haproxy.cfg" -db > "$work/haproxy.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do (echo > "/dev/tcp/127.0.0.1/$lb_port") 2>/dev/null && break; sleep 0.05; done

echo "three replicas behind HAProxy at http://127.0.0.1:$lb_port/mcp"
bash crates/jrpc-mcp/tests/interop/conformance.sh --url "http://127.0.0.1:$lb_port/mcp"
