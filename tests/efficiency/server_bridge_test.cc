#include <gtest/gtest.h>

#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

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

// ---- a report's seconds together give what the same seconds one by one give ----------------

// One second of node `node`'s four GPUs, scripted so that every GPU rule changes state in the
// middle of reports: GPU 0 holds job 12 and idles with short bursts (the yellow dip at 2 min,
// the job's orange JobGpusIdle at 15 min, both broken and started again), GPU 1 wastes its SMs
// in stretches (orange after 15 min), GPU 2 overheats in bursts of 70 s (red after 1 min) and
// is lost for 5 s, GPU 3 is memory-bound with gaps.
std::vector<GpuSample> ScriptedSecond(int s, WallTime at, bool stamped) {
  std::vector<GpuSample> out;
  for (uint32_t i = 0; i < 4; ++i) {
    GpuSample g;
    g.id.index = i;
    g.id.uuid = "GPU-" + std::to_string(i);
    g.id.name = "NVIDIA H100 80GB HBM3";
    if (stamped) g.timestamp = at;
    g.memory_total_bytes = Field<uint64_t>::Of(80ull << 30);
    g.memory_used_bytes = Field<uint64_t>::Of(20ull << 30);
    g.power_mw = Field<uint32_t>::Of(300'000);
    uint32_t util = 0, temp = 50;
    double sm = 0, tensor = 0, dram = 0;
    switch (i) {
      case 0:  // idle, a burst of 30 s at minute 20 and 7 s at minute 31
        if ((s >= 1200 && s < 1230) || (s >= 1860 && s < 1867)) util = 80, sm = 0.8;
        break;
      case 1:  // SM waste, interrupted for 13 s every 17 minutes
        util = 70, sm = (s % 1020) < 1007 ? 0.4 : 0.9, tensor = 0.2;
        break;
      case 2:  // hot for 70 s every 5 minutes; lost for 5 s at minute 12
        util = 90, sm = 0.9, temp = (s % 300) < 70 ? 90 : 60;
        if (s >= 720 && s < 725) g.health = GpuHealth::kLost;
        break;
      default:  // memory-bound, with a 3 s gap every 11 minutes
        util = 60, sm = 0.3, dram = (s % 660) < 657 ? 0.5 : 0.1;
        break;
    }
    g.util_gpu_pct = Field<uint32_t>::Of(util);
    g.temperature_c = Field<uint32_t>::Of(temp);
    g.gpm.sm_active = Field<double>::Of(sm);
    g.gpm.tensor_active = Field<double>::Of(tensor);
    g.gpm.dram_bw_util = Field<double>::Of(dram);
    out.push_back(std::move(g));
  }
  return out;
}

void ExpectSameAlerts(const std::vector<Alert>& a, const std::vector<Alert>& b, int s) {
  ASSERT_EQ(a.size(), b.size()) << "at second " << s;
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE("second " + std::to_string(s) + ": " + a[i].fingerprint);
    EXPECT_EQ(a[i].fingerprint, b[i].fingerprint);
    EXPECT_EQ(a[i].state, b[i].state);
    EXPECT_EQ(a[i].pending_since, b[i].pending_since);
    EXPECT_EQ(a[i].starts_at, b[i].starts_at);
    EXPECT_EQ(a[i].ends_at, b[i].ends_at);
    EXPECT_EQ(a[i].labels, b[i].labels);
    EXPECT_EQ(a[i].annotations, b[i].annotations);
    EXPECT_EQ(a[i].value, b[i].value);
    EXPECT_EQ(a[i].silenced, b[i].silenced);
    EXPECT_EQ(a[i].inhibited, b[i].inhibited);
  }
}

void ExpectSameZones(const std::vector<ZoneStatus>& a, const std::vector<ZoneStatus>& b, int s) {
  ASSERT_EQ(a.size(), b.size()) << "at second " << s;
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE("second " + std::to_string(s) + ": " + a[i].key);
    EXPECT_EQ(a[i].key, b[i].key);
    EXPECT_EQ(a[i].zone, b[i].zone);
    EXPECT_EQ(a[i].mean_milli, b[i].mean_milli);
    EXPECT_EQ(a[i].peak_milli, b[i].peak_milli);
    EXPECT_EQ(a[i].samples, b[i].samples);
    EXPECT_EQ(a[i].zero_samples, b[i].zero_samples);
    EXPECT_EQ(a[i].covered, b[i].covered);
    EXPECT_EQ(a[i].last_sample, b[i].last_sample);
  }
}

