// Gangs in the scheduling pass: placed all or nothing, each part on a node of its own, held on
// every node while active, preempted as one job.

#include <gtest/gtest.h>

#include <set>

#include "pass_views.h"

namespace stoker::pass {
namespace {

using testing::Find;
using testing::Node;
using testing::Queued;
using testing::Running;
using testing::RunPass;

JobView Gang(int64_t id, int nodes, int gpus, bool preemptible = false) {
  JobView j = Queued(id, gpus, preemptible);
  j.nodes = nodes;
  return j;
}

TEST(GangPass, EveryPartOnANodeOfItsOwn) {
  for (const std::string& policy : scheduler::PlacementPolicyNames()) {
    SCOPED_TRACE(policy);
    PassInput in;
    in.nodes = {Node("a", 4), Node("b", 4), Node("c", 2)};
    in.queued = {Gang(1, 2, 2)};
    const Decision d = RunPass(in, policy);
    ASSERT_EQ(d.stats.placed, 1);
    const Action* a = Find(d, 1);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->kind, Action::Kind::kAssign);
    ASSERT_EQ(a->gang.size(), 2u);
    EXPECT_NE(a->gang[0].placement.node, a->gang[1].placement.node);
    for (const Grant& part : a->gang) {
      EXPECT_EQ(part.gpu_indices.size(), 2u);
      EXPECT_EQ(part.placement.shares.size(), 2u);
      EXPECT_EQ(part.cuda_visible_devices.size(), 3u);  // "i,j"
    }
    EXPECT_TRUE(d.reasons.empty());
  }
}

TEST(GangPass, AllOrNothingAndTheReasonSaysHowManyFit) {
  PassInput in;
  in.nodes = {Node("a", 4), Node("b", 4)};
  // Node b is busy: only one part of 4 GPUs fits now.
  JobView busy = Queued(1, 4);
  busy.phase = JobPhase::kRunning;
  busy.placement = JobPlacement{"b", {{0, 1000}, {1, 1000}, {2, 1000}, {3, 1000}}, 0, ""};
  in.active = {busy};
  in.queued = {Gang(2, 2, 4), Queued(3, 2)};
  const Decision d = RunPass(in);
  EXPECT_EQ(Find(d, 2), nullptr);
  ASSERT_TRUE(d.reasons.count(2));
  EXPECT_NE(d.reasons.at(2).find("waiting for resources: 1 of 2 parts"), std::string::npos)
      << d.reasons.at(2);
  // The gang took nothing: the job behind it is placed on node a (backfill).
  const Action* three = Find(d, 3);
  ASSERT_NE(three, nullptr);
  EXPECT_EQ(three->assignment.placement.node, "a");
  EXPECT_EQ(d.stats.placed, 1);
  EXPECT_EQ(d.stats.blocked, 1);
}

TEST(GangPass, ATotalSplitsByTheLargestNode) {
  PassInput in;
  in.nodes = {Node("a", 8), Node("b", 8), Node("c", 4)};
  JobView j = Queued(1, 0);
  j.total_gpus = 12;
  in.queued = {j};
  const Decision d = RunPass(in);
  const Action* a = Find(d, 1);
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->gang.size(), 2u);
  EXPECT_EQ(a->gang[0].gpu_indices.size(), 8u);  // a whole node first
  EXPECT_EQ(a->gang[1].gpu_indices.size(), 4u);
}

TEST(GangPass, NeverPlaceableGangsSaySo) {
  PassInput in;
  in.nodes = {Node("a", 4), Node("b", 4)};
  in.queued = {Gang(1, 3, 1)};
  Decision d = RunPass(in);
  ASSERT_TRUE(d.reasons.count(1));
  EXPECT_NE(d.reasons.at(1).find("no node can ever run this"), std::string::npos);
  EXPECT_NE(d.reasons.at(1).find("needs 3 machines"), std::string::npos) << d.reasons.at(1);
  EXPECT_EQ(d.stats.infeasible, 1);
  // A part larger than any node.
  in.queued = {Gang(2, 2, 8)};
  d = RunPass(in);
  ASSERT_TRUE(d.reasons.count(2));
  EXPECT_NE(d.reasons.at(2).find("no node can ever run this"), std::string::npos);
}

