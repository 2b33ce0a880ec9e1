// Gangs in the scheduler library (scheduler/gang.h): how a total splits into parts, and parts
// placed all or nothing, each on a machine of its own, by every registered policy.

#include "scheduler/gang.h"

#include <gtest/gtest.h>

#include <set>

#include "scheduler/registry.h"

namespace stoker::scheduler {
namespace {

TEST(SplitGang, WholeNodesFirstThenTheRemainder) {
  EXPECT_EQ(SplitGang(20, 8), (std::vector<int32_t>{8, 8, 4}));
  EXPECT_EQ(SplitGang(16, 8), (std::vector<int32_t>{8, 8}));
  EXPECT_EQ(SplitGang(3, 8), (std::vector<int32_t>{3}));
  EXPECT_EQ(SplitGang(5, 2), (std::vector<int32_t>{2, 2, 1}));
  EXPECT_TRUE(SplitGang(0, 8).empty());
  EXPECT_TRUE(SplitGang(8, 0).empty());
}

// Four 4-GPU nodes, two 2-GPU nodes of another model, a CPU-only node.
ClusterState Mixed() {
  ClusterState c;
  const GpuModelId h100 = *c.models().Intern("H100");
  const GpuModelId t4 = *c.models().Intern("T4");
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(c.AddNode({"h" + std::to_string(i), 32000, 262144, 4, h100, 81920, false}).ok());
  }
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(c.AddNode({"t" + std::to_string(i), 16000, 65536, 2, t4, 16384, false}).ok());
  }
  EXPECT_TRUE(c.AddNode({"cpu", 64000, 262144, 0, 0, 0, false}).ok());
  return c;
}

TEST(LargestGangPart, IsTheLargestNodeThatCouldHostAPart) {
  const ClusterState c = Mixed();
  EXPECT_EQ(LargestGangPart(c, Request::WholeGpus(1, 1000, 1024)), 4);
  Request t4 = Request::WholeGpus(1, 1000, 1024);
  t4.allowed_models = GpuModelTable::Bit(*c.models().Find("T4"));
  EXPECT_EQ(LargestGangPart(c, t4), 2);
  // More CPU than any GPU node has: no part can hold a GPU.
  EXPECT_EQ(LargestGangPart(c, Request::WholeGpus(1, 40000, 1024)), 0);
}

class GangPolicyTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<PlacementPolicy> Make() {
    auto p = CreatePlacementPolicy(GetParam(), PolicyConfig{});
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return std::move(p).value();
  }
};

TEST_P(GangPolicyTest, PartsGoToDistinctMachinesAndStayAllocated) {
  ClusterState c = Mixed();
  auto policy = Make();
  // Three parts of two GPUs: each would fit twice on a 4-GPU node, but each takes a machine.
  const std::vector<Request> parts(3, Request::WholeGpus(2, 1000, 1024));
  auto g = PlaceGang(*policy, c, parts);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->status, PlacementStatus::kPlaced) << g->reason;
  ASSERT_EQ(g->parts.size(), 3u);
  std::set<int32_t> nodes;
  for (const Placement& p : g->parts) {
    EXPECT_EQ(p.num_gpus, 2);
    nodes.insert(p.node);
  }
  EXPECT_EQ(nodes.size(), 3u);
  // What stays allocated is the parts, and only them (the machines kept from later parts are
  // given back).
  EXPECT_EQ(c.allocated_gpu_milli(), 6000);
  EXPECT_EQ(c.allocated_cpu_milli(), 3000);
  for (const Placement& p : g->parts) EXPECT_TRUE(c.Release(p).ok());
  EXPECT_EQ(c.allocated_gpu_milli(), 0);
  EXPECT_EQ(c.allocated_cpu_milli(), 0);
  EXPECT_EQ(c.allocated_memory_mib(), 0);
}

