# Simulated hosts on this machine, for the bench scripts that run across
# hosts (bench/scale-out.sh, bench/mcp-fleet.sh). Sourced, not run:
#
#   source bench/hosts.sh
#   hosts_up TAG N      # N network namespaces TAG-h1..TAG-hN on a bridge
#
# Each host's eth0 is one end of a veth pair whose other end is a port of a
# bridge in a namespace of its own (TAG-br); host i has 198.18.0.i (the
# range reserved for such tests), and nothing is made in, or routed to, the
# namespace the script runs in. The processes a script starts go in `pids`
# (`stop PID` kills and reaps one); when the script ends, also when
# interrupted, they are killed and reaped, the namespaces deleted and the
# work folder `$work` removed (KEEP=DIR keeps it there instead, with the
# run's logs).

address() { echo "198.18.0.$1"; }
work=$(mktemp -d)
bridge_ns=""
hosts=()
# The processes of ours still running: a PID leaves the list once reaped,
# so that cleanup never signals a PID the system may have given another.
pids=()
forget() {
  local kept=() pid
  for pid in "${pids[@]}"; do [ "$pid" = "$1" ] || kept+=("$pid"); done
  pids=("${kept[@]}")
}
stop() { # kills one of ours and reaps it
  kill -KILL "$1" 2>/dev/null || true
  { wait "$1"; } 2>/dev/null || true
  forget "$1"
}
cleanup() {
  for pid in "${pids[@]}" ${sleeper:-}; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}" ${sleeper:-}; do { wait "$pid"; } 2>/dev/null || true; done
  for ns in "${hosts[@]}" $bridge_ns; do ip netns del "$ns" 2>/dev/null || true; done
  if [ -n "${KEEP:-}" ]; then rm -rf "$KEEP" && mv "$work" "$KEEP"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

hosts_up() { # tag count
  local tag=$1 count=$2 i host
  bridge_ns="$tag-br"
  ip netns add "$bridge_ns"
  ip -n "$bridge_ns" link add br0 type bridge
  ip -n "$bridge_ns" link set br0 up
  for i in $(seq 1 "$count"); do
    host="$tag-h$i"
    hosts+=("$host")
    ip netns add "$host"
    ip -n "$bridge_ns" link add "port$i" type veth peer name eth0 netns "$host"
    ip -n "$bridge_ns" link set "port$i" master br0 up
    ip -n "$host" addr add "$(address "$i")/24" dev eth0
    ip -n "$host" link set eth0 up
    ip -n "$host" link set lo up
  done
}

# Runs a command on host i. To start one in the background, use `ip netns
# exec "$(ns i)" PROGRAM &` (it execs the program): then $! is the
# program's own PID.
on() { local i=$1; shift; ip netns exec "${hosts[$((i - 1))]}" "$@"; }
ns() { echo "${hosts[$(($1 - 1))]}"; }

wait_port() { # host port
  for _ in $(seq 1 300); do
    on "$1" bash -c "echo > /dev/tcp/$(address "$1")/$2" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "host $1: port $2 never opened" >&2
  exit 1
}

# Waits run in the background: a signal is handled at once, not after them.
pause() { sleep "$1" & sleeper=$!; wait "$sleeper"; unset sleeper; }
at() { # seconds since $started (the load's clock)
  pause "$(python3 -c "import time; print(max(0.0, $started + $1 - time.time()))")"
}
