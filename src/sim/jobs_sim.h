#pragma once
// The dynamic trace simulator: an event-driven replay of a job trace (arrivals, starts,
// completions, preemptions) on a homogeneous cluster. Placement is the production scheduling
// pass's (pass::SchedulingPass::Run over the scheduler::ClusterState the simulator keeps, through
// a scheduler::PlacementPolicy; EASY reservations and backfill included) and ordering a
// queue::QueuePolicy's, so the simulator measures the code the server runs, not a model of it.
//
// Time is simulated only: integer milliseconds since the first submission, advanced from event
// to event; nothing reads a clock. Jobs larger than the cluster are reported infeasible.
//
// Extension points for idleness models and idle reclaim: SimJobSpec::gpu_util carries a per-job
// utilisation profile, and SimObserver sees every event, every interval of constant allocation
// (OnAdvance) and optional periodic ticks. Oversubscription is a co-location mode
// (JobsSimOptions::colocation, off by default) decided by the scheduling pass's admission and
// preemption rules.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/enum_table.h"
#include "core/status.h"
#include "scheduler/cluster.h"
#include "scheduler/pass/pass.h"
#include "scheduler/policy.h"
#include "scheduler/queue/job_queue.h"
#include "scheduler/queue/queue_policy.h"
#include "sim/traces.h"

