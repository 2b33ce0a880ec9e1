#pragma once
// Prometheus text for the engine's state, appended to the server's /metrics:
//   stoker_efficiency_gpu_zone{uuid,zone}            1 for the GPU's current zone
//   stoker_efficiency_gpu_activity_ratio{uuid}       window mean activity (0..1)
//   stoker_efficiency_job_zone{jobid,zone}           1 for the job's current zone
//   stoker_efficiency_alerts{alertname,grade,state}  active alerts by rule and state
//   stoker_efficiency_reclaim_actions_total{action}  idle-reclaim records made
//   stoker_cluster_backlog_wait_seconds              longest wait that idle GPUs could serve
//   stoker_efficiency_gpu_tflops_estimate{uuid}      ESTIMATE: TFLOPS the GPU achieves now
//   stoker_efficiency_gpu_tflops_per_watt_estimate{uuid}  ESTIMATE: the same per watt drawn
// deploy/prometheus/stoker-rules.yml alerts on the last one (ClusterBacklog).

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "efficiency/alerts.h"
#include "efficiency/idle_reclaim.h"
#include "efficiency/report.h"
#include "efficiency/zones.h"

namespace stoker::efficiency {

struct EngineState {
  const ZoneTracker* zones = nullptr;
  // Its active alerts (those an evaluation has seen) are counted by rule, grade and state.
  const AlertEngine* alerts = nullptr;
  const std::vector<ReclaimRecord>* reclaim_log = nullptr;
  const ClusterSnapshot* cluster = nullptr;
};

// What RenderMetrics writes, copied out of the engine's state: taken under the engine's lock,
// written without it (at 10,000 nodes the text is about 47 MB and took seconds to write, with
// every submission waiting on the lock meanwhile).
struct MetricsSnapshot {
  bool zones = false;
  std::vector<ZoneStatus> gpus, jobs;  // GPUs sorted by key once finished
  // Each GPU's estimates from its latest sample. The caller adds them as taken, a GPU key
  // possibly more than once (two nodes reporting one GPU); FinishMetrics keeps each key's
  // latest, the last taken among equally recent ones, in gpu_estimates.
  bool estimates = false;
  struct EstimateRow {
    std::string key;
    SampleEstimate estimate;
    WallTime at{};
  };
  std::vector<EstimateRow> estimate_rows;
  std::map<std::string, SampleEstimate> gpu_estimates;  // by GPU key (UUID)
  bool alerts = false;
  std::map<std::tuple<std::string, std::string, std::string>, int>
      alert_counts;  // rule, grade, state
  bool reclaim = false;
  std::map<std::string, int64_t> reclaim_counts;  // by action
  std::optional<ClusterSnapshot> cluster;
};

// Under the engine's lock: copies what is shown (GPU zones unsorted; the caller adds the
// estimates as estimate_rows).
MetricsSnapshot TakeMetrics(const EngineState& s);
// After it: sorts the GPU zones and folds estimate_rows into gpu_estimates.
void FinishMetrics(MetricsSnapshot* m);
void RenderMetrics(const MetricsSnapshot& m, std::string* out);

}  // namespace stoker::efficiency
