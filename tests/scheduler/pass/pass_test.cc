// The scheduling pass as a pure function: a view in, a decision out (scheduler/pass/pass.h).

#include "scheduler/pass/pass.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "pass_views.h"
#include "scheduler/registry.h"

namespace stoker::pass {
namespace {

using testing::Node;
using testing::Queued;
using testing::Running;

JobView Share(int64_t id, int32_t milli, bool preemptible) {
  JobView j = Queued(id, 0, preemptible);
  j.gpu_milli = milli;
  return j;
}

class PassTest : public ::testing::Test {
 protected:
  Decision Run(const PassInput& in, const std::string& policy = "bestfit", int32_t ratio = 1000,
               bool backfill = true) {
    auto pol = scheduler::CreatePlacementPolicy(policy, scheduler::PolicyConfig{});
    EXPECT_TRUE(pol.ok());
    SchedulingPass pass(std::move(*pol));
    auto fifo = queue::CreateQueuePolicy("fifo");
    EXPECT_TRUE(fifo.ok());
    return pass.Run(in, **fifo, PassOptions{policy, backfill, ratio});
  }
  static const Action* Find(const Decision& d, int64_t job) {
    for (const Action& a : d.actions) {
      if (a.job == job) return &a;
    }
    return nullptr;
  }
};

TEST_F(PassTest, PlacesWholeGpusAndSaysWhereAndWhich) {
  PassInput in;
  in.nodes = {Node("a", 2), Node("b", 4)};
  in.queued = {Queued(1, 4), Queued(2, 2)};
  const Decision d = Run(in);
  ASSERT_EQ(d.stats.placed, 2);
  const Action* four = Find(d, 1);
  ASSERT_NE(four, nullptr);
  EXPECT_EQ(four->kind, Action::Kind::kAssign);
  EXPECT_EQ(four->assignment.placement.node, "b");
  EXPECT_EQ(four->assignment.cuda_visible_devices, "0,1,2,3");
  EXPECT_EQ(four->assignment.placement.shares.size(), 4u);
  const Action* two = Find(d, 2);
  ASSERT_NE(two, nullptr);
  EXPECT_EQ(two->assignment.placement.node, "a");
  EXPECT_TRUE(d.reasons.empty());
}

// Names are how a decision names nodes: a name listed again is not a second machine, and the
// pass says so instead of placing on it.
TEST_F(PassTest, ANodeNameListedTwiceIsPlacedOnOnce) {
  PassInput in;
  in.nodes = {Node("a", 2), Node("a", 4), Node("a", 8)};
  in.queued = {Queued(1, 4), Queued(2, 2)};
  const Decision d = Run(in);
  EXPECT_EQ(d.stats.placed, 1);
  const Action* two = Find(d, 2);
  ASSERT_NE(two, nullptr);
  EXPECT_EQ(two->assignment.placement.node, "a");
  EXPECT_EQ(two->assignment.cuda_visible_devices, "0,1");
  EXPECT_EQ(Find(d, 1), nullptr);
  ASSERT_EQ(d.warnings.size(), 2u);
  EXPECT_NE(d.warnings[0].find("node a not schedulable: the name is listed twice"),
            std::string::npos)
      << d.warnings[0];
}

TEST_F(PassTest, DrainedAndLostNodesHostNothingNew) {
  PassInput in;
  in.nodes = {Node("a", 4), Node("b", 4)};
  in.nodes[0].drained = true;
  in.nodes[1].lost = true;
  in.queued = {Queued(1, 1)};
  const Decision d = Run(in);
  EXPECT_EQ(d.stats.placed, 0);
  EXPECT_TRUE(d.actions.empty());
  ASSERT_TRUE(d.reasons.count(1));
  EXPECT_NE(d.reasons.at(1).find("no node can ever run this"), std::string::npos);
}

TEST_F(PassTest, ActiveJobsHoldTheirGpus) {
  PassInput in;
  in.nodes = {Node("a", 2)};
  in.active = {Running(Queued(1, 2), "a", {0, 1}, 1000, 5)};
  in.queued = {Queued(2, 1)};
  const Decision d = Run(in);
  EXPECT_EQ(d.stats.placed, 0);
  EXPECT_EQ(d.stats.blocked, 1);
  EXPECT_EQ(d.reasons.at(2).rfind("waiting for resources", 0), 0u);
}

TEST_F(PassTest, SaysWhyEachJobWaits) {
  PassInput in;
  in.nodes = {Node("a", 2)};
  JobView model = Queued(3, 1);
  model.gpu_models = {"B200"};  // no node has one
  in.active = {Running(Queued(9, 2), "a", {0, 1}, 1000, 1)};
  in.queued = {Queued(1, 9), Queued(2, 1), model, Queued(4, 1)};
  const Decision d = Run(in);
  EXPECT_EQ(d.stats.infeasible, 2);
  EXPECT_EQ(d.stats.blocked, 2);
  EXPECT_NE(d.reasons.at(1).find("no node can ever run this"), std::string::npos);
  EXPECT_NE(d.reasons.at(3).find("no node can ever run this"), std::string::npos);
  EXPECT_EQ(d.reasons.at(2).rfind("waiting for resources", 0), 0u);
  // The same shape after a failed one is not placed again this pass: it waits too.
  EXPECT_EQ(d.reasons.at(4), "waiting for resources");
}

TEST_F(PassTest, StrictQueueStopsAtTheFirstBlockedJob) {
  PassInput in;
  in.nodes = {Node("a", 2)};
  // One GPU free: the 2-GPU job blocks the line unless backfill lets the 1-GPU job by.
  in.active = {Running(Queued(9, 1), "a", {0}, 1000, 1)};
  in.queued = {Queued(1, 2), Queued(2, 1)};
  const Decision strict = Run(in, "bestfit", 1000, /*backfill=*/false);
  EXPECT_EQ(strict.stats.placed, 0);
  EXPECT_FALSE(strict.reasons.count(2));
  const Decision greedy = Run(in, "bestfit", 1000, /*backfill=*/true);
  EXPECT_EQ(greedy.stats.placed, 1);
  ASSERT_NE(Find(greedy, 2), nullptr);
}

TEST_F(PassTest, GangsAreAllOrNothingAndElasticJobsShrink) {
  PassInput in;
  in.nodes = {Node("a", 4)};
  in.active = {Running(Queued(9, 1), "a", {0}, 1000, 1)};
  JobView rigid = Queued(1, 4);
  JobView elastic = Queued(2, 4);
  elastic.min_gpus = 2;
  // Three GPUs free: the rigid 4-GPU job gets none of them...
  in.queued = {rigid};
  const Decision d = Run(in);
  EXPECT_TRUE(d.actions.empty());
  EXPECT_EQ(d.reasons.at(1).rfind("waiting for resources", 0), 0u);
  // ...the elastic one takes three.
  in.queued = {elastic};
  const Decision e = Run(in);
  ASSERT_EQ(e.actions.size(), 1u);
  EXPECT_EQ(e.actions[0].assignment.gpu_indices, (std::vector<uint32_t>{1, 2, 3}));
}

TEST_F(PassTest, GuaranteedWorkPreemptsTheLowestPriorityLatestStarted) {
  PassInput in;
  in.nodes = {Node("a", 3)};
  in.active = {Running(Queued(1, 1, true, 5), "a", {0}, 1000, 10),
               Running(Queued(2, 1, true, 0), "a", {1}, 1000, 20),
               Running(Queued(3, 1, true, 0), "a", {2}, 1000, 30)};
  in.queued = {Queued(4, 1, false, 0)};
  const Decision d = Run(in);
  EXPECT_EQ(d.stats.placed, 0);
  EXPECT_EQ(d.stats.preempting, 1);
  EXPECT_EQ(d.stats.preempted, 1);
  ASSERT_EQ(d.actions.size(), 1u);
  EXPECT_EQ(d.actions[0].kind, Action::Kind::kStop);
  EXPECT_EQ(d.actions[0].job, 3);  // priority 0, started last
  EXPECT_EQ(d.actions[0].for_job, 4);
  EXPECT_TRUE(d.actions[0].running);
  EXPECT_EQ(d.reasons.at(4), "waiting for 1 preempted job(s) to stop");

  // While it stops, the next pass picks no further victim.
  in.active[2].phase = JobPhase::kCancelling;
  in.active[2].preempted_by = 4;
  const Decision again = Run(in);
  EXPECT_TRUE(again.actions.empty());
  EXPECT_EQ(again.reasons.at(4), "waiting for preempted jobs to stop");
}

TEST_F(PassTest, NeverPreemptsGuaranteedOrHigherPriorityWork) {
  PassInput in;
  in.nodes = {Node("a", 2)};
  in.active = {Running(Queued(1, 1, false, 0), "a", {0}, 1000, 10),
               Running(Queued(2, 1, true, 9), "a", {1}, 1000, 20)};
  in.queued = {Queued(3, 1, false, 1), Queued(4, 1, true, 0)};
  const Decision d = Run(in);
  EXPECT_TRUE(d.actions.empty());
  EXPECT_EQ(d.stats.preempted, 0);
  EXPECT_EQ(d.reasons.at(3).rfind("waiting for resources", 0), 0u);
}

TEST_F(PassTest, AnUnstartedVictimIsRequeuedNotStopped) {
  PassInput in;
  in.nodes = {Node("a", 1)};
  JobView assigned = Running(Queued(1, 1, true), "a", {0}, 1000, 0);
  assigned.phase = JobPhase::kAssigned;
  in.active = {assigned};
  in.queued = {Queued(2, 1)};
  const Decision d = Run(in);
  ASSERT_EQ(d.actions.size(), 1u);
  EXPECT_EQ(d.actions[0].job, 1);
  EXPECT_FALSE(d.actions[0].running);
}

TEST_F(PassTest, OversubscriptionAdmitsPreemptibleWorkUpToTheRatio) {
  PassInput in;
  in.nodes = {Node("a", 1)};
  in.active = {Running(Queued(1, 1, true), "a", {0}, 1000, 10)};
  in.queued = {Share(2, 500, true), Share(3, 1, true)};
  // Off: nothing more fits on a full GPU.
  const Decision off = Run(in);
  EXPECT_EQ(off.stats.placed, 0);
  // 1.5:1: a share of 500 brings the GPU to 1500; not one milli more.
  const Decision on = Run(in, "bestfit", 1500);
  EXPECT_EQ(on.stats.placed, 1);
  EXPECT_EQ(on.stats.oversubscribed, 1);
  const Action* a = Find(on, 2);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->assignment.oversubscribed);
  EXPECT_EQ(a->assignment.env.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "50");
  EXPECT_EQ(Find(on, 3), nullptr);
  EXPECT_TRUE(on.reasons.count(3));
  // Guaranteed work is never admitted beyond capacity.
  in.queued = {Share(4, 100, false)};
  const Decision g = Run(in, "bestfit", 1500);
  EXPECT_EQ(g.stats.placed, 0);
  EXPECT_EQ(g.stats.oversubscribed, 0);
  EXPECT_EQ(g.stats.preempting, 1);
}

TEST_F(PassTest, GuaranteedWorkStopsPreemptibleSharesBeyondCapacity) {
  PassInput in;
  in.nodes = {Node("a", 1)};
  // The GPU carries 1000 + 500 of preemptible work; a guaranteed share of 600 needs both
  // gone... or only as many as bring it within one GPU: the younger 500 and the 1000.
  in.active = {Running(Queued(1, 1, true), "a", {0}, 1000, 10),
               Running(Share(2, 500, true), "a", {0}, 500, 20)};
  in.queued = {Share(3, 600, false)};
  const Decision d = Run(in, "bestfit", 1500);
  EXPECT_EQ(d.stats.preempting, 1);
  std::set<int64_t> stopped;
  for (const Action& a : d.actions) {
    EXPECT_EQ(a.kind, Action::Kind::kStop);
    stopped.insert(a.job);
  }
  EXPECT_EQ(stopped, (std::set<int64_t>{1, 2}));
  // A guaranteed share of 400 needs only the 1000 gone... the 500 stays (400 + 500 <= 1000).
  in.queued = {Share(4, 400, false)};
  const Decision small = Run(in, "bestfit", 1500);
  ASSERT_EQ(small.actions.size(), 1u);
  EXPECT_EQ(small.actions[0].job, 1);
}

TEST_F(PassTest, MigInstancesAreTakenOnce) {
  PassInput in;
  in.nodes = {Node("a", 1, "A100", 1)};
  JobView m1 = Queued(1, 0);
  m1.mig = "2g.20gb";
  JobView m2 = m1;
  m2.id = 2;
  m2.submit_ms = 2;
  in.queued = {m1, m2};
  const Decision d = Run(in);
  ASSERT_EQ(d.stats.placed, 2);
  EXPECT_NE(Find(d, 1)->assignment.placement.mig_uuid, Find(d, 2)->assignment.placement.mig_uuid);
  EXPECT_EQ(Find(d, 1)->assignment.cuda_visible_devices, Find(d, 1)->assignment.placement.mig_uuid);
}

TEST_F(PassTest, SameViewSameDecision) {
  PassInput in;
  for (int i = 0; i < 20; ++i) in.nodes.push_back(Node("n" + std::to_string(i), 1 + i % 8));
  for (int i = 0; i < 60; ++i) {
    JobView j = (i % 3 == 0) ? Share(i + 1, 100 * (1 + i % 9), i % 2 == 0)
                             : Queued(i + 1, 1 + i % 4, i % 2 == 0, i % 3);
    in.queued.push_back(j);
  }
  const PassInput copy = in;
  const Decision a = Run(in, std::string(scheduler::kDefaultPolicyName), 1500);
  const Decision b = Run(in, std::string(scheduler::kDefaultPolicyName), 1500);
  ASSERT_EQ(a.actions.size(), b.actions.size());
  for (size_t i = 0; i < a.actions.size(); ++i) {
    EXPECT_EQ(a.actions[i].job, b.actions[i].job);
    EXPECT_EQ(a.actions[i].assignment.placement.node, b.actions[i].assignment.placement.node);
    EXPECT_EQ(a.actions[i].assignment.gpu_indices, b.actions[i].assignment.gpu_indices);
  }
  EXPECT_EQ(a.reasons, b.reasons);
  EXPECT_GT(a.stats.placed, 0);
  EXPECT_EQ(in.queued.size(), copy.queued.size());
}

// The queue policy orders the queued jobs, whatever order the caller lists them in (FIFO: by
// submission).
TEST_F(PassTest, QueuedJobsListedOutOfOrderAreWalkedInTheQueuePolicysOrder) {
  PassInput in;
  in.nodes = {Node("a", 2)};
  in.queued = {Queued(3, 1), Queued(1, 1), Queued(2, 1)};
  const Decision d = Run(in, "bestfit", 1000, /*backfill=*/false);
  ASSERT_EQ(d.actions.size(), 2u);
  EXPECT_EQ(d.actions[0].job, 1);
  EXPECT_EQ(d.actions[1].job, 2);
  EXPECT_EQ(d.reasons.count(3), 1u);
}

// A job listed twice in the queue is one job, as its first view describes it: one decision at
// most, for the shape the first view asks for, in the place its first view's key gives it.
TEST_F(PassTest, AJobQueuedTwiceCountsOnceWithItsFirstView) {
  PassInput in;
  in.nodes = {Node("a", 2)};
  JobView earlier = Queued(5, 8);
  earlier.submit_ms = 0;  // would come first in FIFO order
  in.queued = {Queued(5, 1), Queued(4, 1), earlier};
  Decision d = Run(in);
  ASSERT_EQ(d.actions.size(), 2u);
  EXPECT_EQ(d.actions[0].job, 4);
  EXPECT_EQ(d.actions[1].job, 5);
  EXPECT_EQ(d.actions[1].assignment.gpu_indices.size(), 1u);
  in.queued = {Queued(5, 8), Queued(4, 1), Queued(5, 1)};
  d = Run(in);
  ASSERT_EQ(d.actions.size(), 1u);
  EXPECT_EQ(d.actions[0].job, 4);
  EXPECT_EQ(d.reasons.count(5), 1u);
}

// Each action names the view it was decided on, as the caller gave it (the caller checks its job
// against that view before applying it): a placement, a gang's, a stop whose victim the pass
// marked stopping in its own copy, and a job listed twice by its first view.
TEST_F(PassTest, EveryActionNamesTheInputViewItWasDecidedOn) {
  PassInput in;
  in.nodes = {Node("a", 3), Node("c", 2), Node("d", 2), Node("e", 1)};
  in.active = {Running(Queued(1, 1, true, 5), "a", {0}, 1000, 10),
               Running(Queued(2, 1, true, 0), "a", {1}, 1000, 20),
               Running(Queued(3, 1, true, 0), "a", {2}, 1000, 30)};
  JobView one = Queued(5, 1);
  one.submit_ms = 1;
  JobView gang = Queued(6, 2);
  gang.nodes = 2;
  gang.submit_ms = 2;
  JobView guaranteed = Queued(4, 1);
  guaranteed.submit_ms = 3;
  JobView again = Queued(5, 2);
  again.submit_ms = 4;
  in.queued = {guaranteed, again, gang, one};
  std::swap(in.queued[1], in.queued[3]);  // the first view of job 5 asks for one GPU
  const Decision d = Run(in);
  ASSERT_EQ(d.actions.size(), 3u);
  EXPECT_EQ(d.actions[0].job, 5);
  EXPECT_EQ(d.actions[1].job, 6);
  EXPECT_EQ(d.actions[1].gang.size(), 2u);
  EXPECT_EQ(d.actions[2].kind, Action::Kind::kStop);
  EXPECT_EQ(d.actions[2].job, 3);
  EXPECT_EQ(d.actions[0].view, &in.queued[1]);
  EXPECT_EQ(d.actions[1].view, &in.queued[2]);
  EXPECT_EQ(d.actions[2].view, &in.active[2]);
  EXPECT_EQ(d.actions[2].view->phase, JobPhase::kRunning);  // not the pass's stopping copy
}

// A pass given back the storage of an earlier decision (Recycle) decides as a fresh one.
TEST_F(PassTest, APassIntoARecycledDecisionDecidesAsAFreshOne) {
  PassInput in;
  for (int i = 0; i < 12; ++i) in.nodes.push_back(Node("n" + std::to_string(i), 1 + i % 8));
  for (int i = 0; i < 40; ++i) {
    in.queued.push_back((i % 3 == 0) ? Share(i + 1, 100 * (1 + i % 9), i % 2 == 0)
                                     : Queued(i + 1, 1 + i % 4, i % 2 == 0, i % 3));
  }
  const std::string policy(scheduler::kDefaultPolicyName);
  auto fifo = queue::CreateQueuePolicy("fifo");
  ASSERT_TRUE(fifo.ok());
  auto fresh_pass = [&] {
    return SchedulingPass(scheduler::CreatePlacementPolicy(policy, {}).value());
  };
  SchedulingPass recycling = fresh_pass();
  PassInput crowded = in;  // a first pass over more jobs leaves more storage behind
  for (int i = 40; i < 200; ++i) crowded.queued.push_back(Queued(i + 1, 1));
  recycling.Recycle(recycling.Run(crowded, **fifo, PassOptions{policy, true, 1500}));
  recycling.KeepCluster(false);  // the same cluster as a fresh pass's, from the input
  const Decision a = recycling.Run(in, **fifo, PassOptions{policy, true, 1500});
  SchedulingPass other = fresh_pass();
  const Decision b = other.Run(in, **fifo, PassOptions{policy, true, 1500});
  ASSERT_GT(b.actions.size(), 0u);
  ASSERT_EQ(a.actions.size(), b.actions.size());
  for (size_t i = 0; i < a.actions.size(); ++i) {
    EXPECT_EQ(a.actions[i].job, b.actions[i].job);
    EXPECT_EQ(a.actions[i].assignment.placement.node, b.actions[i].assignment.placement.node);
    EXPECT_EQ(a.actions[i].assignment.gpu_indices, b.actions[i].assignment.gpu_indices);
    EXPECT_EQ(a.actions[i].assignment.basis, b.actions[i].assignment.basis);
  }
  EXPECT_EQ(a.reasons, b.reasons);
}

// Counts the placement decisions it is asked for (for the sink's test: how far the pass had got
// when it handed actions over).
class CountingPolicy : public scheduler::PlacementPolicy {
 public:
  CountingPolicy(std::unique_ptr<scheduler::PlacementPolicy> inner, int* places)
      : inner_(std::move(inner)), places_(places) {}
  std::string_view Name() const override { return inner_->Name(); }
  scheduler::PlacementResult Place(const scheduler::Request& r,
                                   const scheduler::ClusterState& cluster) override {
    ++*places_;
    return inner_->Place(r, cluster);
  }
  void Observe(const scheduler::Request& r) override { inner_->Observe(r); }
  bool UsesUtilization() const override { return inner_->UsesUtilization(); }

