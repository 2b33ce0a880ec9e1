#pragma once
// Prometheus text for the engine's state, appended to the server's /metrics:
//   stoker_efficiency_gpu_zone{uuid,zone}            1 for the GPU's current zone
//   stoker_efficiency_gpu_activity_ratio{uuid}       window mean activity (0..1)
//   stoker_efficiency_job_zone{jobid,zone}           1 for the job's current zone
//   stoker_efficiency_alerts{alertname,grade,state}  active alerts by rule and state
//   stoker_efficiency_reclaim_actions_total{action}  idle-reclaim records made
//   stoker_cluster_backlog_wait_seconds              longest wait that idle GPUs could serve
// deploy/prometheus/stoker-rules.yml alerts on the last one (ClusterBacklog).

#include <string>
#include <vector>

#include "efficiency/alerts.h"
#include "efficiency/idle_reclaim.h"
#include "efficiency/zones.h"

namespace stoker::efficiency {

struct EngineState {
  const ZoneTracker* zones = nullptr;
  const std::vector<Alert>* active_alerts = nullptr;
  const std::vector<ReclaimRecord>* reclaim_log = nullptr;
  const ClusterSnapshot* cluster = nullptr;
};

void RenderMetrics(const EngineState& s, std::string* out);

}  // namespace stoker::efficiency
