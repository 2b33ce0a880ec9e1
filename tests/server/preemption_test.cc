// Preemption: guaranteed (non-preemptible) work that is queued takes GPUs from preemptible
// jobs, which the node stops like a cancel and the server puts back in the queue.

#include <gtest/gtest.h>

#include <algorithm>

#include "server/server.h"
#include "test_util.h"

namespace stoker::server {
namespace {
using testing::Fixture;
using testing::Spec;

JobReport Report(int64_t id, const std::string& phase, std::optional<int> code = std::nullopt,
                 std::optional<int> signal = std::nullopt) {
  JobReport r;
  r.id = id;
  r.phase = phase;
  r.exit_code = code;
  r.signal = signal;
  r.logs_complete = phase == "exited";
  return r;
}

JobSpec Preemptible(int gpus, int priority = 0) {
  JobSpec s = Spec({"sleep", "1000"}, gpus);
  s.preemptible = true;
  s.priority = priority;
  return s;
}

bool HasEvent(Fixture& f, int64_t id, const std::string& kind) {
  auto ev = f.server->Events(f.admin, id);
  if (!ev.ok()) return false;
  return std::any_of(ev->begin(), ev->end(),
                     [&](const store::EventRow& e) { return e.kind == kind; });
}

// Starts every job the server hands to n1 and reports them running.
// Starts every job the server hands to n1 and reports them (and those already started) running.
void StartAll(Fixture& f, std::vector<int64_t>* running) {
  Heartbeat hb;
  for (int64_t id : *running) hb.jobs.push_back(Report(id, "running"));
  auto reply = f.server->Heartbeat(f.agent, "n1", hb);
  ASSERT_TRUE(reply.ok());
  for (const auto& o : reply->start) {
    running->push_back(o.id);
    hb.jobs.push_back(Report(o.id, "running"));
  }
  ASSERT_TRUE(f.server->Heartbeat(f.agent, "n1", hb).ok());
}

TEST(Preemption, GuaranteedJobPreemptsLowestPriorityLatestStarted) {
  Fixture f("preempt");
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 4)).ok());
  // Three preemptible jobs fill the node: priorities 5, 0, 0 (the last started latest).
  auto high = f.server->Submit(f.bob, Preemptible(2, 5));
  ASSERT_TRUE(high.ok());
  ASSERT_EQ(f.server->RunSchedulingPass().placed, 1);
  std::vector<int64_t> running;
  StartAll(f, &running);
  f.clock.Advance(std::chrono::seconds(1));
  auto early = f.server->Submit(f.bob, Preemptible(1, 0));
  ASSERT_EQ(f.server->RunSchedulingPass().placed, 1);
  StartAll(f, &running);
  f.clock.Advance(std::chrono::seconds(1));
  auto late = f.server->Submit(f.bob, Preemptible(1, 0));
  ASSERT_EQ(f.server->RunSchedulingPass().placed, 1);
  StartAll(f, &running);
  ASSERT_EQ(f.server->GetJob(f.admin, late->id)->state, JobState::kRunning);

  // A guaranteed job needs one GPU: only the latest-started lowest-priority job is stopped.
  auto guaranteed = f.server->Submit(f.alice, Spec({"train"}, 1));
  ASSERT_TRUE(guaranteed.ok());
  PassStats st = f.server->RunSchedulingPass();
  EXPECT_EQ(st.placed, 0);
  EXPECT_EQ(st.preempting, 1);
  auto victim = f.server->GetJob(f.admin, late->id);
  EXPECT_EQ(victim->state, JobState::kCancelling);
  EXPECT_EQ(victim->preempted_by, guaranteed->id);
  EXPECT_EQ(f.server->GetJob(f.admin, early->id)->state, JobState::kRunning);
  EXPECT_EQ(f.server->GetJob(f.admin, high->id)->state, JobState::kRunning);
  EXPECT_TRUE(HasEvent(f, late->id, "preempt"));
  EXPECT_NE(f.server->GetJob(f.admin, guaranteed->id)->reason.find("preempted"), std::string::npos);

  // A second pass does not pick more victims while the first one is stopping.
  EXPECT_EQ(f.server->RunSchedulingPass().preempting, 1);
  EXPECT_EQ(f.server->GetJob(f.admin, early->id)->state, JobState::kRunning);

  // The node is told to stop it (SIGTERM, grace, SIGKILL on the node)...
  Heartbeat hb;
  for (int64_t id : running) hb.jobs.push_back(Report(id, "running"));
  auto reply = f.server->Heartbeat(f.agent, "n1", hb);
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->cancel, std::vector<int64_t>{late->id});

  // ...and when it reports the exit, the job goes back to the queue, not to cancelled.
  hb.jobs = {Report(high->id, "running"), Report(early->id, "running"),
             Report(late->id, "exited", std::nullopt, 15)};
  reply = f.server->Heartbeat(f.agent, "n1", hb);
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->forget, std::vector<int64_t>{late->id});
  auto requeued = f.server->GetJob(f.admin, late->id);
  EXPECT_EQ(requeued->state, JobState::kQueued);
  EXPECT_EQ(requeued->preemptions, 1);
  EXPECT_EQ(requeued->requeues, 1);
  EXPECT_EQ(requeued->preempted_by, 0);
  EXPECT_FALSE(requeued->assignment.has_value());
  EXPECT_TRUE(HasEvent(f, late->id, "requeued"));

  // The freed GPU goes to the guaranteed job, although the requeued job was submitted first.
  st = f.server->RunSchedulingPass();
  EXPECT_EQ(st.placed, 1);
  EXPECT_EQ(f.server->GetJob(f.admin, guaranteed->id)->state, JobState::kAssigned);
  EXPECT_EQ(f.server->GetJob(f.admin, late->id)->state, JobState::kQueued);
}