TEST(GangPass, AnActiveGangHoldsEveryPart) {
  PassInput in;
  in.nodes = {Node("a", 2), Node("b", 2)};
  JobView g = Gang(1, 2, 2);
  g.phase = JobPhase::kRunning;
  g.gang = {JobPlacement{"a", {{0, 1000}, {1, 1000}}, 0, ""},
            JobPlacement{"b", {{0, 1000}, {1, 1000}}, 0, ""}};
  in.active = {g};
  in.queued = {Queued(2, 1)};
  const Decision d = RunPass(in);
  EXPECT_EQ(d.stats.placed, 0);
  ASSERT_TRUE(d.reasons.count(2));
}

TEST(GangPass, APreemptibleGangIsStoppedAsOneJob) {
  PassInput in;
  in.nodes = {Node("a", 2), Node("b", 2)};
  JobView g = Gang(1, 2, 2, /*preemptible=*/true);
  g.phase = JobPhase::kRunning;
  g.start_ms = 5;
  g.gang = {JobPlacement{"a", {{0, 1000}, {1, 1000}}, 0, ""},
            JobPlacement{"b", {{0, 1000}, {1, 1000}}, 0, ""}};
  in.active = {g};
  in.queued = {Queued(2, 2)};  // guaranteed: needs one node's GPUs
  const Decision d = RunPass(in);
  const Action* stop = Find(d, 1);
  ASSERT_NE(stop, nullptr);
  EXPECT_EQ(stop->kind, Action::Kind::kStop);
  EXPECT_EQ(stop->for_job, 2);
  EXPECT_TRUE(stop->running);
  int stops = 0;
  for (const Action& a : d.actions) stops += a.kind == Action::Kind::kStop;
  EXPECT_EQ(stops, 1);  // one action stops every part
  EXPECT_EQ(d.stats.preempted, 1);
}

TEST(GangPass, AGuaranteedGangPreemptsAsOneJobOnlyWhereItsPartsGo) {
  for (const std::string& policy : scheduler::PlacementPolicyNames()) {
    SCOPED_TRACE(policy);
    PassInput in;
    in.nodes = {Node("a", 2), Node("b", 2), Node("c", 2)};
    // Preemptible work fills a and b (three jobs); guaranteed work fills c.
    in.active = {Running(Queued(10, 2, true), "a", {0, 1}, 1000, 10),
                 Running(Queued(11, 1, true), "b", {0}, 1000, 11),
                 Running(Queued(12, 1, true), "b", {1}, 1000, 12),
                 Running(Queued(13, 2), "c", {0, 1}, 1000, 13)};
    in.queued = {Gang(1, 2, 2)};
    Decision d = RunPass(in, policy);
    std::set<int64_t> stopped;
    for (const Action& a : d.actions) {
      ASSERT_EQ(a.kind, Action::Kind::kStop) << a.job;
      EXPECT_EQ(a.for_job, 1);
      EXPECT_TRUE(a.running);
      stopped.insert(a.job);
    }
    EXPECT_EQ(stopped, (std::set<int64_t>{10, 11, 12}));
    EXPECT_EQ(d.stats.preempting, 1);
    EXPECT_EQ(d.stats.preempted, 3);
    ASSERT_TRUE(d.reasons.count(1));
    EXPECT_EQ(d.reasons.at(1), "waiting for 3 preempted job(s) to stop");

    // The next pass, while they stop: nothing more is stopped and the gang waits for them.
    for (JobView& j : in.active) {
      if (stopped.count(j.id)) {
        j.phase = JobPhase::kCancelling;
        j.preempted_by = 1;
      }
    }
    d = RunPass(in, policy);
    EXPECT_EQ(d.stats.preempted, 0);
    EXPECT_EQ(d.stats.placed, 0);
    ASSERT_TRUE(d.reasons.count(1));
    EXPECT_EQ(d.reasons.at(1), "waiting for preempted jobs to stop");

    // Once they are gone the gang is placed on a and b.
    in.active = {in.active[3]};
    d = RunPass(in, policy);
    const Action* a = Find(d, 1);
    ASSERT_NE(a, nullptr);
    ASSERT_EQ(a->gang.size(), 2u);
    EXPECT_EQ((std::set<std::string>{a->gang[0].placement.node, a->gang[1].placement.node}),
              (std::set<std::string>{"a", "b"}));
  }
}

