#include "efficiency/server_bridge.h"

#include <gtest/gtest.h>

namespace stoker::efficiency {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class FakeServerActions : public server::JobActions {
 public:
  Status CancelJob(int64_t id, const std::string& reason) override {
    cancelled.emplace_back(id, reason);
    return Status::Ok();
  }
  Status RequeueJob(int64_t id, const std::string& reason) override {
    requeued.emplace_back(id, reason);
    return Status::Ok();
  }
  std::vector<std::pair<int64_t, std::string>> cancelled, requeued;
};

// The agent's snapshot JSON shape (telemetry/snapshot_json.cc).
json Snapshot(double t, int util, bool with_job) {
  json fields = {{"util_gpu_pct", {{"value", util}, {"state", "value"}}},
                 {"temperature_c", {{"value", 55}, {"state", "value"}}},
                 {"sm_active_ratio", {{"value", nullptr}, {"state", "unsupported"}}}};
  json procs = json::array();
  if (with_job) procs.push_back({{"pid", 7}, {"job", {{"kind", "stoker"}, {"id", "12"}}}});
  return {{"hostname", "n1"},
          {"gpus", json::array({{{"index", 0},
                                 {"uuid", "GPU-x"},
                                 {"name", "NVIDIA A100"},
                                 {"health", "ok"},
                                 {"timestamp_unix", t},
                                 {"fields", fields},
                                 {"processes", procs}}})}};
}

server::Job RunningJob() {
  server::Job j;
  j.id = 12;
  j.user = "carol";
  j.state = server::JobState::kRunning;
  j.start_ms = 1'767'225'600'000;
  server::Assignment a;
  a.node = "n1";
  a.gpu_indices = {0};
  j.assignment = a;
  return j;
}

// The readings as the server hands them to observers: parsed from a heartbeat body.
std::vector<GpuSample> Readings(const json& snapshot) {
  auto hb = server::ParseHeartbeat(json{{"samples", snapshot["gpus"]}}.dump());
  EXPECT_TRUE(hb.ok()) << hb.status().ToString();
  return hb.ok() ? hb->gpus : std::vector<GpuSample>{};
}

TEST(EfficiencyServiceTest, HeartbeatsDriveZonesAlertsAndIdleCancelThroughTheServer) {
  auto cfg = LoadConfigYaml("idle_reclaim: {action: cancel}");
  ASSERT_TRUE(cfg.ok());
  FakeServerActions actions;
  EfficiencyService svc(*cfg, &actions);
  svc.OnJobChanged(RunningJob());
  const double t0 = 1'767'225'600;
  for (int s = 0; s <= 130 * 60; s += 30) {
    const WallTime at = WallTime(std::chrono::seconds(static_cast<int64_t>(t0) + s));
    svc.OnHeartbeat("n1", Readings(Snapshot(t0 + s, 0, true)), at);
    // Heartbeats only record; decisions are the evaluation loop's (every 5 minutes here).
    if (s < 120 * 60) {
      EXPECT_TRUE(actions.cancelled.empty()) << "at " << s << " s";
    }
    if (s % 300 == 0) svc.Evaluate(at);
  }
  ASSERT_EQ(actions.cancelled.size(), 1u);
  EXPECT_EQ(actions.cancelled[0].first, 12);
  EXPECT_NE(actions.cancelled[0].second.find("idle reclaim"), std::string::npos);
  const auto log = svc.ReclaimLog();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].action, ReclaimAction::kWarn);
  EXPECT_EQ(log[1].action, ReclaimAction::kCancel);
  bool idle_alert = false;
  for (const auto& a : svc.ActiveAlerts())
    idle_alert |= a.rule == "GpuActivityDip" && a.labels.at("job") == "12";
  EXPECT_TRUE(idle_alert);
  ASSERT_EQ(svc.JobZones().size(), 1u);
  EXPECT_EQ(svc.JobZones()[0].zone, Zone::kBronze);
  const std::string m = svc.Metrics();
  EXPECT_NE(m.find("stoker_efficiency_gpu_zone{uuid=\"GPU-x\",zone=\"bronze\"} 1"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("stoker_efficiency_reclaim_actions_total{action=\"cancel\"} 1"),
            std::string::npos)
      << m;
  // The job ends: the service forgets it.
  server::Job done = RunningJob();
  done.state = server::JobState::kCancelled;
  svc.OnJobChanged(done);
  EXPECT_TRUE(svc.JobZones().empty());
}

TEST(EfficiencyServiceTest, DefaultActionRequeuesThroughTheServer) {
  auto cfg = LoadConfigYaml("");  // idle_reclaim.action defaults to requeue
  ASSERT_TRUE(cfg.ok());
  FakeServerActions actions;
  EfficiencyService svc(*cfg, &actions);
  svc.OnJobChanged(RunningJob());
  const double t0 = 1'767'225'600;
  for (int s = 0; s <= 130 * 60; s += 30) {
    const WallTime at = WallTime(std::chrono::seconds(static_cast<int64_t>(t0) + s));
    svc.OnHeartbeat("n1", Readings(Snapshot(t0 + s, 0, true)), at);
    if (s % 300 == 0) svc.Evaluate(at);
  }
  EXPECT_TRUE(actions.cancelled.empty());
  ASSERT_EQ(actions.requeued.size(), 1u);
  EXPECT_EQ(actions.requeued[0].first, 12);
  EXPECT_NE(actions.requeued[0].second.find("idle reclaim"), std::string::npos);
  const auto log = svc.ReclaimLog();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[1].action, ReclaimAction::kRequeue);
}

}  // namespace
}  // namespace stoker::efficiency
