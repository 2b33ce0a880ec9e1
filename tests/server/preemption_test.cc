// Preemption: guaranteed (non-preemptible) work that is queued takes GPUs from preemptible
// jobs, which the node stops like a cancel and the server puts back in the queue.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "server/api.h"
#include "server/server.h"
#include "test_util.h"

namespace stoker::server {
namespace {
using testing::Fixture;
using testing::Spec;

RunReport Report(int64_t id, const std::string& phase, std::optional<int> code = std::nullopt,
                 std::optional<int> signal = std::nullopt) {
  RunReport r;
  r.id = id;
  r.phase = *protocol::kRunPhaseNames.Find(phase);
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

// ---- oversubscription: preemptible work beyond a GPU's capacity -------------------------

JobSpec Share(int32_t milli, bool preemptible) {
  JobSpec s = Spec({"serve"}, 0);
  s.gpu_milli = milli;
  s.preemptible = preemptible;
  return s;
}

ServerOptions Oversubscribed(int32_t ratio_milli = 1500) {
  ServerOptions o;
  o.gpu_oversubscription_milli = ratio_milli;
  o.preemption_grace = std::chrono::seconds(90);
  return o;
}

// Submits `spec`, runs a pass, starts what it placed; returns the job id (0 if not placed).
int64_t Place(Fixture& f, const JobSpec& spec, std::vector<int64_t>* running) {
  auto id = f.server->Submit(spec.preemptible ? f.bob : f.alice, spec);
  if (!id.ok()) return 0;
  f.server->RunSchedulingPass();
  if (f.server->GetJob(f.admin, id->id)->state != JobState::kAssigned) return 0;
  StartAll(f, running);
  f.clock.Advance(std::chrono::seconds(1));  // distinct start times
  return id->id;
}

TEST(Oversubscription, OffByDefault) {
  Fixture f("oversub_off");
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 1)).ok());
  std::vector<int64_t> running;
  ASSERT_NE(Place(f, Spec({"train"}, 1), &running), 0);
  auto be = f.server->Submit(f.bob, Share(400, true));
  PassStats st = f.server->RunSchedulingPass();
  EXPECT_EQ(st.placed, 0);
  EXPECT_EQ(st.oversubscribed, 0);
  EXPECT_EQ(f.server->GetJob(f.admin, be->id)->state, JobState::kQueued);
}

TEST(Oversubscription, PreemptibleWorkSharesAGpuUpToTheRatio) {
  Fixture f("oversub_ratio", Oversubscribed(1500));
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 1)).ok());
  std::vector<int64_t> running;
  ASSERT_NE(Place(f, Spec({"train"}, 1), &running), 0);  // guaranteed: the whole GPU

  auto p1 = f.server->Submit(f.bob, Share(400, true));
  PassStats st = f.server->RunSchedulingPass();
  EXPECT_EQ(st.placed, 1);
  EXPECT_EQ(st.oversubscribed, 1);
  auto j1 = f.server->GetJob(f.admin, p1->id);
  ASSERT_EQ(j1->state, JobState::kAssigned);
  ASSERT_EQ(j1->assignment->shares.size(), 1u);
  EXPECT_EQ(j1->assignment->shares[0].second, 400);  // its full share, beside the guaranteed job
  EXPECT_EQ(j1->assignment->cuda_visible_devices, "0");
  StartAll(f, &running);

  // 1400 committed: 200 more would pass 1.5, 100 does not; nothing fits after that.
  auto p2 = f.server->Submit(f.bob, Share(200, true));
  EXPECT_EQ(f.server->RunSchedulingPass().placed, 0);
  EXPECT_EQ(f.server->GetJob(f.admin, p2->id)->state, JobState::kQueued);
  ASSERT_TRUE(f.server->Cancel(f.bob, p2->id).ok());
  auto p3 = f.server->Submit(f.bob, Share(100, true));
  EXPECT_EQ(f.server->RunSchedulingPass().oversubscribed, 1);
  EXPECT_EQ(f.server->GetJob(f.admin, p3->id)->state, JobState::kAssigned);
  auto p4 = f.server->Submit(f.bob, Share(10, true));
  EXPECT_EQ(f.server->RunSchedulingPass().placed, 0);

  // Guaranteed work never goes beyond one GPU, and it does not preempt for a GPU that its own
  // tier fills.
  auto g2 = f.server->Submit(f.alice, Share(100, false));
  st = f.server->RunSchedulingPass();
  EXPECT_EQ(st.placed, 0);
  EXPECT_EQ(st.preempting, 0);
  EXPECT_EQ(f.server->GetJob(f.admin, g2->id)->state, JobState::kQueued);

  // The commitments are rebuilt from the jobs after a restart: still full.
  f.Open();
  EXPECT_EQ(f.server->RunSchedulingPass().placed, 0);
  EXPECT_EQ(f.server->GetJob(f.admin, p4->id)->state, JobState::kQueued);
}

