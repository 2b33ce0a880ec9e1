// Gangs in the server: a job of several parts, each on a node of its own, started with the
// launcher environment, ended, failed or requeued as a whole, durable across a restart. The
// nodes are played by the test (heartbeats through the server's API, as the node loop sends
// them); tests/node/gang_test.cc runs the same with real node loops and processes.

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "server/server.h"
#include "test_util.h"

namespace stoker::server {
namespace {
using testing::Fixture;
using testing::Spec;

// A node as the test plays it: what it was told to start, what it runs, what it stops.
struct Node {
  std::string name;
  std::map<int64_t, RunReport> runs;
  std::map<int64_t, LaunchOrder> started;  // the last start order per job
  std::vector<int64_t> told_to_cancel;
  std::map<int64_t, int64_t> grace_ms;

  // One heartbeat: reports every run, starts what it is told (running at once), remembers
  // cancels (the test decides when a cancelled run exits).
  HeartbeatReply Beat(Fixture& f) {
    Heartbeat hb;
    for (const auto& [id, r] : runs) hb.jobs.push_back(r);
    auto reply = f.server->Heartbeat(f.admin, name, hb);
    EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    if (!reply.ok()) return {};
    for (int64_t id : reply->forget) runs.erase(id);
    for (int64_t id : reply->cancel) told_to_cancel.push_back(id);
    for (const auto& [id, ms] : reply->cancel_grace_ms) grace_ms[id] = ms;
    for (const LaunchOrder& o : reply->start) {
      started[o.id] = o;
      RunReport r;
      r.id = o.id;
      r.attempt = o.attempt;
      r.phase = protocol::RunPhase::kRunning;
      runs[o.id] = r;
    }
    return *reply;
  }
  void Exit(int64_t id, std::optional<int> code, std::optional<int> signal = std::nullopt) {
    RunReport& r = runs.at(id);
    r.phase = protocol::RunPhase::kExited;
    r.exit_code = code;
    r.signal = signal;
    r.logs_complete = true;
  }
  bool Cancelled(int64_t id) const {
    return std::find(told_to_cancel.begin(), told_to_cancel.end(), id) != told_to_cancel.end();
  }
};

struct GangWorld {
  explicit GangWorld(const std::string& name, ServerOptions o = {}) : f(name, o) {
    for (const char* n : {"n1", "n2", "n3"}) {
      NodeInventory inv = f.Node(n, 2);
      for (GpuInfo& g : inv.gpus) g.uuid = std::string(n) + "-" + g.uuid;
      inv.address = std::string("10.0.0.") + n[1];
      EXPECT_TRUE(f.server->RegisterNode(f.admin, inv).ok());
      nodes.push_back(Node{n, {}, {}, {}, {}});
    }
  }
  // A 2-node x 2-GPU gang, placed and started on its nodes; returns its id.
  int64_t StartGang(JobSpec spec = GangSpec()) {
    auto j = f.server->Submit(f.alice, spec);
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    EXPECT_EQ(f.server->RunSchedulingPass().placed, 1);
    BeatAll();
    BeatAll();  // the second beat reports the parts running
    return j->id;
  }
  static JobSpec GangSpec() {
    JobSpec s = Spec({"torchrun", "train.py"}, 2);
    s.nodes = 2;
    return s;
  }
  void BeatAll() {
    for (Node& n : nodes) {
      if (!silent.count(n.name)) n.Beat(f);
    }
  }
  Job Get(int64_t id) { return *f.server->GetJob(f.admin, id); }
  Node& On(const std::string& name) {
    return *std::find_if(nodes.begin(), nodes.end(), [&](const Node& n) { return n.name == name; });
  }
  // The nodes that run a part of `id` now, by rank.
  std::vector<Node*> PartNodes(int64_t id) {
    std::vector<Node*> out;
    for (const GangPart& p : Get(id).parts) out.push_back(&On(p.assignment.node));
    return out;
  }