 private:
  std::unique_ptr<scheduler::PlacementPolicy> inner_;
  int* places_;
};

// A pass with a sink hands its actions over while it still decides, `every` at a time, in the
// order taken, each once; the rest stays for the caller. Taking them (moving from them) changes
// nothing the pass decides after: the decision is the one a pass without a sink makes.
TEST_F(PassTest, HandsItsActionsOverWhileItStillDecides) {
  PassInput in;
  for (int i = 0; i < 12; ++i) in.nodes.push_back(Node("n" + std::to_string(i), 1 + i % 8));
  // Preemptible jobs holding GPUs, stopped for guaranteed ones: stops among the actions.
  in.active = {Running(Queued(901, 1, true), "n0", {0}, 1000, 10),
               Running(Queued(902, 2, true), "n1", {0, 1}, 1000, 20)};
  for (int i = 0; i < 60; ++i) {
    in.queued.push_back((i % 3 == 0) ? Share(i + 1, 100 * (1 + i % 9), i % 2 == 0)
                                     : Queued(i + 1, 1 + i % 4, i % 2 == 0, i % 3));
  }
  const std::string policy = "bestfit";
  auto fifo = queue::CreateQueuePolicy("fifo");
  ASSERT_TRUE(fifo.ok());
  const Decision whole = Run(in, policy, 1500);

  int places = 0;
  SchedulingPass pass(std::make_unique<CountingPolicy>(
      scheduler::CreatePlacementPolicy(policy, {}).value(), &places));
  struct Taken {
    int64_t job;
    Action::Kind kind;
    std::string node;
    std::vector<uint32_t> gpus;
  };
  std::vector<Taken> taken;
  std::vector<int> places_when_handed;
  ActionSink sink;
  sink.every = 4;
  sink.take = [&](std::span<Action> acts) {
    EXPECT_EQ(acts.size(), 4u);
    places_when_handed.push_back(places);
    for (Action& a : acts) {
      taken.push_back(
          Taken{a.job, a.kind, a.assignment.placement.node, std::move(a.assignment.gpu_indices)});
      a.assignment = Grant{};  // taken: what the pass left there is the caller's now
    }
  };
  Decision d = pass.Run(in, **fifo, PassOptions{policy, true, 1500}, sink);

  ASSERT_GE(whole.actions.size(), 12u);
  int stops = 0;
  for (const Action& a : whole.actions) stops += a.kind == Action::Kind::kStop;
  EXPECT_GT(stops, 0);
  ASSERT_EQ(d.actions.size(), whole.actions.size());
  EXPECT_EQ(d.handed, taken.size());
  EXPECT_EQ(d.handed, whole.actions.size() / 4 * 4);  // the rest (fewer than 4) stays
  for (size_t i = d.handed; i < d.actions.size(); ++i) {
    taken.push_back(Taken{d.actions[i].job, d.actions[i].kind,
                          d.actions[i].assignment.placement.node,
                          d.actions[i].assignment.gpu_indices});
  }
  for (size_t i = 0; i < whole.actions.size(); ++i) {
    EXPECT_EQ(taken[i].job, whole.actions[i].job) << i;
    EXPECT_EQ(taken[i].kind, whole.actions[i].kind) << i;
    EXPECT_EQ(taken[i].node, whole.actions[i].assignment.placement.node) << i;
    EXPECT_EQ(taken[i].gpus, whole.actions[i].assignment.gpu_indices) << i;
  }
  EXPECT_EQ(d.reasons, whole.reasons);
  EXPECT_EQ(d.stats.placed, whole.stats.placed);
  EXPECT_EQ(d.stats.preempted, whole.stats.preempted);
  // Handed over as they came: the pass had more placements to decide after each part.
  ASSERT_GE(places_when_handed.size(), 2u);
  for (size_t k = 1; k < places_when_handed.size(); ++k) {
    EXPECT_LT(places_when_handed[k - 1], places_when_handed[k]);
  }
  EXPECT_LT(places_when_handed.back(), places);
}

}  // namespace
}  // namespace stoker::pass
