#include "server/server.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <mutex>

#include "test_util.h"

namespace stoker::server {
namespace {
using testing::Fixture;
using testing::Spec;

RunReport Report(int64_t id, const std::string& phase, std::optional<int> code = std::nullopt) {
  RunReport r;
  r.id = id;
  r.phase = *protocol::kRunPhaseNames.Find(phase);
  r.exit_code = code;
  r.logs_complete = phase == "exited";
  return r;
}

// A clock that runs a hook once, in the thread of the first wall-clock read after Arm(). A
// scheduling pass reads the wall clock first between its view and its compute (the measured
// activity's window), holding no lock of the server: the hook changes what the pass decides on
// while it computes.
class HookClock final : public Clock {
 public:
  MonoTime Now() const override { return base_.Now(); }
  WallTime WallNow() const override {
    std::function<void()> hook;
    {
      std::lock_guard lock(mu_);
      hook.swap(hook_);
    }
    if (hook) hook();
    return base_.WallNow();
  }
  bool SleepUntil(MonoTime deadline) override { return base_.SleepUntil(deadline); }
  void Wake() override { base_.Wake(); }
  void Arm(std::function<void()> hook) {
    std::lock_guard lock(mu_);
    hook_ = std::move(hook);
  }

 private:
  ManualClock base_;
  mutable std::mutex mu_;
  mutable std::function<void()> hook_;
};

// A decision stands only if its job and its node are still as the pass saw them. A job cancelled
// and a node drained while the pass computes get nothing from it; the rest of the decision is
// applied, the dropped placements are not counted, and the next pass places the jobs it dropped
// on a node still open.
TEST(Server, DecisionsOvertakenWhileThePassComputesAreDropped) {
  HookClock hook_clock;
  Fixture f("overtaken", {}, &hook_clock);
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 4)).ok());
  ASSERT_TRUE(f.server->RegisterNode(f.admin, f.Node("n2", 4)).ok());
  std::vector<int64_t> ids;
  for (int i = 0; i < 4; ++i) {
    auto j = f.server->Submit(f.alice, Spec({"train"}, 2));
    ASSERT_TRUE(j.ok());
    ids.push_back(j->id);
  }
  bool hooked = false;
  hook_clock.Arm([&] {
    hooked = true;
    EXPECT_TRUE(f.server->Cancel(f.alice, ids[0]).ok());
    EXPECT_TRUE(f.server->SetDrained(f.admin, "n2", true).ok());
  });
  const PassStats st = f.server->RunSchedulingPass();
  ASSERT_TRUE(hooked);
  // The pass placed all four, two on each node. Of the three still wanted, those it put on n1
  // stand and those on n2 are dropped.
  int on_n1 = 0, queued = 0;
  for (int64_t id : ids) {
    auto j = f.server->GetJob(f.admin, id);
    ASSERT_TRUE(j.ok());
    if (id == ids[0]) {
      EXPECT_EQ(j->state, JobState::kCancelled);
      EXPECT_FALSE(j->assignment.has_value());
      continue;
    }
    if (j->state == JobState::kQueued) {
      ++queued;
      EXPECT_FALSE(j->assignment.has_value());
      continue;
    }
    ASSERT_EQ(j->state, JobState::kAssigned);
    EXPECT_EQ(j->assignment->node, "n1");
    ++on_n1;
  }
  EXPECT_EQ(st.placed, on_n1);
  EXPECT_GE(on_n1, 1);
  EXPECT_EQ(on_n1 + queued, 3);
  EXPECT_GE(queued, 1);  // n2 was half of the room: at least one placement there was dropped
  // The next pass places what fits on n1 and nothing on the drained n2.
  const PassStats next = f.server->RunSchedulingPass();
  EXPECT_EQ(on_n1 + next.placed, 2);
  for (int64_t id : ids) {
    auto j = f.server->GetJob(f.admin, id);
    if (j->assignment) {
      EXPECT_EQ(j->assignment->node, "n1") << id;
    }
  }
}

