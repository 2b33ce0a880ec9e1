#pragma once
// The efficiency engine inside the server: a server::ServerObserver that receives every
// heartbeat (the agent's GPU samples as telemetry's snapshot JSON) and every job change, and
// runs zones, graded alerts and idle reclaim on them. Reclaim acts through the server's
// JobActions (cancel; the server has no system requeue yet, so "requeue" cancels with the
// reason recorded). Thread-safe: the server calls it from request threads.

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "efficiency/alerts.h"
#include "efficiency/config.h"
#include "efficiency/idle_reclaim.h"
#include "efficiency/zones.h"
#include "server/server.h"

namespace stoker::efficiency {

// Telemetry's snapshot JSON (an object with "gpus", or the "gpus" array itself) -> samples.
// Fields are {"value": v, "state": "value"|...}; a missing or non-value field stays unset.
Result<std::vector<GpuSample>> SamplesFromSnapshotJson(const nlohmann::json& j);

class EfficiencyService final : public server::ServerObserver {
 public:
  EfficiencyService(EfficiencyConfig cfg, server::JobActions* actions);
  ~EfficiencyService() override;

  void OnHeartbeat(const std::string& node, const nlohmann::json& samples, WallTime at) override;
  void OnJobChanged(const server::Job& job) override;

  // Runs alert evaluation and idle reclaim at `now` (the heartbeat path calls it too).
  void Evaluate(WallTime now);

  std::string Metrics() const;             // Prometheus text (efficiency/metrics.h)
  std::vector<Alert> ActiveAlerts() const;
  std::vector<ZoneStatus> GpuZones() const;
  std::vector<ZoneStatus> JobZones() const;
  std::vector<ReclaimRecord> ReclaimLog() const;
  void AddNotifier(Notifier* n);

 private:
  class Directory;
  class Actions;
  mutable std::mutex mu_;
  EfficiencyConfig cfg_;
  std::unique_ptr<Directory> directory_;
  std::unique_ptr<Actions> actions_;
  ZoneTracker zones_;
  AlertEngine alerts_;
  std::unique_ptr<IdleReclaimer> reclaimer_;
  std::map<std::pair<std::string, uint32_t>, std::string> job_on_gpu_;  // (node, index) -> job
  std::vector<Alert> active_;
};

}  // namespace stoker::efficiency
