// The adapter's decision step and cycle over recorded Slurm answers and a fake client.
#include "slurm/controller.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "fake_client.h"

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
  auto policies = DecisionPolicies::Create({}).value();
  const Decision d = Decide(snap, policies, {});
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
  auto policies = DecisionPolicies::Create({}).value();
  Decision d = Decide(snap, policies, {});
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
  EXPECT_TRUE(Decide(snap, policies, {}).weights.empty());
}

TEST(SlurmDecide, OnlyMarkedHeldJobsAreSteered) {
  SlurmSnapshot snap;
  snap.nodes = {Node("a", 8, 0), Node("b", 8, 4)};
  snap.jobs = {HeldGpuJob(1, 2), HeldGpuJob(2, 2, "user hold"), HeldGpuJob(3, 9)};
  auto policies = DecisionPolicies::Create({}).value();
  Decision d = Decide(snap, policies, {});
  ASSERT_EQ(d.steer.size(), 2u);
  std::map<uint32_t, std::vector<std::string>> to;
  for (const auto& s : d.steer) to[s.job] = s.nodes;
  ASSERT_EQ(to.count(2), 0u) << "a user's own hold is not Stoker's";
  EXPECT_EQ(to[1], std::vector<std::string>{"b"});  // packs onto the used node
  EXPECT_TRUE(to.at(3).empty());  // 9 GPUs: no node can host it, released to Slurm
}

// A typed request is steered only onto nodes of exactly that type: the pass's model match is a
// substring one, and an a10 job on an a100 node would never start.
TEST(SlurmDecide, TypedJobsAreNotSteeredOntoAnotherTypeWhoseNameContainsTheirs) {
  SlurmSnapshot snap;
  snap.nodes = {Node("big", 8, 0), Node("small", 8, 8)};
  snap.nodes[0].gpu_type = "a100";
  snap.nodes[1].gpu_type = "a10";
  SlurmJob j = HeldGpuJob(1, 1);
  j.gpu_type = "a10";
  snap.jobs = {j};
  auto policies = DecisionPolicies::Create({}).value();
  Decision d = Decide(snap, policies, {});
  EXPECT_TRUE(d.steer.empty()) << "steered onto "
                               << (d.steer.empty() || d.steer[0].nodes.empty()
                                       ? std::string("-")
                                       : d.steer[0].nodes[0]);
  EXPECT_TRUE(d.waiting.count(1));

  snap.nodes[1].gpus_used = 4;  // the a10 node has room: the job goes there
  d = Decide(snap, policies, {});
  ASSERT_EQ(d.steer.size(), 1u);
  EXPECT_EQ(d.steer[0].nodes, std::vector<std::string>{"small"});
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
  auto policies = DecisionPolicies::Create({}).value();
  Decision d = Decide(snap, policies, {});
  ASSERT_EQ(d.steer.size(), 1u);
  EXPECT_EQ(d.steer[0].job, 2u);
  EXPECT_EQ(d.steer[0].nodes, std::vector<std::string>{"b"}) << "a's last 2 GPUs are promised";
}

// The held jobs go through the scheduling pass: its queue policy orders them (FIFO by
// submission, not by job id) and backfill=false stops at the first job that cannot start.
TEST(SlurmDecide, TheSchedulingPassOrdersAndBackfillsHeldJobs) {
  SlurmSnapshot snap;
  snap.nodes = {Node("a", 8, 6)};
  SlurmJob newer = HeldGpuJob(1, 2);
  newer.submit_time = 200;
  SlurmJob older = HeldGpuJob(2, 2);
  older.submit_time = 100;
  snap.jobs = {newer, older};
  auto policies = DecisionPolicies::Create({}).value();
  Decision d = Decide(snap, policies, {});
  ASSERT_EQ(d.steer.size(), 1u);
  EXPECT_EQ(d.steer[0].job, 2u) << "the first submitted gets the 2 free GPUs";
  EXPECT_EQ(d.waiting.count(1), 1u);
  EXPECT_EQ(d.pass.placed, 1);
  EXPECT_EQ(d.pass.blocked, 1);

  SlurmJob big = HeldGpuJob(3, 4);
  big.submit_time = 50;
  snap.jobs = {big, newer};
  ControllerOptions strict;
  strict.backfill = false;
  auto strict_policies = DecisionPolicies::Create(strict).value();
  EXPECT_TRUE(Decide(snap, strict_policies, strict).steer.empty())
      << "without backfill the blocked 4-GPU job holds back the 2-GPU one";
  d = Decide(snap, policies, {});
  ASSERT_EQ(d.steer.size(), 1u);
  EXPECT_EQ(d.steer[0].job, 1u);
}

