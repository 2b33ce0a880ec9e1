#include <gtest/gtest.h>

#include "efficiency/activity.h"
#include "efficiency/metrics.h"
#include "efficiency/window.h"
#include "efficiency/zones.h"
#include "test_util.h"

namespace stoker::efficiency {
namespace {

using namespace std::chrono_literals;
using testing::Sample;
using testing::T0;

TEST(SlidingWindowTest, EvictsByTimeAndTracksSumZerosAndMax) {
  SlidingWindow w(60s);
  w.Add(T0(), 0);
  w.Add(T0() + 10s, 90'000);
  w.Add(T0() + 20s, 30'000);
  EXPECT_EQ(w.count(), 3);
  EXPECT_EQ(w.sum(), 120'000);
  EXPECT_EQ(w.zeros(), 1);
  EXPECT_EQ(w.max(), 90'000);
  // At t=75 s the window [15 s, 75 s] drops the first two readings.
  w.Add(T0() + 75s, 10'000);
  EXPECT_EQ(w.count(), 2);
  EXPECT_EQ(w.zeros(), 0);
  EXPECT_EQ(w.max(), 30'000);
  EXPECT_EQ(w.mean(), 20'000);
  EXPECT_EQ(w.covered(), 55s);
}

TEST(SlidingWindowTest, RejectsReadingsThatGoBackInTime) {
  SlidingWindow w(60s);
  EXPECT_TRUE(w.Add(T0() + 10s, 5));
  EXPECT_FALSE(w.Add(T0(), 7));
  EXPECT_EQ(w.count(), 1);
}

TEST(SlidingWindowTest, RingGrowsPastInitialCapacityAndStaysConsistent) {
  SlidingWindow w(1000s);
  int64_t expected = 0;
  for (int i = 0; i < 500; ++i) {
    w.Add(T0() + std::chrono::seconds(i), i);
    expected += i;
  }
  EXPECT_EQ(w.count(), 500);
  EXPECT_EQ(w.sum(), expected);
  EXPECT_EQ(w.max(), 499);
  w.EvictBefore(T0() + 490s);
  EXPECT_EQ(w.count(), 10);
  EXPECT_EQ(w.max(), 499);
}

TEST(ActivityTest, PrefersSmActiveAndFallsBackToUtilization) {
  ActivityMetric used{};
  auto s = Sample("GPU-a", T0(), 100, "", 0.42);
  EXPECT_EQ(ActivityMilli(s, ActivityMetric::kAuto, &used), 42'000);
  EXPECT_EQ(used, ActivityMetric::kSmActive);
  EXPECT_EQ(ActivityMilli(s, ActivityMetric::kGpuUtil, &used), 100'000);
  auto old = Sample("GPU-b", T0(), 55);
  EXPECT_EQ(ActivityMilli(old, ActivityMetric::kAuto, &used), 55'000);
  EXPECT_EQ(used, ActivityMetric::kGpuUtil);
  EXPECT_FALSE(ActivityMilli(old, ActivityMetric::kSmActive).has_value());
  old.health = GpuHealth::kLost;
  EXPECT_FALSE(ActivityMilli(old, ActivityMetric::kAuto).has_value());
}

TEST(ZoneTest, ClassifiesBandsAtTheirEdges) {
  ZoneConfig c;
  EXPECT_EQ(Classify(c, 0), Zone::kBronze);
  EXPECT_EQ(Classify(c, 49'999), Zone::kBronze);
  EXPECT_EQ(Classify(c, 50'000), Zone::kSilver);
  EXPECT_EQ(Classify(c, 70'000), Zone::kGold);
  EXPECT_EQ(Classify(c, 90'000), Zone::kGold);
  EXPECT_EQ(Classify(c, 90'001), Zone::kHot);
}

TEST(ZoneTrackerTest, GpuAndJobZonesFollowTheWindowAndRecordTransitions) {
  ZoneConfig c;
  c.window = 10min;
  c.min_coverage = 2min;
  ZoneTracker z(c);
  const std::vector<std::string> jobs = {"j1"};
  for (int i = 0; i <= 4; ++i) z.Observe(Sample("GPU-a", T0() + i * 30s, 80, "j1"), jobs);
  EXPECT_EQ(z.Gpu("GPU-a").zone, Zone::kGold);
  EXPECT_EQ(z.Job("j1").zone, Zone::kGold);
  // Twenty minutes at 20 %: the old readings leave the window, the zone drops to bronze.
  for (int i = 5; i <= 45; ++i) z.Observe(Sample("GPU-a", T0() + i * 30s, 20, "j1"), jobs);
  const ZoneStatus s = z.Gpu("GPU-a");
  EXPECT_EQ(s.zone, Zone::kBronze);
  EXPECT_EQ(s.mean_milli, 20'000);
  EXPECT_EQ(s.peak_milli, 20'000);
  auto tr = z.TakeTransitions();
  ASSERT_GE(tr.size(), 4u);  // unknown->gold and gold->...->bronze, for both GPU and job
  EXPECT_EQ(tr.front().to, Zone::kGold);
  EXPECT_EQ(tr.back().to, Zone::kBronze);
  EXPECT_TRUE(z.TakeTransitions().empty());
}

TEST(ZoneTrackerTest, UnknownUntilMinimumCoverage) {
  ZoneConfig c;
  c.min_coverage = 5min;
  ZoneTracker z(c);
  z.Observe(Sample("GPU-a", T0(), 80), {});
  z.Observe(Sample("GPU-a", T0() + 1min, 80), {});
  EXPECT_EQ(z.Gpu("GPU-a").zone, Zone::kUnknown);
  z.Observe(Sample("GPU-a", T0() + 5min, 80), {});
  EXPECT_EQ(z.Gpu("GPU-a").zone, Zone::kGold);
}

JobLoad Load(std::string id, std::string user, int64_t milli, uint64_t mem_gb, bool mig,
             bool movable) {
  JobLoad j;
  j.job = std::move(id);
  j.user = std::move(user);
  j.gpu_model = "H100";
  j.mean_milli = milli;
  j.memory_peak_bytes = mem_gb * 1'000'000'000ULL;
  j.gpu_memory_bytes = 81'559ULL << 20;  // what an H100 80GB HBM3 reports (79.6 GiB)
  j.mig_capable = mig;
  j.movable = movable;
  return j;
}

TEST(ConsolidationTest, PacksLowJobsUnderTheGoldCeilingAndPicksTheMode) {
  ZoneConfig c;
  std::vector<JobLoad> jobs = {
      Load("a", "u1", 40'000, 10, false, true),    Load("b", "u1", 30'000, 10, false, true),
      Load("c", "u1", 15'000, 10, false, true),     // a+b+c = 85 % fits; one GPU, two freed
      Load("gold", "u1", 80'000, 10, false, true),  // gold: not a candidate
      Load("idle", "u1", 0, 10, false, true),       // idle: reclaim, not pack
  };
  ConsolidationPlan p = PlanConsolidation(jobs, c);
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].jobs, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(p.groups[0].mode, ShareMode::kMps);
  EXPECT_TRUE(p.groups[0].apply_now);
  EXPECT_EQ(p.gpus_freed, 2);

  // Different owners without MIG: time-slicing; one job not movable: applied at next start.
  jobs = {Load("a", "u1", 40'000, 10, false, true), Load("b", "u2", 30'000, 10, false, false)};
  p = PlanConsolidation(jobs, c);
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].mode, ShareMode::kTimeSlicing);
  EXPECT_FALSE(p.groups[0].apply_now);

  // Small jobs on a MIG-capable model: a MIG layout.
  jobs = {Load("a", "u1", 25'000, 8, true, true), Load("b", "u2", 10'000, 9, true, true)};
  p = PlanConsolidation(jobs, c);
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].mode, ShareMode::kMig);
  EXPECT_EQ(p.groups[0].mig_layout, "2g.20gb+1g.10gb");

  // Three slices hold half the memory: named as NVIDIA names the profile (3g.40gb on an H100 80GB,
  // not the 42 decimal GB that half of its 79.6 GiB is).
  jobs = {Load("a", "u1", 40'000, 30, true, true), Load("b", "u2", 30'000, 20, true, true)};
  p = PlanConsolidation(jobs, c);
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].mode, ShareMode::kMig);
  EXPECT_EQ(p.groups[0].mig_layout, "3g.40gb+3g.40gb");
}

TEST(ConsolidationTest, MemoryLimitsPacking) {
  ZoneConfig c;
  std::vector<JobLoad> jobs = {Load("a", "u1", 20'000, 50, false, true),
                               Load("b", "u1", 20'000, 40, false, true)};
  EXPECT_TRUE(PlanConsolidation(jobs, c).groups.empty());  // 90 GB > 72 GB usable
}

// /metrics is copied under the engine's lock and finished after it: the GPU zones come out
// sorted by key, and of a GPU key reported by two nodes the latest estimate is kept (the last
// taken among equally recent ones), as the text showed when it was written under the lock.
TEST(EfficiencyMetrics, FinishSortsZonesAndKeepsEachGpusLatestEstimate) {
  MetricsSnapshot m;
  m.zones = true;
  m.gpus = {ZoneStatus{.key = "GPU-b"}, ZoneStatus{.key = "GPU-a"}, ZoneStatus{.key = "GPU-c"}};
  m.estimates = true;
  auto row = [](std::string key, double tflops, int at_s) {
    return MetricsSnapshot::EstimateRow{std::move(key), SampleEstimate{tflops, std::nullopt},
                                        T0() + std::chrono::seconds(at_s)};
  };
  m.estimate_rows = {row("GPU-b", 1, 10), row("GPU-a", 2, 5), row("GPU-b", 3, 20),
                     row("GPU-b", 4, 15), row("GPU-c", 5, 7), row("GPU-c", 6, 7)};
  FinishMetrics(&m);
  ASSERT_EQ(m.gpus.size(), 3u);
  EXPECT_EQ(m.gpus[0].key, "GPU-a");
  EXPECT_EQ(m.gpus[1].key, "GPU-b");
  EXPECT_EQ(m.gpus[2].key, "GPU-c");
  ASSERT_EQ(m.gpu_estimates.size(), 3u);
  EXPECT_EQ(m.gpu_estimates.at("GPU-a").tflops, 2);
  EXPECT_EQ(m.gpu_estimates.at("GPU-b").tflops, 3);  // 20 s: the latest
  EXPECT_EQ(m.gpu_estimates.at("GPU-c").tflops, 6);  // both at 7 s: the last taken
  EXPECT_TRUE(m.estimate_rows.empty());
  std::string text;
  RenderMetrics(m, &text);
  EXPECT_LT(text.find("stoker_efficiency_gpu_zone{uuid=\"GPU-a\""),
            text.find("stoker_efficiency_gpu_zone{uuid=\"GPU-b\""));
  EXPECT_NE(text.find("stoker_efficiency_gpu_tflops_estimate{uuid=\"GPU-b\"} 3\n"),
            std::string::npos);
}

}  // namespace
}  // namespace stoker::efficiency