TEST(Server, PlacesJobsAndHandsThemToTheNode) {
  Fixture f("place");
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 4)).ok());
  auto j1 = f.server->Submit(f.alice, Spec({"train"}, 2));
  auto j2 = f.server->Submit(f.alice, Spec({"eval"}, 0));
  auto j3 = f.server->Submit(f.bob, Spec({"big"}, 4));
  ASSERT_TRUE(j1.ok() && j2.ok() && j3.ok());
  PassStats st = f.server->RunSchedulingPass();
  EXPECT_EQ(st.placed, 2);
  EXPECT_EQ(st.blocked, 1);
  auto g1 = f.server->GetJob(f.admin, j1->id);
  EXPECT_EQ(g1->state, JobState::kAssigned);
  EXPECT_EQ(g1->assignment->gpu_indices.size(), 2u);
  EXPECT_EQ(g1->assignment->cuda_visible_devices.size(), 3u);  // "a,b"
  EXPECT_EQ(f.server->GetJob(f.admin, j3->id)->state, JobState::kQueued);
  EXPECT_NE(f.server->GetJob(f.admin, j3->id)->reason.find("waiting"), std::string::npos);

  auto reply = f.server->Heartbeat(f.agent, "n1", {});
  ASSERT_TRUE(reply.ok());
  ASSERT_EQ(reply->start.size(), 2u);
  EXPECT_EQ(reply->start[0].id, j1->id);
  EXPECT_TRUE(reply->start[0].has_gpu);

  // The node reports j1 running and j2 finished; j1 ends, j3 gets its GPUs.
  Heartbeat hb;
  hb.jobs = {Report(j1->id, "running"), Report(j2->id, "exited", 0)};
  reply = f.server->Heartbeat(f.agent, "n1", hb);
  ASSERT_TRUE(reply.ok());
  EXPECT_TRUE(reply->start.empty());
  EXPECT_EQ(reply->forget, std::vector<int64_t>{j2->id});
  EXPECT_EQ(f.server->GetJob(f.admin, j1->id)->state, JobState::kRunning);
  EXPECT_EQ(f.server->GetJob(f.admin, j2->id)->state, JobState::kSucceeded);
  hb.jobs = {Report(j1->id, "exited", 3)};
  ASSERT_TRUE(f.server->Heartbeat(f.agent, "n1", hb).ok());
  auto done = f.server->GetJob(f.admin, j1->id);
  EXPECT_EQ(done->state, JobState::kFailed);
  EXPECT_EQ(done->exit_code, 3);
  EXPECT_EQ(f.server->RunSchedulingPass().placed, 1);
  EXPECT_EQ(f.server->GetJob(f.admin, j3->id)->state, JobState::kAssigned);
}

