#include "sim/packing_workload.h"

#include <gtest/gtest.h>

#include <bit>
#include <map>

namespace stoker::sim {
namespace {

using scheduler::ClusterState;
using scheduler::GpuModelTable;
using scheduler::Request;

// Two models: "big" on two 8-GPU nodes (16 GPUs), "small" on two 2-GPU nodes (4 GPUs), so
// constraints drawn in proportion to the GPUs pin 80 % of the pods that fit both to "big".
ClusterState TwoModels() {
  ClusterState c;
  const auto big = *c.models().Intern("big");
  const auto small = *c.models().Intern("small");
  EXPECT_TRUE(c.AddNode({"b0", 96000, 393216, 8, big, 0, false}).ok());
  EXPECT_TRUE(c.AddNode({"b1", 96000, 393216, 8, big, 0, false}).ok());
  EXPECT_TRUE(c.AddNode({"s0", 32000, 131072, 2, small, 0, false}).ok());
  EXPECT_TRUE(c.AddNode({"s1", 32000, 131072, 2, small, 0, false}).ok());
  return c;
}

std::vector<Request> Pods(int whole, int shares, int eight, int cpu_only) {
  std::vector<Request> pods;
  for (int i = 0; i < whole; ++i) pods.push_back(Request::WholeGpus(1, 8000, 16384));
  for (int i = 0; i < shares; ++i) pods.push_back(Request::GpuShare(500, 4000, 8192));
  for (int i = 0; i < eight; ++i) pods.push_back(Request::WholeGpus(8, 64000, 65536));
  for (int i = 0; i < cpu_only; ++i) pods.push_back(Request::CpuOnly(2000, 4096));
  return pods;
}

TEST(GenerateWorkloadTest, ConstrainsTheShareOfGpuPodsToOneModelInProportionToItsGpus) {
  const ClusterState c = TwoModels();
  const std::vector<Request> pods = Pods(6000, 3800, 200, 1000);
  auto out = GenerateWorkload(pods, c, {.constrain_pct = 20}, 42);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), pods.size());
  const GpuModelTable& m = c.models();
  const auto big = GpuModelTable::Bit(*m.Find("big"));
  std::map<uint64_t, int> by_model;
  int constrained = 0;
  for (size_t i = 0; i < out->size(); ++i) {
    const Request& r = (*out)[i];
    // Only the constraint changes; CPU-only pods never get one.
    EXPECT_EQ(r.cpu_milli, pods[i].cpu_milli);
    EXPECT_EQ(r.num_gpu, pods[i].num_gpu);
    if (r.IsCpuOnly()) {
      EXPECT_EQ(r.allowed_models, 0u);
    }
    if (r.allowed_models == 0) continue;
    ++constrained;
    EXPECT_EQ(std::popcount(r.allowed_models), 1) << "one model per constrained pod";
    // An 8-GPU pod can only run on the 8-GPU model.
    if (r.num_gpu == 8) {
      EXPECT_EQ(r.allowed_models, big);
    }
    ++by_model[r.allowed_models];
  }
  EXPECT_EQ(constrained, 2000);  // 20 % of 10,000 GPU pods
  // 98 % of the pods fit both models, 16 of whose 20 GPUs are "big"; the 8-GPU pods (2 %) fit
  // only "big": about 80.4 % "big" in all.
  const double big_share = static_cast<double>(by_model[big]) / constrained;
  EXPECT_NEAR(big_share, 0.804, 0.03);
  // Deterministic for a seed; another seed draws other pods.
  auto again = GenerateWorkload(pods, c, {.constrain_pct = 20}, 42);
  auto other = GenerateWorkload(pods, c, {.constrain_pct = 20}, 43);
  ASSERT_TRUE(again.ok() && other.ok());
  size_t same = 0, differ = 0;
  for (size_t i = 0; i < out->size(); ++i) {
    same += (*again)[i].allowed_models == (*out)[i].allowed_models;
    differ += (*other)[i].allowed_models != (*out)[i].allowed_models;
  }
  EXPECT_EQ(same, out->size());
  EXPECT_GT(differ, 1000u);
}

