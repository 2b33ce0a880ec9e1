#!/usr/bin/env bash
# Regenerates the tables of docs/scheduling.md, "stoker against FGD at every load": `stoker`
# against FGD at every arrival step 50..130 % (the published FGD figures where the paper has
# them, our `fgd` on the same arrivals everywhere), on every openb pod list found and on the
# generated GPU-model-constrained and multi-GPU-heavy variants of `default`.
#
# Usage: scripts/packing-tables.sh [STOKER_BINARY] [SEEDS]   (defaults: build/bin/stoker, 42-51)
# Env: OUT (CSV folder, default /tmp/stoker-packing-tables), THREADS (default 2), NICE (10),
# TABLES_ONLY=1 (print the tables from the CSVs already in OUT), WORKLOADS (only these rows, by
# the names the tables give them, e.g. WORKLOADS="cpu050 default+spec5").
# The traces are found as docs/traces.md says (scripts/trace-path.sh); pod lists that are not
# there are left out of the tables. The published FGD figures are read from the
# reference_results.csv beside each pod list (never from another folder); stderr says which
# file that was, and where there is none the tables mark the published figures "absent".
# About 15 minutes on two loaded cores.
set -euo pipefail
cd "$(dirname "$0")/.."
stoker=${1:-build/bin/stoker}
seeds=${2:-42-51}
out=${OUT:-/tmp/stoker-packing-tables}
threads=${THREADS:-2}
niceness=${NICE:-10}
nodes=$(scripts/trace-path.sh openb/openb_node_list_gpu_node.csv)
mkdir -p "$out"
published="default cpu050 cpu100 cpu200 cpu250 gpushare40 gpushare60 gpushare80 gpushare100"
heldout="gpushare20 cpu0 cpu037 cpu072 cpu235 cpu300"
fgdlists="gpuspec05 gpuspec10 gpuspec20 gpuspec25 gpuspec33 multigpu20 multigpu30 multigpu40 multigpu50"
wanted() { [[ -z ${WORKLOADS:-} || " $WORKLOADS " == *" $1 "* ]]; }
# One line per row: NAME, the pod list it reads (with TABLES_ONLY, the one recorded beside the
# row's CSV when it was written), the number of generator options (0: the list as published).
sources=$out/.sources
: >"$sources"
pods_of() {  # NAME LIST: prints the pod list's path, or fails
  if [[ -n ${TABLES_ONLY:-} && -f $out/$1.pods ]]; then
    cat "$out/$1.pods"
  else
    scripts/trace-path.sh "openb/openb_pod_list_$2.csv" 2>/dev/null
  fi
}
run() {  # NAME POD_LIST [stoker sim packing options...]
  local name=$1 list=$2
  shift 2
  wanted "$name" || return 0
  local pods
  if ! pods=$(pods_of "$name" "$list"); then
    echo "skipping $name: openb_pod_list_$list.csv not found" >&2
    return 0
  fi
  printf '%s\t%s\t%s\n' "$name" "$pods" "$#" >>"$sources"
  [[ -n ${TABLES_ONLY:-} ]] && return 0
  echo "$pods" >"$out/$name.pods"
  nice -n "$niceness" "$stoker" sim packing --nodes "$nodes" --pods "$pods" --policy fgd,stoker \
    --seeds "$seeds" --threads "$threads" --csv "$out/$name.csv" "$@" 2>"$out/$name.log"
}
for w in $published $heldout $fgdlists; do run "$w" "$w"; done
for s in 5 10 20 33; do run "default+spec$s" default --constrain "$s"; done
for m in 20 30 40 50; do run "default+mgpu$m" default --multi-gpu "$m"; done
# The published figures for each pod list: the reference_results.csv in the same folder (the
# generated variants of `default` have none anywhere).
refs=$out/.refs
: >"$refs"
while IFS= read -r dir; do
  names=$(awk -F'\t' -v d="$dir" \
    '$3 == 0 { f = $2; sub(/\/[^\/]*$/, "", f); if (f == d) printf "%s ", $1 }' "$sources")
  if [[ -f $dir/reference_results.csv ]]; then
    echo "published FGD figures: $dir/reference_results.csv (beside the pod lists of: ${names% })" >&2
    printf '%s\t%s\n' "$dir" "$dir/reference_results.csv" >>"$refs"
  else
    echo "published FGD figures: no reference_results.csv in $dir, beside the pod lists of:" \
      "${names% }; the tables mark them absent" >&2
  fi
