#!/usr/bin/env bash
# Scrape cost of the Stoker agent vs prometheus-node-exporter, measured in one run on this host.
# Starts both on loopback ports, scrapes each /metrics N times with hyperfine (or a curl loop),
# and prints mean latency, body size and the agent/node-exporter ratio.
#
# Usage: scripts/bench-scrape.sh [BUILD_DIR] [N] [SCENARIO]
#   BUILD_DIR  where bin/stoker is (default build-agent)      N  scrapes per target (default 200)
#   SCENARIO   --simulate scenario for the agent (default h100-mig-node)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-agent}; n=${2:-200}; scenario=${3:-h100-mig-node}
stoker="$build/bin/stoker"
agent_port=19471; node_port=19100
[[ -x $stoker ]] || { echo "no $stoker; build it first (ninja -C $build stoker)" >&2; exit 1; }
command -v prometheus-node-exporter >/dev/null || { echo "install prometheus-node-exporter" >&2; exit 1; }

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

"$stoker" agent --simulate "$scenario" --listen "127.0.0.1:$agent_port" --interval 1s \
  >/tmp/stoker-bench-agent.log 2>&1 &
pids+=($!)
prometheus-node-exporter --web.listen-address="127.0.0.1:$node_port" \
  >/tmp/stoker-bench-node-exporter.log 2>&1 &
pids+=($!)

wait_up() {
  for _ in $(seq 100); do curl -sf "$1" >/dev/null && return 0; sleep 0.1; done
  echo "$1 did not come up" >&2; return 1
}
agent_url="http://127.0.0.1:$agent_port/metrics"; node_url="http://127.0.0.1:$node_port/metrics"
wait_up "$agent_url"; wait_up "$node_url"
sleep 2  # let the agent take a couple of samples

mean_ms() {  # url -> mean milliseconds per scrape
  if command -v hyperfine >/dev/null; then
    hyperfine -N --warmup 10 --runs "$n" --export-json /tmp/stoker-bench-scrape.json \
      "curl -sf -o /dev/null $1" >/dev/null 2>&1
    python3 -c 'import json;print(json.load(open("/tmp/stoker-bench-scrape.json"))["results"][0]["mean"]*1000)'
  else
    local s e; s=$(date +%s.%N)
    for _ in $(seq "$n"); do curl -sf -o /dev/null "$1"; done
    e=$(date +%s.%N); python3 -c "print(($e-$s)/$n*1000)"
  fi
}
a=$(mean_ms "$agent_url"); b=$(mean_ms "$node_url")
asz=$(curl -sf "$agent_url" | wc -c); bsz=$(curl -sf "$node_url" | wc -c)
aser=$(curl -sf "$agent_url" | grep -vc '^#'); bser=$(curl -sf "$node_url" | grep -vc '^#')
printf '%-26s %10s %10s %8s\n' target "mean ms" bytes series
printf '%-26s %10.3f %10d %8d\n' "stoker agent ($scenario)" "$a" "$asz" "$aser"
printf '%-26s %10.3f %10d %8d\n' prometheus-node-exporter "$b" "$bsz" "$bser"
python3 -c "print(f'ratio agent/node-exporter (mean scrape time): {$a/$b:.3f}')"
