#pragma once
// Proof by simulation: an idleness model (a share of jobs idle for part of their run, after the
// PAI 2020 statistics: about 36 % of instances at 0 % GPU utilisation) plus idle reclaim decided
// by the live IdleReclaimer, replayed through the dynamic trace simulator (sim::JobsSim).
//
// Idleness is a property of a job's own run (relative to its start), so the engine's decision
// for each job is computed by feeding the IdleReclaimer that job's samples (every
// sample_every, checked every check_every as in production) and the job's run is cut where the
// engine acts. The simulator then replays the trace with those runs: static allocation (as
// recorded) vs reclaim.

#include <cstdint>
#include <string>
#include <vector>

#include "efficiency/config.h"
#include "sim/jobs_sim.h"

namespace stoker::efficiency {

struct IdlenessModel {
  double idle_share = 0.36;     // share of jobs with an idle phase (PAI: 36 % of instances at 0 %)
  double min_idle_fraction = 0.2;  // idle phase length, uniform in [min, max] of the run
  double max_idle_fraction = 1.0;
  int64_t busy_activity_milli = 60'000;  // activity while busy (any value above the threshold)
  uint64_t seed = 42;
};

struct IdleProfile {
  sim::SimMs busy_ms = 0;  // the run starts busy ...
  sim::SimMs idle_ms = 0;  // ... and ends idle (a finished script holding its GPUs, a notebook)
};

// Deterministic for a seed.
std::vector<IdleProfile> DrawIdleness(const std::vector<sim::JobSpec>& jobs, const IdlenessModel& m);

struct ReclaimDecision {
  bool acted = false;
  sim::SimMs run_ms = 0;         // run length after reclaim (== busy + idle when not acted)
  int64_t warnings = 0;
};

// Runs the IdleReclaimer over one job's samples; `gpus` GPUs all follow the profile.
ReclaimDecision DecideReclaim(const IdleProfile& p, int gpus, const IdleReclaimPolicy& policy,
                              Duration sample_every, Duration check_every);

struct VariantResult {
  std::string name;             // "static", "reclaim"
  sim::JobsSimReport report;
  int64_t jobs_reclaimed = 0;
  double gpu_hours_reclaimed = 0;   // idle allocation removed by the engine
  double busy_gpu_hours = 0;        // useful (non-idle) GPU time
  double used_gpu_utilization_pct = 0;  // busy GPU time / (GPUs x makespan)
};

struct EfficiencySimOptions {
  IdlenessModel idleness;
  IdleReclaimPolicy policy;  // action is treated as cancel: an idle tail has nothing to rerun
  Duration sample_every = std::chrono::seconds(60);
  Duration check_every = std::chrono::minutes(15);
  std::string queue_policy = "fifo";
};

// Runs static and reclaim variants on the same jobs and cluster.
Result<std::vector<VariantResult>> CompareReclaim(const std::vector<sim::JobSpec>& jobs,
                                                  const sim::JobsSimOptions& sim_options,
                                                  const EfficiencySimOptions& options);

}  // namespace stoker::efficiency