TEST(GangPass, AGangDoesNotPreemptWhatItMayNot) {
  PassInput in;
  in.nodes = {Node("a", 2), Node("b", 2)};
  // A higher-priority preemptible job on b: the gang may not stop it, so it stops nothing.
  in.active = {Running(Queued(10, 2, true), "a", {0, 1}, 1000, 10),
               Running(Queued(11, 2, true, /*priority=*/5), "b", {0, 1}, 1000, 11)};
  in.queued = {Gang(1, 2, 2)};
  const Decision d = RunPass(in);
  EXPECT_TRUE(d.actions.empty());
  ASSERT_TRUE(d.reasons.count(1));
  EXPECT_NE(d.reasons.at(1).find("waiting for resources: 0 of 2 parts"), std::string::npos)
      << d.reasons.at(1);
  // A preemptible gang never preempts.
  in.active[1].priority = 0;
  in.queued = {Gang(2, 2, 2, /*preemptible=*/true)};
  EXPECT_TRUE(RunPass(in).actions.empty());
}

TEST(GangPass, AGangIsNotAdmittedBeyondCapacity) {
  PassInput in;
  in.nodes = {Node("a", 2), Node("b", 2)};
  // Every GPU half committed: at 1.5 : 1 a preemptible whole-GPU job may share any of them.
  int64_t id = 10;
  for (const char* node : {"a", "b"}) {
    for (uint8_t gpu = 0; gpu < 2; ++gpu) {
      JobView half = Queued(id++, 0);
      half.gpu_milli = 500;
      half.phase = JobPhase::kRunning;
      half.placement = JobPlacement{node, {{gpu, 500}}, 0, ""};
      in.active.push_back(half);
    }
  }
  in.queued = {Gang(2, 2, 2, /*preemptible=*/true), Queued(3, 2, /*preemptible=*/true)};
  const Decision d = RunPass(in, "bestfit", 1500);
  EXPECT_EQ(Find(d, 2), nullptr);  // the gang waits ...
  ASSERT_TRUE(d.reasons.count(2));
  const Action* three = Find(d, 3);  // ... where a one-node preemptible job shares GPUs
  ASSERT_NE(three, nullptr);
  EXPECT_TRUE(three->assignment.oversubscribed);
  EXPECT_EQ(d.stats.oversubscribed, 1);
}

TEST(GangPass, CpuOnlyPartsStayOffTheMigSideOfTheirNode) {
  PassInput in;
  // Each node is two scheduler nodes (plain GPUs and MIG GPUs) sharing CPU and memory.
  in.nodes = {Node("a", 2, "H100", 2), Node("b", 2, "H100", 2)};
  JobView g = Gang(1, 2, 0);
  in.queued = {g};
  Decision d = RunPass(in);
  const Action* a = Find(d, 1);
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->gang.size(), 2u);
  EXPECT_NE(a->gang[0].placement.node, a->gang[1].placement.node);
  g.id = 2;
  g.nodes = 3;
  in.queued = {g};
  d = RunPass(in);
  ASSERT_TRUE(d.reasons.count(2));
  EXPECT_NE(d.reasons.at(2).find("needs 3 machines"), std::string::npos) << d.reasons.at(2);
}

}  // namespace
}  // namespace stoker::pass
