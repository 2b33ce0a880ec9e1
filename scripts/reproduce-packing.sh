#!/usr/bin/env bash
# Reproduces the static packing experiment of the FGD paper (ATC'23) on every openb workload that
# has published results, for every placement policy, and prints a markdown table of GPU
# allocation (mean over seeds) beside the published figures (docs/scheduling.md).
#
# Usage: scripts/reproduce-packing.sh [STOKER_BINARY] [SEEDS]   (defaults: build/bin/stoker, 42-51)
# Env: OUT (CSV directory, default /tmp/stoker-packing), THREADS (default 2: the machine is
# shared), NICE (default 10). The traces are found as docs/traces.md says (scripts/trace-path.sh).
# About 10 minutes wall for 9 workloads x 8 policies x 10 seeds on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
stoker=${1:-build/bin/stoker}
seeds=${2:-42-51}
out=${OUT:-/tmp/stoker-packing}
threads=${THREADS:-2}
niceness=${NICE:-10}
openb=$(dirname "$(scripts/trace-path.sh openb/reference_results.csv)")
mkdir -p "$out"
workloads=$(cut -d, -f1 "$openb/reference_results.csv" | tail -n +2 | sort -u | sed 's/^openb_pod_list_//')
for w in $workloads; do
  nice -n "$niceness" "$stoker" sim packing --nodes "$openb/openb_node_list_gpu_node.csv" \
    --pods "$openb/openb_pod_list_$w.csv" --policy all --seeds "$seeds" --threads "$threads" \
    --csv "$out/$w.csv" --plot "$out/$w.svg" 2>"$out/$w.log"
done
python3 - "$openb/reference_results.csv" "$out" <<'PY'
import csv, glob, os, sys
ref, out = sys.argv[1], sys.argv[2]
names = {"01-Random": "random", "02-DotProd": "dotprod", "03-GpuClustering": "clustering",
         "04-GpuPacking": "packing", "05-BestFit": "bestfit", "06-FGD": "fgd"}
pub = {}
for row in csv.DictReader(open(ref)):
    if row["metric"] == "gpu_alloc_pct":
        pub[(row["workload"].replace("openb_pod_list_", ""), names[row["policy"]])] = row
steps = [50, 70, 90, 100, 110, 130]
print("| workload | policy | " + " | ".join(f"{s} %: ours / published" for s in steps) + " | max abs diff 50-130 |")
print("|---|---|" + "---|" * (len(steps) + 1))
for path in sorted(glob.glob(os.path.join(out, "*.csv"))):
    for row in csv.DictReader(open(path)):
        if row["metric"] != "gpu_alloc_pct":
            continue
        key = (row["workload"], row["policy"])
        p = pub.get(key)
        cells, worst = [], 0.0
        for s in range(50, 131, 10):
            ours = float(row[f"arr_{s}"])
            if p:
                worst = max(worst, abs(ours - float(p[f"arr_{s}"])))
        for s in steps:
            ours = float(row[f"arr_{s}"])
            cells.append(f"{ours:.2f} / {p[f'arr_{s}']}" if p else f"{ours:.2f} / -")
        print(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + (f" | {worst:.2f} |" if p else " | - |"))
PY
