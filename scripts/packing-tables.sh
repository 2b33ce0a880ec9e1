#!/usr/bin/env bash
# Regenerates the tables of docs/scheduling.md, "stoker against FGD at every load": `stoker`
# against FGD at every arrival step 50..130 % (the published FGD figures where the paper has
# them, our `fgd` on the same arrivals everywhere), on every openb pod list found and on the
# generated GPU-model-constrained and multi-GPU-heavy variants of `default`.
#
# Usage: scripts/packing-tables.sh [STOKER_BINARY] [SEEDS]   (defaults: build/bin/stoker, 42-51)
# Env: OUT (CSV folder, default /tmp/stoker-packing-tables), THREADS (default 2), NICE (10),
# TABLES_ONLY=1 (print the tables from the CSVs already in OUT).
# The traces are found as docs/traces.md says (scripts/trace-path.sh); pod lists that are not
# there are left out of the tables. About 15 minutes on two loaded cores.
set -euo pipefail
cd "$(dirname "$0")/.."
stoker=${1:-build/bin/stoker}
seeds=${2:-42-51}
out=${OUT:-/tmp/stoker-packing-tables}
threads=${THREADS:-2}
niceness=${NICE:-10}
nodes=$(scripts/trace-path.sh openb/openb_node_list_gpu_node.csv)
ref=$(scripts/trace-path.sh openb/reference_results.csv)
mkdir -p "$out"
run() {  # NAME POD_LIST [stoker sim packing options...]
  local name=$1 list=$2
  shift 2
  local pods
  if ! pods=$(scripts/trace-path.sh "openb/openb_pod_list_$list.csv" 2>/dev/null); then
    echo "skipping $name: openb_pod_list_$list.csv not found" >&2
    return 0
  fi
  nice -n "$niceness" "$stoker" sim packing --nodes "$nodes" --pods "$pods" --policy fgd,stoker \
    --seeds "$seeds" --threads "$threads" --csv "$out/$name.csv" "$@" 2>"$out/$name.log"
}
published="default cpu050 cpu100 cpu200 cpu250 gpushare40 gpushare60 gpushare80 gpushare100"
heldout="gpushare20 cpu0 cpu037 cpu072 cpu235 cpu300"
fgdlists="gpuspec05 gpuspec10 gpuspec20 gpuspec25 gpuspec33 multigpu20 multigpu30 multigpu40 multigpu50"
if [[ -z ${TABLES_ONLY:-} ]]; then
  for w in $published $heldout $fgdlists; do run "$w" "$w"; done
  for s in 5 10 20 33; do run "default+spec$s" default --constrain "$s"; done
  for m in 20 30 40 50; do run "default+mgpu$m" default --multi-gpu "$m"; done
fi
python3 - "$ref" "$out" "$published" "$heldout" "$fgdlists" <<'PY'
import csv, os, sys
ref, out = sys.argv[1], sys.argv[2]
groups = [("Workloads with published FGD figures", sys.argv[3].split()),
          ("Held-out workloads (no published figures)", sys.argv[4].split()),
          ("FGD's GPU-type and multi-GPU pod lists", sys.argv[5].split()),
          ("Generated from `default`: GPU-model constraints (`--constrain`) and multi-GPU-heavy "
           "(`--multi-gpu`)", [f"default+spec{s}" for s in (5, 10, 20, 33)] +
           [f"default+mgpu{m}" for m in (20, 30, 40, 50)])]
pub = {}
for row in csv.DictReader(open(ref)):
    if row["policy"] == "06-FGD" and row["metric"] == "gpu_alloc_pct":
        pub[row["workload"].replace("openb_pod_list_", "")] = row
steps = list(range(50, 131, 10))
def curves(name):
    path = os.path.join(out, name + ".csv")
    if not os.path.exists(path):
        return None
    got = {}
    for row in csv.DictReader(open(path)):
        if row["metric"] == "gpu_alloc_pct":
            got[row["policy"]] = {s: float(row[f"arr_{s}"]) for s in steps}
    return got
worst_all = []
for title, names in groups:
    rows = []
    for name in names:
        c = curves(name)
        if c is None:
            continue
        p = pub.get(name)
        cells, worst, noise = [], None, None
        for s in steps:
            if p is not None:
                n = c["fgd"][s] - float(p[f"arr_{s}"])
                noise = n if noise is None else min(noise, n)
            bar = c["fgd"][s]
            if p is not None:
                bar = max(bar, float(p[f"arr_{s}"]))
            d = c["stoker"][s] - bar
            worst = d if worst is None else min(worst, d)
            cells.append(f"{d:+.2f}")
        worst_all.append((worst, name))
        fgd130 = float(p["arr_130"]) if p is not None else c["fgd"][130]
        rows.append(f"| {name} | {'published' if p is not None else 'ours'} | " + " | ".join(cells) +
                    f" | {c['stoker'][100]:.2f} / {c['stoker'][130]:.2f} | "
                    f"{100 - fgd130:.2f} % → {100 - c['stoker'][130]:.2f} % | " +
                    (f"{noise:+.2f} |" if noise is not None else "- |"))
    if not rows:
        continue
    print(f"\n{title}: stoker minus FGD (points of GPU allocation), the bar being the larger of our "
          "`fgd` and the published figure where there is one\n")
    print("| workload | FGD | " + " | ".join(f"{s} %" for s in steps) +
          " | stoker at 100 / 130 % | unallocated at 130 %: FGD → stoker |"
          " our fgd minus published, lowest step |")
    print("|---|---|" + "---|" * (len(steps) + 3))
    print("\n".join(rows))
worst = min(worst_all)
print(f"\nLargest shortfall over all workloads and steps: {worst[0]:+.2f} ({worst[1]}).")
PY
