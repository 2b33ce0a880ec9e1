// One suite run over every registered placement policy: the contract every policy must keep.
#include <gtest/gtest.h>

#include <vector>

#include "scheduler/registry.h"
#include "scheduler/rng.h"

namespace stoker::scheduler {
namespace {

ClusterState SmallCluster() {
  ClusterState c;
  GpuModelId g2 = *c.models().Intern("G2");
  GpuModelId t4 = *c.models().Intern("T4");
  c.models().Intern("UNUSED").value();
  for (int i = 0; i < 4; ++i)
    EXPECT_TRUE(c.AddNode({"g2-" + std::to_string(i), 96000, 393216, 8, g2, 0, false}).ok());
  for (int i = 0; i < 4; ++i)
    EXPECT_TRUE(c.AddNode({"t4-" + std::to_string(i), 64000, 262144, 2, t4, 0, false}).ok());
  EXPECT_TRUE(c.AddNode({"cpu", 32000, 131072, 0, 0, 0, false}).ok());
  return c;
}

Request RandomRequest(Rng& rng) {
  const int64_t cpu = 1000 * static_cast<int64_t>(1 + rng.Uniform(16));
  switch (rng.Uniform(5)) {
    case 0:
      return Request::CpuOnly(cpu, 1024);
    case 1:
      return Request::GpuShare(static_cast<int32_t>(100 + 50 * rng.Uniform(18)), cpu, 1024);
    case 2:
      return Request::WholeGpus(1, cpu, 1024);
    case 3:
      return Request::WholeGpus(2, cpu, 1024);
    default:
      return Request::WholeGpus(rng.Uniform(2) ? 4 : 8, cpu, 1024);
  }
}

class PolicyConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<PlacementPolicy> Make(uint64_t seed = 42) {
    PolicyConfig config;
    config.seed = seed;
    auto p = CreatePlacementPolicy(GetParam(), config);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return std::move(p).value();
  }
};

TEST_P(PolicyConformanceTest, NameMatchesRegistry) { EXPECT_EQ(Make()->Name(), GetParam()); }

TEST_P(PolicyConformanceTest, ReportsInfeasibleRequests) {
  ClusterState c = SmallCluster();
  auto policy = Make();
  Request nine = Request::WholeGpus(9, 1000, 1);
  Request huge_cpu = Request::CpuOnly(200000, 1);
  Request unused_model = Request::WholeGpus(1, 1000, 1);
  unused_model.allowed_models = GpuModelTable::Bit(*c.models().Find("UNUSED"));
  Request malformed = Request::GpuShare(500, 1000, 1);
  malformed.num_gpu = 3;
  for (const Request& r : {nine, huge_cpu, unused_model, malformed}) {
    policy->Observe(r);
    PlacementResult res = policy->Place(r, c);
    EXPECT_EQ(res.status, PlacementStatus::kInfeasible);
    EXPECT_FALSE(res.reason.empty());
  }
}

TEST_P(PolicyConformanceTest, FillsClusterWithValidPlacementsAndReleasesExactly) {
  ClusterState c = SmallCluster();
  auto policy = Make();
  Rng rng(7);
  std::vector<Placement> placed;
  int no_capacity = 0;
  for (int i = 0; i < 400; ++i) {
    Request r = RandomRequest(rng);
    policy->Observe(r);
    PlacementResult res = policy->Place(r, c);
    ASSERT_NE(res.status, PlacementStatus::kInfeasible) << res.reason;
    if (res.status == PlacementStatus::kNoCapacityNow) {
      ++no_capacity;
      // No capacity means no node fits (the shared filter), whichever policy.
      for (int32_t n = 0; n < c.num_nodes(); ++n) ASSERT_FALSE(c.Fits(n, r)) << "node " << n;
      continue;
    }
    ASSERT_TRUE(c.Fits(res.placement.node, r));
    ASSERT_EQ(res.placement.num_gpus, r.num_gpu);
    ASSERT_EQ(res.placement.TotalGpuMilli(), r.TotalGpuMilli());
    ASSERT_TRUE(c.Allocate(res.placement).ok());
    placed.push_back(res.placement);
  }
  EXPECT_GT(no_capacity, 0);  // 400 requests overfill this cluster
  EXPECT_GT(c.allocated_gpu_milli(), c.total_gpu_milli() / 2);
  for (const Placement& p : placed) ASSERT_TRUE(c.Release(p).ok());
  EXPECT_EQ(c.allocated_gpu_milli(), 0);
  EXPECT_EQ(c.allocated_cpu_milli(), 0);
  for (int32_t n = 0; n < c.num_nodes(); ++n)
    EXPECT_EQ(c.node(n).full_free_gpus, c.spec(n).num_gpus);
}

TEST_P(PolicyConformanceTest, HonoursGpuModelConstraint) {
  ClusterState c = SmallCluster();
  auto policy = Make();
  Request r = Request::GpuShare(300, 1000, 1);
  r.allowed_models = GpuModelTable::Bit(*c.models().Find("T4"));
  for (int i = 0; i < 20; ++i) {
    policy->Observe(r);
    PlacementResult res = policy->Place(r, c);
    ASSERT_TRUE(res.placed());
    EXPECT_EQ(c.spec(res.placement.node).gpu_model, *c.models().Find("T4"));
    ASSERT_TRUE(c.Allocate(res.placement).ok());
  }
}

TEST_P(PolicyConformanceTest, DeterministicForASeed) {
  auto run = [&](uint64_t seed) {
    ClusterState c = SmallCluster();
    auto policy = Make(seed);
    Rng rng(11);
    std::vector<int32_t> nodes;
    for (int i = 0; i < 150; ++i) {
      Request r = RandomRequest(rng);
      policy->Observe(r);
      PlacementResult res = policy->Place(r, c);
      nodes.push_back(res.placed() ? res.placement.node : -1);
      if (res.placed()) {
        EXPECT_TRUE(c.Allocate(res.placement).ok());
      }
    }
    return nodes;
  };
  EXPECT_EQ(run(5), run(5));
}

TEST_P(PolicyConformanceTest, NoCapacityWhenFull) {
  ClusterState c;
  GpuModelId g = *c.models().Intern("G");
  ASSERT_TRUE(c.AddNode({"only", 8000, 8192, 1, g, 0, false}).ok());
  auto policy = Make();
  Request r = Request::WholeGpus(1, 1000, 1);
  PlacementResult first = policy->Place(r, c);
  ASSERT_TRUE(first.placed());
  ASSERT_TRUE(c.Allocate(first.placement).ok());
  EXPECT_EQ(policy->Place(r, c).status, PlacementStatus::kNoCapacityNow);
  // CPU-only requests still fit.
  EXPECT_TRUE(policy->Place(Request::CpuOnly(1000, 1), c).placed());
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, PolicyConformanceTest,
                         ::testing::ValuesIn(PlacementPolicyNames()), [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

TEST(RegistryTest, UnknownNameListsValidOnes) {
  auto p = CreatePlacementPolicy("nope", PolicyConfig{});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
  EXPECT_NE(p.status().message().find("random"), std::string::npos);
}

}  // namespace
}  // namespace stoker::scheduler
