#!/usr/bin/env bash
# scripts/packing-tables.sh takes the published FGD figures only from the reference_results.csv
# beside the pod list it reads: with none there it says so and marks the row "absent" (even where
# another folder of the trace lookup has one), and with one there it names that file.
# Usage: packing_tables_script_test.sh STOKER SOURCE_DIR
set -euo pipefail
stoker=$1
root=$2
dir=$(cd "$(mktemp -d)" && pwd -P)
trap 'rm -rf "$dir"' EXIT
openb=$dir/traces/openb
mkdir -p "$openb"
# A small cluster (20 nodes, 160 GPUs) and a pod list of single GPUs and shares, fine enough
# that every arrival step of 10 % is reached, under the name of a published workload.
{
  echo "sn,cpu_milli,memory_mib,gpu,model"
  for n in $(seq 0 19); do
    if ((n % 2 == 0)); then echo "n$n,96000,393216,8,V100M32"; else echo "n$n,96000,393216,8,T4"; fi
  done
} >"$openb/openb_node_list_gpu_node.csv"
{
  echo "name,cpu_milli,memory_mib,num_gpu,gpu_milli"
  for p in $(seq 0 29); do
    cpu=$((p % 7 * 2000 + 1000))
    if ((p % 5 == 0)); then
      echo "p$p,$cpu,8192,0,0"
    else
      echo "p$p,$cpu,8192,1,$((p % 3 * 250 + 500))"
    fi
  done
} >"$openb/openb_pod_list_cpu050.csv"
tables() {  # [ENV=VALUE...]: runs the script on that one workload
  env "$@" STOKER_TRACES="$dir/traces" OUT="$dir/out" WORKLOADS=cpu050 THREADS=1 NICE=0 \
    "$root/scripts/packing-tables.sh" "$stoker" 42-43 >"$dir/stdout" 2>"$dir/stderr"
}
fail() {
  printf '%s\n--- stdout:\n%s\n--- stderr:\n%s\n' "$1" "$(<"$dir/stdout")" "$(<"$dir/stderr")" >&2
  exit 1
}
tables || fail "packing-tables.sh failed"
grep -qF "no reference_results.csv in $openb, beside the pod lists of: cpu050" "$dir/stderr" ||
  fail "stderr does not say that the pod list's folder has no reference file"
grep -qE '^\| cpu050 \| ours \|.* absent \|$' "$dir/stdout" ||
  fail "the row is not marked: published figures absent"
if grep -q 'reference_results.csv (beside' "$dir/stderr"; then
  fail "another folder's reference file was used"
fi
# Now the folder has one: the tables (from the same CSVs) compare against it and name it.
{
  echo "workload,policy,metric,n_seeds$(printf ',arr_%d' $(seq 0 10 130))"
  echo "openb_pod_list_cpu050,06-FGD,gpu_alloc_pct,2,0,10,20,30,40,50,60,70,80,90,90,90,90,90"
} >"$openb/reference_results.csv"
tables TABLES_ONLY=1 || fail "packing-tables.sh TABLES_ONLY=1 failed"
grep -qF "published FGD figures: $openb/reference_results.csv (beside the pod lists of: cpu050)" \
  "$dir/stderr" || fail "stderr does not name the reference file beside the pod list"
grep -qE '^\| cpu050 \| published \|.* 10\.00 % → ' "$dir/stdout" ||
  fail "the row does not compare against the reference file beside the pod list"
echo "published figures: absent without a file beside the pod list, that file with one"
