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
//
// A third variant adds oversubscription: preemptible (best-effort) jobs share GPUs beyond 1.0 up
// to the configured ratio, admitted and preempted inside sim::JobsSim's co-location by the
// scheduling pass's rules (pass::AdmitsPreemptible, pass::ShareVictims). Model, stated in
// docs/efficiency.md: a guaranteed job keeps busy_activity of its GPUs while busy and none in its
// idle tail, and is not slowed by co-located work (an assumption: MPS/time-slicing with priority
// to the guaranteed job); preemptible jobs on a GPU split the activity it leaves; a preempted
// preemptible job restarts from scratch (no checkpoint), its lost work counted.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "efficiency/config.h"
#include "sim/jobs_sim.h"

namespace stoker::efficiency {

struct IdlenessModel {
  double idle_share = 0.36;  // share of jobs with an idle phase (PAI: 36 % of instances at 0 %)
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
std::vector<IdleProfile> DrawIdleness(const std::vector<sim::SimJobSpec>& jobs,
                                      const IdlenessModel& m);

struct ReclaimDecision {
  bool acted = false;
  sim::SimMs run_ms = 0;  // run length after reclaim (== busy + idle when not acted)
  int64_t warnings = 0;
};

// Which jobs are preemptible: single-GPU jobs of at most max_duration_ms (short, like debugging
// and tuning runs), each with probability `share`. Deterministic for a seed.
struct PreemptibleModel {
  double share = 0.5;
  sim::SimMs max_duration_ms = sim::SimMs{2} * 3'600'000;
  uint64_t seed = 7;
};
std::vector<bool> DrawPreemptible(const std::vector<sim::SimJobSpec>& jobs,
                                  const PreemptibleModel& m);

// The oversubscription settings as the simulator's co-location. A preemptible job commits
// max_ratio - 1.0 of a GPU (0.5 at 1.5 : 1). Empty when max_ratio is 1.0 (off).
std::optional<sim::CoLocation> MakeCoLocation(const OversubscriptionPolicy& p);

// Runs the IdleReclaimer over one job's samples; `gpus` GPUs all follow the profile.
ReclaimDecision DecideReclaim(const IdleProfile& p, int gpus, const IdleReclaimPolicy& policy,
                              Duration sample_every, Duration check_every);

struct TierStats {
  int64_t jobs = 0;  // completed
  sim::Percentiles queue_delay_s;
  sim::Percentiles jct_s;
  int64_t preemptions = 0;
  double lost_gpu_hours = 0;
};

struct VariantResult {
  std::string name;  // "static", "reclaim", "reclaim+oversub"
  sim::JobsSimReport report;
  int64_t jobs_reclaimed = 0;
  double gpu_hours_reclaimed = 0;       // idle allocation removed by the engine
  double busy_gpu_hours = 0;            // useful (non-idle) GPU time
  double used_gpu_utilization_pct = 0;  // busy GPU time / (GPUs x makespan)
  TierStats guaranteed;                 // jobs the preemptible model did not pick
  TierStats preemptible;  // the same jobs in every variant; co-located only in the third
};

struct EfficiencySimOptions {
  IdlenessModel idleness;
  IdleReclaimPolicy policy;  // action is treated as cancel: an idle tail has nothing to rerun
  Duration sample_every = std::chrono::seconds(60);
  Duration check_every = std::chrono::minutes(15);
  std::string queue_policy = "fifo";
  OversubscriptionPolicy oversub;  // the third variant; max_ratio 1.0 makes it equal to reclaim
  PreemptibleModel preemptible;
  // Interference (the third variant): the speed of a busy guaranteed job while preemptible work
  // shares one of its GPUs; 1 = not slowed (the default model), kPublishedSharedSpeed = the
  // published measurement below.
  double shared_speed = 1.0;
};

// A deep-learning training job's speed beside another one on the same GPU, relative to running
// alone: the mean over both jobs of the 1,388 pairs measured for Lucid (Hu et al., "Lucid: A
// Non-intrusive, Scalable and Interpretable Scheduler for Deep Learning Training Jobs",
// ASPLOS 2023; its profiling data, simulation/data/colocate_info.csv, columns speed1/speed2).
// Median 0.955, 10th percentile 0.78. Measured without priority between the two jobs, so as a
// model of a guaranteed job that has priority it is on the pessimistic side.
inline constexpr double kPublishedSharedSpeed = 0.937;

// The variants, in the order every report lists them.
inline constexpr const char* kReclaimVariants[] = {"static", "reclaim", "reclaim+oversub"};

// One variant on one cluster, given the jobs' idle profiles and tiers (DrawIdleness,
// DrawPreemptible). InvalidArgument for a name not in kReclaimVariants.
Result<VariantResult> RunReclaimVariant(const std::vector<sim::SimJobSpec>& jobs,
                                        const std::vector<IdleProfile>& profiles,
                                        const std::vector<bool>& preemptible,
                                        const sim::JobsSimOptions& sim_options,
                                        const EfficiencySimOptions& options, std::string_view name);

// Runs static, reclaim and reclaim+oversub on the same jobs and cluster. InvalidArgument for a
// bad oversubscription policy.
Result<std::vector<VariantResult>> CompareReclaim(const std::vector<sim::SimJobSpec>& jobs,
                                                  const sim::JobsSimOptions& sim_options,
                                                  const EfficiencySimOptions& options);

}  // namespace stoker::efficiency
