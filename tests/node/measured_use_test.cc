// Placement by measured use through the real agent path: two node loops whose GPUs come from the
// fake NVML (loaded through the real dlopen path) with scripted activity (scenarios
// measured-busy and measured-idle: 90 % and 5 % busy whatever is allocated), samplers reading
// them, heartbeats carrying the samples to the real server over HTTP, and the scheduling pass
// reading the window the server keeps. Time is a manual clock shared by all of them, advanced a
// second per round, so a window of measurements takes no wall time.

#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "node/node_agent.h"
#include "node_world.h"
#include "nvml/simulated.h"
#include "telemetry/sampler.h"
#include "telemetry/snapshot_json.h"

namespace stoker::node {
namespace {
using server::JobState;
using server::Principal;
using server::Role;

using testing::Me;

struct MeasuredWorld {
  MeasuredWorld(const std::string& name, const std::string& policy, int32_t ratio_milli)
      : srv("measured_" + name, Options(policy, ratio_milli), &clock) {
    // Named so that, with equal allocations, the busy node is the policy's first choice.
    for (const auto& [node, scenario] : std::vector<std::pair<std::string, std::string>>{
             {"a-busy", "measured-busy"}, {"b-idle", "measured-idle"}}) {
      auto src = nvml::OpenSimulatedGpuSource(scenario);
      EXPECT_TRUE(src.ok()) << src.status().ToString();
      Node& n = nodes[node];
      n.source = std::move(*src);
      n.sampler = std::make_unique<telemetry::Sampler>(n.source.get(), &clock, nullptr,
                                                       telemetry::SamplerOptions{});
      telemetry::Sampler* sampler = n.sampler.get();
      n.agent = std::make_unique<NodeAgent>(
          srv.Agent(node), &clock, BuildInventory(node, n.source.get()), [sampler, node = node] {
            telemetry::TelemetrySnapshot snap;
            sampler->Snapshot(&snap);
            return telemetry::SnapshotToJson(snap, node)["gpus"];
          });
    }
  }
  ~MeasuredWorld() {
    for (int i = 0; i < 100 && srv.CancelAll(); ++i) Round();
  }
  static server::ServerOptions Options(const std::string& policy, int32_t ratio_milli) {
    server::ServerOptions so;
    so.placement_policy = policy;
    so.gpu_oversubscription_milli = ratio_milli;
    so.activity_window = std::chrono::seconds(20);
    return so;
  }
  // One second: every GPU sampled, every node's heartbeat (with the samples), a pass.
  void Round() {
    clock.Advance(std::chrono::seconds(1));
    for (auto& [name, n] : nodes) {
      if (sampling) {
        for (uint32_t i = 0; i < n.sampler->gpu_count(); ++i) n.sampler->SampleOnce(i);
      }
      Status s = n.agent->RunOnce();
      EXPECT_TRUE(s.ok()) << name << ": " << s.ToString();
    }
    srv.core->RunSchedulingPass();
  }
  bool RunUntil(const std::function<bool()>& done, int rounds = 200) {
    for (int i = 0; i < rounds; ++i) {
      Round();
      if (done()) return true;
      // Real processes start and end in real time: let them.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  server::Job Get(int64_t id) { return *srv.core->GetJob(srv.admin, id); }
  int64_t Submit(int gpus, int32_t gpu_milli = 0, bool preemptible = false) {
    server::JobSpec s;
    s.command = {"sleep", "300"};
    s.cpu_milli = 100;  // the nodes have the host's CPUs: let GPUs, not CPUs, be what fills up
    s.memory_mib = 64;
    s.gpus = gpus;
    s.gpu_milli = gpu_milli;
    s.preemptible = preemptible;
    auto j = srv.core->Submit(alice, s);
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? j->id : 0;
  }
  std::string AssignedEvent(int64_t id) {
    auto ev = srv.core->Events(srv.admin, id);
    std::string msg;
    for (const store::EventRow& e : *ev) {
      if (e.kind == "assigned") msg = e.message;
    }
    return msg;
  }
  std::string NodeOf(int64_t id) {
    const server::Job j = Get(id);
    return j.assignment ? j.assignment->node : std::string();
  }

  struct Node {
    std::unique_ptr<GpuSource> source;
    std::unique_ptr<telemetry::Sampler> sampler;
    std::unique_ptr<NodeAgent> agent;
  };
  // The server's manual clock starts at the real wall time: the agents stamp their samples with
  // it, and the server takes only samples within 5 minutes of its own time.
  ManualClock clock{MonoTime(std::chrono::seconds(1)), SystemClock().WallNow()};
  testing::ServerOverHttp srv;
  Principal alice{Me(), Role::kUser};
  std::map<std::string, Node> nodes;
  bool sampling = true;  // false: the agents send no readings (their GPUs are not measured)
};

TEST(MeasuredUse, WeightedPlacesByMeasuredUtilizationAndSaysSo) {
  MeasuredWorld w("weighted", "weighted", 1000);
  // Before the agents report any reading: one GPU of the idle node is allocated (the busy node
  // drained meanwhile), none of the busy one's.
  w.sampling = false;
  w.Round();  // the nodes register
  ASSERT_TRUE(w.srv.core->SetDrained(w.srv.admin, "a-busy", true).ok());
  const int64_t first = w.Submit(1);
  ASSERT_TRUE(w.RunUntil([&] { return w.Get(first).state == JobState::kRunning; }));
  ASSERT_EQ(w.NodeOf(first), "b-idle");
  ASSERT_TRUE(w.srv.core->SetDrained(w.srv.admin, "a-busy", false).ok());
  // By allocation the nodes tie (weighted: the emptier node against the tighter fit), and the
  // first node wins: the busy one.
  const int64_t probe = w.Submit(1);
  ASSERT_TRUE(w.RunUntil([&] { return w.Get(probe).state == JobState::kRunning; }));
  EXPECT_EQ(w.NodeOf(probe), "a-busy");
  EXPECT_NE(w.AssignedEvent(probe).find("u of a-busy 0 %: allocated share (its GPUs report no "
                                        "activity)"),
            std::string::npos)
      << w.AssignedEvent(probe);
  ASSERT_TRUE(w.srv.core->Cancel(w.alice, probe).ok());
  ASSERT_TRUE(w.RunUntil([&] { return IsTerminal(w.Get(probe).state); }));
  // The agents report: their GPUs are 90 % and 5 % busy. The same job now goes to the idle
  // node, and the decision says it went by measured use.
  w.sampling = true;
  for (int i = 0; i < 3; ++i) w.Round();
  const int64_t third = w.Submit(1);
  ASSERT_TRUE(w.RunUntil([&] { return w.Get(third).state == JobState::kRunning; }));
  EXPECT_EQ(w.NodeOf(third), "b-idle");
  const std::string why = w.AssignedEvent(third);
  EXPECT_NE(why.find("u of b-idle 5 %: measured use"), std::string::npos) << why;
}

TEST(MeasuredUse, OversubscriptionNeedsMeasuredHeadroomOverTheWindow) {
  MeasuredWorld w("oversub", "bestfit", 1500);
  // Guaranteed work holds every GPU of both nodes.
  const int64_t g1 = w.Submit(2);
  const int64_t g2 = w.Submit(2);
  ASSERT_TRUE(w.RunUntil([&] {
    return w.Get(g1).state == JobState::kRunning && w.Get(g2).state == JobState::kRunning;
  }));
  // A preemptible share: by commitments it could share any GPU (1000 + 400 <= 1500), but the
  // GPUs report activity and not yet over the window: it waits.
  const int64_t be = w.Submit(0, 400, /*preemptible=*/true);
  for (int i = 0; i < 5; ++i) w.Round();
  EXPECT_EQ(w.Get(be).state, JobState::kQueued) << w.Get(be).reason;
  // Once the window is covered it goes where the measurement leaves room: the idle node (the
  // busy one, 90 % busy, has no room for 40 % more).
  ASSERT_TRUE(w.RunUntil([&] { return w.Get(be).state == JobState::kRunning; }, 60));
  EXPECT_EQ(w.NodeOf(be), "b-idle");
  const std::string why = w.AssignedEvent(be);
  EXPECT_NE(why.find("sharing GPUs beyond their capacity"), std::string::npos) << why;
  EXPECT_NE(why.find("by measured headroom"), std::string::npos) << why;
  // A second share goes to the idle node's other GPU; a third finds room on no GPU (the idle
  // ones are at 1.4 of 1.5 committed, the busy ones have no measured headroom): it waits.
  const int64_t be2 = w.Submit(0, 400, true);
  ASSERT_TRUE(w.RunUntil([&] { return w.Get(be2).state == JobState::kRunning; }, 30));
  EXPECT_EQ(w.NodeOf(be2), "b-idle");
  const int64_t be3 = w.Submit(0, 400, true);
  for (int i = 0; i < 5; ++i) w.Round();
  EXPECT_EQ(w.Get(be3).state, JobState::kQueued);
}

}  // namespace
}  // namespace stoker::node
