#include "efficiency/sizing.h"

#include <gtest/gtest.h>

namespace stoker::efficiency {
namespace {

constexpr sim::SimMs kHour = 3'600'000;

std::vector<sim::JobSpec> Burst(int jobs, int gpus, sim::SimMs duration) {
  std::vector<sim::JobSpec> out;
  for (int i = 0; i < jobs; ++i) {
    sim::JobSpec j;
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
  std::vector<sim::JobSpec> jobs = Burst(3, 1, kHour);
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

}  // namespace
}  // namespace stoker::efficiency
