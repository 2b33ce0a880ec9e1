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
#include <string>
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
  // Each GPU's estimates from its latest sample, by GPU key (UUID).
  const std::map<std::string, SampleEstimate>* gpu_estimates = nullptr;
};

void RenderMetrics(const EngineState& s, std::string* out);

}  // namespace stoker::efficiency