// A pass that places thousands of jobs hands them to the store in chunks (one batch in parts,
// its status rows and "assigned" events built on the store's writer while the rest is
// applied): after a restart every job reads back with its own placement, and its last event
// says where it went.
TEST(Server, ALargePassStoresEveryPlacementWithItsOwnJob) {
  Fixture f("large_pass");
  constexpr int kNodes = 520;  // 4,160 GPUs
  constexpr int kJobs = 4150;  // two chunks: 4,096 changed jobs, then the rest
  for (int n = 0; n < kNodes; ++n) {
    ASSERT_TRUE(f.server->RegisterNode(f.admin, f.Node("n" + std::to_string(n), 8)).ok());
  }
  std::vector<int64_t> ids;
  for (int i = 0; i < kJobs; ++i) {
    JobSpec s = Spec({"train"}, 1);
    s.cpu_milli = 1000;
    s.memory_mib = 1024;
    auto j = f.server->Submit(f.alice, s);
    ASSERT_TRUE(j.ok()) << j.status().ToString();
    ids.push_back(j->id);
  }
  EXPECT_EQ(f.server->RunSchedulingPass().placed, kJobs);
  std::map<int64_t, std::pair<std::string, std::string>> placed;  // id -> node, devices
  for (int64_t id : ids) {
    auto j = f.server->GetJob(f.admin, id);
    ASSERT_TRUE(j.ok() && j->assignment);
    placed[id] = {j->assignment->node, j->assignment->cuda_visible_devices};
  }
  f.Open();
  for (int64_t id : ids) {
    auto j = f.server->GetJob(f.admin, id);
    ASSERT_TRUE(j.ok());
    EXPECT_EQ(j->state, JobState::kAssigned) << id;
    ASSERT_TRUE(j->assignment) << id;
    EXPECT_EQ(j->assignment->node, placed[id].first) << id;
    EXPECT_EQ(j->assignment->cuda_visible_devices, placed[id].second) << id;
    auto events = f.server->Events(f.admin, id);
    ASSERT_TRUE(events.ok() && !events->empty()) << id;
    EXPECT_EQ(events->back().kind, "assigned") << id;
    EXPECT_EQ(
        events->back().message.rfind("to " + placed[id].first + " devices " + placed[id].second, 0),
        0u)
        << id << ": " << events->back().message;
  }
}

// Reading a node is allowed to people and to the node's own agent, and to no one else.
TEST(Server, GetNodeIsForPeopleAndTheNodesOwnAgent) {
  Fixture f("get_node_roles");
  ASSERT_TRUE(f.server->RegisterNode(f.admin, f.Node("n1", 1)).ok());
  ASSERT_TRUE(f.server->RegisterNode(f.admin, f.Node("n2", 1)).ok());
  EXPECT_TRUE(f.server->GetNode(f.admin, "n1").ok());
  EXPECT_TRUE(f.server->GetNode(f.alice, "n1").ok());
  EXPECT_TRUE(f.server->GetNode(f.agent, "n1").ok());
  EXPECT_EQ(f.server->GetNode(f.agent, "n2").status().code(), StatusCode::kPermissionDenied);
  const Principal scheduler{"sched", Role::kScheduler};
  EXPECT_EQ(f.server->GetNode(scheduler, "n1").status().code(), StatusCode::kPermissionDenied);
}

TEST(Server, StrictOrderWithoutBackfill) {
  ServerOptions o;
  o.backfill = false;
  Fixture f("strict", o);
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 2)).ok());
  ASSERT_TRUE(f.server->Submit(f.alice, Spec({"a"}, 2)).ok());
  auto blocked = f.server->Submit(f.alice, Spec({"b"}, 2));
  auto small = f.server->Submit(f.alice, Spec({"c"}, 0));
  EXPECT_EQ(f.server->RunSchedulingPass().placed, 1);
  EXPECT_EQ(f.server->GetJob(f.admin, small->id)->state, JobState::kQueued);
  ASSERT_TRUE(f.server->SetPolicy(f.admin, "", "", true).ok());
  EXPECT_EQ(f.server->RunSchedulingPass().placed, 1);
  EXPECT_EQ(f.server->GetJob(f.admin, small->id)->state, JobState::kAssigned);
  EXPECT_EQ(f.server->GetJob(f.admin, blocked->id)->state, JobState::kQueued);
}

TEST(Server, PriorityQueueOrdersPlacement) {
  ServerOptions o;
  o.queue_policy = "priority";
  Fixture f("prio", o);
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 1)).ok());
  auto low = f.server->Submit(f.alice, Spec({"low"}, 1));
  JobSpec hi = Spec({"high"}, 1);
  hi.priority = 10;
  auto high = f.server->Submit(f.alice, hi);
  f.server->RunSchedulingPass();
  EXPECT_EQ(f.server->GetJob(f.admin, high->id)->state, JobState::kAssigned);
  EXPECT_EQ(f.server->GetJob(f.admin, low->id)->state, JobState::kQueued);
}

