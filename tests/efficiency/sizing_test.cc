#include "efficiency/sizing.h"

#include <gtest/gtest.h>

#include "efficiency/history_sizing.h"

namespace stoker::efficiency {
namespace {

constexpr sim::SimMs kHour = 3'600'000;

std::vector<sim::SimJobSpec> Burst(int jobs, int gpus, sim::SimMs duration) {
  std::vector<sim::SimJobSpec> out;
  for (int i = 0; i < jobs; ++i) {
    sim::SimJobSpec j;
    j.name = "j" + std::to_string(i);
    j.duration_ms = duration;
    j.gpus = gpus;
    j.min_gpus = gpus;
    out.push_back(j);
  }
  return out;
}

SizingOptions Options() {
  SizingOptions o;
  o.sim.idleness.idle_share = 0;  // no idle phases: every variant needs the same cluster
  o.base.cluster = {1, 8};
  return o;
}

// 40 one-GPU one-hour jobs at once: on n 8-GPU nodes 8n start and the rest wait an hour, so the
// mean wait is (40 - 8n) / 40 hours. Ten minutes or less needs 34 started: 5 nodes.
TEST(SizeClusterTest, FindsTheSmallestClusterByDoublingThenBisecting) {
  SizingOptions o = Options();
  o.variants = {"static"};
  std::vector<SizingProbe> seen;
  o.on_probe = [&](const SizingProbe& p) { seen.push_back(p); };
  auto sized = SizeCluster(Burst(40, 1, kHour), o);
  ASSERT_TRUE(sized.ok()) << sized.status().ToString();
  ASSERT_EQ(sized->size(), 1u);
  const SizedVariant& v = sized->front();
  EXPECT_EQ(v.name, "static");
  EXPECT_EQ(v.nodes, 5);
  EXPECT_EQ(v.result.report.queue_delay_s.mean, 0);
  EXPECT_EQ(v.result.report.cluster.nodes, 5);
  // 1, 2, 4 miss; 8 meets; then 6 and 5 meet.
  std::vector<int32_t> nodes;
  for (const SizingProbe& p : v.probes) nodes.push_back(p.nodes);
  EXPECT_EQ(nodes, (std::vector<int32_t>{1, 2, 4, 8, 6, 5}));
  ASSERT_EQ(seen.size(), 6u);
  EXPECT_FALSE(seen[2].met);
  EXPECT_NEAR(seen[2].mean_s, (40.0 - 32) / 40 * 3600, 1);
  EXPECT_TRUE(seen[3].met);
  EXPECT_EQ(seen.back().probes_done, 6);
}

TEST(SizeClusterTest, EveryVariantOnTheSameJobsAndTheWidestJobSetsTheSmallestSize) {
  SizingOptions o = Options();
  std::vector<sim::SimJobSpec> jobs = Burst(3, 1, kHour);
  jobs.push_back(Burst(1, 24, kHour).front());  // needs 3 nodes to run at all
  auto sized = SizeCluster(jobs, o);
  ASSERT_TRUE(sized.ok()) << sized.status().ToString();
  ASSERT_EQ(sized->size(), 3u);
  for (const SizedVariant& v : *sized) {
    EXPECT_EQ(v.probes.front().nodes, 3) << v.name;
    EXPECT_EQ(v.nodes, 4) << v.name;  // 3 nodes: the wide job or the others wait an hour
  }
  EXPECT_EQ((*sized)[1].name, "reclaim");
  EXPECT_EQ((*sized)[2].name, "reclaim+oversub");
}

TEST(SizeClusterTest, TheP99TargetIsStrict) {
  SizingOptions o = Options();
  o.variants = {"static"};
  o.targets.max_mean_s = 1e9;
  o.targets.max_p99_s = kHour / 1000.0;  // every wait is 0 or exactly an hour: below means 0
  auto sized = SizeCluster(Burst(16, 1, kHour), o);
  ASSERT_TRUE(sized.ok());
  EXPECT_EQ(sized->front().nodes, 2);
}

TEST(SizeClusterTest, RefusesWhatItCannotSearch) {
  SizingOptions o = Options();
  o.max_nodes = 2;
  auto wide = SizeCluster(Burst(1, 24, kHour), o);
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.status().message().find("widest job (24 GPUs)"), std::string::npos);
  auto none = SizeCluster(Burst(40, 1, kHour), o);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->front().nodes, -1);  // 2 nodes is the most allowed: not enough
  EXPECT_EQ(none->front().result.report.cluster.nodes, 2);
  o.variants = {"static", "magic"};
  EXPECT_FALSE(SizeCluster(Burst(1, 1, kHour), o).ok());
  o = Options();
  o.targets.max_mean_s = 0;
  EXPECT_FALSE(SizeCluster(Burst(1, 1, kHour), o).ok());
  EXPECT_FALSE(SizeCluster({}, Options()).ok());
}