TEST(Preemption, PreemptionStateSurvivesARestart) {
  Fixture f("preempt_restart");
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 1)).ok());
  auto be = f.server->Submit(f.bob, Preemptible(1));
  ASSERT_EQ(f.server->RunSchedulingPass().placed, 1);
  std::vector<int64_t> running;
  StartAll(f, &running);
  auto g = f.server->Submit(f.alice, Spec({"train"}, 1));
  ASSERT_EQ(f.server->RunSchedulingPass().preempting, 1);
  f.Open();  // server restart: the job is still being preempted for g
  auto after = f.server->GetJob(f.admin, be->id);
  EXPECT_EQ(after->state, JobState::kCancelling);
  EXPECT_EQ(after->preempted_by, g->id);
  Heartbeat hb;
  hb.jobs = {Report(be->id, "exited", std::nullopt, 9)};
  ASSERT_TRUE(f.server->Heartbeat(f.agent, "n1", hb).ok());
  EXPECT_EQ(f.server->GetJob(f.admin, be->id)->state, JobState::kQueued);
  EXPECT_EQ(f.server->RunSchedulingPass().placed, 1);
  EXPECT_EQ(f.server->GetJob(f.admin, g->id)->state, JobState::kAssigned);
}

TEST(Preemption, NeverPreemptsGuaranteedOrHigherPriorityWork) {
  Fixture f("preempt_none");
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 2)).ok());
  auto guaranteed = f.server->Submit(f.bob, Spec({"a"}, 1));
  auto important = f.server->Submit(f.bob, Preemptible(1, 10));
  ASSERT_EQ(f.server->RunSchedulingPass().placed, 2);
  std::vector<int64_t> running;
  StartAll(f, &running);
  // A preemptible job never preempts; a guaranteed one does not take a higher-priority job.
  auto be = f.server->Submit(f.alice, Preemptible(1, 100));
  auto low = f.server->Submit(f.alice, Spec({"b"}, 1));
  PassStats st = f.server->RunSchedulingPass();
  EXPECT_EQ(st.placed, 0);
  EXPECT_EQ(st.preempting, 0);
  EXPECT_EQ(f.server->GetJob(f.admin, guaranteed->id)->state, JobState::kRunning);
  EXPECT_EQ(f.server->GetJob(f.admin, important->id)->state, JobState::kRunning);
  EXPECT_EQ(f.server->GetJob(f.admin, be->id)->state, JobState::kQueued);
  EXPECT_EQ(f.server->GetJob(f.admin, low->id)->state, JobState::kQueued);
}

TEST(Preemption, AssignedVictimIsRequeuedAtOnceAndCancelWins) {
  Fixture f("preempt_assigned");
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 2)).ok());
  auto a = f.server->Submit(f.bob, Preemptible(1));
  auto b = f.server->Submit(f.bob, Preemptible(1));
  ASSERT_EQ(f.server->RunSchedulingPass().placed, 2);
  // `b` runs; `a` is assigned but the node has not started it yet.
  Heartbeat hb;
  hb.jobs = {Report(b->id, "running")};
  ASSERT_TRUE(f.server->Heartbeat(f.agent, "n1", hb).ok());
  ASSERT_EQ(f.server->GetJob(f.admin, a->id)->state, JobState::kAssigned);
  auto g = f.server->Submit(f.alice, Spec({"two"}, 2));
  EXPECT_EQ(f.server->RunSchedulingPass().preempting, 1);
  EXPECT_EQ(f.server->GetJob(f.admin, a->id)->state, JobState::kQueued);
  EXPECT_EQ(f.server->GetJob(f.admin, b->id)->state, JobState::kCancelling);
  // The owner cancels the job being preempted: its exit ends it instead of requeueing it.
  ASSERT_TRUE(f.server->Cancel(f.bob, b->id).ok());
  hb.jobs = {Report(b->id, "exited", std::nullopt, 15)};
  ASSERT_TRUE(f.server->Heartbeat(f.agent, "n1", hb).ok());
  EXPECT_EQ(f.server->GetJob(f.admin, b->id)->state, JobState::kCancelled);
  EXPECT_EQ(f.server->RunSchedulingPass().placed, 1);
  EXPECT_EQ(f.server->GetJob(f.admin, g->id)->state, JobState::kAssigned);
}

}  // namespace
}  // namespace stoker::server