namespace stoker::sim {

enum class BackfillMode {
  kNone,  // strict order: the first waiting job that cannot start blocks the ones behind it
  kEasy,  // EASY: reserve the earliest start for the blocked head, backfill jobs that do not delay
          // it
};
inline constexpr EnumTable<BackfillMode, 2> kBackfillModeNames{
    "backfill mode", {{{BackfillMode::kNone, "none"}, {BackfillMode::kEasy, "easy"}}}};
constexpr const auto& NamesOf(BackfillMode) { return kBackfillModeNames; }
inline Result<BackfillMode> ParseBackfillMode(std::string_view name) {
  return kBackfillModeNames.Parse(name);
}

// One job as the simulator runs it (built from a TraceJob, or directly by tests).
struct SimJobSpec {
  std::string name;
  SimMs submit_ms = 0;
  SimMs duration_ms = 0;  // at `gpus` GPUs; elastic jobs at fewer GPUs run proportionally longer
  int gpus = 1;           // max GPUs
  int min_gpus = 0;       // elastic minimum (0 or == gpus: rigid)
  int priority = 0;
  // Mean GPU utilisation while running (0..1), when a trace or model provides one. Unused by the
  // scheduling itself; for idleness models plugged in through SimObserver. With co-location it
  // is the share of its GPUs a guaranteed job keeps busy (unset = all of it).
  std::optional<double> gpu_util;
  // The last idle_tail_ms of the run (at full allocation) leave the job's GPUs idle, so a
  // co-located preemptible job gets all of them then. Only read with co-location.
  SimMs idle_tail_ms = 0;
  // Best-effort tier. Only with JobsSimOptions::colocation: the job then runs as a share of one
  // GPU beside other work and guaranteed jobs preempt it; without it, an ordinary job.
  bool preemptible = false;
};
std::vector<SimJobSpec> JobsFromTrace(const Trace& trace);

enum class JobState { kPending, kWaiting, kRunning, kDone, kInfeasible };

// Runtime state of one job; index in JobsSim::jobs() is the queue::JobId.
struct SimJob {
  SimJobSpec spec;
  JobState state = JobState::kPending;  // kPending = not yet arrived
  int alloc_gpus = 0;                   // GPUs held while running
  int64_t remaining_work = 0;           // GPU-ms still to do (duration_ms * gpus at arrival)
  int64_t attained_gpu_ms = 0;          // service received (kept across preemptions)
  SimMs last_update_ms = 0;             // when remaining/attained were last brought up to date
  SimMs first_start_ms = -1;
  SimMs finish_ms = -1;
  SimMs waiting_ms = 0;  // total time spent waiting (first wait + after preemptions)
  SimMs waiting_since_ms = 0;
  int preemptions = 0;
  uint32_t epoch = 0;                            // bumps on start/preempt; stale events are ignored
  std::vector<scheduler::Placement> placements;  // one per node the job spans
  // Co-location only. A guaranteed job that had to preempt holds its GPUs from its start but
  // runs from active_from_ms (start + grace). A preemptible job runs on `gpu` at `rate` of a
  // full GPU; `evicting` until evict_at_ms, then it requeues and restarts from scratch.
  SimMs active_from_ms = 0;
  int32_t gpu = -1;
  double rate = 1.0;
  bool evicting = false;
  SimMs evict_at_ms = 0;
  int64_t attained_at_run_start = 0;
  int64_t lost_gpu_ms = 0;  // work thrown away by preemptions
  // Co-location with interference: the speed a guaranteed job runs at now (shared_speed while
  // preemptible work shares one of its GPUs, else 1).
  double host_rate = 1.0;
};

// Co-location of preemptible (best-effort) jobs on GPUs beyond 1.0 GPU of commitments, by the
// scheduling pass's rules (scheduler/pass/gpu_commitments.h): a preemptible job commits
// `ratio_milli - 1000` of a GPU and is admitted where the GPU's commitments stay within the
// ratio (pass::AdmitsPreemptible); a guaranteed job that lands on GPUs with preemptible work
// stops it by the preemption rule (pass::ShareVictims), each victim after `grace_ms`. Which GPU
// a preemptible job goes to is the simulator's activity model (the most spare activity).
struct CoLocation {
  int32_t ratio_milli = 1500;  // 1001..2000
  SimMs grace_ms = 0;
  // Interference: the speed (0..1] at which a busy guaranteed job runs while preemptible work
  // shares any of its GPUs (1: not slowed). Its idle tail is not slowed (nothing runs there).
  double shared_speed = 1.0;
  int64_t preemptible_milli() const { return ratio_milli - 1000; }
};

enum class JobEventKind { kArrive, kStart, kFinish, kPreempt, kInfeasible };

class JobsSim;
struct JobsSimReport;

// The report over one or more finished simulations (e.g. one per virtual cluster, as Helios
// simulates Philly): per-job metrics over all jobs, allocation summed over all clusters.
Result<JobsSimReport> SummariseRuns(const std::vector<const JobsSim*>& sims);

// Observer hooks. All callbacks run synchronously inside Run(); the simulator state is
// consistent at each call.
class SimObserver {
 public:
  virtual ~SimObserver() = default;
  virtual void OnJobEvent(SimMs /*now*/, JobEventKind /*kind*/, queue::JobId /*id*/,
                          const JobsSim& /*sim*/) {}
  // Allocation is constant over [from, to): integrate utilisation or idle time here.
  virtual void OnAdvance(SimMs /*from*/, SimMs /*to*/, const JobsSim& /*sim*/) {}
  // Every JobsSimOptions::tick_ms of simulated time while jobs remain (0 = no ticks).
  virtual void OnTick(SimMs /*now*/, JobsSim& /*sim*/) {}
  // EASY backfill computed the earliest start `at_ms` for the blocked head job `id`.
  virtual void OnReservation(SimMs /*now*/, queue::JobId /*id*/, SimMs /*at_ms*/) {}
};

struct JobsSimOptions {
  ClusterShape cluster{64, 8};
  std::string placement_policy;  // empty = scheduler::kDefaultPolicyName
  scheduler::PolicyConfig placement_config;
  BackfillMode backfill = BackfillMode::kNone;
  // Added to a preempted job's remaining time (checkpoint/restore cost), in ms at full allocation.
  SimMs preemption_overhead_ms = 0;
  SimMs tick_ms = 0;
  // Called with the fraction of arrivals processed, at most every 1/1000 of the trace.
  std::function<void(double)> progress;
  // Cap on the number of (time, allocated GPUs) points kept for the allocation series; the
  // series is downsampled by time-weighted averaging into this many buckets at the end.
  size_t allocation_series_points = 2000;
  // Off when empty: preemptible jobs are ordinary jobs. On: they share GPUs as it admits.
  std::optional<CoLocation> colocation;
};

struct Percentiles {
  double mean = 0, median = 0, p99 = 0, max = 0;
};
// Mean, median, p99 (linear interpolation between closest ranks) and max of `values`.
Percentiles SummarisePercentiles(std::vector<double> values);

struct AllocationPoint {
  SimMs t_ms = 0;
  double allocated_gpus = 0;  // time-weighted mean over the bucket starting at t_ms
};

struct JobsSimReport {
  std::string queue_policy;
  std::string placement_policy;
  std::string backfill;
  ClusterShape cluster;  // summed nodes when several simulations are summarised
  int64_t total_gpus = 0;
  int64_t jobs_total = 0;
  int64_t jobs_completed = 0;
  int64_t jobs_infeasible = 0;
  int64_t preemptions = 0;
  double lost_gpu_hours = 0;  // work thrown away by preemptions of co-located jobs
  Percentiles jct_s;          // completion - submission
  Percentiles queue_delay_s;  // first start - submission (as Helios reports)
  Percentiles waiting_s;      // all time spent waiting, preemptions included
  double makespan_s = 0;      // last completion - first submission
  double gpu_hours_used = 0;  // integral of allocated GPUs
  double idle_gpu_hours = 0;  // integral of idle GPUs over the makespan
  double mean_allocation_pct = 0;
  std::vector<AllocationPoint> allocation;  // downsampled series
  int64_t events = 0;
  int64_t scheduling_rounds = 0;
};

class JobsSim {
 public:
  // InvalidArgument for a bad cluster shape, NotFound for an unknown placement policy.
  static Result<std::unique_ptr<JobsSim>> Create(std::vector<SimJobSpec> jobs,
                                                 std::unique_ptr<queue::QueuePolicy> queue_policy,
                                                 JobsSimOptions options);

  void AddObserver(SimObserver* observer) { observers_.push_back(observer); }

  // Runs to completion (every feasible job finished). Internal if the scheduler and the
  // simulator disagree (a placement that cannot be allocated), which would be a bug.
  Result<JobsSimReport> Run();

