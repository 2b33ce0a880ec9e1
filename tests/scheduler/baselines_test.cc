// Policy-specific behaviour of the baselines and the weighted policy (the shared contract is in
// policy_conformance_test.cc).
#include <gtest/gtest.h>

#include <array>

#include "scheduler/registry.h"

namespace stoker::scheduler {
namespace {

// Node 0 has 3 of 4 GPUs taken; node 1 is idle.
ClusterState HalfUsed() {
  ClusterState c;
  GpuModelId g = *c.models().Intern("G");
  EXPECT_TRUE(c.AddNode({"used", 64000, 262144, 4, g, 0, false}).ok());
  EXPECT_TRUE(c.AddNode({"idle", 64000, 262144, 4, g, 0, false}).ok());
  uint8_t gpus[3] = {0, 1, 2};
  EXPECT_TRUE(c.Allocate(MakePlacement(Request::WholeGpus(3, 8000, 1), 0, gpus)).ok());
  return c;
}

int32_t NodeFor(const std::string& policy, const Request& r, PolicyConfig config = {}) {
  ClusterState c = HalfUsed();
  auto p = std::move(CreatePlacementPolicy(policy, config).value());
  p->Observe(r);
  PlacementResult res = p->Place(r, c);
  EXPECT_TRUE(res.placed()) << policy;
  return res.placement.node;
}

TEST(BaselinesTest, PackersPreferThePartlyUsedNode) {
  const Request r = Request::WholeGpus(1, 4000, 1);
  for (const std::string p : {"bestfit", "packing", "dotprod", "stoker"}) {
    EXPECT_EQ(NodeFor(p, r), 0) << p;
  }
  // Clustering keeps classes apart: node 0 hosts a 3-GPU pod, so a 1-GPU pod prefers the idle
  // node; a 3-GPU request joins its class.
  EXPECT_EQ(NodeFor("clustering", r), 1);
  ClusterState c = HalfUsed();
  ASSERT_TRUE(
      c.Allocate(MakePlacement(Request::WholeGpus(1, 1000, 1), 1, std::array<uint8_t, 1>{0}.data()))
          .ok());
  auto clustering = std::move(CreatePlacementPolicy("clustering", {}).value());
  PlacementResult res = clustering->Place(Request::WholeGpus(1, 1000, 1), c);
  ASSERT_TRUE(res.placed());
  EXPECT_EQ(res.placement.node, 1);  // the node already hosting 1-GPU pods
}

TEST(WeightedTest, ClassWeightsChooseBetweenPackingAndSpreading) {
  Request r = Request::WholeGpus(1, 4000, 1);
  PolicyConfig config;
  config.class_weights["spread"] = {10, 0};
  config.class_weights["pack"] = {0, 10};
  r.job_class = "spread";
  EXPECT_EQ(NodeFor("weighted", r, config), 1);
  r.job_class = "pack";
  EXPECT_EQ(NodeFor("weighted", r, config), 0);
  // Defaults: recsys 3:7 packs (fit 1/1 dominates), cv 5:5 as documented.
  r.job_class = "recsys";
  EXPECT_EQ(NodeFor("weighted", r), 0);
}

TEST(PackingTest, ShareGoesOntoAnAlreadySharedGpu) {
  ClusterState c;
  GpuModelId g = *c.models().Intern("G");
  ASSERT_TRUE(c.AddNode({"a", 64000, 262144, 2, g, 0, false}).ok());
  ASSERT_TRUE(c.AddNode({"b", 64000, 262144, 2, g, 0, false}).ok());
  uint8_t gpu1[1] = {1};
  ASSERT_TRUE(c.Allocate(MakePlacement(Request::GpuShare(300, 1000, 1), 1, gpu1)).ok());
  auto p = std::move(CreatePlacementPolicy("packing", {}).value());
  PlacementResult res = p->Place(Request::GpuShare(500, 1000, 1), c);
  ASSERT_TRUE(res.placed());
  EXPECT_EQ(res.placement.node, 1);
  EXPECT_EQ(res.placement.gpus[0].gpu, 1);
}

}  // namespace
}  // namespace stoker::scheduler
