#!/usr/bin/env bash
# 100 `stoker submit` against a local `stoker up` next to 100 `sbatch` against a local Slurm
# (scripts/slurm-cluster.sh), measured in one run, in alternating rounds of 10 so both see the
# same machine load. Prints the wall time of each and the ratio stoker/sbatch (< 1: stoker is
# faster). Usage: bench/cli-vs-sbatch.sh [BUILD_DIR] [N]   (default build, 100)
# STOKER_SYNC=normal runs the server with --sync normal (a commit survives kill -9 but not a
# power loss, as slurmctld's state saves do); the default, full, fsyncs every commit.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
n=${2:-100}
stoker=$(realpath "$build/bin/stoker")
[[ -x $stoker ]] || { echo "no $stoker: build first" >&2; exit 2; }
command -v sbatch >/dev/null || { echo "sbatch missing: run scripts/install-deps.sh" >&2; exit 2; }
work=$(mktemp -d /tmp/stoker-cli-bench.XXXXXX)
cleanup() {
  [[ -n ${up_pid:-} ]] && kill "$up_pid" 2>/dev/null && wait "$up_pid" 2>/dev/null
  scripts/slurm-cluster.sh down "$work/slurm" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

SLURM_NODES=2 scripts/slurm-cluster.sh up "$work/slurm" >/dev/null
export SLURM_CONF=$work/slurm/slurm.conf
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
allow=(); [[ $(id -u) -eq 0 ]] && allow=(--allow-root-jobs)
XDG_CONFIG_HOME=$work/config "$stoker" up --data-dir "$work/stoker" --listen "127.0.0.1:$port" --sync "${STOKER_SYNC:-full}" \
  "${allow[@]}" >"$work/up.log" 2>&1 &
up_pid=$!
for _ in $(seq 100); do
  curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  sleep 0.1
done
token=$(cat "$work/stoker/admin.token")
# Each job is `true`: both systems queue, place and run it; the loop times the submission as a
# user's script sees it (the command returns once the job is accepted).
stoker_round() {
  for _ in $(seq "$1"); do
    "$stoker" submit --server "http://127.0.0.1:$port" --token "$token" -- true >/dev/null
  done
}
sbatch_round() {
  for _ in $(seq "$1"); do sbatch --wrap true -o /dev/null >/dev/null; done
}
# Warm both (page cache, connections, first database pages).
stoker_round 3
sbatch_round 3
ts=0 tb=0
rounds=$((n / 10))
for _ in $(seq "$rounds"); do
  t0=$(date +%s%N); stoker_round 10; t1=$(date +%s%N); sbatch_round 10; t2=$(date +%s%N)
  ts=$((ts + t1 - t0)) tb=$((tb + t2 - t1))
done
total=$((rounds * 10))
python3 - "$total" "$ts" "$tb" <<'PY'
import sys
n, ts, tb = int(sys.argv[1]), int(sys.argv[2]) / 1e9, int(sys.argv[3]) / 1e9
print(f"{n} x stoker submit: {ts:.2f} s ({ts / n * 1000:.1f} ms each)")
print(f"{n} x sbatch:        {tb:.2f} s ({tb / n * 1000:.1f} ms each)")
print(f"ratio stoker/sbatch: {ts / tb:.2f}")
PY
