#!/usr/bin/env python3
"""Mean over seeds of the FGD paper's published simulator results, shaped as the simulator's CSV.

Reads analysis_allo_discrete.csv, analysis_frag_discrete.csv and analysis_frag_ratio_discrete.csv
(hkust-adsl/kubernetes-scheduler-simulator, experiments/analysis/expected_results: one row per
workload, policy and seed; one column per arrived percent) from DIR and prints
reference_results.csv: workload,policy,metric,n_seeds,arr_0,arr_10,...,arr_130, the mean over
the seeds rounded to two decimals (in about 2 % of the cells the last digit can differ from the
copy the team derived earlier: the rounding of the mean, not the data).

Usage: fgd-reference-results.py DIR > reference_results.csv
"""
import collections
import csv
import sys

METRICS = [("allo", "gpu_alloc_pct"), ("frag", "frag_gpu_pct_of_cluster"),
           ("frag_ratio", "frag_ratio_pct_of_idle")]
STEPS = range(0, 131, 10)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rows = {}
    for short, metric in METRICS:
        runs = collections.defaultdict(list)
        with open(f"{sys.argv[1]}/analysis_{short}_discrete.csv", newline="") as f:
            for r in csv.DictReader(f):
                runs[(r["workload"], r["sc_policy"])].append(r)
        for (workload, policy), rs in runs.items():
            means = []
            for s in STEPS:
                xs = [float(r[str(s)]) for r in rs if r.get(str(s), "") != ""]
                means.append(sum(xs) / len(xs) if xs else float("nan"))
            rows[(workload, policy, metric)] = (len(rs), means)
    order = {metric: i for i, (_, metric) in enumerate(METRICS)}
    print("workload,policy,metric,n_seeds," + ",".join(f"arr_{s}" for s in STEPS))
    for key in sorted(rows, key=lambda k: (k[0], k[1], order[k[2]])):
        n, means = rows[key]
        print(",".join(key) + f",{n}," + ",".join(f"{m:.2f}" for m in means))


if __name__ == "__main__":
    main()
