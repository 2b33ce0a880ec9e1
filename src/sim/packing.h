#pragma once
// The static packing experiment of the FGD paper (ATC'23), as described in
// ../shared/traces/README.md: shuffle the pods with a seed, inflate them to 1.3x the cluster's GPU
// capacity by sampling with replacement, place them one at a time (pods never finish; a pod that
// does not fit stays out), and after every pod record allocated and arrived GPU milli. The curve
// is binned like the published analysis scripts: each record's arrived % is rounded to an
// integer, and a step's value is the mean over the records in that bin (or in the bins +-1 when
// it is empty).

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "scheduler/cluster.h"
#include "scheduler/policy.h"

namespace stoker::sim {

inline constexpr int kMaxArrivedPct = 130;

struct PackingCurve {
  // Indexed by arrived % 0..130; `present` is false where the run had no record near that step.
  std::array<double, kMaxArrivedPct + 1> alloc_pct{};
  std::array<double, kMaxArrivedPct + 1> frag_pct{};        // fragment / cluster GPU milli
  std::array<double, kMaxArrivedPct + 1> frag_ratio_pct{};  // fragment / idle GPU milli
  std::array<bool, kMaxArrivedPct + 1> present{};
  int64_t pods_scheduled = 0;
  int64_t pods_failed = 0;
  int64_t pods_infeasible = 0;
};

struct PackingRun {
  std::string policy;
  uint64_t seed = 42;
  int32_t inflate_permille = 1300;
  // Published protocol: the node order that breaks score ties is a random permutation drawn
  // from the seed (see ShuffleNodes). Off: ties go to the lowest index of the node list.
  bool shuffle_nodes = true;
};

// One run. `cluster` is copied (the caller's stays empty). `typical` is the offline typical-shape
// distribution of `pods` (given to fgd, and used for the fragmentation metrics of every policy).
Result<PackingCurve> RunPacking(const scheduler::ClusterState& cluster,
                                const std::vector<scheduler::Request>& pods,
                                const scheduler::TypicalShapes& typical, const PackingRun& run);

// The pod sequence of a run: shuffled with `seed`, then inflated by sampling with replacement
// while the total GPU request stays within inflate_permille/1000 of `total_gpu_milli` (the first
// draw that would exceed it ends the inflation, as in the published simulator).
std::vector<scheduler::Request> ShuffleAndInflate(const std::vector<scheduler::Request>& pods,
                                                  uint64_t seed, int32_t inflate_permille,
                                                  int64_t total_gpu_milli);

// The cluster with its nodes re-added in a random order drawn from `seed`. The published
// simulator prefixes every node name with its rank in a random permutation (rand.Perm) and its
// scheduler gives score ties to the smallest name, so ties go to a random but fixed node order;
// re-adding the nodes in that order makes "lowest node id wins" the same rule.
scheduler::ClusterState ShuffleNodes(const scheduler::ClusterState& cluster, uint64_t seed);

// Mean over seeds per step (published: mean of the per-seed binned values).
PackingCurve MeanCurve(const std::vector<PackingCurve>& runs);

// Rows shaped like reference_results.csv: workload,policy,metric,n_seeds,arr_0,...,arr_130
// (steps of 10), one per metric.
std::string PackingCsvHeader();
std::string PackingCsvRows(const std::string& workload, const std::string& policy, int n_seeds,
                           const PackingCurve& mean);

// An SVG line chart of GPU allocation % against arrived % for one or several policies.
std::string PackingSvg(const std::string& title,
                       const std::vector<std::pair<std::string, PackingCurve>>& curves);

}  // namespace stoker::sim