TEST(Oversubscription, WholeGpusOnlyWhereAGpuCarriesAtMostTheSurplus) {
  Fixture f("oversub_whole", Oversubscribed(1500));
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 2)).ok());
  std::vector<int64_t> running;
  ASSERT_NE(Place(f, Share(500, false), &running), 0);  // GPU 0 or 1 at 0.5
  ASSERT_NE(Place(f, Share(600, false), &running), 0);  // the other at 0.6
  // Two whole preemptible GPUs: the 0.6 GPU cannot carry a whole one more (1.6 > 1.5).
  auto two = f.server->Submit(f.bob, Preemptible(2));
  EXPECT_EQ(f.server->RunSchedulingPass().placed, 0);
  ASSERT_TRUE(f.server->Cancel(f.bob, two->id).ok());
  auto one = f.server->Submit(f.bob, Preemptible(1));
  EXPECT_EQ(f.server->RunSchedulingPass().oversubscribed, 1);
  auto j = f.server->GetJob(f.admin, one->id);
  ASSERT_EQ(j->state, JobState::kAssigned);
  ASSERT_EQ(j->assignment->shares.size(), 1u);
  EXPECT_EQ(j->assignment->shares[0].second, 1000);
  // It went to the GPU carrying 0.5.
  auto half = f.server->ListJobs(f.admin, JobFilter{});
  ASSERT_TRUE(half.ok());
  for (const Job& other : *half) {
    if (other.spec.gpu_milli == 500) {
      EXPECT_EQ(other.assignment->shares[0].first, j->assignment->shares[0].first);
    }
  }
}

TEST(Oversubscription, GuaranteedWorkPreemptsOnlyWhatItNeeds) {
  Fixture f("oversub_needs", Oversubscribed(1500));
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 1)).ok());
  std::vector<int64_t> running;
  const int64_t whole = Place(f, Preemptible(1), &running);  // 1.0, started first
  ASSERT_NE(whole, 0);
  const int64_t share = Place(f, Share(400, true), &running);  // 1.4, beyond capacity
  ASSERT_NE(share, 0);
  // A guaranteed 0.3 needs guaranteed + what stays <= 1.0: stopping the whole-GPU job is
  // enough (0.3 + 0.4); the younger share stays although it was looked at first.
  auto g = f.server->Submit(f.alice, Share(300, false));
  PassStats st = f.server->RunSchedulingPass();
  EXPECT_EQ(st.placed, 0);
  EXPECT_EQ(st.preempting, 1);
  EXPECT_EQ(f.server->GetJob(f.admin, whole)->state, JobState::kCancelling);
  EXPECT_EQ(f.server->GetJob(f.admin, whole)->preempted_by, g->id);
  EXPECT_EQ(f.server->GetJob(f.admin, share)->state, JobState::kRunning);

  // The node is told to stop it with the preemption grace, not its own cancel grace.
  Heartbeat hb;
  for (int64_t id : running) hb.jobs.push_back(Report(id, "running"));
  auto reply = f.server->Heartbeat(f.agent, "n1", hb);
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->cancel, std::vector<int64_t>{whole});
  EXPECT_EQ(reply->cancel_grace_ms.at(whole), 90000);

  // Until it exits the guaranteed job waits; then it runs beside the share (0.7).
  EXPECT_EQ(f.server->RunSchedulingPass().placed, 0);
  hb.jobs = {Report(share, "running"), Report(whole, "exited", std::nullopt, 15)};
  ASSERT_TRUE(f.server->Heartbeat(f.agent, "n1", hb).ok());
  EXPECT_EQ(f.server->GetJob(f.admin, whole)->state, JobState::kQueued);
  st = f.server->RunSchedulingPass();
  EXPECT_EQ(st.placed, 1);
  EXPECT_EQ(f.server->GetJob(f.admin, g->id)->state, JobState::kAssigned);
  // The requeued whole-GPU job may not come back: the GPU carries 0.7 > 0.5.
  EXPECT_EQ(f.server->GetJob(f.admin, whole)->state, JobState::kQueued);
}