TEST_P(GangPolicyTest, AllOrNothing) {
  ClusterState c = Mixed();
  auto policy = Make();
  // Three of the four H100 nodes are full: two parts of 4 GPUs cannot both find room.
  std::vector<Placement> held;
  for (int n = 0; n < 3; ++n) {
    Placement p;
    p.node = n;
    p.num_gpus = 4;
    for (uint8_t g = 0; g < 4; ++g) p.gpus[g] = GpuShare{g, 1000, 0};
    ASSERT_TRUE(c.Allocate(p).ok());
    held.push_back(p);
  }
  const int64_t gpu_before = c.allocated_gpu_milli();
  const int64_t cpu_before = c.allocated_cpu_milli();
  auto g = PlaceGang(*policy, c, std::vector<Request>(2, Request::WholeGpus(4, 1000, 1024)));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->status, PlacementStatus::kNoCapacityNow);
  EXPECT_EQ(g->placed_parts, 1);
  EXPECT_TRUE(g->parts.empty());
  EXPECT_NE(g->reason.find("1 of 2 parts"), std::string::npos) << g->reason;
  // Nothing of the first part stays.
  EXPECT_EQ(c.allocated_gpu_milli(), gpu_before);
  EXPECT_EQ(c.allocated_cpu_milli(), cpu_before);
  // Possible once a node is free again.
  ASSERT_TRUE(c.Release(held.back()).ok());
  g = PlaceGang(*policy, c, std::vector<Request>(2, Request::WholeGpus(4, 1000, 1024)));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->status, PlacementStatus::kPlaced) << g->reason;
}

TEST_P(GangPolicyTest, AMachineOfSeveralNodesTakesOnePart) {
  ClusterState c = Mixed();
  auto policy = Make();
  // Nodes 0 and 1 are one machine (as the pass models a node with MIG and plain GPUs): two
  // CPU-only parts may not both land on it.
  MachineOf machine = [](int32_t n) {
    if (n == 0 || n == 1) return std::vector<int32_t>{0, 1};
    return std::vector<int32_t>{n};
  };
  for (int round = 0; round < 3; ++round) {
    auto g = PlaceGang(*policy, c, std::vector<Request>(6, Request::CpuOnly(1000, 1024)), machine);
    ASSERT_TRUE(g.ok());
    ASSERT_EQ(g->status, PlacementStatus::kPlaced) << g->reason;
    std::set<int32_t> machines;
    for (const Placement& p : g->parts) machines.insert(p.node == 1 ? 0 : p.node);
    EXPECT_EQ(machines.size(), 6u);
  }
  // Six machines in all (0+1, 2, 3, 4, 5, 6): six parts fit, seven never do.
  EXPECT_FALSE(GangNeverFits(c, std::vector<Request>(6, Request::CpuOnly(1000, 1024)), machine));
  auto never = GangNeverFits(c, std::vector<Request>(7, Request::CpuOnly(1000, 1024)), machine);
  ASSERT_TRUE(never.has_value());
  EXPECT_NE(never->find("needs 7 machines"), std::string::npos) << *never;
}

TEST_P(GangPolicyTest, NeverFitsSaysWhy) {
  ClusterState c = Mixed();
  // Five parts of 4 GPUs: only four nodes have 4 GPUs.
  auto never = GangNeverFits(c, std::vector<Request>(5, Request::WholeGpus(4, 1000, 1024)));
  ASSERT_TRUE(never.has_value());
  EXPECT_NE(never->find("needs 5 machines"), std::string::npos) << *never;
  EXPECT_NE(never->find("only 4 could"), std::string::npos) << *never;
  // {4, 4, 4, 4, 2, 2}: four 4-GPU nodes and two 2-GPU nodes host it.
  std::vector<Request> mixed(4, Request::WholeGpus(4, 1000, 1024));
  mixed.push_back(Request::WholeGpus(2, 1000, 1024));
  mixed.push_back(Request::WholeGpus(2, 1000, 1024));
  EXPECT_FALSE(GangNeverFits(c, mixed));
  mixed.push_back(Request::WholeGpus(2, 1000, 1024));  // a seventh GPU part: no seventh node
  EXPECT_TRUE(GangNeverFits(c, mixed).has_value());
  // A part no node could host at all.
  auto nine = GangNeverFits(c, {Request::WholeGpus(9, 1000, 1024)});
  ASSERT_TRUE(nine.has_value());
  // And through PlaceGang: the policy reports it infeasible.
  auto policy = Make();
  auto g = PlaceGang(*policy, c, {Request::WholeGpus(6, 1000, 1024)});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->status, PlacementStatus::kInfeasible);
  EXPECT_EQ(c.allocated_gpu_milli(), 0);
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, GangPolicyTest, ::testing::ValuesIn(PlacementPolicyNames()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace stoker::scheduler
