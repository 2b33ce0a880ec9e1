#pragma once
// Per-group clusters: Philly (and the Helios simulator that reports on it) runs every virtual
// cluster (VC) as its own pool of nodes, and a job only ever uses its VC's GPUs. This runs one
// JobsSim per group and reports over all of them with SummariseRuns().

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "sim/jobs_sim.h"
#include "sim/traces.h"

namespace stoker::sim {

struct GroupCluster {
  std::string group;  // Philly VC hash
  int nodes = 0;
};

// A CSV with a header and rows `group,nodes` (HeliosArtifact's philly_vc.csv is `vc,node num`).
Result<std::vector<GroupCluster>> ParseGroupClusters(std::istream& in, std::string_view name);
Result<std::vector<GroupCluster>> LoadGroupClusters(const std::string& path);

struct GroupedRun {
  std::vector<std::unique_ptr<JobsSim>> sims;  // one per group with jobs, in file order
  std::vector<std::string> groups;
  int64_t dropped_jobs = 0;  // jobs of groups without a cluster
};

// Splits `trace` by TraceJob::group, runs each group's jobs on `nodes x gpus_per_node` with the
// named queue policy and `base` options (its cluster is replaced per group), all to completion.
Result<GroupedRun> RunPerGroup(const Trace& trace, const std::vector<GroupCluster>& groups,
                               int gpus_per_node, std::string_view queue_policy,
                               const JobsSimOptions& base);

}  // namespace stoker::sim