TEST(Oversubscription, GuaranteedWorkStopsPreemptibleJobsBeyondCapacityToo) {
  Fixture f("oversub_overflow", Oversubscribed(1500));
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 1)).ok());
  std::vector<int64_t> running;
  ASSERT_NE(Place(f, Share(600, false), &running), 0);
  const int64_t fits = Place(f, Share(400, true), &running);    // 1.0
  const int64_t beyond = Place(f, Share(500, true), &running);  // 1.5
  ASSERT_NE(fits, 0);
  ASSERT_NE(beyond, 0);
  // A guaranteed 0.3: 0.6 + 0.3 leaves 0.1, so both preemptible jobs must go, including the
  // one that holds no capacity the library can see.
  auto g = f.server->Submit(f.alice, Share(300, false));
  EXPECT_EQ(f.server->RunSchedulingPass().preempting, 1);
  EXPECT_EQ(f.server->GetJob(f.admin, fits)->preempted_by, g->id);
  EXPECT_EQ(f.server->GetJob(f.admin, beyond)->preempted_by, g->id);
  // With one of them gone it still waits for the other.
  Heartbeat hb;
  hb.jobs = {Report(running[0], "running"), Report(fits, "exited", std::nullopt, 15),
             Report(beyond, "running")};
  ASSERT_TRUE(f.server->Heartbeat(f.agent, "n1", hb).ok());
  EXPECT_EQ(f.server->RunSchedulingPass().placed, 0);
  EXPECT_EQ(f.server->GetJob(f.admin, g->id)->state, JobState::kQueued);
  hb.jobs = {Report(running[0], "running"), Report(beyond, "exited", std::nullopt, 15)};
  ASSERT_TRUE(f.server->Heartbeat(f.agent, "n1", hb).ok());
  PassStats st = f.server->RunSchedulingPass();
  EXPECT_EQ(st.placed, 2);
  EXPECT_EQ(f.server->GetJob(f.admin, g->id)->state, JobState::kAssigned);
  // The requeued 0.4 comes back beside it, beyond capacity again (0.6 + 0.3 + 0.4 <= 1.5);
  // the 0.5 one is still queued: it would make 1.8.
  EXPECT_EQ(st.oversubscribed, 1);
  EXPECT_EQ(f.server->GetJob(f.admin, fits)->state, JobState::kAssigned);
}

TEST(Oversubscription, RatioOutOfRangeIsRejectedAtStart) {
  for (int32_t bad : {999, 1501}) {
    try {
      Fixture f("oversub_bad" + std::to_string(bad), Oversubscribed(bad));
      ADD_FAILURE() << bad << " accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("gpu oversubscription"), std::string::npos) << e.what();
    }
    std::filesystem::remove_all(
        std::filesystem::temp_directory_path() /
        ("stoker_srv_oversub_bad" + std::to_string(bad) + "_" + std::to_string(::getpid())));
  }
}

