#pragma once
// Slurm as the server's engine (`stoker server --engine slurm --slurm-config FILE`): Slurm
// queues and runs the jobs; the server's loop, every cycle (config.cycle, 2 s):
//   1. runs the SlurmController: reads Slurm, decides through the shared scheduling pass, acts
//      (node weights, held marked GPU jobs released onto the pass's node);
// and every config.measure_every (10 s):
//   2. asks every GPU node's agent for its samples (GET /api/v1/snapshot of `stoker agent`),
//      whose processes the agent has attributed to Slurm jobs (cgroup path, environment);
//   3. feeds them, with the GPUs Slurm allocated to each job as the allocation table, to idle
//      reclaim (SlurmReclaim), job summaries (JobStatsCollector) and the efficiency engine
//      (zones, alerts, the report's samples, the market's usage), where Slurm job 1234 is
//      "slurm:1234";
//   4. evaluates idle reclaim and writes job summaries into AdminComment;
//   5. reads the jobcomp spool (scripts/slurm-jobcomp.sh): each finished job's record ends and
//      its usage is charged to the ledger, without polling Slurm for it.
// Bad input is a log line and a metric, never a crash or a wrong reclaim: Slurm unreachable or
// answering nonsense (no action that cycle; reclaim acts only after re-reading the job), a node
// without an agent (no samples: no evidence, so no reclaim), a process attributed to a job
// Slurm does not run on that node (its attribution is dropped), a job that vanished (actions
// refused and counted), a malformed spool file (moved aside).

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/gpu.h"
#include "integration/efficiency_service.h"
#include "server/api.h"
#include "slurm/controller.h"
#include "slurm/engine_config.h"
#include "slurm/jobstats.h"
#include "slurm/reclaim.h"

namespace stoker::slurm {

// Where a node's GPU samples come from.
class SampleSource {
 public:
  virtual ~SampleSource() = default;
  // The node's attributed GPU samples. Unavailable when its agent cannot be reached,
  // InvalidArgument when it answers something that is not a snapshot.
  virtual Result<std::vector<GpuSample>> Fetch(const std::string& node) = 0;
};

// The agents over HTTP: GET <url>/api/v1/snapshot, bounded in time and size.
class AgentSampleSource final : public SampleSource {
 public:
  explicit AgentSampleSource(AgentsConfig config) : config_(std::move(config)) {}
  Result<std::vector<GpuSample>> Fetch(const std::string& node) override;

 private:
  AgentsConfig config_;
};

struct SlurmEngineMetrics {
  int64_t cycles = 0;
  int64_t agent_errors_unreachable = 0;
  int64_t agent_errors_malformed = 0;
  int64_t nodes_without_agent = 0;         // gauge: GPU nodes whose agent did not answer
  int64_t samples = 0;                     // GPU samples taken in
  int64_t attributions_dropped = 0;        // processes named a job Slurm does not run there
  int64_t gpu_count_mismatches = 0;        // gauge: nodes whose agent shows other GPUs than Slurm
  int64_t jobs_running = 0;                // gauge: Slurm jobs holding resources
  int64_t jobs_ended = 0;                  // records ended (jobcomp or gone from Slurm)
  int64_t jobs_ended_without_jobcomp = 0;  // with a spool configured: left Slurm without one
  int64_t jobcomp_records = 0;
  int64_t jobcomp_bad = 0;
  int64_t jobcomp_unknown_jobs = 0;  // finished before a cycle saw their GPUs
  double jobcomp_gpu_hours = 0;
  int64_t summaries_written = 0;
};

class SlurmEngine final : public server::ApiExtension {
 public:
  // `client`, `samples` and `efficiency` (may be null: no zones, alerts or reports) must
  // outlive the engine. InvalidArgument/NotFound for a configuration the controller refuses.
  static Result<std::unique_ptr<SlurmEngine>> Create(SlurmEngineConfig config, SlurmClient* client,
                                                     SampleSource* samples,
                                                     efficiency::EfficiencyService* efficiency,
                                                     Clock* clock);
  ~SlurmEngine() override;

  // The loop (one cycle every config.cycle) on its own thread; Stop() joins it.
  void Start();
  void Stop();
  // One cycle (the loop calls it; tests drive it directly).
  void CycleOnce();

  // ApiExtension: no routes; the engine's families on GET /metrics.
  void AddRoutes(http::Router* /*router*/) override {}
  std::string Metrics(const server::Principal& who) override;

  SlurmEngineMetrics metrics() const;
  ControllerMetrics controller_metrics() const;
  SlurmReclaimMetrics reclaim_metrics() const;

 private:
  SlurmEngine(SlurmEngineConfig config, SlurmClient* client, SampleSource* samples,
              efficiency::EfficiencyService* efficiency, Clock* clock,
              std::unique_ptr<SlurmController> controller);
  struct Known {  // a Slurm job the engine has told the efficiency engine about
    efficiency::ExternalJob job;
    int64_t start_time = 0;
    bool holding = false;
  };
  // The jobs as Slurm lists them: records, allocation table, reclaim's directory.
  void UpdateJobs(const SlurmSnapshot& snap, WallTime now);
  // Samples from every GPU node's agent into reclaim, summaries and the efficiency engine.
  void Measure(const SlurmSnapshot& snap, WallTime now);
  void ReadSpool(WallTime now);
  void EndJob(uint32_t id, WallTime end, WallTime now);
  // Slurm's GPU index on `node` -> the agent's NVML index (matched by device minor number).
  uint32_t NvmlIndex(const std::string& node, int32_t slurm_index) const;
  void Publish();

  SlurmEngineConfig config_;
  SlurmClient* client_;
  SampleSource* samples_;
  efficiency::EfficiencyService* efficiency_;
  Clock* clock_;
  std::unique_ptr<SlurmController> controller_;
  std::unique_ptr<SlurmReclaim> reclaim_;
  std::unique_ptr<JobStatsCollector> jobstats_;

  // Loop thread state (CycleOnce is not reentrant).
  std::map<uint32_t, Known> known_;
  std::map<std::string, std::map<uint32_t, uint32_t>> minor_to_index_;  // node -> minor -> index
  MonoTime last_measure_{};
  bool measured_ = false;
  std::set<std::string> agent_down_;   // nodes whose agent failed last time (log on change)
  std::set<std::string> warned_jobs_;  // "node/job" attributions already reported
  SlurmEngineMetrics m_;

  // What Metrics() and the accessors read, copied at the end of each cycle.
  mutable std::mutex mu_;
  SlurmEngineMetrics published_;
  ControllerMetrics published_controller_;
  SlurmReclaimMetrics published_reclaim_;

  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool stopping_ = false;
  std::thread loop_;
};

// Prometheus text of the engine's own families (stoker_slurm_*; the controller's are
// RenderControllerMetrics').
std::string RenderEngineMetrics(const SlurmEngineMetrics& m, const SlurmReclaimMetrics& r);

}  // namespace stoker::slurm
