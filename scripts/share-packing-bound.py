#!/usr/bin/env python3
"""Lower bound on the GPU capacity that GPU-sharing pods must leave free, under ANY placement.

Each GPU is a bin of 1000 milli; pods sharing a GPU are items. The configuration LP of bin
packing (minimise GPUs such that every pod is packed by some pattern that fits one GPU) is
solved exactly (fractions) through its dual by cutting planes: max sum d_i y_i subject to
sum_i a_i y_i <= 1 for every pattern a, y >= 0. Any feasible y proves GPUs >= sum d_i y_i.
CPU, memory, node boundaries and arrival order are ignored, so real placements can only do
worse. Used for docs/scheduling.md ("How far can the default workload go?").

Usage: share-packing-bound.py POD_LIST.csv...            (all share pods of each list)
       share-packing-bound.py --counts "810x1058 470x740 ..." (e.g. from stoker_waste_analysis)
Cluster size for the percentage: --cluster-gpus N (default 6212, openb).
"""
import argparse
import collections
import csv
import math
from fractions import Fraction


def knapsack(sizes, counts, weights, capacity=1000):
    """Heaviest pattern (bounded counts) under `weights`: (value, pattern)."""
    best = [Fraction(0)] * (capacity + 1)
    take = [[0] * len(sizes) for _ in range(capacity + 1)]
    for i, (s, c, w) in enumerate(zip(sizes, counts, weights)):
        if w <= 0:
            continue
        for _ in range(min(c, capacity // s)):
            for cap in range(capacity, s - 1, -1):
                v = best[cap - s] + w
                if v > best[cap]:
                    best[cap] = v
                    t = list(take[cap - s])
                    t[i] += 1
                    take[cap] = t
    return best[capacity], take[capacity]


def simplex_max(c, rows):
    """max c.y s.t. rows y <= 1, y >= 0 (origin feasible). Dense tableau, Bland's rule."""
    m, n = len(rows), len(c)
    t = [[Fraction(v) for v in r] + [Fraction(int(j == i)) for j in range(m)] + [Fraction(1)]
         for i, r in enumerate(rows)]
    z = [Fraction(-v) for v in c] + [Fraction(0)] * (m + 1)
    basis = [n + i for i in range(m)]
    while True:
        e = next((j for j in range(n + m) if z[j] < 0), None)
        if e is None:
            break
        r, best = None, None
        for i in range(m):
            if t[i][e] > 0:
                q = t[i][-1] / t[i][e]
                if r is None or q < best or (q == best and basis[i] < basis[r]):
                    r, best = i, q
        piv = t[r][e]
        t[r] = [v / piv for v in t[r]]
        for i in range(m):
            if i != r and t[i][e] != 0:
                f = t[i][e]
                t[i] = [a - f * b for a, b in zip(t[i], t[r])]
        f = z[e]
        z = [a - f * b for a, b in zip(z, t[r])]
        basis[r] = e
    y = [Fraction(0)] * n
    for i, b in enumerate(basis):
        if b < n:
            y[b] = t[i][-1]
    return y


def gpu_lower_bound(items):
    cnt = collections.Counter(items)
    sizes = sorted(cnt, reverse=True)
    counts = [cnt[s] for s in sizes]
    rows = [[int(j == i) for j in range(len(sizes))] for i in range(len(sizes))]
    while True:
        y = simplex_max(counts, rows)
        value, pattern = knapsack(sizes, counts, y)
        if value <= 1:
            return sum(c * w for c, w in zip(counts, y))
        rows.append(pattern)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pod_lists", nargs="*")
    ap.add_argument("--counts", action="append", default=[])
    ap.add_argument("--cluster-gpus", type=int, default=6212)
    args = ap.parse_args()
    cases = []
    for path in args.pod_lists:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        cases.append((path, [int(r["gpu_milli"]) for r in rows
                             if int(r["num_gpu"]) == 1 and 0 < int(r["gpu_milli"]) < 1000]))
    for text in args.counts:
        items = []
        for tok in text.split():
            milli, k = tok.split("x")
            items += [int(milli)] * int(k)
        cases.append(("counts", items))
    for name, items in cases:
        lp = gpu_lower_bound(items)
        gpus = math.ceil(lp)
        free = gpus * 1000 - sum(items)
        print(f"{name}: {len(items)} share pods need >= {gpus} GPUs (LP {float(lp):.2f}); "
              f"free milli on them >= {free} = {100 * free / (args.cluster_gpus * 1000):.3f} % of the cluster")


if __name__ == "__main__":
    main()