// A history built directly: one job per (model, memory GiB, activity) on its own GPU, all
// submitted at t0 and running an hour, one sample a minute.
RecordSet History(const std::vector<std::tuple<std::string, std::string, int, double>>& jobs) {
  RecordSet r;
  const WallTime t0 = WallTime{} + std::chrono::hours(24 * 365 * 56);
  for (size_t i = 0; i < jobs.size(); ++i) {
    const auto& [cls, model, gib, act] = jobs[i];
    JobRecord j;
    j.info.id = "j" + std::to_string(i);
    j.info.job_class = cls;
    j.info.start = t0;
    j.info.gpus = {"GPU-" + std::to_string(i)};
    j.submit = t0;
    j.end = t0 + std::chrono::hours(1);
    r.jobs.push_back(j);
    for (int m = 0; m <= 60; ++m) {
      RecordedSample s;
      s.t = t0 + std::chrono::minutes(m);
      s.gpu = j.info.gpus[0];
      s.model = model;
      s.job = j.info.id;
      s.sm_active = act;
      s.mem_used = static_cast<uint64_t>(gib) << 30;
      s.mem_total = model.find("L4") != std::string::npos ? 24ull << 30 : 80ull << 30;
      r.samples.push_back(s);
    }
  }
  std::stable_sort(r.samples.begin(), r.samples.end(),
                   [](const RecordedSample& a, const RecordedSample& b) { return a.t < b.t; });
  return r;
}

TEST(SizeFromHistoryTest, SlicesFollowMemoryAndActivityAndOnlyMigModelsAreSliced) {
  auto sized = SizeFromHistory(History({{"small", "NVIDIA H100 80GB HBM3", 4, 0.05},
                                        {"mid", "NVIDIA H100 80GB HBM3", 15, 0.2},
                                        {"big", "NVIDIA H100 80GB HBM3", 70, 0.2},
                                        {"huge", "NVIDIA H100 80GB HBM3", 75, 0.2},
                                        {"busy", "NVIDIA H100 80GB HBM3", 4, 0.9},
                                        {"inference", "NVIDIA L4", 4, 0.05}}),
                               HistorySizingOptions{});
  ASSERT_TRUE(sized.ok()) << sized.status().ToString();
  std::map<std::string, std::string> need;
  for (const ClassNeed& c : sized->classes) need[c.job_class] = c.need;
  EXPECT_EQ(need["small"], "1g.10gb");
  EXPECT_EQ(need["mid"], "2g.20gb");      // 15 GiB + 10 % needs two eighths of the memory
  EXPECT_EQ(need["big"], "7g.80gb");      // 77 GiB with headroom: only the whole-GPU profile
  EXPECT_EQ(need["huge"], "1 GPU");       // 82.5 GiB with headroom: no profile holds it
  EXPECT_EQ(need["busy"], "7g.80gb");     // 90 % of the SMs needs all seven slices
  EXPECT_EQ(need["inference"], "1 GPU");  // L4: no MIG
  // Right-sized, the five H100 jobs need 1 + 2 + 7 + 7 + 7 slices: 4 GPUs, not 5.
  std::map<std::string, ModelSize> by;
  for (const ModelSize& m : sized->models) by[m.model] = m;
  EXPECT_EQ(by["H100"].as_requested, 5);
  EXPECT_EQ(by["H100"].right_sized, 4);
  EXPECT_EQ(by["L4"].right_sized, 1);
  EXPECT_EQ(by["H100"].price_per_gpu_hour_micro, 0);  // no prices configured
}

TEST(SizeFromHistoryTest, JobsWithoutSamplesAreSkippedAndAnEmptyHistoryIsRefused) {
  RecordSet r = History({{"a", "NVIDIA H100 80GB HBM3", 4, 0.5}});
  JobRecord ghost = r.jobs[0];
  ghost.info.id = "ghost";
  r.jobs.push_back(ghost);
  auto sized = SizeFromHistory(r, HistorySizingOptions{});
  ASSERT_TRUE(sized.ok());
  EXPECT_EQ(sized->jobs_used, 1);
  EXPECT_EQ(sized->jobs_skipped, 1);
  r.samples.clear();
  auto none = SizeFromHistory(r, HistorySizingOptions{});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().ToString().find("no job that ran has samples"), std::string::npos);
  HistorySizingOptions bad;
  bad.memory_headroom = -1;
  EXPECT_FALSE(SizeFromHistory(History({{"a", "H100", 4, 0.5}}), bad).ok());
}

}  // namespace
}  // namespace stoker::efficiency
