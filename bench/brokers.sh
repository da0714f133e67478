#!/usr/bin/env bash
# jrpc over message brokers beside each broker's raw request-reply ceiling,
# in one run: for NATS, MQTT 5 (mosquitto) and AMQP (RabbitMQ), ROUNDS
# alternating rounds of
#   - broker_ceiling: an echo responder and callers on the broker's own client
#     crate (the one jrpc uses), no JSON work, a JSON-RPC-sized payload;
#   - jrpc serve --nats/--mqtt/--amqp and jrpc bench add 1 2,
# each with 16 connections x 64 in flight for SECONDS. Prints one JSON line per
# run. Debian's nats-server, mosquitto and rabbitmq-server, started here on
# free ports with their own data directories, and stopped at the end.
#
#   cargo build --release -p jrpc-cli -p jrpc-examples --example broker_ceiling
#   bash bench/brokers.sh [ROUNDS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
seconds="${2:-5}"
jrpc=target/release/jrpc
ceiling=target/release/examples/broker_ceiling
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true; done
  # The port mapper refuses while the killed node is still registered.
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    [ -n "${epmd_port:-}" ] && epmd -port "$epmd_port" -kill >/dev/null 2>&1 && break
    sleep 0.3
  done
  rm -rf "$work"
}
trap cleanup EXIT
exec 2>>"$work/stderr.log"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 400); do (echo > "/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 never opened" >&2; exit 1; }

nats_port=$(free_port); mqtt_port=$(free_port); amqp_port=$(free_port); epmd_port=$(free_port)
setsid nats-server -a 127.0.0.1 -p "$nats_port" > "$work/nats.log" 2>&1 & pids+=($!)
# More than the 1 000 queued messages per client of mosquitto's default:
# 16 x 64 calls may wait for the server at once.
printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 10000\n' "$mqtt_port" > "$work/mosquitto.conf"
setsid mosquitto -c "$work/mosquitto.conf" > "$work/mosquitto.log" 2>&1 & pids+=($!)
mkdir -p "$work/rabbit" && echo '[].' > "$work/rabbit/enabled_plugins"
setsid env HOME="$work/rabbit" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT="$amqp_port" \
  RABBITMQ_DIST_PORT="$(free_port)" ERL_EPMD_PORT="$epmd_port" RABBITMQ_NODENAME="jrpcbench$amqp_port@localhost" \
  RABBITMQ_MNESIA_BASE="$work/rabbit/mnesia" RABBITMQ_LOG_BASE="$work/rabbit/log" \
  RABBITMQ_ENABLED_PLUGINS_FILE="$work/rabbit/enabled_plugins" RABBITMQ_CONFIG_FILE="$work/rabbit/rabbitmq" \
  RABBITMQ_ADVANCED_CONFIG_FILE="$work/rabbit/advanced.config" \
  sh -c 'cd "$HOME" && exec sh /usr/lib/rabbitmq/bin/rabbitmq-server' > "$work/rabbit.log" 2>&1 & pids+=($!)
wait_port "$nats_port"; wait_port "$mqtt_port"; wait_port "$amqp_port"; sleep 1

echo "{\"versions\":{\"nats-server\":\"$(nats-server --version | awk '{print $2}')\",\"mosquitto\":\"$(dpkg-query -W -f='${Version}' mosquitto)\",\"rabbitmq-server\":\"$(dpkg-query -W -f='${Version}' rabbitmq-server)\"}}"

run() { # kind url serve-flags... -- target
  local kind=$1 url=$2; shift 2
  local flags=(); while [ "$1" != "--" ]; do flags+=("$1"); shift; done; shift
  local target=$1
  setsid "$ceiling" respond "$kind" "$url" > /dev/null 2>&1 & local responder=$!
  sleep 1
  echo "{\"case\":\"raw\",\"result\":$("$ceiling" call "$kind" "$url" -c 16 -m 64 -d "$seconds")}"
  kill -KILL -- "-$responder" 2>/dev/null || true; wait "$responder" 2>/dev/null || true
  setsid "$jrpc" serve "${flags[@]}" > /dev/null 2> "$work/serve.log" & local server=$!
  sleep 1
  echo "{\"case\":\"jrpc\",\"broker\":\"$kind\",\"result\":$("$jrpc" bench "$target" add 1 2 -c 16 -m 64 -d "${seconds}s" --json)}"
  kill -TERM -- "-$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true
}

for _ in $(seq 1 "$rounds"); do
  run nats "nats://127.0.0.1:$nats_port" --nats "nats://127.0.0.1:$nats_port" --subject bench -- "nats://127.0.0.1:$nats_port/bench"
  run mqtt "mqtt://127.0.0.1:$mqtt_port" --mqtt "mqtt://127.0.0.1:$mqtt_port" --topic bench -- "mqtt://127.0.0.1:$mqtt_port/bench"
  run amqp "amqp://127.0.0.1:$amqp_port/%2f" --amqp "amqp://127.0.0.1:$amqp_port/%2f" --queue bench -- "amqp://127.0.0.1:$amqp_port/%2f?queue=bench"
done