  Fixture f;
  std::vector<Node> nodes;
  std::set<std::string> silent;
};

TEST(Gang, BothPartsStartWithConsistentRankAndWorldSize) {
  GangWorld w("gang_start");
  const int64_t id = w.StartGang();
  const Job j = w.Get(id);
  EXPECT_EQ(j.state, JobState::kRunning);
  ASSERT_EQ(j.parts.size(), 2u);
  EXPECT_FALSE(j.assignment.has_value());
  std::vector<Node*> parts = w.PartNodes(id);
  ASSERT_NE(parts[0], parts[1]);
  const std::string master = "10.0.0." + parts[0]->name.substr(1);
  for (int rank = 0; rank < 2; ++rank) {
    const LaunchOrder& o = parts[rank]->started.at(id);
    EXPECT_EQ(o.env.at("RANK"), std::to_string(rank));
    EXPECT_EQ(o.env.at("LOCAL_RANK"), "0");
    EXPECT_EQ(o.env.at("WORLD_SIZE"), "2");
    EXPECT_EQ(o.env.at("MASTER_ADDR"), master);
    EXPECT_EQ(o.env.at("MASTER_PORT"), "29500");
    EXPECT_EQ(o.env.at("PET_NPROC_PER_NODE"), "2");
    EXPECT_EQ(o.gpu_indices.size(), 2u);
    EXPECT_EQ(o.cuda_visible_devices, "0,1");
    EXPECT_EQ(j.parts[rank].phase, PartPhase::kRunning);
  }
  // The third node never heard of it.
  for (Node& n : w.nodes) {
    if (n.name != parts[0]->name && n.name != parts[1]->name) {
      EXPECT_TRUE(n.started.empty()) << n.name;
    }
  }
  // One part done: the gang runs on; both done: it succeeded.
  parts[1]->Exit(id, 0);
  w.BeatAll();
  EXPECT_EQ(w.Get(id).state, JobState::kRunning);
  EXPECT_EQ(w.Get(id).parts[1].phase, PartPhase::kExited);
  parts[0]->Exit(id, 0);
  w.BeatAll();
  EXPECT_EQ(w.Get(id).state, JobState::kSucceeded);
  EXPECT_EQ(w.Get(id).exit_code, 0);
  // Listed under the node of either part.
  auto on_n = w.f.server->ListJobs(w.f.admin, JobFilter{.node = parts[1]->name});
  ASSERT_TRUE(on_n.ok());
  EXPECT_EQ(on_n->size(), 1u);
}

TEST(Gang, APartThatFailsEndsBothParts) {
  GangWorld w("gang_fail");
  const int64_t id = w.StartGang();
  std::vector<Node*> parts = w.PartNodes(id);
  auto alloc = w.f.server->Allocations(w.f.admin);
  ASSERT_TRUE(alloc.ok());
  EXPECT_EQ(alloc->size(), 2u);
  parts[1]->Exit(id, 3);
  w.BeatAll();
  Job j = w.Get(id);
  EXPECT_EQ(j.state, JobState::kCancelling);
  EXPECT_EQ(j.stop_to_fail, "part 1 on " + parts[1]->name + ": exit code 3");
  w.BeatAll();
  EXPECT_TRUE(parts[0]->Cancelled(id));
  parts[0]->Exit(id, std::nullopt, 15);
  w.BeatAll();
  j = w.Get(id);
  EXPECT_EQ(j.state, JobState::kFailed);
  EXPECT_EQ(j.reason, "part 1 on " + parts[1]->name + ": exit code 3");
  EXPECT_EQ(j.exit_code, 3);
  // Both parts are told to forget it; its GPUs are free again.
  EXPECT_TRUE(parts[0]->runs.empty());
  EXPECT_TRUE(parts[1]->runs.empty());
  EXPECT_TRUE(w.f.server->Allocations(w.f.admin)->empty());
}

TEST(Gang, CancellingEndsBothPartsAndAPartKilledOnItsNodeEndsTheGang) {
  GangWorld w("gang_cancel");
  const int64_t id = w.StartGang();
  std::vector<Node*> parts = w.PartNodes(id);
  ASSERT_TRUE(w.f.server->Cancel(w.f.alice, id).ok());
  w.BeatAll();
  EXPECT_TRUE(parts[0]->Cancelled(id));
  EXPECT_TRUE(parts[1]->Cancelled(id));
  parts[0]->Exit(id, std::nullopt, 15);
  w.BeatAll();
  EXPECT_EQ(w.Get(id).state, JobState::kCancelling);  // part 1 still stopping
  parts[1]->Exit(id, std::nullopt, 15);
  w.BeatAll();
  EXPECT_EQ(w.Get(id).state, JobState::kCancelled);

  // A part cancelled on its own node (its process killed there) ends the whole gang.
  const int64_t second = w.StartGang();
  parts = w.PartNodes(second);
  parts[0]->Exit(second, std::nullopt, 15);
  w.BeatAll();
  EXPECT_EQ(w.Get(second).state, JobState::kCancelling);
  w.BeatAll();
  EXPECT_TRUE(parts[1]->Cancelled(second));
  parts[1]->Exit(second, std::nullopt, 15);
  w.BeatAll();
  const Job j = w.Get(second);
  EXPECT_EQ(j.state, JobState::kFailed);
  EXPECT_EQ(j.reason, "part 0 on " + parts[0]->name + ": killed by signal 15");
  // The job's exit is that of the part that failed, not of the part stopped after it.
  EXPECT_EQ(j.signal, 15);
  EXPECT_FALSE(j.exit_code.has_value());
}

TEST(Gang, LosingANodeRequeuesTheWholeGang) {
  GangWorld w("gang_lost");
  const int64_t id = w.StartGang();
  std::vector<Node*> parts = w.PartNodes(id);
  const std::string lost = parts[1]->name;
  w.silent.insert(lost);
  w.f.clock.Advance(std::chrono::seconds(31));
  w.BeatAll();  // the others stay alive
  EXPECT_EQ(w.f.server->CheckNodeTimeouts(), 1);
  Job j = w.Get(id);
  EXPECT_EQ(j.state, JobState::kCancelling);
  EXPECT_EQ(j.parts[1].phase, PartPhase::kLost);
  EXPECT_EQ(j.stop_to_requeue, "part 1 on " + lost + ": node " + lost + " lost");
  w.BeatAll();
  EXPECT_TRUE(parts[0]->Cancelled(id));
  parts[0]->Exit(id, std::nullopt, 15);
  w.BeatAll();
  j = w.Get(id);
  EXPECT_EQ(j.state, JobState::kQueued);
  EXPECT_EQ(j.requeues, 1);
  EXPECT_TRUE(j.parts.empty());
  // Placed again as a whole, on the nodes left, as the next attempt.
  EXPECT_EQ(w.f.server->RunSchedulingPass().placed, 1);
  w.BeatAll();
  j = w.Get(id);
  ASSERT_EQ(j.parts.size(), 2u);
  for (const GangPart& p : j.parts) {
    EXPECT_NE(p.assignment.node, lost);
    EXPECT_EQ(w.On(p.assignment.node).started.at(id).attempt, 1);
  }
  // A part of the old run still reported by a node that comes back is told to stop.
  w.silent.clear();
  HeartbeatReply reply = w.On(lost).Beat(w.f);
  EXPECT_NE(std::find(reply.cancel.begin(), reply.cancel.end(), id), reply.cancel.end());
}

TEST(Gang, OnNodeLossFailMakesTheGangFail) {
  GangWorld w("gang_lost_fail");
  JobSpec spec = GangWorld::GangSpec();
  spec.on_node_loss = protocol::OnNodeLoss::kFail;
  const int64_t id = w.StartGang(spec);
  std::vector<Node*> parts = w.PartNodes(id);
  w.silent.insert(parts[0]->name);
  w.f.clock.Advance(std::chrono::seconds(31));
  w.BeatAll();
  ASSERT_EQ(w.f.server->CheckNodeTimeouts(), 1);
  w.BeatAll();
  parts[1]->Exit(id, std::nullopt, 15);
  w.BeatAll();
  const Job j = w.Get(id);
  EXPECT_EQ(j.state, JobState::kFailed);
  EXPECT_EQ(j.reason, "part 0 on " + parts[0]->name + ": node " + parts[0]->name + " lost");
}

TEST(Gang, TheStateMachineSurvivesARestart) {
  GangWorld w("gang_restart");
  const int64_t id = w.StartGang();
  std::vector<Node*> parts = w.PartNodes(id);
  parts[1]->Exit(id, 2);
  w.BeatAll();
  ASSERT_EQ(w.Get(id).state, JobState::kCancelling);
  w.f.Open();  // a server restart: everything from the store
  Job j = w.Get(id);
  EXPECT_EQ(j.state, JobState::kCancelling);
  EXPECT_EQ(j.stop_to_fail, "part 1 on " + parts[1]->name + ": exit code 2");
  ASSERT_EQ(j.parts.size(), 2u);
  EXPECT_EQ(j.parts[1].phase, PartPhase::kExited);
  EXPECT_EQ(j.parts[0].phase, PartPhase::kRunning);
  w.BeatAll();
  EXPECT_TRUE(parts[0]->Cancelled(id));
  parts[0]->Exit(id, std::nullopt, 9);
  w.BeatAll();
  j = w.Get(id);
  EXPECT_EQ(j.state, JobState::kFailed);
  // The failed part's exit, kept when the gang started stopping, survived the restart too.
  EXPECT_EQ(j.exit_code, 2);
  EXPECT_FALSE(j.signal.has_value());
}

TEST(Gang, APreemptibleGangIsPreemptedAndRequeuedAsOneJob) {
  ServerOptions o;
  o.preemption_grace = std::chrono::seconds(7);
  GangWorld w("gang_preempt", o);
  JobSpec spec = GangWorld::GangSpec();
  spec.preemptible = true;
  spec.nodes = 3;  // every GPU of the cluster
  const int64_t gang = w.StartGang(spec);
  ASSERT_EQ(w.Get(gang).state, JobState::kRunning);
  auto guaranteed = w.f.server->Submit(w.f.bob, Spec({"train"}, 2));
  ASSERT_TRUE(guaranteed.ok());
  PassStats st = w.f.server->RunSchedulingPass();
  EXPECT_EQ(st.preempted, 1);
  Job j = w.Get(gang);
  EXPECT_EQ(j.state, JobState::kCancelling);
  EXPECT_EQ(j.preempted_by, guaranteed->id);
  w.BeatAll();
  for (Node& n : w.nodes) {
    EXPECT_TRUE(n.Cancelled(gang)) << n.name;
    EXPECT_EQ(n.grace_ms.at(gang), 7000);
    n.Exit(gang, std::nullopt, 15);
  }
  w.BeatAll();
  j = w.Get(gang);
  EXPECT_EQ(j.state, JobState::kQueued);
  EXPECT_EQ(j.preemptions, 1);
  EXPECT_EQ(j.requeues, 1);
  EXPECT_EQ(w.f.server->RunSchedulingPass().placed, 1);
  EXPECT_EQ(w.Get(guaranteed->id).state, JobState::kAssigned);
  // The gang waits for three free nodes, and says so.
  EXPECT_EQ(w.Get(gang).state, JobState::kQueued);
  EXPECT_NE(w.Get(gang).reason.find("2 of 3 parts"), std::string::npos) << w.Get(gang).reason;
}

TEST(Gang, GangsWithRankZeroOnOneNodeGetDifferentMasterPorts) {
  GangWorld w("gang_ports");
  JobSpec spec = GangWorld::GangSpec();
  spec.gpus = 1;
  spec.nodes = 3;
  const int64_t a = w.StartGang(spec);
  const int64_t b = w.StartGang(spec);
  const Job ja = w.Get(a), jb = w.Get(b);
  ASSERT_EQ(ja.parts.size(), 3u);
  ASSERT_EQ(jb.parts.size(), 3u);
  const auto& ea = ja.parts[0].assignment.env;
  const auto& eb = jb.parts[0].assignment.env;
  // (With the default policy both put rank 0 on the same node, so the second gang takes 29501.)
  // Both rank 0s share a node (the case this is about), so the ports must differ there.
  ASSERT_EQ(ja.parts[0].assignment.node, jb.parts[0].assignment.node);
  EXPECT_EQ(ea.at("MASTER_ADDR"), eb.at("MASTER_ADDR"));
  EXPECT_EQ((std::set<std::string>{ea.at("MASTER_PORT"), eb.at("MASTER_PORT")}),
            (std::set<std::string>{"29500", "29501"}));
}

// The port range is checked in 64 bits: a base and a count whose int32 sum wraps are refused.
TEST(Gang, APortRangePastThePortSpaceIsRefusedWithoutOverflow) {
  testing::Fixture f("gang_port_range");
  ServerOptions o;
  o.gang_port_base = std::numeric_limits<int32_t>::max() - 10;
  o.gang_ports = 100;
  auto s = Server::Create(f.store.get(), &f.clock, o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().ToString().find("gang ports"), std::string::npos) << s.status().ToString();
}

TEST(Gang, PartLogsAreKeptApart) {
  GangWorld w("gang_logs");
  const int64_t id = w.StartGang();
  std::vector<Node*> parts = w.PartNodes(id);
  for (int rank = 0; rank < 2; ++rank) {
    RunReport& r = parts[rank]->runs.at(id);
    r.stdout_offset = 0;
    r.stdout_data = "hello from rank " + std::to_string(rank) + "\n";
  }
  w.BeatAll();
  for (int rank = 0; rank < 2; ++rank) {
    auto log = w.f.server->ReadLog(w.f.alice, id, "stdout", 0, rank);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    EXPECT_EQ(log->data, "hello from rank " + std::to_string(rank) + "\n");
  }
  auto none = w.f.server->ReadLog(w.f.alice, id, "stdout", 0, 2);
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
}

TEST(Gang, RefusedShapesSayWhy) {
  GangWorld w("gang_refused");
  JobSpec spec = GangWorld::GangSpec();
  spec.env = {{"MASTER_PORT", "1"}};
  auto r = w.f.server->Submit(w.f.alice, spec);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  // Four parts on three nodes: never.
  spec.env.clear();
  spec.nodes = 4;
  auto j = w.f.server->Submit(w.f.alice, spec);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(w.f.server->RunSchedulingPass().infeasible, 1);
  EXPECT_NE(w.Get(j->id).reason.find("needs 4 machines"), std::string::npos) << w.Get(j->id).reason;
  // A one-GPU gang job is not consolidated onto a share.
  spec.nodes = 2;
  spec.gpus = 1;
  j = w.f.server->Submit(w.f.alice, spec);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(w.f.server->ConsolidateAtNextStart(j->id, 500, "test").code(),
            StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace stoker::server