TEST(GenerateWorkloadTest, PodsThatAlreadyNameModelsKeepThem) {
  const ClusterState c = TwoModels();
  std::vector<Request> pods = Pods(100, 0, 0, 0);
  const auto small = GpuModelTable::Bit(*c.models().Find("small"));
  for (int i = 0; i < 50; ++i) pods[static_cast<size_t>(i)].allowed_models = small;
  auto out = GenerateWorkload(pods, c, {.constrain_pct = 60}, 7);
  ASSERT_TRUE(out.ok());
  int constrained = 0;
  for (int i = 0; i < 100; ++i) {
    if (i < 50) {
      EXPECT_EQ((*out)[static_cast<size_t>(i)].allowed_models, small);
    }
    constrained += (*out)[static_cast<size_t>(i)].allowed_models != 0;
  }
  EXPECT_EQ(constrained, 60);  // 60 % of all GPU pods, the 50 already constrained included
}

TEST(GenerateWorkloadTest, AppendsMultiGpuPodsUpToTheirShareOfTheGpuRequest) {
  const ClusterState c = TwoModels();
  std::vector<Request> pods = Pods(900, 0, 10, 100);  // multi-GPU: 80 of 980 GPUs
  pods.push_back(Request::WholeGpus(2, 16000, 32768));
  auto out = GenerateWorkload(pods, c, {.multi_gpu_pct = 30}, 42);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_GT(out->size(), pods.size());
  int64_t multi = 0, total = 0, last = 0;
  for (size_t i = 0; i < out->size(); ++i) {
    const Request& r = (*out)[i];
    if (i < pods.size()) {
      EXPECT_EQ(r.num_gpu, pods[i].num_gpu);  // the list itself is kept, in order
    } else {
      EXPECT_GT(r.num_gpu, 1) << "only copies of multi-GPU pods are appended";
      last = r.TotalGpuMilli();
    }
    total += r.TotalGpuMilli();
    if (r.num_gpu > 1) multi += r.TotalGpuMilli();
  }
  EXPECT_GE(100 * multi, 30 * total);
  EXPECT_LT(100 * (multi - last), 30 * (total - last)) << "stops at the first append reaching 30 %";
  // Already above the share: nothing appended.
  auto none = GenerateWorkload(pods, c, {.multi_gpu_pct = 5}, 42);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->size(), pods.size());
}

TEST(GenerateWorkloadTest, RefusesWhatItCannotMake) {
  const ClusterState c = TwoModels();
  auto no_multi = GenerateWorkload(Pods(10, 0, 0, 0), c, {.multi_gpu_pct = 20}, 1);
  ASSERT_FALSE(no_multi.ok());
  EXPECT_NE(no_multi.status().message().find("no multi-GPU pod"), std::string::npos);
  EXPECT_FALSE(GenerateWorkload(Pods(10, 0, 0, 0), c, {.constrain_pct = 101}, 1).ok());
  EXPECT_FALSE(GenerateWorkload(Pods(10, 0, 0, 0), c, {.constrain_pct = -1}, 1).ok());
  EXPECT_FALSE(GenerateWorkload(Pods(10, 0, 1, 0), c, {.multi_gpu_pct = 91}, 1).ok());
}

TEST(GenerateWorkloadTest, NamesTheVariant) {
  EXPECT_EQ((WorkloadVariant{}).Name("default"), "default");
  EXPECT_EQ((WorkloadVariant{.constrain_pct = 20}).Name("default"), "default+spec20");
  EXPECT_EQ((WorkloadVariant{.constrain_pct = 5, .multi_gpu_pct = 30}).Name("cpu250"),
            "cpu250+mgpu30+spec5");
}

}  // namespace
}  // namespace stoker::sim