TEST(Oversubscription, MetricsShowCommitmentsAndSchedulerCounters) {
  Fixture f("oversub_metrics", Oversubscribed(1500));
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 2)).ok());
  std::vector<int64_t> running;
  ASSERT_NE(Place(f, Spec({"train"}, 1), &running), 0);
  auto be = f.server->Submit(f.bob, Share(400, true));
  ASSERT_TRUE(be.ok());
  // The empty GPU takes it within capacity first.
  EXPECT_EQ(f.server->RunSchedulingPass().oversubscribed, 0);
  auto be2 = f.server->Submit(f.bob, Share(700, true));
  EXPECT_EQ(f.server->RunSchedulingPass().oversubscribed, 1);
  ApiRequest req;
  req.method = "GET";
  req.path = "/metrics";
  req.authorization = "Bearer " + f.admin_token;
  const std::string m = f.api->Handle(req).body;
  for (const char* line :
       {"stoker_server_jobs{state=\"running\"} 1", "stoker_server_jobs{state=\"assigned\"} 2",
        "stoker_server_nodes{state=\"ready\"} 1", "stoker_server_gpus{commitment=\"full\"} 1",
        "stoker_server_gpus{commitment=\"oversubscribed\"} 1",
        "stoker_server_gpu_oversubscription_ratio 1.5", "stoker_scheduler_placements_total 3",
        "stoker_scheduler_oversubscribed_placements_total 1",
        "stoker_scheduler_fragmented_gpus 0"}) {
    EXPECT_NE(m.find(line), std::string::npos) << line << "\n" << m;
  }
  if (std::system("command -v promtool >/dev/null 2>&1") == 0) {
    const std::string file = f.dir + "/metrics.prom";
    std::ofstream(file) << m;
    const std::string cmd = "promtool check metrics < " + file + " > " + file + ".log 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    std::ifstream log(file + ".log");
    const std::string report((std::istreambuf_iterator<char>(log)),
                             std::istreambuf_iterator<char>());
    EXPECT_EQ(report, "") << report;
  }
}

// ---- system requeue (idle reclaim with action requeue) -----------------------------------

TEST(SystemRequeue, RunningJobIsStoppedThenQueuedAgainAssignedOneAtOnce) {
  Fixture f("requeue");
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 2)).ok());
  std::vector<int64_t> running;
  const int64_t idle = Place(f, Spec({"notebook"}, 1), &running);
  ASSERT_NE(idle, 0);
  ASSERT_TRUE(f.server->RequeueJob(idle, "idle reclaim: no GPU activity for 2h").ok());
  auto j = f.server->GetJob(f.admin, idle);
  EXPECT_EQ(j->state, JobState::kCancelling);
  EXPECT_TRUE(HasEvent(f, idle, "requeue"));
  // The node is told to stop it with its own grace (no per-job grace for a requeue).
  Heartbeat hb;
  hb.jobs = {Report(idle, "running")};
  auto reply = f.server->Heartbeat(f.agent, "n1", hb);
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->cancel, std::vector<int64_t>{idle});
  EXPECT_TRUE(reply->cancel_grace_ms.empty());
  // It survives a restart while stopping; its exit puts it back in the queue.
  f.Open();
  hb.jobs = {Report(idle, "exited", std::nullopt, 15)};
  ASSERT_TRUE(f.server->Heartbeat(f.agent, "n1", hb).ok());
  j = f.server->GetJob(f.admin, idle);
  EXPECT_EQ(j->state, JobState::kQueued);
  EXPECT_EQ(j->requeues, 1);
  EXPECT_NE(j->reason.find("requeued: idle reclaim"), std::string::npos) << j->reason;
  EXPECT_TRUE(j->stop_to_requeue.empty());
  // Assigned but not started: back in the queue at once. Ended jobs cannot be requeued.
  auto assigned = f.server->Submit(f.alice, Spec({"b"}, 1));
  ASSERT_EQ(f.server->RunSchedulingPass().placed, 2);
  ASSERT_TRUE(f.server->RequeueJob(assigned->id, "idle reclaim").ok());
  EXPECT_EQ(f.server->GetJob(f.admin, assigned->id)->state, JobState::kQueued);
  ASSERT_TRUE(f.server->Cancel(f.alice, assigned->id).ok());
  EXPECT_EQ(f.server->RequeueJob(assigned->id, "x").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.server->RequeueJob(9999, "x").code(), StatusCode::kNotFound);
}

// ---- consolidation: a one-GPU job runs as a share from its next start ------------------

