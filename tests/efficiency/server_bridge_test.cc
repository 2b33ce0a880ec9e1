#include <gtest/gtest.h>

#include <functional>

#include "integration/efficiency_service.h"

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
  Status ConsolidateAtNextStart(int64_t id, int32_t milli, const std::string&) override {
    consolidated.emplace_back(id, milli);
    return Status::Ok();
  }
  std::vector<std::pair<int64_t, std::string>> cancelled, requeued;
  std::vector<std::pair<int64_t, int32_t>> consolidated;
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

// Job 12 runs on GPU-x at 0 % for 130 minutes: heartbeats every 30 s, an evaluation every 5
// minutes; `each(s)` runs after every heartbeat, s seconds in.
void RunIdleJob(EfficiencyService& svc, const std::function<void(int)>& each) {
  svc.OnJobChanged(RunningJob());
  const double t0 = 1'767'225'600;
  for (int s = 0; s <= 130 * 60; s += 30) {
    const WallTime at = WallTime(std::chrono::seconds(static_cast<int64_t>(t0) + s));
    svc.OnHeartbeat("n1", Readings(Snapshot(t0 + s, 0, true)), at);
    each(s);
    if (s % 300 == 0) svc.Evaluate(at);
  }
}

TEST(EfficiencyServiceTest, HeartbeatsDriveZonesAlertsAndIdleCancelThroughTheServer) {
  auto cfg = LoadConfigYaml("idle_reclaim: {action: cancel}");
  ASSERT_TRUE(cfg.ok());
  FakeServerActions actions;
  EfficiencyService svc(*cfg, &actions);
  // Heartbeats only record; decisions are the evaluation loop's (every 5 minutes here).
  RunIdleJob(svc, [&](int s) {
    if (s < 120 * 60) {
      EXPECT_TRUE(actions.cancelled.empty()) << "at " << s << " s";
    }
  });
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
  const std::string m = svc.Metrics(server::Principal{"admin", server::Role::kAdmin});
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

// Power efficiency per GPU, as a metric: the estimate from the latest sample (the reports'
// formula), absent where SM activity is not reported, gone once the GPU is quiet for the window.
TEST(EfficiencyServiceTest, MetricsEstimateTflopsPerWattPerGpu) {
  auto cfg = LoadConfigYaml("");
  ASSERT_TRUE(cfg.ok());
  FakeServerActions actions;
  EfficiencyService svc(*cfg, &actions);
  const double t0 = 1'767'225'600;
  auto gpu = [](int index, const std::string& uuid, json fields) {
    return json{{"index", index}, {"uuid", uuid},          {"name", "NVIDIA A100-SXM4-80GB"},
                {"health", "ok"}, {"timestamp_unix", 0.0}, {"fields", std::move(fields)}};
  };
  auto value = [](double v) { return json{{"value", v}, {"state", "value"}}; };
  auto beat = [&](double t, bool both) {
    json busy = gpu(0, "GPU-busy",
                    {{"sm_active_ratio", value(0.5)},
                     {"tensor_active_ratio", value(0.2)},
                     {"power_mw", {{"value", 250000}, {"state", "value"}}}});
    json blind = gpu(1, "GPU-blind",
                     {{"util_gpu_pct", value(80)},
                      {"sm_active_ratio", {{"value", nullptr}, {"state", "unsupported"}}},
                      {"power_mw", {{"value", 200000}, {"state", "value"}}}});
    json gpus = both ? json::array({busy, blind}) : json::array({blind});
    for (auto& g : gpus) g["timestamp_unix"] = t;
    svc.OnHeartbeat("n1", Readings(json{{"gpus", gpus}}),
                    WallTime(std::chrono::seconds(static_cast<int64_t>(t))));
  };
  beat(t0, true);
  std::string m = svc.Metrics(server::Principal{"admin", server::Role::kAdmin});
  // A sample's value, or -1 when the series is absent.
  auto value_of = [&](const std::string& series) {
    const size_t at = m.find("\n" + series + " ");
    return at == std::string::npos ? -1.0 : std::stod(m.substr(at + series.size() + 2));
  };
  // A100: 312 tensor, 19.5 FP32 TFLOPS: 0.2 x 312 + (0.5 - 0.2) x 19.5 = 68.25, over 250 W.
  EXPECT_NEAR(value_of("stoker_efficiency_gpu_tflops_estimate{uuid=\"GPU-busy\"}"), 68.25, 1e-9)
      << m;
  EXPECT_NEAR(value_of("stoker_efficiency_gpu_tflops_per_watt_estimate{uuid=\"GPU-busy\"}"),
              68.25 / 250, 1e-12)
      << m;
  EXPECT_NE(m.find("# HELP stoker_efficiency_gpu_tflops_per_watt_estimate ESTIMATE"),
            std::string::npos);
  EXPECT_EQ(m.find("estimate{uuid=\"GPU-blind\""), std::string::npos) << "no SM activity:\n" << m;
  // GPU-busy goes quiet for longer than the zone window (15 minutes): its estimate goes.
  beat(t0 + 16 * 60, false);
  m = svc.Metrics(server::Principal{"admin", server::Role::kAdmin});
  EXPECT_EQ(m.find("estimate{uuid=\"GPU-busy\""), std::string::npos) << m;
}

TEST(EfficiencyServiceTest, DefaultActionRequeuesThroughTheServer) {
  auto cfg = LoadConfigYaml("");  // idle_reclaim.action defaults to requeue
  ASSERT_TRUE(cfg.ok());
  FakeServerActions actions;
  EfficiencyService svc(*cfg, &actions);
  RunIdleJob(svc, [](int) {});
  EXPECT_TRUE(actions.cancelled.empty());
  ASSERT_EQ(actions.requeued.size(), 1u);
  EXPECT_EQ(actions.requeued[0].first, 12);
  EXPECT_NE(actions.requeued[0].second.find("idle reclaim"), std::string::npos);
  const auto log = svc.ReclaimLog();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[1].action, ReclaimAction::kRequeue);
}

