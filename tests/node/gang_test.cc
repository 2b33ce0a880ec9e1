// A 2-node x 2-GPU gang end to end: the real server (in-process, over HTTP on loopback), two
// real node loops whose GPUs come from the fake NVML through the real dlopen path, and parts
// that run as real processes. The test drives the rounds (scheduling pass, node rounds, the
// liveness check) itself; waits are bounded by generous limits for processes to start and end.

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <thread>

#include "node/node_agent.h"
#include "node_world.h"
#include "nvml/simulated.h"

namespace stoker::node {
namespace {
using server::JobState;
using server::Principal;
using server::Role;

using testing::Me;

struct GangWorld {
  explicit GangWorld(const std::string& name) : srv("gang_" + name, Options(), &clock) {
    for (const std::string node : {"sim-a", "sim-b"}) {
      auto src = nvml::OpenSimulatedGpuSource("h100-mig-node");
      EXPECT_TRUE(src.ok()) << src.status().ToString();
      NodeOptions no = srv.Agent(node);
      no.address = node == "sim-a" ? "127.0.0.1" : "127.0.0.2";
      agents[node] = std::make_unique<NodeAgent>(no, &clock, BuildInventory(node, src->get()),
                                                 std::function<server::json()>());
      sources.push_back(std::move(*src));
    }
  }
  ~GangWorld() {
    // Whatever still runs is stopped: cancel the jobs and let the nodes report them gone.
    for (int i = 0; i < 100 && srv.CancelAll(); ++i) Round();
  }
  static server::ServerOptions Options() {
    server::ServerOptions so;
    so.node_timeout = std::chrono::seconds(3);
    return so;
  }
  // One round: liveness, a scheduling pass, one heartbeat of every node not `silent`.
  void Round() {
    srv.core->CheckNodeTimeouts();
    srv.core->RunSchedulingPass();
    for (auto& [name, agent] : agents) {
      if (silent.count(name)) continue;
      Status s = agent->RunOnce();
      EXPECT_TRUE(s.ok()) << name << ": " << s.ToString();
    }
  }
  bool RunUntil(const std::function<bool()>& done) {
    for (int i = 0; i < 600; ++i) {
      Round();
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  server::Job Get(int64_t id) { return *srv.core->GetJob(srv.admin, id); }
  std::string Log(int64_t id, int32_t part) {
    return srv.core->ReadLog(srv.admin, id, "stdout", 0, part)->data;
  }
  int64_t SubmitGang(const std::string& script) {
    server::JobSpec s;
    s.command = {"sh", "-c", script};
    s.gpus = 2;
    s.nodes = 2;
    auto j = srv.core->Submit(alice, s);
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? j->id : 0;
  }
  bool BothPartsRunning(int64_t id) {
    const server::Job j = Get(id);
    return j.parts.size() == 2 && j.parts[0].phase == server::PartPhase::kRunning &&
           j.parts[1].phase == server::PartPhase::kRunning;
  }

  SystemClock clock;
  testing::ServerOverHttp srv;
  Principal alice{Me(), Role::kUser};
  std::vector<std::unique_ptr<GpuSource>> sources;
  std::map<std::string, std::unique_ptr<NodeAgent>> agents;
  std::set<std::string> silent;
};

constexpr char kPrintEnv[] =
    "echo rank=$RANK local=$LOCAL_RANK world=$WORLD_SIZE master=$MASTER_ADDR:$MASTER_PORT "
    "nnodes=$PET_NNODES nproc=$PET_NPROC_PER_NODE devices=$CUDA_VISIBLE_DEVICES";

TEST(GangEndToEnd, BothPartsStartWithConsistentRankAndWorldSize) {
  GangWorld w("start");
  const int64_t id = w.SubmitGang(kPrintEnv);
  ASSERT_TRUE(w.RunUntil([&] {
    return w.Get(id).state == JobState::kSucceeded && !w.Log(id, 0).empty() &&
           !w.Log(id, 1).empty();
  })) << JobStateName(w.Get(id).state)
      << " " << w.Get(id).reason;
  const server::Job j = w.Get(id);
  ASSERT_EQ(j.parts.size(), 2u);
  EXPECT_NE(j.parts[0].assignment.node, j.parts[1].assignment.node);
  const std::string master = j.parts[0].assignment.node == "sim-a" ? "127.0.0.1" : "127.0.0.2";
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(w.Log(id, rank), "rank=" + std::to_string(rank) + " local=0 world=2 master=" +
                                   master + ":29500 nnodes=2 nproc=2 devices=" +
                                   j.parts[rank].assignment.cuda_visible_devices + "\n");
    EXPECT_EQ(j.parts[rank].exit_code, 0);
  }
}

TEST(GangEndToEnd, CancellingTheGangEndsBothParts) {
  GangWorld w("cancel");
  const int64_t id = w.SubmitGang("exec sleep 300");
  ASSERT_TRUE(w.RunUntil([&] { return w.BothPartsRunning(id); }));
  ASSERT_TRUE(w.srv.core->Cancel(w.alice, id).ok());
  ASSERT_TRUE(w.RunUntil([&] { return IsTerminal(w.Get(id).state); }));
  const server::Job j = w.Get(id);
  EXPECT_EQ(j.state, JobState::kCancelled);
  for (const server::GangPart& p : j.parts) EXPECT_EQ(p.signal, 15) << p.assignment.node;
}

TEST(GangEndToEnd, CancellingOnePartOnItsNodeEndsBoth) {
  GangWorld w("cancel_part");
  const int64_t id = w.SubmitGang("exec sleep 300");
  ASSERT_TRUE(w.RunUntil([&] { return w.BothPartsRunning(id); }));
  // Part 1 is cancelled by its own node (as its operator would): the gang stops part 0 too.
  const std::string node = w.Get(id).parts[1].assignment.node;
  ASSERT_TRUE(w.agents.at(node)->runner().Cancel(std::to_string(id)).ok());
  ASSERT_TRUE(w.RunUntil([&] { return IsTerminal(w.Get(id).state); }));
  const server::Job j = w.Get(id);
  EXPECT_EQ(j.state, JobState::kFailed);
  EXPECT_EQ(j.reason, "part 1 on " + node + ": killed by signal 15");
  EXPECT_EQ(j.parts[0].signal, 15);  // stopped by the server's cancel
}

TEST(GangEndToEnd, APartThatFailsEndsBoth) {
  GangWorld w("fail");
  const int64_t id = w.SubmitGang("if [ \"$RANK\" = 1 ]; then exit 3; fi; exec sleep 300");
  ASSERT_TRUE(w.RunUntil([&] { return IsTerminal(w.Get(id).state); }));
  const server::Job j = w.Get(id);
  EXPECT_EQ(j.state, JobState::kFailed);
  EXPECT_EQ(j.reason, "part 1 on " + j.parts[1].assignment.node + ": exit code 3");
  EXPECT_EQ(j.exit_code, 3);
}

TEST(GangEndToEnd, LosingANodeRequeuesTheGang) {
  GangWorld w("lost");
  const int64_t id = w.SubmitGang("exec sleep 300");
  ASSERT_TRUE(w.RunUntil([&] { return w.BothPartsRunning(id); }));
  const std::string lost = w.Get(id).parts[1].assignment.node;
  // That node stops reporting: after the timeout it is lost, the other part is stopped and the
  // gang goes back to the queue as a whole.
  w.silent.insert(lost);
  ASSERT_TRUE(w.RunUntil([&] { return w.Get(id).requeues == 1; }));
  server::Job j = w.Get(id);
  EXPECT_NE(j.state, JobState::kRunning);
  EXPECT_NE(j.reason.find("node " + lost + " lost"), std::string::npos) << j.reason;
  // It comes back: its stale part is stopped and the gang runs again on both nodes, as the
  // next attempt.
  w.silent.clear();
  ASSERT_TRUE(w.RunUntil([&] { return w.BothPartsRunning(id); }));
  j = w.Get(id);
  EXPECT_EQ(j.attempt(), 1);
  EXPECT_EQ(j.state, JobState::kRunning);
}

}  // namespace
}  // namespace stoker::node