TEST(Consolidation, JobRunsAsAShareFromItsNextStart) {
  Fixture f("consolidate");
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 1)).ok());
  std::vector<int64_t> running;
  const int64_t a = Place(f, Spec({"infer-a"}, 1), &running);
  ASSERT_NE(a, 0);
  auto b = f.server->Submit(f.alice, Spec({"infer-b"}, 1));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(f.server->RunSchedulingPass().placed, 0);  // the only GPU is taken

  // The plan: both use about a third of a GPU.
  ASSERT_TRUE(f.server->ConsolidateAtNextStart(a, 400, "plan").ok());
  ASSERT_TRUE(f.server->ConsolidateAtNextStart(b->id, 400, "plan").ok());
  EXPECT_TRUE(HasEvent(f, a, "consolidate"));
  // `a` keeps its whole GPU while it runs, so `b` still waits...
  EXPECT_EQ(f.server->RunSchedulingPass().placed, 0);
  // ...until `a` restarts (here: the system requeues it, as for a movable job).
  ASSERT_TRUE(f.server->RequeueJob(a, "consolidation").ok());
  Heartbeat hb;
  hb.jobs = {Report(a, "exited", std::nullopt, 15)};
  ASSERT_TRUE(f.server->Heartbeat(f.agent, "n1", hb).ok());
  f.Open();  // the promised share survives a restart
  EXPECT_EQ(f.server->GetJob(f.admin, a)->consolidate_milli, 400);
  EXPECT_EQ(f.server->RunSchedulingPass().placed, 2);
  for (int64_t id : {a, b->id}) {
    auto j = f.server->GetJob(f.admin, id);
    ASSERT_EQ(j->state, JobState::kAssigned);
    EXPECT_EQ(j->assignment->gpu_milli, 400);
    EXPECT_EQ(j->assignment->cuda_visible_devices, "0");
  }

  // Only one-GPU jobs, shares of 1..999, jobs that exist and have not ended.
  auto two = f.server->Submit(f.alice, Spec({"x"}, 2));
  EXPECT_EQ(f.server->ConsolidateAtNextStart(two->id, 400, "p").code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.server->ConsolidateAtNextStart(a, 1000, "p").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.server->ConsolidateAtNextStart(4242, 400, "p").code(), StatusCode::kNotFound);
}

// ---- fragmentation sampled by the scheduling loop (FGD's measure) ----------------------

class FragmentationLog : public ServerObserver {
 public:
  void OnFragmentation(const Fragmentation& f, WallTime) override { seen.push_back(f); }
  std::vector<Fragmentation> seen;
};

TEST(FragmentationSample, FgdMeasureOfTheCurrentWorkloadOncePerMinute) {
  FragmentationLog log;  // outlives the server that calls it
  Fixture f("fragmentation");
  f.server->AddObserver(&log);
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 2)).ok());
  std::vector<int64_t> running;
  ASSERT_NE(Place(f, Share(600, false), &running), 0);  // the first pass samples an empty cluster
  ASSERT_EQ(log.seen.size(), 1u);
  EXPECT_EQ(log.seen[0].fragmented_gpu_milli, 0);
  // Within the minute: no sample, and an empty queue costs nothing.
  EXPECT_FALSE(f.server->RunSchedulingPass().fragmentation.has_value());
  f.clock.Advance(std::chrono::seconds(61));
  PassStats st = f.server->RunSchedulingPass();  // nothing queued: a sample only
  ASSERT_TRUE(st.fragmentation.has_value());
  EXPECT_EQ(st.placed, 0);
  // The workload is one 0.6 share: the 0.4 left beside it is what it cannot use.
  EXPECT_EQ(st.fragmentation->fragmented_gpu_milli, 400);
  EXPECT_EQ(st.fragmentation->free_gpu_milli, 1400);
  EXPECT_EQ(st.fragmentation->total_gpu_milli, 2000);
  EXPECT_EQ(st.fragmentation->typical_shapes, 1);
  EXPECT_EQ(log.seen.size(), 2u);
}

}  // namespace
}  // namespace stoker::server
