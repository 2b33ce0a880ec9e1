// The adapter's decision step and cycle over recorded Slurm answers and a fake client.
#include "slurm/controller.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "fake_client.h"
#include "scheduler/registry.h"

namespace stoker::slurm {
namespace {

std::string ReadTestdata(const std::string& name) {
  std::ifstream in(std::string(STOKER_SOURCE_DIR) + "/tests/slurm/testdata/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

SlurmNode Node(std::string name, int gpus, int used, int64_t weight = 1) {
  SlurmNode n;
  n.name = std::move(name);
  n.state = used > 0 ? "mixed" : "idle";
  n.cpus = 16;
  n.real_memory_mib = 64000;
  n.gpus = gpus;
  n.gpus_used = used;
  n.weight = weight;
  return n;
}

SlurmJob HeldGpuJob(uint32_t id, int gpus, std::string comment = "stoker:steer") {
  SlurmJob j;
  j.id = id;
  j.state = "PENDING";
  j.state_reason = "JobHeldUser";
  j.priority = 0;
  j.gpus_per_node = gpus;
  j.cpus = 1;
  j.submit_time = id;
  j.comment = std::move(comment);
  return j;
}

TEST(SlurmDecide, RecordedSnapshotSteersHeldJobAndSkipsDrainedNode) {
  SlurmSnapshot snap;
  snap.nodes = ParseSinfoJson(ReadTestdata("sinfo-22.05.json")).value();
  snap.jobs = ParseSqueueJson(ReadTestdata("squeue-22.05.json")).value();
  auto policy = scheduler::CreatePlacementPolicy("stoker", {}).value();
  const Decision d = Decide(snap, *policy, {});
  // Job 8 (4 GPUs, held, marked) goes where stoker packs it: g1 has 3 free, so an empty node.
  ASSERT_EQ(d.steer.size(), 1u);
  EXPECT_EQ(d.steer[0].job, 8u);
  ASSERT_EQ(d.steer[0].nodes.size(), 1u);
  EXPECT_NE(d.steer[0].nodes[0], "g4");  // drained
  EXPECT_NE(d.steer[0].nodes[0], "g1");  // 3 GPUs free only
  // Weights: never for the drained node; every usable node gets one.
  EXPECT_EQ(d.weights.count("g4"), 0u);
  EXPECT_FALSE(d.weights.empty());
}

TEST(SlurmDecide, WeightsFollowPackingAndSkipUnchangedNodes) {
  SlurmSnapshot snap;
  snap.nodes = {Node("a", 8, 0), Node("b", 8, 6), Node("c", 8, 8)};
  auto policy = scheduler::CreatePlacementPolicy("stoker", {}).value();
  Decision d = Decide(snap, *policy, {});
  // The partly used node is filled first (lowest weight); the full node is heaviest.
  ASSERT_EQ(d.weights.count("b"), 0u) << "b already has weight 1";
  ASSERT_TRUE(d.weights.count("a"));
  ASSERT_TRUE(d.weights.count("c"));
  EXPECT_GT(d.weights["a"], 1);
  EXPECT_GT(d.weights["c"], d.weights["a"]);
  // Applying the wanted weights makes the next decision a no-op.
  for (auto& n : snap.nodes) {
    if (d.weights.count(n.name)) n.weight = d.weights[n.name];
  }
  EXPECT_TRUE(Decide(snap, *policy, {}).weights.empty());
}

TEST(SlurmDecide, OnlyMarkedHeldJobsAreSteered) {
  SlurmSnapshot snap;
  snap.nodes = {Node("a", 8, 0), Node("b", 8, 4)};
  snap.jobs = {HeldGpuJob(1, 2), HeldGpuJob(2, 2, "user hold"), HeldGpuJob(3, 9)};
  auto policy = scheduler::CreatePlacementPolicy("stoker", {}).value();
  Decision d = Decide(snap, *policy, {});
  ASSERT_EQ(d.steer.size(), 2u);
  EXPECT_EQ(d.steer[0].job, 1u);
  EXPECT_EQ(d.steer[0].nodes, std::vector<std::string>{"b"});  // packs onto the used node
  EXPECT_EQ(d.steer[1].job, 3u);  // 9 GPUs: no node can host it, released to Slurm
  EXPECT_TRUE(d.steer[1].nodes.empty());
}

// A job released onto a node in an earlier cycle but not started yet still counts there.
TEST(SlurmDecide, ReleasedButNotStartedJobsHoldTheirGpus) {
  SlurmSnapshot snap;
  snap.nodes = {Node("a", 8, 6), Node("b", 8, 0)};
  SlurmJob released = HeldGpuJob(1, 2);
  released.state_reason = "None";
  released.priority = 100;
  released.required_nodes = {"a"};
  snap.jobs = {released, HeldGpuJob(2, 2)};
  auto policy = scheduler::CreatePlacementPolicy("stoker", {}).value();
  Decision d = Decide(snap, *policy, {});
  ASSERT_EQ(d.steer.size(), 1u);
  EXPECT_EQ(d.steer[0].job, 2u);
  EXPECT_EQ(d.steer[0].nodes, std::vector<std::string>{"b"}) << "a's last 2 GPUs are promised";
}

TEST(SlurmController, UnreachableOrMalformedSlurmDoesNothingAndCounts) {
  testing::FakeSlurmClient fake;
  auto c = SlurmController::Create(&fake, {}).value();
  fake.nodes = ParseSqueueJson(ReadTestdata("squeue-unreachable-22.05.json")).status();
  auto r = c->Cycle();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(c->metrics().read_errors_unreachable, 1);
  fake.nodes = ParseSinfoJson("{\"nodes\": [{\"name\": 1}]}").status();
  EXPECT_FALSE(c->Cycle().ok());
  EXPECT_EQ(c->metrics().read_errors_malformed, 1);
  EXPECT_TRUE(fake.actions.empty());
  const std::string text = RenderControllerMetrics(c->metrics());
  EXPECT_NE(text.find("stoker_slurm_read_errors_total{kind=\"unreachable\"} 1"), std::string::npos);
  EXPECT_NE(text.find("stoker_slurm_read_errors_total{kind=\"malformed\"} 1"), std::string::npos);
}

TEST(SlurmController, VanishedJobsAndUnknownNodesAreCountedNotFatal) {
  testing::FakeSlurmClient fake;
  fake.nodes = std::vector<SlurmNode>{Node("a", 8, 0), Node("b", 8, 2)};
  fake.jobs = std::vector<SlurmJob>{HeldGpuJob(5, 1)};
  fake.action_status = NotFound("scontrol update exited with 1: Invalid job id specified");
  auto c = SlurmController::Create(&fake, {}).value();
  auto r = c->Cycle();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(c->metrics().jobs_steered, 0);
  EXPECT_GE(c->metrics().action_errors_not_found, 2);  // the steer and at least one weight
  EXPECT_FALSE(fake.actions.empty());
}

TEST(SlurmController, UnknownPolicyIsRefused) {
  ControllerOptions o;
  o.policy = "nope";
  auto c = SlurmController::Create(nullptr, o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace stoker::slurm