done < <(awk -F'\t' '$3 == 0 { sub(/\/[^\/]*$/, "", $2); print $2 }' "$sources" | sort -u)
python3 - "$sources" "$refs" "$out" "$published" "$heldout" "$fgdlists" <<'PY'
import csv, os, sys
sources, refs, out = sys.argv[1], sys.argv[2], sys.argv[3]
groups = [("Workloads with published FGD figures", sys.argv[4].split()),
          ("Held-out workloads (no published figures)", sys.argv[5].split()),
          ("FGD's GPU-type and multi-GPU pod lists", sys.argv[6].split()),
          ("Generated from `default`: GPU-model constraints (`--constrain`) and multi-GPU-heavy "
           "(`--multi-gpu`)", [f"default+spec{s}" for s in (5, 10, 20, 33)] +
           [f"default+mgpu{m}" for m in (20, 30, 40, 50)])]
# The published FGD curve of each row, from the reference file beside its pod list only: None
# where that file has no row for it (or the row is a generated variant), "absent" where there is
# no reference file beside the pod list.
ref_of = dict(line.rstrip("\n").split("\t") for line in open(refs) if line.strip())
pub_in = {}
def published_curve(pods, generated):
    if generated:
        return None
    folder = os.path.dirname(pods)
    if folder not in ref_of:
        return "absent"
    if folder not in pub_in:
        pub_in[folder] = {}
        for row in csv.DictReader(open(ref_of[folder])):
            if row["policy"] == "06-FGD" and row["metric"] == "gpu_alloc_pct":
                pub_in[folder][row["workload"]] = row
    return pub_in[folder].get(os.path.splitext(os.path.basename(pods))[0])
pub = {}
for line in open(sources):
    name, pods, options = line.rstrip("\n").split("\t")
    pub[name] = published_curve(pods, options != "0")
steps = list(range(50, 131, 10))
def curves(name):
    path = os.path.join(out, name + ".csv")
    if name not in pub or not os.path.exists(path):
        return None
    got = {}
    for row in csv.DictReader(open(path)):
        if row["metric"] == "gpu_alloc_pct":
            got[row["policy"]] = {s: float(row[f"arr_{s}"]) for s in steps}
    return got
worst_all, absent = [], False
for title, names in groups:
    rows = []
    for name in names:
        c = curves(name)
        if c is None:
            continue
        p = pub[name]
        missing = p == "absent"
        absent |= missing
        if missing:
            p = None
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
                    (f"{noise:+.2f} |" if noise is not None else
                     "absent |" if missing else "- |"))
    if not rows:
        continue
    print(f"\n{title}: stoker minus FGD (points of GPU allocation), the bar being the larger of our "
          "`fgd` and the published figure where there is one\n")
    print("| workload | FGD | " + " | ".join(f"{s} %" for s in steps) +
          " | stoker at 100 / 130 % | unallocated at 130 %: FGD → stoker |"
          " our fgd minus published, lowest step |")
    print("|---|---|" + "---|" * (len(steps) + 3))
    print("\n".join(rows))
if absent:
    print("\n\"absent\": no reference_results.csv beside that pod list, so the published FGD figures "
          "were not compared (the bar is our `fgd` alone).")
if not worst_all:
    sys.exit(f"no results: no pod list found, or no CSV in {out}")
worst = min(worst_all)
print(f"\nLargest shortfall over all workloads and steps: {worst[0]:+.2f} ({worst[1]}).")
PY