SlurmNode ShardNode(std::string name, int shards_per_gpu) {
  SlurmNode n = Node(std::move(name), 8, 0);
  n.shards = 8 * shards_per_gpu;
  return n;
}

SlurmJob RunningOn(uint32_t id, const std::string& node, std::vector<int32_t> gpus,
                   int32_t shards = 0, std::vector<int32_t> shard_gpus = {}) {
  SlurmJob j;
  j.id = id;
  j.state = "RUNNING";
  j.cpus = 1;
  j.nodes = {node};
  j.gpus_per_node = static_cast<int32_t>(gpus.size());
  j.shards_per_node = shards;
  j.gpu_indices = {std::move(gpus)};
  j.shard_counts = {shards};
  j.shard_gpus = {std::move(shard_gpus)};
  return j;
}

// Slurm 22.05 gives a whole-GPU job the lowest GPUs not allocated whole, even where shard jobs
// run. The pass picks node a (exactly 2 GPUs free: GPUs 1 and 2), but Slurm would take GPUs 0
// and 1 there, and GPU 0 carries shards: the job goes to the best-packed node where Slurm's pick
// is clean. A shard job joins the GPU whose shards are partly used.
TEST(SlurmDecide, WholeGpuJobsAreKeptOffGpusWithShardsAndShardJobsPack) {
  SlurmSnapshot snap;
  snap.nodes = {ShardNode("a", 4), ShardNode("b", 4)};
  snap.jobs = {RunningOn(10, "a", {}, 2, {0}), RunningOn(11, "a", {3, 4, 5, 6, 7})};
  snap.jobs.push_back(HeldGpuJob(1, 2));
  SlurmJob shard = HeldGpuJob(2, 0);
  shard.shards_per_node = 1;
  snap.jobs.push_back(shard);
  const auto uses = NodeUses(snap);
  EXPECT_EQ(uses.at("a").PredictWhole(2), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(uses.at("a").PredictShards(2), 0);
  EXPECT_EQ(uses.at("a").PredictShards(3), 1);
  auto policies = DecisionPolicies::Create({}).value();
  const Decision d = Decide(snap, policies, {});
  ASSERT_EQ(d.steer.size(), 2u) << (d.waiting.empty() ? "" : d.waiting.begin()->second);
  std::map<uint32_t, std::string> to;
  for (const auto& s : d.steer) to[s.job] = s.nodes.empty() ? "" : s.nodes[0];
  EXPECT_EQ(to[1], "b");
  EXPECT_EQ(to[2], "a");
  EXPECT_EQ(d.kept_off_shared_gpus, std::set<uint32_t>{1});

  // Without keep_shards_apart the job goes where the pass put it, and Slurm shares GPU 0.
  ControllerOptions shared;
  shared.keep_shards_apart = false;
  const Decision s = Decide(snap, policies, shared);
  ASSERT_EQ(s.steer.size(), 2u);
  for (const auto& st : s.steer) to[st.job] = st.nodes.empty() ? "" : st.nodes[0];
  EXPECT_EQ(to[1], "a");
  EXPECT_TRUE(s.kept_off_shared_gpus.empty());
}

// Slurm puts a shard job on the lowest GPU with room: on an empty node that is GPU 0, and every
// whole-GPU job after it would be given GPU 0 too. The shard job goes where it costs whole-GPU
// jobs the least room (after the 6 whole GPUs of b), and the 4-GPU job then fits a cleanly.
TEST(SlurmDecide, ShardJobsGoWhereTheyLeaveWholeGpuJobsRoom) {
  SlurmSnapshot snap;
  snap.nodes = {ShardNode("a", 4), ShardNode("b", 4)};
  snap.jobs = {RunningOn(10, "b", {0, 1, 2, 3, 4, 5})};
  SlurmJob shard = HeldGpuJob(1, 0);
  shard.shards_per_node = 2;
  snap.jobs.push_back(shard);
  snap.jobs.push_back(HeldGpuJob(2, 4));
  EXPECT_EQ(NodeUses(snap).at("a").CleanWholeCapacity(), 8);
  EXPECT_EQ(NodeUses(snap).at("b").CleanWholeCapacity(), 2);
  auto policies = DecisionPolicies::Create({}).value();
  const Decision d = Decide(snap, policies, {});
  std::map<uint32_t, std::string> to;
  for (const auto& s : d.steer) to[s.job] = s.nodes.empty() ? "" : s.nodes[0];
  EXPECT_EQ(to[1], "b");
  EXPECT_EQ(to[2], "a");
}

// The recorded shard answers: job 3 was given GPUs 0-1 by Slurm although jobs 1 and 2 hold
// shards there; the model sees both.
TEST(SlurmDecide, RecordedShardSnapshotModelsWholeAndShardUse) {
  SlurmSnapshot snap;
  snap.nodes = ParseSinfoJson(ReadTestdata("sinfo-shards-22.05.json")).value();
  snap.jobs = ParseSqueueJson(ReadTestdata("squeue-shards-22.05.json")).value();
  const auto uses = NodeUses(snap);
  const NodeUse& g1 = uses.at("g1");
  EXPECT_EQ(g1.whole, (std::vector<bool>{true, true, true, false, false, false, false, false}));
  EXPECT_EQ(g1.shards, (std::vector<int32_t>{3, 2, 4, 4, 0, 0, 0, 0}));
  // A held 1-shard job: Slurm's pick on g1 would be GPU 3 (full) -> none; GPU 4 is free.
  EXPECT_EQ(g1.PredictShards(1), 4);
  EXPECT_EQ(g1.PredictWhole(1), std::vector<int32_t>{3}) << "GPU 3 is full of shards";
}

// The submit plan: whole-GPU jobs may go to nodes without shard jobs at any time, and to a node
// with shard jobs once, where Slurm's pick now avoids them; shard jobs where they cost
// whole-GPU jobs the least clean room.
TEST(SlurmDecide, SubmitPlanKeepsWholeAndShardJobsApart) {
  SlurmSnapshot snap;
  snap.nodes = {ShardNode("a", 4), ShardNode("b", 4), ShardNode("c", 4), ShardNode("d", 4)};
  snap.nodes[3].state = "idle";
  snap.nodes[3].state_flags = {"DRAIN"};
  // a: shards on GPU 0 (Slurm would give any whole-GPU job GPU 0); b: empty; c: GPUs 0-5 whole,
  // shards on GPU 7 (a 1-GPU job gets GPU 6, clean; a 2-GPU job GPUs 6 and 7).
  snap.jobs = {RunningOn(10, "a", {}, 2, {0}), RunningOn(11, "c", {0, 1, 2, 3, 4, 5}),
               RunningOn(12, "c", {}, 1, {7})};
  const auto uses = NodeUses(snap);
  const SubmitPlan p = PlanSubmissions(snap, uses, {});
  EXPECT_EQ(p.nodes, (std::vector<std::string>{"a", "b", "c", "d"}));
  ASSERT_EQ(p.whole.size(), 8u);
  EXPECT_EQ(p.whole.at(1).safe, std::vector<std::string>{"b"});
  EXPECT_EQ(p.whole.at(1).once, std::vector<std::string>{"c"});
  EXPECT_EQ(p.whole.at(2).safe, std::vector<std::string>{"b"});
  EXPECT_TRUE(p.whole.at(2).once.empty()) << "GPU 7 of c has shards";
  EXPECT_EQ(p.whole.at(8).safe, std::vector<std::string>{"b"});
  // 1 shard: a's GPU 0 costs nothing (it has shards already); b would lose all 8 clean GPUs.
  ASSERT_EQ(p.shards.size(), 4u);
  EXPECT_EQ(p.shards.at(1).safe, std::vector<std::string>{"a"});
  EXPECT_EQ(p.shards.at(4).safe, std::vector<std::string>{"a"}) << "GPU 1 of a: a's room is 0";
  ControllerOptions o;
  o.steer_marker = "stoker:steer";
  o.submit_plan_valid_s = 12;
  const std::string text = RenderSubmitPlan(p, o, 5, 1700000000);
  EXPECT_EQ(text.substr(0, text.find("gpu 3")),
            "stoker-submit-plan 1\ngeneration 5\nwritten 1700000000\nvalid_for 12\n"
            "marker stoker:steer\nnodes a,b,c,d\ngpu 1 b c\ngpu 2 b -\n");
  EXPECT_NE(text.find("\nshard 1 a -\n"), std::string::npos) << text;

  // No node without shards and none with clean room: the plan holds whole-GPU jobs.
  snap.jobs.push_back(RunningOn(13, "b", {}, 1, {0}));
  const SubmitPlan full = PlanSubmissions(snap, NodeUses(snap), {});
  EXPECT_TRUE(full.whole.at(2).safe.empty());
  EXPECT_TRUE(full.whole.at(2).once.empty());
  EXPECT_NE(RenderSubmitPlan(full, o, 6, 0).find("\ngpu 2 - -\n"), std::string::npos);

  // Without keep_shards_apart there is nothing to keep: no shape, the script leaves jobs alone.
  ControllerOptions shared;
  shared.keep_shards_apart = false;
  const SubmitPlan none = PlanSubmissions(snap, uses, shared);
  EXPECT_TRUE(none.whole.empty());
  EXPECT_TRUE(none.shards.empty());
}

// Jobs the script placed and that still wait keep excluding what the plan no longer allows, and
// may go where it allows again (a node's shard jobs ended).
TEST(SlurmDecide, PendingPlacedJobsFollowThePlansSafeNodes) {
  SlurmSnapshot snap;
  snap.nodes = {ShardNode("a", 4), ShardNode("b", 4), ShardNode("c", 4)};
  snap.jobs = {RunningOn(10, "a", {}, 2, {0}), RunningOn(11, "b", {0, 1, 2, 3, 4, 5, 6})};
  SlurmJob stale = HeldGpuJob(1, 8);  // placed when a was free of shards and c was not
  stale.priority = 100;
  stale.state_reason = "Resources";
  stale.excluded_nodes = {"c"};
  SlurmJob current = stale;  // already excluding what the plan excludes
  current.id = 2;
  current.excluded_nodes = {"a"};
  SlurmJob unmarked = stale;
  unmarked.id = 3;
  unmarked.comment.clear();
  SlurmJob held = HeldGpuJob(4, 8);
  snap.jobs.insert(snap.jobs.end(), {stale, current, unmarked, held});
  ControllerOptions o;
  o.submit_plan = "plan";
  auto policies = DecisionPolicies::Create(o).value();
  const Decision d = Decide(snap, policies, o);
  ASSERT_EQ(d.exclude.size(), 1u);
  EXPECT_EQ(d.exclude.at(1), std::vector<std::string>{"a"});
  // Without a submit plan nothing is placed at submission, so nothing follows it.
  EXPECT_TRUE(Decide(snap, policies, {}).exclude.empty());
  // No safe node at all: the list is left as it is rather than exclude every node.
  snap.jobs.push_back(RunningOn(12, "c", {}, 1, {0}));
  snap.jobs.push_back(RunningOn(13, "b", {}, 1, {7}));
  EXPECT_EQ(Decide(snap, policies, o).exclude.count(1), 0u);
}

TEST(SlurmController, WritesTheSubmitPlanEveryCycle) {
  testing::FakeSlurmClient fake;
  fake.nodes = std::vector<SlurmNode>{Node("a", 8, 0), Node("b", 8, 0)};
  const std::string path = ::testing::TempDir() + "/stoker-submit-plan-test";
  std::remove(path.c_str());
  ControllerOptions o;
  o.submit_plan = path;
  auto c = SlurmController::Create(&fake, o).value();
  auto read = [&] {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  ASSERT_TRUE(c->Cycle().ok());
  std::string text = read();
  EXPECT_EQ(text.rfind("stoker-submit-plan 1\ngeneration 1\n", 0), 0u) << text;
  EXPECT_NE(text.find("\ngpu 8 a,b -\n"), std::string::npos) << text;
  ASSERT_TRUE(c->Cycle().ok());
  EXPECT_NE(read().find("\ngeneration 2\n"), std::string::npos);
  // A link planted where the temporary file goes is replaced, not followed.
  const std::string victim = ::testing::TempDir() + "/stoker-submit-plan-victim";
  std::ofstream(victim) << "keep";
  std::remove((path + ".tmp").c_str());
  ASSERT_EQ(::symlink(victim.c_str(), (path + ".tmp").c_str()), 0);
  ASSERT_TRUE(c->Cycle().ok());
  EXPECT_EQ(c->metrics().submit_plan_errors, 0);
  EXPECT_NE(read().find("\ngeneration 3\n"), std::string::npos);
  {
    std::ifstream in(victim);
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_EQ(ss.str(), "keep");
  }
  std::error_code ec;
  EXPECT_FALSE(std::filesystem::is_symlink(path, ec)) << "the plan is a file of its own";
  std::remove(victim.c_str());
  // A path that cannot be written is counted and logged, and the cycle goes on.
  ControllerOptions bad;
  bad.submit_plan = ::testing::TempDir() + "/no-such-dir/plan";
  auto b = SlurmController::Create(&fake, bad).value();
  ASSERT_TRUE(b->Cycle().ok());
  EXPECT_EQ(b->metrics().submit_plan_errors, 1);
  std::remove(path.c_str());
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

// A job kept held because Slurm would give it GPUs with shards is decided again every cycle,
// but is one decision: the counter counts it once per hold, and again after a new hold.
TEST(SlurmController, KeptOffSharedGpusCountsEachHeldJobOncePerHold) {
  testing::FakeSlurmClient fake;
  // The only node has shards on GPU 0: Slurm would give a 1-GPU job GPU 0.
  fake.nodes = std::vector<SlurmNode>{ShardNode("a", 4)};
  std::vector<SlurmJob> jobs = {RunningOn(10, "a", {}, 2, {0}), HeldGpuJob(1, 1)};
  fake.jobs = jobs;
  auto c = SlurmController::Create(&fake, {}).value();
  for (int i = 0; i < 3; ++i) {
    auto d = c->Cycle();
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->kept_off_shared_gpus, std::set<uint32_t>{1});
    EXPECT_EQ(d->waiting.count(1), 1u);
  }
  EXPECT_EQ(c->metrics().kept_off_shared_gpus, 1);
  EXPECT_EQ(c->metrics().jobs_steered, 0);
  EXPECT_NE(RenderControllerMetrics(c->metrics()).find("stoker_slurm_kept_off_shared_gpus_total 1"),
            std::string::npos);
  // A second held job is a second decision; the first is not counted again.
  jobs.push_back(HeldGpuJob(2, 1));
  fake.jobs = jobs;
  ASSERT_TRUE(c->Cycle().ok());
  EXPECT_EQ(c->metrics().kept_off_shared_gpus, 2);
  // Job 1 leaves the hold (started elsewhere, cancelled): held again later, it counts anew.
  fake.jobs = std::vector<SlurmJob>{jobs[0], jobs[2]};
  ASSERT_TRUE(c->Cycle().ok());
  EXPECT_EQ(c->metrics().kept_off_shared_gpus, 2);
  fake.jobs = jobs;
  ASSERT_TRUE(c->Cycle().ok());
  EXPECT_EQ(c->metrics().kept_off_shared_gpus, 3);
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
