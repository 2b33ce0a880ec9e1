#pragma once
// Oversubscription and preemption decisions (the server/scheduler apply them): best-effort
// (preemptible) work may share GPUs up to a ratio <= 1.5:1 and run on capacity reclaimed from
// idle jobs; when guaranteed work needs the GPUs, preemptible jobs are preempted first, each
// with a grace period. Resources are integer milli-GPU.

#include <optional>
#include <string>
#include <vector>

#include "efficiency/config.h"
#include "efficiency/jobs.h"

namespace stoker::efficiency {

struct GpuShare {
  std::string job;
  Tier tier = Tier::kGuaranteed;
  int64_t milli = 1000;  // share of the GPU the job holds
  WallTime started{};
};

struct GpuLoad {
  std::string gpu;
  std::vector<GpuShare> shares;
  bool reclaimed = false;  // freed by idle reclaim: offered to the preemptible tier
  bool healthy = true;
};

int64_t CommittedMilli(const GpuLoad& g, std::optional<Tier> tier = std::nullopt);

// May a preemptible job taking `milli` of a GPU run on it? Guaranteed commitments never exceed
// 1000; with preemptible work the total may reach max_ratio_milli.
bool AdmitPreemptible(const OversubscriptionPolicy& p, const GpuLoad& g, int64_t milli);

struct Preemption {
  std::string job;
  std::string gpu;
  WallTime deadline{};  // now + grace: the job checkpoints or is killed then
};

struct PreemptionPlan {
  bool feasible = false;
  std::vector<std::string> gpus;  // GPUs the guaranteed job gets
  std::vector<Preemption> victims;
  std::string reason;
};

// Finds `gpus` GPUs that can each give a guaranteed job `milli`, preempting the fewest and the
// youngest preemptible jobs (least work lost). GPUs with guaranteed load that leaves no room are
// never touched: guaranteed work is not preempted for guaranteed work.
PreemptionPlan PlanPreemption(const OversubscriptionPolicy& p, const std::vector<GpuLoad>& gpus,
                              int needed_gpus, int64_t milli, WallTime now);

}  // namespace stoker::efficiency