TEST(Server, GpuShareAndModelConstraints) {
  Fixture f("share");
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 1, "NVIDIA A100-SXM4-80GB")).ok());
  JobSpec share = Spec({"s"});
  share.gpu_milli = 300;
  share.gpu_memory_mib = 10000;
  auto s = f.server->Submit(f.alice, share);
  JobSpec wrong = Spec({"w"}, 1);
  wrong.gpu_models = {"H100"};
  auto w = f.server->Submit(f.alice, wrong);
  PassStats st = f.server->RunSchedulingPass();
  EXPECT_EQ(st.placed, 1);
  EXPECT_EQ(st.infeasible, 1);
  auto sj = f.server->GetJob(f.admin, s->id);
  EXPECT_EQ(sj->assignment->gpu_milli, 300);
  EXPECT_EQ(sj->assignment->env.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "30");
  EXPECT_EQ(sj->assignment->env.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=10000M");
  EXPECT_NE(f.server->GetJob(f.admin, w->id)->reason.find("no node can ever"), std::string::npos);
}

TEST(Server, MigJobGetsAnInstanceUuid) {
  Fixture f("mig");
  // A mixed node: GPU 0 whole, GPU 1 in MIG mode.
  NodeInventory n = f.Node("n1", 2);
  n.gpus[1].mig_enabled = true;
  n.gpus[1].mig = {{"MIG-a", "1g.10gb", 1}, {"MIG-b", "1g.10gb", 1}, {"MIG-c", "3g.40gb", 3}};
  ASSERT_TRUE(f.server->RegisterNode(f.agent, n).ok());
  JobSpec m = Spec({"m"});
  m.mig = "1g.10gb";
  auto a = f.server->Submit(f.alice, m);
  auto b = f.server->Submit(f.alice, m);
  auto whole = f.server->Submit(f.alice, Spec({"w"}, 1));
  auto whole2 = f.server->Submit(f.alice, Spec({"w2"}, 1));
  PassStats ps = f.server->RunSchedulingPass();
  EXPECT_EQ(ps.placed, 3) << f.server->GetJob(f.admin, whole->id)->reason << " | "
                          << f.server->GetJob(f.admin, a->id)->reason;
  EXPECT_EQ(f.server->GetJob(f.admin, whole->id)->assignment->cuda_visible_devices, "0");
  EXPECT_EQ(f.server->GetJob(f.admin, whole2->id)->state, JobState::kQueued);
  auto ja = f.server->GetJob(f.admin, a->id);
  auto jb = f.server->GetJob(f.admin, b->id);
  ASSERT_EQ(ja->state, JobState::kAssigned);
  ASSERT_EQ(jb->state, JobState::kAssigned);
  EXPECT_EQ(ja->assignment->cuda_visible_devices.rfind("MIG-", 0), 0u);
  EXPECT_NE(ja->assignment->mig_uuid, jb->assignment->mig_uuid);
}

