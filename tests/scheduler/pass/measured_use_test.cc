// Placement by measured use in the scheduling pass: the weighted policy's utilization is the
// GPUs' measured activity where the view has it (allocation where not) and the decision says
// which; oversubscription admits preemptible work beyond capacity only with measured headroom
// over the whole window; without measurements every decision is as before.

#include <gtest/gtest.h>

#include "pass_views.h"

namespace stoker::pass {
namespace {

constexpr int64_t kWindow = 300000;

using testing::Find;
using testing::Node;
using testing::Queued;
using testing::Running;

void Measure(NodeView& n, int32_t busy_milli, int64_t covered_ms = kWindow) {
  for (GpuView& g : n.gpus) g.activity = GpuActivity{busy_milli, covered_ms};
}

// A queued job of `gpus` whole GPUs, or of a `gpu_milli` share of one.
JobView Job(int64_t id, int gpus, int32_t gpu_milli = 0, bool preemptible = false) {
  JobView j = Queued(id, gpus, preemptible);
  j.gpu_milli = gpu_milli;
  return j;
}

Decision RunPass(const PassInput& in, const std::string& policy, int32_t ratio = 1000) {
  return testing::RunPass(in, policy, ratio, kWindow);
}

// Two 4-GPU nodes, each with a 2-GPU job: equal by allocation.
PassInput HalfUsed() {
  PassInput in;
  in.nodes = {Node("a", 4), Node("b", 4)};
  in.active = {Running(Job(1, 2), "a", {0, 1}, 1000), Running(Job(2, 2), "b", {0, 1}, 1000)};
  in.queued = {Job(3, 1)};
  return in;
}

TEST(MeasuredUse, WeightedGoesByAllocationWithoutMeasurements) {
  const Decision d = RunPass(HalfUsed(), "weighted");
  const Action* a = Find(d, 3);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->assignment.placement.node, "a");  // a tie: the first node
  EXPECT_EQ(a->assignment.basis, "u of a 50 %: allocated share (its GPUs report no activity)");
}

TEST(MeasuredUse, WeightedGoesByMeasuredUtilizationWhereReported) {
  PassInput in = HalfUsed();
  Measure(in.nodes[0], 900);  // a: its jobs keep the GPUs busy (and more)
  Measure(in.nodes[1], 50);   // b: its job barely uses its GPUs
  const Decision d = RunPass(in, "weighted");
  const Action* a = Find(d, 3);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->assignment.placement.node, "b");
  EXPECT_EQ(a->assignment.basis, "u of b 5 %: measured use");
  // Measured on one node only: the other goes by allocation (50 %), still above 5 %.
  in.nodes[0].gpus[2].activity.reset();
  in.nodes[0].gpus[3].activity.reset();
  const Decision mixed = RunPass(in, "weighted");
  ASSERT_NE(Find(mixed, 3), nullptr);
  EXPECT_EQ(Find(mixed, 3)->assignment.placement.node, "b");
}

TEST(MeasuredUse, WhatAPassPlacesCountsAsBusy) {
  PassInput in;
  in.nodes = {Node("a", 4), Node("b", 4)};
  in.active = {Running(Job(1, 1), "a", {0}, 1000), Running(Job(2, 1), "b", {0}, 1000)};
  Measure(in.nodes[0], 300);
  Measure(in.nodes[1], 0);
  in.queued = {Job(3, 2), Job(4, 1)};
  const Decision d = RunPass(in, "weighted");
  ASSERT_NE(Find(d, 3), nullptr);
  ASSERT_NE(Find(d, 4), nullptr);
  EXPECT_EQ(Find(d, 3)->assignment.placement.node, "b");
  EXPECT_EQ(Find(d, 3)->assignment.basis, "u of b 0 %: measured use");
  // The 2 GPUs placed on b this pass count in full for the next decision (not their 0 %).
  EXPECT_EQ(Find(d, 4)->assignment.placement.node, "b");
  EXPECT_EQ(Find(d, 4)->assignment.basis, "u of b 50 %: measured use");
}

TEST(MeasuredUse, PoliciesThatDoNotUseUtilizationAreUnchanged) {
  for (const std::string& policy : scheduler::PlacementPolicyNames()) {
    if (policy == "weighted") continue;
    SCOPED_TRACE(policy);
    PassInput in = HalfUsed();
    const Decision plain = RunPass(in, policy);
    Measure(in.nodes[0], 900);
    Measure(in.nodes[1], 50);
    const Decision measured = RunPass(in, policy);
    ASSERT_EQ(plain.actions.size(), measured.actions.size());
    for (size_t i = 0; i < plain.actions.size(); ++i) {
      EXPECT_EQ(plain.actions[i].assignment.placement.node,
                measured.actions[i].assignment.placement.node);
      EXPECT_EQ(plain.actions[i].assignment.gpu_indices,
                measured.actions[i].assignment.gpu_indices);
      EXPECT_TRUE(measured.actions[i].assignment.basis.empty());
    }
  }
}

