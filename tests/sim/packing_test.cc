#include "sim/packing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "scheduler/registry.h"

namespace stoker::sim {
namespace {

using scheduler::Request;

scheduler::ClusterState Cluster() {
  scheduler::ClusterState c;
  auto g = *c.models().Intern("G");
  for (int i = 0; i < 8; ++i)
    EXPECT_TRUE(c.AddNode({"n" + std::to_string(i), 64000, 262144, 4, g, 0, false}).ok());
  return c;
}

std::vector<Request> Pods() {
  std::vector<Request> pods;
  for (int i = 0; i < 10; ++i) pods.push_back(Request::WholeGpus(1, 4000, 1024));
  for (int i = 0; i < 10; ++i) pods.push_back(Request::GpuShare(500, 2000, 1024));
  for (int i = 0; i < 4; ++i) pods.push_back(Request::CpuOnly(8000, 1024));
  pods.push_back(Request::WholeGpus(4, 16000, 1024));
  return pods;
}

int64_t GpuMilli(const std::vector<Request>& pods) {
  int64_t s = 0;
  for (const Request& r : pods) s += r.TotalGpuMilli();
  return s;
}

TEST(ShuffleAndInflateTest, DeterministicAndReachesTarget) {
  const auto pods = Pods();
  auto a = ShuffleAndInflate(pods, 42, 1300, 32000);
  auto b = ShuffleAndInflate(pods, 42, 1300, 32000);
  auto other = ShuffleAndInflate(pods, 43, 1300, 32000);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].TotalGpuMilli(), b[i].TotalGpuMilli());
  // Published rule: a draw is appended while the total plus its per-GPU milli stays within the
  // target, and the first draw that would exceed it ends the inflation. So the total ends within
  // one GPU below the target, and above it by at most a multi-GPU pod's extra GPUs (4 here).
  const int64_t target = 32000 * 13 / 10;
  EXPECT_GT(GpuMilli(a), target - 1000);
  EXPECT_LE(GpuMilli(a), target + 3000);
  EXPECT_GT(a.size(), pods.size());
  // The original pods come first (a permutation), then the samples.
  EXPECT_EQ(GpuMilli(std::vector<Request>(a.begin(), a.begin() + static_cast<long>(pods.size()))),
            GpuMilli(pods));
  bool differs = false;
  for (size_t i = 0; i < pods.size(); ++i)
    differs |= a[i].TotalGpuMilli() != other[i].TotalGpuMilli();
  EXPECT_TRUE(differs);
}

TEST(ShuffleNodesTest, SeededPermutationOfTheSameNodes) {
  scheduler::ClusterState c;
  auto g = *c.models().Intern("G");
  for (int i = 0; i < 50; ++i)
    ASSERT_TRUE(
        c.AddNode({"n" + std::to_string(i), 1000 * (i + 1), 4096, i % 5, g, 0, false}).ok());
  const auto a = ShuffleNodes(c, 42), b = ShuffleNodes(c, 42), other = ShuffleNodes(c, 43);
  ASSERT_EQ(a.num_nodes(), c.num_nodes());
  std::vector<std::string> names_a, names_c;
  bool same_order = true, differs_from_other = false;
  for (int32_t n = 0; n < c.num_nodes(); ++n) {
    EXPECT_EQ(a.spec(n).name, b.spec(n).name);  // deterministic for a seed
    same_order &= a.spec(n).name == c.spec(n).name;
    differs_from_other |= a.spec(n).name != other.spec(n).name;
    names_a.push_back(a.spec(n).name);
    names_c.push_back(c.spec(n).name);
    // Each node keeps its own spec.
    EXPECT_EQ(a.spec(n).cpu_milli, 1000 * (std::stoi(a.spec(n).name.substr(1)) + 1));
  }
  EXPECT_FALSE(same_order);
  EXPECT_TRUE(differs_from_other);
  std::sort(names_a.begin(), names_a.end());
  std::sort(names_c.begin(), names_c.end());
  EXPECT_EQ(names_a, names_c);
  EXPECT_EQ(a.total_gpu_milli(), c.total_gpu_milli());
}

TEST(RunPackingTest, CurveIsBinnedAndConsistent) {
  const auto cluster = Cluster();
  const auto pods = Pods();
  const auto typical = scheduler::ComputeTypicalShapes(pods, 95);
  for (const std::string& policy : scheduler::PlacementPolicyNames()) {
    auto curve = RunPacking(cluster, pods, typical, {policy, 42, 1300});
    ASSERT_TRUE(curve.ok()) << curve.status().ToString();
    // Inflation stops within one GPU (3.1 % here) below 130 %, so the last step is >= 126.
    int last = kMaxArrivedPct;
    while (last > 0 && !curve->present[last]) --last;
    EXPECT_GE(last, 126) << policy;
    for (int s = 0; s <= kMaxArrivedPct; ++s) {
      if (!curve->present[s]) continue;
      // Allocation never exceeds arrival (one pod here is 3.1 % of the cluster, plus binning).
      EXPECT_LE(curve->alloc_pct[s], std::min(100.0, s + 5.0)) << policy << " step " << s;
      EXPECT_GE(curve->frag_pct[s], 0.0);
      EXPECT_LE(curve->frag_ratio_pct[s], 100.0 + 1e-9);
    }
    EXPECT_GT(curve->alloc_pct[last], 60.0) << policy;
    EXPECT_GT(curve->pods_failed, 0) << policy;  // 130 % cannot all fit
  }
}

TEST(RunPackingTest, UnknownPolicyIsAnError) {
  auto curve = RunPacking(Cluster(), Pods(), {}, {"nope", 42, 1300});
  EXPECT_FALSE(curve.ok());
}

TEST(PackingOutputTest, CsvRowsMatchReferenceShape) {
  PackingCurve c;
  for (int s = 0; s <= kMaxArrivedPct; ++s) {
    c.present[s] = true;
    c.alloc_pct[s] = s * 0.5;
  }
  EXPECT_EQ(PackingCsvHeader().substr(0, 40), "workload,policy,metric,n_seeds,arr_0,arr");
  const std::string rows = PackingCsvRows("default", "fgd", 10, c);
  EXPECT_NE(rows.find("default,fgd,gpu_alloc_pct,10,0.00,5.00,"), std::string::npos) << rows;
  EXPECT_NE(rows.find("frag_gpu_pct_of_cluster"), std::string::npos);
  EXPECT_NE(rows.find("frag_ratio_pct_of_idle"), std::string::npos);
  const std::string svg = PackingSvg("t <1>", {{"fgd", c}, {"stoker", c}});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("t &lt;1&gt;"), std::string::npos);
  EXPECT_NE(svg.find("polyline"), std::string::npos);
  EXPECT_NE(svg.find("stoker"), std::string::npos);
}

TEST(MeanCurveTest, AveragesPresentSteps) {
  PackingCurve a, b;
  a.present[10] = b.present[10] = true;
  a.alloc_pct[10] = 10;
  b.alloc_pct[10] = 20;
  a.present[20] = true;
  a.alloc_pct[20] = 30;
  PackingCurve m = MeanCurve({a, b});
  EXPECT_DOUBLE_EQ(m.alloc_pct[10], 15);
  EXPECT_DOUBLE_EQ(m.alloc_pct[20], 30);
  EXPECT_FALSE(m.present[30]);
}

}  // namespace
}  // namespace stoker::sim