// Feeds 50 minutes to one service a second per call (OnHeartbeat) and to another in reports of
// `lengths` seconds in turn (OnReport), evaluating both after every report, and compares their
// alerts (with their start and end times), zones, samples and metrics throughout.
void CompareOnePerCallWithReports(const std::vector<int>& lengths, bool stamped) {
  EfficiencyConfig cfg;  // the built-in rules, as the server's configuration has them
  cfg.alerting.rules = BuiltinRules();
  EfficiencyService one(cfg, nullptr);
  EfficiencyService batched(cfg, nullptr);
  one.OnJobChanged(RunningJob());
  batched.OnJobChanged(RunningJob());
  const WallTime t0 = WallTime(std::chrono::seconds(1'767'225'600));
  const int total = 50 * 60;
  std::vector<WallTime> dip_starts, idle_job_starts;
  size_t which = 0;
  for (int s = 0; s < total;) {
    const int n = std::min(lengths[which++ % lengths.size()], total - s);
    std::vector<server::SampleTick> report;
    for (int k = 0; k < n; ++k) {
      const WallTime at = t0 + std::chrono::seconds(s + k);
      report.push_back(server::SampleTick{at, ScriptedSecond(s + k, at, stamped)});
      one.OnHeartbeat("n1", report.back().gpus, at);
    }
    batched.OnReport("n1", report);
    s += n;
    const WallTime now = t0 + std::chrono::seconds(s - 1);
    one.Evaluate(now);
    batched.Evaluate(now);
    const auto alerts = one.ActiveAlerts();
    ExpectSameAlerts(alerts, batched.ActiveAlerts(), s);
    ExpectSameZones(one.GpuZones(), batched.GpuZones(), s);
    ExpectSameZones(one.JobZones(), batched.JobZones(), s);
    if (::testing::Test::HasFailure()) return;
    for (const Alert& a : alerts) {
      if (a.state != AlertState::kFiring) continue;
      auto& starts = a.rule == "GpuActivityDip" ? dip_starts : idle_job_starts;
      if ((a.rule == "GpuActivityDip" || a.rule == "JobGpusIdle") &&
          (starts.empty() || starts.back() != a.starts_at)) {
        starts.push_back(a.starts_at);
      }
    }
  }
  // The alerts' start times are the seconds they started, not the reports': GPU 0 went idle at
  // 0 s and again after its bursts (1230 s, 1867 s). The dip (yellow, 2 min) and the job's
  // JobGpusIdle (orange, 15 min) both start then; the orange one fires only where 15 minutes
  // of idleness passed before the next burst: at 900 s and at 2767 s (1867 + 900), seconds no
  // report ends on.
  EXPECT_EQ(dip_starts, (std::vector<WallTime>{t0, t0 + 1230s, t0 + 1867s}));
  EXPECT_EQ(idle_job_starts, (std::vector<WallTime>{t0, t0 + 1867s}));
  const server::Principal admin{"root", server::Role::kAdmin};
  EXPECT_EQ(one.Metrics(admin), batched.Metrics(admin));
  const RecordSet a = one.Records(), b = batched.Records();
  ASSERT_EQ(a.samples.size(), b.samples.size());
  for (size_t i = 0; i < a.samples.size(); ++i) {
    EXPECT_EQ(a.samples[i].t, b.samples[i].t);
    EXPECT_EQ(a.samples[i].gpu, b.samples[i].gpu);
    EXPECT_EQ(a.samples[i].job, b.samples[i].job);
    EXPECT_EQ(a.samples[i].sm_active, b.samples[i].sm_active);
  }
}

TEST(EfficiencyServiceTest, ReportsOfTenSecondsGiveWhatOneSecondPerCallGives) {
  CompareOnePerCallWithReports({10}, /*stamped=*/true);
}

TEST(EfficiencyServiceTest, ReportsOfUnevenLengthsAndUnstampedSamplesGiveTheSame) {
  CompareOnePerCallWithReports({7, 3, 1, 15, 2}, /*stamped=*/false);
}

TEST(EfficiencyServiceTest, RecordedSamplesAreTheLatestKeptOnesInOrder) {
  EfficiencyConfig cfg;
  cfg.service.keep_samples = 25;  // fewer than the report's samples: the ring wraps
  EfficiencyService svc(cfg, nullptr);
  const WallTime t0 = WallTime(std::chrono::seconds(1'767'225'600));
  std::vector<server::SampleTick> report;
  for (int k = 0; k < 10; ++k) {
    const WallTime at = t0 + std::chrono::seconds(k);
    report.push_back(server::SampleTick{at, ScriptedSecond(k, at, true)});
  }
  svc.OnReport("n1", report);
  const RecordSet r = svc.Records();
  ASSERT_EQ(r.samples.size(), 25u);
  // 40 samples (10 s x 4 GPUs) went in; the last 25 are seconds 3 (GPU 3) .. 9.
  EXPECT_EQ(r.samples.front().t, t0 + 3s);
  EXPECT_EQ(r.samples.front().gpu, "GPU-3");
  EXPECT_EQ(r.samples.back().t, t0 + 9s);
  EXPECT_EQ(r.samples.back().gpu, "GPU-3");
}

// A GPU's samples belong to the job that was set on it last: a job set on it earlier that ends
// afterwards leaves it to the later one, and once that one ends too they belong to no job.
TEST(EfficiencyServiceTest, AJobEndingLeavesItsGpuToAJobSetOnItSince) {
  EfficiencyService svc(EfficiencyConfig{}, nullptr);
  const double t0 = 1'767'225'600;
  auto sample_at = [&](int s) {
    svc.OnHeartbeat("n1", Readings(Snapshot(t0 + s, 40, false)),
                    WallTime(std::chrono::seconds(static_cast<int64_t>(t0) + s)));
    const RecordSet r = svc.Records();
    return r.samples.empty() ? std::string("(none)") : r.samples.back().job;
  };
  server::Job first = RunningJob();
  server::Job second = RunningJob();
  second.id = 13;
  svc.OnJobChanged(first);
  EXPECT_EQ(sample_at(0), "12");
  svc.OnJobChanged(second);  // set on GPU 0 of n1 after job 12
  EXPECT_EQ(sample_at(1), "13");
  first.state = server::JobState::kSucceeded;
  first.end_ms = first.start_ms + 2000;
  svc.OnJobChanged(first);
  EXPECT_EQ(sample_at(2), "13");
  second.state = server::JobState::kSucceeded;
  second.end_ms = second.start_ms + 3000;
  svc.OnJobChanged(second);
  EXPECT_EQ(sample_at(3), "");
}

// The backlog gauge the ClusterBacklog rule (deploy/prometheus/stoker-rules.yml) reads is in the
// server's /metrics from the first evaluation on: a job queued for 10 minutes while idle GPUs
// could run it.
TEST(EfficiencyServiceTest, MetricsCarryTheBacklogWaitFromTheLastEvaluation) {
  EfficiencyService svc(EfficiencyConfig{}, nullptr);
  const WallTime t0 = WallTime(std::chrono::seconds(1'767'225'600));
  server::Job queued;
  queued.id = 20;
  queued.user = "carol";
  queued.state = server::JobState::kQueued;
  queued.submit_ms = 1'767'225'600'000;
  queued.spec.gpus = 1;
  svc.OnJobChanged(queued);
  std::vector<server::SampleTick> report;
  for (int k = 0; k < 10; ++k) {
    const WallTime at = t0 + std::chrono::seconds(k);
    report.push_back(server::SampleTick{at, ScriptedSecond(k, at, true)});
  }
  svc.OnReport("n1", report);
  const server::Principal admin{"root", server::Role::kAdmin};
  EXPECT_EQ(svc.Metrics(admin).find("stoker_cluster_backlog_wait_seconds"), std::string::npos)
      << "no evaluation yet";
  svc.Evaluate(t0 + std::chrono::minutes(10));
  EXPECT_NE(svc.Metrics(admin).find("\nstoker_cluster_backlog_wait_seconds 600\n"),
            std::string::npos)
      << svc.Metrics(admin).substr(0, 2000);
}

// Holds the engine's lock from inside an evaluation: the first notification waits until
// released.
struct BlockingNotifier final : Notifier {
  Status Notify(const std::vector<Alert>&, WallTime) override {
    std::unique_lock lock(mu);
    if (!blocked_once) {
      blocked_once = true;
      entered = true;
      cv.notify_all();
      cv.wait(lock, [&] { return released; });
    }
    return Status::Ok();
  }
  bool WaitEntered() {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(30), [&] { return entered; });
  }
  void Release() {
    std::lock_guard lock(mu);
    released = true;
    cv.notify_all();
  }
  std::mutex mu;
  std::condition_variable cv;
  bool blocked_once = false, entered = false, released = false;
};

// A report that finds the engine busy (here: an evaluation that notifies) does not wait for it:
// it is queued, and applied in the order the reports came before anyone reads the engine. The
// service that took the reports while busy ends exactly where one that took them after the
// evaluation does: same alerts, zones, samples and metrics.
TEST(EfficiencyServiceTest, ReportsThatFindTheEngineBusyAreQueuedAndAppliedInOrder) {
  EfficiencyConfig cfg;
  cfg.alerting.rules = BuiltinRules();
  EfficiencyService busy(cfg, nullptr);
  EfficiencyService reference(cfg, nullptr);
  BlockingNotifier notifier;
  busy.AddNotifier(&notifier);
  busy.OnJobChanged(RunningJob());
  reference.OnJobChanged(RunningJob());
  const WallTime t0 = WallTime(std::chrono::seconds(1'767'225'600));
  auto report = [&](int from) {
    std::vector<server::SampleTick> r;
    for (int k = 0; k < 10; ++k) {
      const WallTime at = t0 + std::chrono::seconds(from + k);
      r.push_back(server::SampleTick{at, ScriptedSecond(from + k, at, true)});
    }
    return r;
  };
  // Five minutes: GPU 0 idles, so its dip alert fires (and is notified) at the evaluation.
  int s = 0;
  for (; s < 300; s += 10) {
    busy.OnReport("n1", report(s));
    reference.OnReport("n1", report(s));
  }
  const WallTime now = t0 + std::chrono::seconds(s - 1);
  std::thread evaluation([&] { busy.Evaluate(now); });
  if (!notifier.WaitEntered()) {  // the evaluation holds the engine's lock
    notifier.Release();
    evaluation.join();
    FAIL() << "the evaluation notified nothing: no alert fired in five idle minutes";
  }
  // Three more reports while it does: each returns without waiting for the evaluation.
  auto queued = std::async(std::launch::async, [&] {
    for (int k = 0; k < 3; ++k) busy.OnReport("n1", report(s + 10 * k));
  });
  const bool returned = queued.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  notifier.Release();
  evaluation.join();
  queued.wait();
  EXPECT_TRUE(returned) << "a report waited for the evaluation holding the engine";
  reference.Evaluate(now);
  for (int k = 0; k < 3; ++k) reference.OnReport("n1", report(s + 10 * k));
  s += 30;
  ExpectSameAlerts(reference.ActiveAlerts(), busy.ActiveAlerts(), s);
  ExpectSameZones(reference.GpuZones(), busy.GpuZones(), s);
  ExpectSameZones(reference.JobZones(), busy.JobZones(), s);
  const RecordSet a = reference.Records(), b = busy.Records();
  ASSERT_EQ(a.samples.size(), b.samples.size());
  ASSERT_FALSE(b.samples.empty());
  EXPECT_EQ(b.samples.back().t, t0 + std::chrono::seconds(s - 1));  // the last queued second
  for (size_t i = 0; i < a.samples.size(); ++i) {
    EXPECT_EQ(a.samples[i].t, b.samples[i].t) << i;
    EXPECT_EQ(a.samples[i].gpu, b.samples[i].gpu) << i;
  }
  const server::Principal admin{"root", server::Role::kAdmin};
  EXPECT_EQ(reference.Metrics(admin), busy.Metrics(admin));
}

}  // namespace
}  // namespace stoker::efficiency