// Two 1-GPU nodes, each GPU held by a guaranteed job; a preemptible share of 400 at 1.5 : 1.
PassInput FullGpus() {
  PassInput in;
  in.nodes = {Node("a", 1), Node("b", 1)};
  in.active = {Running(Job(1, 1), "a", {0}, 1000), Running(Job(2, 1), "b", {0}, 1000)};
  in.queued = {Job(3, 0, 400, /*preemptible=*/true)};
  return in;
}

TEST(MeasuredUse, OversubscriptionWithoutMeasurementsGoesByCommitments) {
  const Decision d = RunPass(FullGpus(), "bestfit", 1500);
  const Action* a = Find(d, 3);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->assignment.oversubscribed);
  EXPECT_EQ(a->assignment.basis, "beyond capacity by commitments (GPU 0 unmeasured)");
}

TEST(MeasuredUse, OversubscriptionNeedsMeasuredHeadroom) {
  PassInput in = FullGpus();
  Measure(in.nodes[0], 900);  // 10 % headroom: not enough for 40 %
  Measure(in.nodes[1], 700);  // 30 %: not enough either
  Decision d = RunPass(in, "bestfit", 1500);
  EXPECT_EQ(Find(d, 3), nullptr);
  ASSERT_TRUE(d.reasons.count(3));
  EXPECT_NE(d.reasons.at(3).find("beyond capacity only with measured headroom over the window"),
            std::string::npos)
      << d.reasons.at(3);
  Measure(in.nodes[1], 600);  // 40 %: room for the share
  d = RunPass(in, "bestfit", 1500);
  const Action* a = Find(d, 3);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->assignment.placement.node, "b");
  EXPECT_TRUE(a->assignment.oversubscribed);
  EXPECT_EQ(a->assignment.basis, "beyond capacity by measured headroom (GPU 0 measured 60 % busy)");
  // Two shares in one pass: the first one's 40 % counts as busy for the second.
  in.queued.push_back(Job(4, 0, 400, true));
  Measure(in.nodes[1], 100);
  d = RunPass(in, "bestfit", 1500);
  ASSERT_NE(Find(d, 3), nullptr);
  EXPECT_EQ(Find(d, 4), nullptr);  // 10 % + 40 % + 40 % fits, but 1.0 + 0.4 + 0.4 > 1.5
  // Refused by measured use alone: b at 70 % takes one 20 % share (90 %) but not a second
  // (70 % + 20 % + 20 % > 100 %), though the ratio would take both (1.0 + 0.2 + 0.2 <= 1.5).
  // Without the first share counted as busy in this pass, the second would be placed too.
  in.queued = {Job(3, 0, 200, true), Job(4, 0, 200, true)};
  Measure(in.nodes[1], 700);
  d = RunPass(in, "bestfit", 1500);
  ASSERT_NE(Find(d, 3), nullptr);
  EXPECT_EQ(Find(d, 3)->assignment.placement.node, "b");
  EXPECT_EQ(Find(d, 4), nullptr);
  ASSERT_TRUE(d.reasons.count(4));
  EXPECT_NE(d.reasons.at(4).find("measured headroom"), std::string::npos) << d.reasons.at(4);
}

TEST(MeasuredUse, OversubscriptionNeedsTheWholeWindow) {
  PassInput in = FullGpus();
  Measure(in.nodes[0], 0, kWindow / 2);  // idle, but measured for half the window only
  Measure(in.nodes[1], 0, kWindow / 2);
  Decision d = RunPass(in, "bestfit", 1500);
  EXPECT_EQ(Find(d, 3), nullptr);
  Measure(in.nodes[1], 0, kWindow);
  d = RunPass(in, "bestfit", 1500);
  ASSERT_NE(Find(d, 3), nullptr);
  EXPECT_EQ(Find(d, 3)->assignment.placement.node, "b");
  // Within capacity a GPU measured over part of the window still takes a share.
  in = FullGpus();
  in.active.pop_back();  // b's GPU is free
  Measure(in.nodes[1], 0, 1000);
  d = RunPass(in, "bestfit", 1500);
  ASSERT_NE(Find(d, 3), nullptr);
  EXPECT_FALSE(Find(d, 3)->assignment.oversubscribed);
}

}  // namespace
}  // namespace stoker::pass
