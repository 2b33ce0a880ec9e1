#!/usr/bin/env bash
# Starts `stoker server` on a fresh data directory and runs stoker-loadgen against it on
# loopback. Usage: bench/server/load_test.sh BUILD_DIR agents|submit [loadgen options...]
# Example: bench/server/load_test.sh build agents --agents 1000 --duration 60
set -euo pipefail
build=${1:?build dir}; mode=${2:?agents or submit}; shift 2
bin=$build/bin/stoker
gen=$build/bench/server/stoker-loadgen
data=$(mktemp -d /tmp/stoker-load.XXXXXX)
port=${STOKER_LOAD_PORT:-18470}
# One connection per simulated agent on each side: as many descriptors as the hard limit allows.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || ulimit -n 8192 2>/dev/null || true
"$bin" smi --simulate h100-mig-node --json > "$data/samples.json"
"$bin" server --data-dir "$data/server" --listen 127.0.0.1:$port ${STOKER_SERVER_ARGS:-} \
  > "$data/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 100); do [ -s "$data/server/admin.token" ] && break; sleep 0.1; done
# The generator reports its CPU and the server's over the measured window (--server-pid).
pid_arg=(); [ "$mode" = agents ] && pid_arg=(--server-pid "$server")
timer=(); [ -x /usr/bin/time ] && timer=(/usr/bin/time -f "generator: max RSS %M KiB")
"${timer[@]}" "$gen" --mode "$mode" --server 127.0.0.1:$port \
  --admin-token-file "$data/server/admin.token" --samples "$data/samples.json" "${pid_arg[@]}" "$@"
echo "server: $(ps -o rss=,nlwp= -p $server | awk '{printf "RSS %.0f MiB, %d threads", $1/1024, $2}')"