  SimMs now() const { return now_; }
  const std::vector<SimJob>& jobs() const { return jobs_; }
  const scheduler::ClusterState& cluster() const { return cluster_; }
  int64_t allocated_gpus() const { return allocated_gpus_; }
  int64_t total_gpus() const { return cluster_.total_gpus(); }
  // (time, allocated GPUs) at every change of the allocation.
  const std::vector<std::pair<SimMs, int64_t>>& allocation_changes() const {
    return alloc_changes_;
  }
  // Co-location: milli-GPU in use on a GPU now (the guaranteed job once active, plus the
  // preemptible shares), and the preemptible jobs on it.
  int64_t GpuLoadMilli(int32_t gpu) const;
  const std::vector<queue::JobId>& PreemptibleOn(int32_t gpu) const { return gpu_pre_[gpu]; }
  // Share of a GPU left to co-located jobs by its guaranteed job now (1 with none).
  double SpareActivity(int32_t gpu) const;

 private:
  friend Result<JobsSimReport> SummariseRuns(const std::vector<const JobsSim*>& sims);
  JobsSim(std::vector<SimJobSpec> jobs, std::unique_ptr<queue::QueuePolicy> queue_policy,
          JobsSimOptions options);
  Status Init();

  queue::JobView View(queue::JobId id) const;
  void UpdateProgress(SimJob& job) const;
  Status Schedule();
  // One scheduling pass over the kept cluster (pass::KeptCluster), its decision applied in order:
  // jobs started, jobs found infeasible. Returns the decision for what else it says.
  Result<pass::Decision> RunPass(pass::KeptCluster kept);
  // Starts `id` on `placements` at `gpus` GPUs (both counted already: see RunPass).
  Status Start(queue::JobId id, std::vector<scheduler::Placement> placements, int gpus);
  // `released`: the placements were already returned to the cluster (and allocated_gpus_).
  Status Preempt(queue::JobId id, bool released = false);
  Status Finish(queue::JobId id);
  void MarkInfeasible(queue::JobId id);
  void Enqueue(queue::JobId id);
  void ScheduleJobEvents(queue::JobId id);
  Status EasyBackfill(queue::JobId head);
  void RecordAllocation();
  void Notify(JobEventKind kind, queue::JobId id);
  // Co-location.
  bool coloc() const { return options_.colocation.has_value(); }
  std::vector<int32_t> GpusOf(const std::vector<scheduler::Placement>& placements) const;
  // Milli-GPU committed on `gpu`: its guaranteed job (a whole GPU) and the preemptible shares.
  int64_t CommittedMilli(int32_t gpu) const;
  void Retime(int32_t gpu);  // preemptible jobs on `gpu`: progress so far, new rates and finishes
  // Interference: a guaranteed job's speed follows whether preemptible work shares its GPUs.
  void RetimeHost(queue::JobId id);
  // Simulated time `job` needs for `work` GPU-ms at its allocation and speed.
  SimMs RunMs(const SimJob& job, int64_t work) const;
  void ReleaseHost(queue::JobId id, const std::vector<scheduler::Placement>& placements);
  void SchedulePreemptible();
  void StartPreemptible(queue::JobId id, int32_t gpu);
  void EndPreemptible(queue::JobId id, bool finished);

  struct Event {
    SimMs t;
    int kind;  // 0 finish, 1 key change (LAS demotion), 2 host goes idle, 3 eviction deadline
    queue::JobId id;
    uint32_t epoch;
    friend bool operator>(const Event& a, const Event& b) {
      if (a.t != b.t) return a.t > b.t;
      if (a.kind != b.kind) return a.kind > b.kind;
      return a.id > b.id;
    }
  };

  void PushEvent(const Event& e);

  std::vector<SimJob> jobs_;
  std::unique_ptr<queue::QueuePolicy> policy_;
  JobsSimOptions options_;
  // The production scheduling pass, placing on cluster_ (kept between passes) through the
  // placement policy it owns; views_ are the jobs as the pass reads them (by id), kept up to date.
  std::unique_ptr<pass::SchedulingPass> pass_;
  std::vector<pass::JobView> views_;
  scheduler::ClusterState cluster_;
  queue::JobQueue waiting_;
  std::vector<queue::JobId> running_;  // unordered
  std::vector<Event> events_;          // min-heap on t
  std::vector<SimObserver*> observers_;
  SimMs now_ = 0;
  int64_t allocated_gpus_ = 0;
  int64_t events_processed_ = 0;
  int64_t rounds_ = 0;
  bool finished_ = false;
  std::vector<std::pair<SimMs, int64_t>> alloc_changes_;  // (time, allocated GPUs) at each change
  static constexpr queue::JobId kNoJob = ~queue::JobId{0};
  std::vector<queue::JobId> gpu_host_;                    // guaranteed job per GPU (co-location)
  std::vector<std::vector<queue::JobId>> gpu_pre_;        // preemptible jobs per GPU
  std::set<std::pair<SimMs, queue::JobId>> pre_waiting_;  // (submission, id): FIFO
  size_t pre_running_ = 0;
  bool pre_scan_dirty_ = true;  // a GPU changed since the last scan found no room
};

}  // namespace stoker::sim
