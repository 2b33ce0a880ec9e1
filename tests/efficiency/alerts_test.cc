#include "efficiency/alerts.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "efficiency/xid.h"
#include "test_util.h"

namespace stoker::efficiency {
namespace {

using namespace std::chrono_literals;
using testing::Sample;
using testing::T0;

class RecordingNotifier : public Notifier {
 public:
  Status Notify(const std::vector<Alert>& batch, WallTime) override {
    batches.push_back(batch);
    return Status::Ok();
  }
  std::vector<std::vector<Alert>> batches;
  int Count(const std::string& rule, AlertState state) const {
    int n = 0;
    for (const auto& b : batches)
      for (const auto& a : b) n += a.rule == rule && a.state == state;
    return n;
  }
};

AlertingConfig Builtins() {
  AlertingConfig c;
  c.rules = BuiltinRules();
  return c;
}

TEST(XidTest, GradesFollowTheTable) {
  EXPECT_EQ(GradeXid(79), XidGrade::kRed);
  EXPECT_EQ(GradeXid(48), XidGrade::kRed);
  EXPECT_EQ(GradeXid(94), XidGrade::kAmber);
  EXPECT_EQ(GradeXid(13), XidGrade::kBlue);
  EXPECT_EQ(GradeXid(146), XidGrade::kRed);
  EXPECT_EQ(GradeXid(1), XidGrade::kUngraded);
}

TEST(AlertEngineTest, SustainedWasteGoesPendingThenFiresOnceThenResolves) {
  AlertEngine e(Builtins(), ActivityMetric::kAuto);
  RecordingNotifier n;
  e.AddNotifier(&n);
  // Busy GPU (util 100 %) with SM activity 30 %: GpuSmWaste after 15 minutes.
  for (int m = 0; m < 15; ++m) {
    e.ObserveGpu(Sample("GPU-a", T0() + m * 1min, 100, "j1", 0.30));
    e.Evaluate(T0() + m * 1min);
  }
  EXPECT_EQ(n.Count("GpuSmWaste", AlertState::kFiring), 0);
  auto active = e.Evaluate(T0() + 14min);
  ASSERT_FALSE(active.empty());
  e.ObserveGpu(Sample("GPU-a", T0() + 15min, 100, "j1", 0.30));
  active = e.Evaluate(T0() + 15min);
  EXPECT_EQ(n.Count("GpuSmWaste", AlertState::kFiring), 1);
  const auto& fired = e.history().back();
  EXPECT_EQ(fired.labels.at("gpu"), "GPU-a");
  EXPECT_EQ(fired.labels.at("job"), "j1");
  EXPECT_EQ(fired.labels.at("grade"), "orange");
  EXPECT_EQ(fired.starts_at, T0());
  // Still firing a minute later: deduplicated, no second notification.
  e.ObserveGpu(Sample("GPU-a", T0() + 16min, 100, "j1", 0.30));
  e.Evaluate(T0() + 16min);
  EXPECT_EQ(n.Count("GpuSmWaste", AlertState::kFiring), 1);
  // After repeat_interval it is sent again.
  e.ObserveGpu(Sample("GPU-a", T0() + 4h + 16min, 100, "j1", 0.30));
  e.Evaluate(T0() + 4h + 16min);
  EXPECT_EQ(n.Count("GpuSmWaste", AlertState::kFiring), 2);
  // Recovery: resolved once, then gone.
  e.ObserveGpu(Sample("GPU-a", T0() + 4h + 17min, 100, "j1", 0.85));
  e.Evaluate(T0() + 4h + 17min);
  EXPECT_EQ(n.Count("GpuSmWaste", AlertState::kResolved), 1);
  for (const auto& a : e.Active()) EXPECT_NE(a.rule, "GpuSmWaste");
}

TEST(AlertEngineTest, ShortDipIsYellowAndPendingClearsWithoutNotifying) {
  AlertEngine e(Builtins(), ActivityMetric::kAuto);
  RecordingNotifier n;
  e.AddNotifier(&n);
  e.ObserveGpu(Sample("GPU-a", T0(), 10, "j1"));
  e.ObserveGpu(Sample("GPU-a", T0() + 1min, 10, "j1"));
  e.Evaluate(T0() + 1min);
  e.ObserveGpu(Sample("GPU-a", T0() + 90s, 80, "j1"));  // recovered before `for`
  e.Evaluate(T0() + 90s);
  EXPECT_TRUE(n.batches.empty());
  for (int s = 0; s <= 150; s += 30) e.ObserveGpu(Sample("GPU-a", T0() + 2min + s * 1s, 10, "j1"));
  e.Evaluate(T0() + 5min);
  EXPECT_EQ(n.Count("GpuActivityDip", AlertState::kFiring), 1);
  EXPECT_EQ(e.history().back().grade, Grade::kYellow);
}

TEST(AlertEngineTest, FatalXidIsRedAndInhibitsLowerGradesOnThatGpu) {
  AlertEngine e(Builtins(), ActivityMetric::kAuto);
  RecordingNotifier n;
  e.AddNotifier(&n);
  for (int s = 0; s <= 150; s += 30) e.ObserveGpu(Sample("GPU-a", T0() + s * 1s, 5, "j1"));
  for (int s = 0; s <= 150; s += 30) e.ObserveGpu(Sample("GPU-b", T0() + s * 1s, 5, "j2"));
  GpuEvent ev;
  ev.type = GpuEvent::Type::kXid;
  ev.uuid = "GPU-a";
  ev.xid = 79;
  ev.timestamp = T0() + 150s;
  e.ObserveEvent(ev);
  auto active = e.Evaluate(T0() + 150s);
  ASSERT_FALSE(active.empty());
  EXPECT_EQ(active.front().rule, "GpuFatalXid");  // red sorts first
  EXPECT_EQ(n.Count("GpuFatalXid", AlertState::kFiring), 1);
  // GPU-a's yellow dip is inhibited; GPU-b's is not.
  int dips = 0;
  for (const auto& b : n.batches)
    for (const auto& a : b)
      if (a.rule == "GpuActivityDip") {
        EXPECT_EQ(a.labels.at("gpu"), "GPU-b");
        ++dips;
      }
  EXPECT_EQ(dips, 1);
  // An application XID (13) raises nothing red.
  ev.uuid = "GPU-b";
  ev.xid = 13;
  e.ObserveEvent(ev);
  e.Evaluate(T0() + 151s);
  EXPECT_EQ(n.Count("GpuFatalXid", AlertState::kFiring), 1);
}

// Active alerts come red first, then by fingerprint, without a sort (one walk per grade); the
// view the server reads between evaluations holds only alerts an evaluation has seen.
TEST(AlertEngineTest, ActiveAlertsByGradeThenFingerprintAndTheEvaluatedView) {
  AlertEngine e(Builtins(), ActivityMetric::kAuto);
  for (const char* gpu : {"GPU-c", "GPU-a", "GPU-b"}) {
    for (int s = 0; s <= 150; s += 30) e.ObserveGpu(Sample(gpu, T0() + s * 1s, 5, "j1"));
  }
  GpuEvent ev;
  ev.type = GpuEvent::Type::kXid;
  ev.uuid = "GPU-b";
  ev.xid = 79;
  ev.timestamp = T0() + 150s;
  e.ObserveEvent(ev);
  auto names = [](const std::vector<Alert>& v) {
    std::string out;
    for (const Alert& a : v) out += GradeName(a.grade) + std::string(":") + a.fingerprint + " ";
    return out;
  };
  std::vector<Alert> sorted = e.Active();
  std::stable_sort(sorted.begin(), sorted.end(), [](const Alert& a, const Alert& b) {
    return a.grade != b.grade ? a.grade > b.grade : a.fingerprint < b.fingerprint;
  });
  ASSERT_GE(sorted.size(), 4u);
  EXPECT_EQ(sorted.front().grade, Grade::kRed);
  EXPECT_EQ(names(e.Active()), names(sorted));
  auto evaluated = [&e] {
    std::vector<Alert> seen;
    e.ForEachActive([&seen](const Alert& a) { seen.push_back(a); }, /*evaluated_only=*/true);
    return seen;
  };
  EXPECT_TRUE(evaluated().empty()) << names(evaluated());  // no evaluation yet
  e.Apply(T0() + 150s);
  EXPECT_EQ(names(evaluated()), names(sorted));
  // A GPU that starts dipping after the evaluation joins the view at the next one.
  for (int s = 0; s <= 150; s += 30) e.ObserveGpu(Sample("GPU-d", T0() + 160s + s * 1s, 5, "j1"));
  EXPECT_EQ(names(evaluated()), names(sorted));
  EXPECT_GT(e.Active().size(), sorted.size());
  e.Apply(T0() + 310s);
  EXPECT_EQ(names(evaluated()), names(e.Active()));
}

TEST(AlertEngineTest, OverheatLostGpuAndBacklogAreRed) {
  AlertEngine e(Builtins(), ActivityMetric::kAuto);
  auto hot = Sample("GPU-h", T0(), 90, "j");
  hot.temperature_c = Field<uint32_t>::Of(91);
  e.ObserveGpu(hot);
  hot.timestamp = T0() + 61s;
  e.ObserveGpu(hot);
  auto lost = Sample("GPU-l", T0(), 0);
  lost.health = GpuHealth::kLost;
  e.ObserveGpu(lost);
  e.ObserveCluster(T0(), {.backlog_wait_s = 3600, .idle_gpus = 0, .pending_jobs = 4});
  auto active = e.Evaluate(T0() + 61s);
  auto has = [&](const std::string& rule) {
    for (const auto& a : active)
      if (a.rule == rule && a.state == AlertState::kFiring) return true;
    return false;
  };
  EXPECT_TRUE(has("GpuOverheat"));
  EXPECT_TRUE(has("GpuLost"));
  EXPECT_FALSE(has("ClusterBacklog"));  // nothing idle that could run them
  e.ObserveCluster(T0() + 61s, {.backlog_wait_s = 3600, .idle_gpus = 3, .pending_jobs = 4});
  active = e.Evaluate(T0() + 61s);
  EXPECT_TRUE(has("ClusterBacklog"));
}

TEST(AlertEngineTest, SilencesSuppressNotificationsOnlyInTheirWindow) {
  AlertingConfig c = Builtins();
  Silence s;
  s.matchers = {{"gpu", "GPU-a"}};
  s.starts_at = T0();
  s.ends_at = T0() + 10min;
  c.silences.push_back(s);
  AlertEngine e(c, ActivityMetric::kAuto);
  RecordingNotifier n;
  e.AddNotifier(&n);
  auto lost = Sample("GPU-a", T0(), 0);
  lost.health = GpuHealth::kLost;
  e.ObserveGpu(lost);
  auto active = e.Evaluate(T0() + 1min);
  ASSERT_EQ(active.size(), 1u);
  EXPECT_TRUE(active[0].silenced);
  EXPECT_TRUE(n.batches.empty());
  e.Evaluate(T0() + 11min);
  EXPECT_EQ(n.Count("GpuLost", AlertState::kFiring), 1);
}

TEST(AlertEngineTest, GroupsNotificationsByLabels) {
  AlertingConfig c = Builtins();
  c.group_by = {"alertname"};
  AlertEngine e(c, ActivityMetric::kAuto);
  RecordingNotifier n;
  e.AddNotifier(&n);
  for (const char* g : {"GPU-1", "GPU-2", "GPU-3"}) {
    auto lost = Sample(g, T0(), 0);
    lost.health = GpuHealth::kLost;
    e.ObserveGpu(lost);
  }
  e.Evaluate(T0());
  ASSERT_EQ(n.batches.size(), 1u);
  EXPECT_EQ(n.batches[0].size(), 3u);
}

TEST(AlertEngineTest, InvalidRuleInCodeIsDroppedOthersRun) {
  AlertingConfig c;
  AlertRule bad;
  bad.name = "Bad";
  bad.when = {{"no_such_signal", CompareOp::kLess, 1}};
  c.rules = {bad, BuiltinRules()[6]};  // GpuLost
  AlertEngine e(c, ActivityMetric::kAuto);
  EXPECT_EQ(e.rules().size(), 1u);
  auto lost = Sample("GPU-a", T0(), 0);
  lost.health = GpuHealth::kLost;
  e.ObserveGpu(lost);
  EXPECT_EQ(e.Evaluate(T0()).size(), 1u);
}

TEST(AlertmanagerPayloadTest, MatchesTheV2ApiShape) {
  Alert a;
  a.rule = "GpuLost";
  a.labels = {{"alertname", "GpuLost"}, {"gpu", "GPU-a"}};
  a.annotations = {{"summary", "lost"}};
  a.state = AlertState::kFiring;
  a.starts_at = T0();
  auto j = nlohmann::json::parse(AlertmanagerPayload({a}, T0() + 1min, 1h));
  ASSERT_TRUE(j.is_array());
  EXPECT_EQ(j[0]["labels"]["gpu"], "GPU-a");
  EXPECT_EQ(j[0]["startsAt"], "2026-01-01T00:00:00.000Z");
  EXPECT_EQ(j[0]["endsAt"], "2026-01-01T01:01:00.000Z");
}

}  // namespace
}  // namespace stoker::efficiency