TEST(Server, LostNodeRequeuesOrFailsByPolicy) {
  ServerOptions o;
  o.node_timeout = std::chrono::seconds(30);
  Fixture f("lost", o);
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 2)).ok());
  auto rq = f.server->Submit(f.alice, Spec({"requeue-me"}, 1));
  JobSpec fs = Spec({"fail-me"}, 1);
  fs.on_node_loss = protocol::OnNodeLoss::kFail;
  auto fl = f.server->Submit(f.alice, fs);
  f.server->RunSchedulingPass();
  Heartbeat hb;
  hb.jobs = {Report(rq->id, "running"), Report(fl->id, "running")};
  ASSERT_TRUE(f.server->Heartbeat(f.agent, "n1", hb).ok());
  f.clock.Advance(std::chrono::seconds(29));
  EXPECT_EQ(f.server->CheckNodeTimeouts(), 0);
  f.clock.Advance(std::chrono::seconds(2));
  EXPECT_EQ(f.server->CheckNodeTimeouts(), 1);
  auto r = f.server->GetJob(f.admin, rq->id);
  EXPECT_EQ(r->state, JobState::kQueued);
  EXPECT_EQ(r->requeues, 1);
  EXPECT_FALSE(r->assignment.has_value());
  auto x = f.server->GetJob(f.admin, fl->id);
  EXPECT_EQ(x->state, JobState::kFailed);
  EXPECT_NE(x->reason.find("lost"), std::string::npos);
  EXPECT_EQ(f.server->GetNode(f.admin, "n1")->state, NodeState::kLost);
  // Lost nodes get no work.
  EXPECT_EQ(f.server->RunSchedulingPass().placed, 0);
  // The node comes back still running the old copy: it is told to stop it.
  auto reply = f.server->Heartbeat(f.agent, "n1", hb);
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->cancel.size(), 2u);
  EXPECT_EQ(f.server->GetNode(f.admin, "n1")->state, NodeState::kReady);
}

TEST(Server, ReconcilesAJobThatEndedWhileTheServerWasDown) {
  Fixture f("reconcile");
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 1)).ok());
  auto j = f.server->Submit(f.alice, Spec({"work"}, 1));
  f.server->RunSchedulingPass();
  Heartbeat hb;
  hb.jobs = {Report(j->id, "running")};
  ASSERT_TRUE(f.server->Heartbeat(f.agent, "n1", hb).ok());
  // Server stops; the job ends on the node meanwhile; a new server process loads the store.
  f.Open();
  EXPECT_EQ(f.server->GetJob(f.admin, j->id)->state, JobState::kRunning);
  hb.jobs = {Report(j->id, "exited", 7)};
  hb.jobs[0].stdout_offset = 0;
  hb.jobs[0].stdout_data = "done\n";
  auto reply = f.server->Heartbeat(f.agent, "n1", hb);
  ASSERT_TRUE(reply.ok());
  auto got = f.server->GetJob(f.admin, j->id);
  EXPECT_EQ(got->state, JobState::kFailed);
  EXPECT_EQ(got->exit_code, 7);
  EXPECT_EQ(reply->forget, std::vector<int64_t>{j->id});
  EXPECT_EQ(f.server->ReadLog(f.admin, j->id, "stdout", 0)->data, "done\n");
  // Resending the same bytes does not duplicate them.
  ASSERT_TRUE(f.server->Heartbeat(f.agent, "n1", hb).ok());
  auto log = f.server->ReadLog(f.admin, j->id, "stdout", 0);
  EXPECT_EQ(log->data, "done\n");
  EXPECT_TRUE(log->finished);
  // And the restarted server still knows the node and its tokens.
  EXPECT_TRUE(f.server->Authenticate("Bearer " + f.alice_token).ok());
}

TEST(Server, CancelRunningGoesThroughTheNode) {
  Fixture f("cancel");
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 1)).ok());
  auto j = f.server->Submit(f.alice, Spec({"work"}));
  auto q = f.server->Submit(f.alice, Spec({"queued"}, 8));
  f.server->RunSchedulingPass();
  Heartbeat hb;
  hb.jobs = {Report(j->id, "running")};
  ASSERT_TRUE(f.server->Heartbeat(f.agent, "n1", hb).ok());
  EXPECT_EQ(f.server->Cancel(f.bob, j->id).status().code(), StatusCode::kNotFound);
  auto c = f.server->Cancel(f.alice, j->id);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->state, JobState::kCancelling);
  auto reply = f.server->Heartbeat(f.agent, "n1", hb);
  EXPECT_EQ(reply->cancel, std::vector<int64_t>{j->id});
  RunReport ex = Report(j->id, "exited");
  ex.signal = 15;
  hb.jobs = {ex};
  ASSERT_TRUE(f.server->Heartbeat(f.agent, "n1", hb).ok());
  EXPECT_EQ(f.server->GetJob(f.admin, j->id)->state, JobState::kCancelled);
  EXPECT_EQ(f.server->GetJob(f.admin, j->id)->signal, 15);
  // Queued jobs are cancelled at once; cancelling twice conflicts.
  EXPECT_EQ(f.server->Cancel(f.alice, q->id)->state, JobState::kCancelled);
  EXPECT_EQ(f.server->Cancel(f.alice, q->id).status().code(), StatusCode::kFailedPrecondition);
  auto events = f.server->Events(f.alice, j->id);
  ASSERT_TRUE(events.ok());
  EXPECT_GE(events->size(), 4u);  // submitted, assigned, running, cancel, cancelled
}

