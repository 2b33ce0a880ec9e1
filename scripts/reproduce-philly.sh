#!/usr/bin/env bash
# Reproduces the Helios (SC'21) FIFO / SJF / SRTF comparison on the Philly trace with
# `stoker sim jobs` (docs/scheduling.md, "Dynamic experiment").
#
# Setup (justified in docs/scheduling.md): Philly jobs submitted 2017-10-01 00:00 to 2017-11-30
# 23:59 UTC (Helios' window, 68,510 jobs of the Pollux-artifact copy in shared/traces/philly),
# oracle durations, no checkpoint overhead, Stoker's default placement, and
#   1. the main run: one pooled cluster of 80 nodes x 8 GPUs (640 GPUs), sized so that the
#      offered load matches Helios' (FIFO queueing / JCT = 0.59 here, 0.66 in Helios);
#   2. for reference, Helios' own layout: each virtual cluster (VC) its own pool of 8-GPU nodes
#      sized by HeliosArtifact data/philly_vc.csv (11 VCs, 352 nodes), jobs of other VCs dropped.
#      This copy of the trace has much shorter jobs than the raw log Helios read, so that layout
#      hardly queues at all.
#
# Usage: scripts/reproduce-philly.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
stoker="$build/bin/stoker"
trace=$("$root/scripts/trace-path.sh" philly/philly.csv)
out="${OUT_DIR:-$build/philly-repro}"
mkdir -p "$out"

# VC sizes in nodes (HeliosArtifact data/philly_vc.csv, header `vc,node num`).
cat > "$out/philly_vc.csv" <<'CSV'
vc,node num
6214e9,64
7f04ca,32
11cb48,16
b436b2,64
ee9e8c,64
e13805,16
6c71a0,32
2869ce,16
ed69ec,8
103959,8
0e4a51,32
CSV

summary() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]:<8} {sys.argv[3]:<6} {r['jct_s']['mean']:10.0f} {r['queue_delay_s']['mean']:10.0f} "
      f"{r['jct_s']['median']:10.0f} {r['jct_s']['p99']:10.0f} {r['preemptions']:8d} {r['mean_allocation_pct']:7.1f}")
PY
}

window=(--since 2017-10-01 --until "2017-11-30 23:59:00")
printf '%-8s %-6s %10s %10s %10s %10s %8s %7s\n' layout queue avg_jct avg_queue med_jct p99_jct preempt alloc%
for q in fifo sjf srtf las; do
  "$stoker" sim jobs --trace "$trace" --format philly --cluster 80x8 --queue "$q" "${window[@]}" \
    --json --no-progress --plot "$out/pooled-$q.svg" > "$out/pooled-$q.json"
  summary "$out/pooled-$q.json" pooled "$q"
done
for q in fifo sjf srtf; do
  "$stoker" sim jobs --trace "$trace" --format philly --cluster 1x8 --queue "$q" "${window[@]}" \
    --group-clusters "$out/philly_vc.csv" --json --no-progress > "$out/vc-$q.json"
  summary "$out/vc-$q.json" per-vc "$q"
done
echo "Helios published (per-VC, raw Philly log): avg JCT / avg queueing (s):"
echo "  fifo 86072 / 56531, sjf 34272 / 4731, srtf 30683 / 1138"
