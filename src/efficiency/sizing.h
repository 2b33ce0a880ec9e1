#pragma once
// Cluster sizing (`stoker sim size`): for each variant of the proof by simulation (static
// allocation, idle reclaim, reclaim + oversubscription; sim_idle.h), the smallest cluster of
// nodes of one shape (8 GPUs each by default) on which a job trace meets the queueing targets:
// mean queueing delay at most the target and p99 below its target. The answer is found by search:
// the cluster is doubled from the smallest one the widest job fits until the targets are met,
// then bisected between the last size that missed and the first that met them. Each probe is one
// full simulation of the trace (the same model as `stoker sim efficiency`, same seeds), so the
// sizes of the variants are compared on the same jobs, idle phases and tiers.
//
// Queueing is taken to fall as the cluster grows; where a trace breaks that (a larger cluster
// queueing more by some placement accident), the search reports the size it found and the
// probes it made, so the claim can be checked.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "efficiency/sim_idle.h"

namespace stoker::efficiency {

struct QueueTargets {
  double max_mean_s = 600;  // mean queueing delay must be at most this
  double max_p99_s = 7200;  // p99 queueing delay must be below this
  bool Met(const sim::JobsSimReport& r) const {
    return r.queue_delay_s.mean <= max_mean_s && r.queue_delay_s.p99 < max_p99_s;
  }
};

struct SizingProbe {
  std::string variant;
  int32_t nodes = 0;
  bool met = false;
  double mean_s = 0, p99_s = 0;
  int probes_done = 0;  // over all variants so far, this one included
};

struct SizingOptions {
  EfficiencySimOptions sim;  // idleness, reclaim, oversubscription, tiers, queue policy
  sim::JobsSimOptions base;  // everything but the node count (cluster.gpus_per_node used)
  QueueTargets targets;
  int32_t max_nodes = 100'000;  // the search gives up beyond this
  std::vector<std::string> variants = {"static", "reclaim", "reclaim+oversub"};
  std::function<void(const SizingProbe&)> on_probe;  // after every simulation (progress)
};

struct SizedVariant {
  std::string name;
  int32_t nodes = -1;    // the smallest size found that meets the targets; -1: none up to max
  VariantResult result;  // at that size (the largest probe when none met them)
  std::vector<SizingProbe> probes;  // in the order they were made
};

// InvalidArgument for non-positive targets or node shape, an unknown variant, or a bad
// oversubscription policy.
Result<std::vector<SizedVariant>> SizeCluster(const std::vector<sim::SimJobSpec>& jobs,
                                              const SizingOptions& options);

}  // namespace stoker::efficiency
