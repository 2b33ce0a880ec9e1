#!/usr/bin/env bash
# stoker_packing_compare's FAILS report covers every seed it runs, and the sum over the seeds is
# the sum of the seeds' counts. Usage: packing_compare_fails_test.sh STOKER_PACKING_COMPARE
set -euo pipefail
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# A small cluster that the inflated arrivals overfill well before 130 %.
cat >"$dir/nodes.csv" <<'CSV'
sn,cpu_milli,memory_mib,gpu,model
n0,32000,131072,2,V100M32
n1,16000,65536,4,T4
n2,64000,262144,8,G2
CSV
cat >"$dir/pods.csv" <<'CSV'
name,cpu_milli,memory_mib,num_gpu,gpu_milli
p0,4000,8192,1,1000
p1,2000,4096,1,500
p2,8000,16384,2,1000
p3,1000,2048,0,0
p4,12000,16384,1,250
p5,6000,8192,4,1000
CSV
out=$(FAILS=130 THREADS=1 "$bin" "$dir/nodes.csv" "$dir/pods.csv" 7-9 fgd,stoker)
fail() {
  printf '%s\n--- output:\n%s\n' "$1" "$out" >&2
  exit 1
}
for policy in fgd stoker; do
  for seed in 7 8 9; do
    grep -q "^$policy seed $seed failures before 130%: [^ ]" <<<"$out" ||
      fail "no failures reported for $policy, seed $seed"
  done
  sum=$(grep "^$policy seed [789] failures before 130%:" <<<"$out" | cut -d: -f2- | tr ' ' '\n' |
    awk -F: 'NF == 2 { n[$1] += $2 } END { for (k in n) print k ":" n[k] }' | sort)
  total=$(grep "^$policy over 3 seeds failures before 130%:" <<<"$out" | cut -d: -f2- |
    tr ' ' '\n' | grep . | sort) || fail "no sum over the seeds for $policy"
  [[ $sum == "$total" ]] || fail "$policy: the sum over the seeds is not the seeds' sum"
done
echo "FAILS reported for 3 seeds and their sum, fgd and stoker"