TEST(Server, DrainedNodesGetNoNewJobs) {
  Fixture f("drain");
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 1)).ok());
  ASSERT_EQ(f.server->SetDrained(f.alice, "n1", true).code(), StatusCode::kPermissionDenied);
  ASSERT_TRUE(f.server->SetDrained(f.admin, "n1", true).ok());
  auto j = f.server->Submit(f.alice, Spec({"x"}));
  EXPECT_EQ(f.server->RunSchedulingPass().placed, 0);
  ASSERT_TRUE(f.server->SetDrained(f.admin, "n1", false).ok());
  EXPECT_EQ(f.server->RunSchedulingPass().placed, 1);
}

TEST(Server, ElasticJobStartsWithFewerGpus) {
  Fixture f("elastic");
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 4)).ok());
  ASSERT_TRUE(f.server->Submit(f.alice, Spec({"a"}, 2)).ok());
  JobSpec e = Spec({"e"}, 4);
  e.min_gpus = 1;
  auto ej = f.server->Submit(f.alice, e);
  f.server->RunSchedulingPass();
  auto got = f.server->GetJob(f.admin, ej->id);
  ASSERT_EQ(got->state, JobState::kAssigned);
  EXPECT_EQ(got->assignment->gpu_indices.size(), 2u);
}

// A job's row as releases before the status column wrote it (the whole document, no status) is
// read as it was after a restart, and its later changes are stored beside it and survive the
// next one.
TEST(Server, AJobStoredWholeByAnEarlierReleaseReadsAndChangesAfterARestart) {
  Fixture f("whole_row");
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 4)).ok());
  auto j = f.server->Submit(f.alice, Spec({"train"}, 2));
  ASSERT_TRUE(j.ok());
  ASSERT_EQ(f.server->RunSchedulingPass().placed, 1);
  const Job assigned = *f.server->GetJob(f.admin, j->id);
  ASSERT_EQ(assigned.state, JobState::kAssigned);
  store::WriteBatch whole;
  whole.PutJob(store::JobRow{assigned.id, assigned.user, "assigned", assigned.assignment->node,
                             JobToJson(assigned).dump(), ""});
  ASSERT_TRUE(f.store->Apply(std::move(whole)).ok());
  f.Open();
  auto got = f.server->GetJob(f.admin, j->id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(JobToJson(*got), JobToJson(assigned));

  Heartbeat hb;
  hb.jobs = {Report(j->id, "running")};
  ASSERT_TRUE(f.server->Heartbeat(f.agent, "n1", hb).ok());
  const Job running = *f.server->GetJob(f.admin, j->id);
  ASSERT_EQ(running.state, JobState::kRunning);
  f.Open();
  got = f.server->GetJob(f.admin, j->id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(JobToJson(*got), JobToJson(running));
  auto rows = f.store->LoadJobs();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].state, "running");
  EXPECT_EQ((*rows)[0].node, "n1");
  EXPECT_EQ((*rows)[0].doc, JobToJson(assigned).dump()) << "the whole row is not written again";
  EXPECT_EQ((*rows)[0].status, protocol::JobStatusToJson(running).dump());
}

}  // namespace
}  // namespace stoker::server