// Two GPUs of one node, each with its own job at the given utilisation.
json TwoJobSnapshot(double t, int util0, int util1) {
  json gpus = json::array();
  for (int i : {0, 1}) {
    json fields = {{"util_gpu_pct", {{"value", i == 0 ? util0 : util1}, {"state", "value"}}},
                   {"sm_active_ratio", {{"value", nullptr}, {"state", "unsupported"}}}};
    gpus.push_back({{"index", i},
                    {"uuid", "GPU-" + std::to_string(i)},
                    {"name", "NVIDIA A100"},
                    {"health", "ok"},
                    {"timestamp_unix", t},
                    {"fields", fields},
                    {"processes", json::array()}});
  }
  return {{"hostname", "n1"}, {"gpus", gpus}};
}

server::Job OneGpuJob(int64_t id, uint32_t gpu, bool movable) {
  server::Job j = RunningJob();
  j.id = id;
  j.spec.gpus = 1;
  j.spec.movable = movable;
  j.assignment->gpu_indices = {gpu};
  return j;
}

// Jobs 21 and 22 on GPUs 0 and 1 use 20 % and 40 % of them for 30 minutes (bronze, packable
// onto one GPU), with an evaluation every 5 minutes.
void RunTwoLightJobs(EfficiencyService& svc, bool movable) {
  const double t0 = 1'767'225'600;
  // Model names come from the samples: one heartbeat before the jobs.
  svc.OnHeartbeat("n1", Readings(TwoJobSnapshot(t0, 0, 0)),
                  WallTime(std::chrono::seconds(static_cast<int64_t>(t0))));
  svc.OnJobChanged(OneGpuJob(21, 0, movable));
  svc.OnJobChanged(OneGpuJob(22, 1, movable));
  for (int s = 0; s <= 30 * 60; s += 30) {
    const WallTime at = WallTime(std::chrono::seconds(static_cast<int64_t>(t0) + s));
    svc.OnHeartbeat("n1", Readings(TwoJobSnapshot(t0 + s, 20, 40)), at);
    if (s % 300 == 0) svc.Evaluate(at);
  }
}

TEST(EfficiencyServiceTest, ConsolidationPlanIsHandedToTheServerOnce) {
  for (bool movable : {false, true}) {
    auto cfg = LoadConfigYaml("idle_reclaim: {enabled: false}");
    ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
    FakeServerActions actions;
    EfficiencyService svc(*cfg, &actions);
    RunTwoLightJobs(svc, movable);
    ASSERT_EQ(actions.consolidated.size(), 2u) << "movable=" << movable;
    std::map<int64_t, int32_t> share(actions.consolidated.begin(), actions.consolidated.end());
    // In proportion to use, one GPU together: 20/60 and 40/60 of it.
    EXPECT_EQ(share.at(21), 333);
    EXPECT_EQ(share.at(22), 666);
    // Movable jobs are restarted now; the others change at their next start.
    EXPECT_EQ(actions.requeued.size(), movable ? 2u : 0u);
    if (movable) {
      EXPECT_NE(actions.requeued[0].second.find("consolidation"), std::string::npos);
    }
  }
}

TEST(EfficiencyServiceTest, ConsolidationCanBeLeftToThePlanOnly) {
  auto cfg = LoadConfigYaml("zones: {apply_consolidation: false}\nidle_reclaim: {enabled: false}");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  FakeServerActions actions;
  EfficiencyService svc(*cfg, &actions);
  RunTwoLightJobs(svc, /*movable=*/true);
  EXPECT_TRUE(actions.consolidated.empty());
  EXPECT_TRUE(actions.requeued.empty());
}

}  // namespace
}  // namespace stoker::efficiency
