// The node agent end to end: an in-process server over HTTP on loopback, a node whose GPUs come
// from the fake NVML (loaded through the real dlopen path, scenario h100-mig-node), and jobs
// that run as real processes. The test drives the rounds itself (scheduling pass, node round),
// so nothing depends on timing beyond generous upper bounds for processes to start and end.

#include "node/node_agent.h"

#include <gtest/gtest.h>

#include <thread>

#include "client/api_client.h"
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

struct World {
  // `allow_root`: the test may run as root (CI does) and submit as itself; a node refuses root
  // jobs unless its configuration allows them (RootJobsAreRefusedUnlessAllowed).
  World(const std::string& name, Duration grace = std::chrono::seconds(1), bool allow_root = true)
      : srv(name, server::ServerOptions{}, &clock) {
    core = srv.core.get();
    auto src = nvml::OpenSimulatedGpuSource("h100-mig-node");
    EXPECT_TRUE(src.ok()) << src.status().ToString();
    source = std::move(*src);
    sampler = std::make_unique<telemetry::Sampler>(source.get(), &clock, nullptr,
                                                   telemetry::SamplerOptions{});
    for (uint32_t i = 0; i < sampler->gpu_count(); ++i) sampler->SampleOnce(i);

    // The compact heartbeat form, as `stoker agent` sends it (the gang and measured-use tests
    // keep the full form of agents before it).
    agent = std::make_unique<NodeAgent>(srv.Agent("sim-node", grace, allow_root), &clock,
                                        BuildInventory("sim-node", source.get()),
                                        GpuSamplesFeed{[this] {
                                          telemetry::TelemetrySnapshot snap;
                                          sampler->Snapshot(&snap);
                                          return telemetry::ReportSamples(snap);
                                        }});
  }
  // Scheduling pass + node round until `done` holds (or ~30 s pass: the test fails).
  bool RunUntil(const std::function<bool()>& done) {
    for (int i = 0; i < 600; ++i) {
      core->RunSchedulingPass();
      Status s = agent->RunOnce();
      EXPECT_TRUE(s.ok()) << s.ToString();
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  JobState State(int64_t id) { return core->GetJob(admin, id)->state; }

  SystemClock clock;
  testing::ServerOverHttp srv;
  server::Server* core = nullptr;
  Principal admin{"admin", Role::kAdmin};
  Principal alice{Me(), Role::kUser};
  std::unique_ptr<GpuSource> source;
  std::unique_ptr<telemetry::Sampler> sampler;
  std::unique_ptr<NodeAgent> agent;
};

server::JobSpec Spec(std::vector<std::string> cmd, int gpus = 0) {
  server::JobSpec s;
  s.command = std::move(cmd);
  s.gpus = gpus;
  return s;
}

std::string Log(World& w, int64_t id) { return w.core->ReadLog(w.admin, id, "stdout", 0)->data; }

TEST(NodeAgent, RegistersASimulatedNodeAndRunsAGpuJob) {
  World w("gpu");
  auto job = w.core->Submit(
      w.alice, Spec({"sh", "-c", "echo devices=$CUDA_VISIBLE_DEVICES job=$STOKER_JOB_ID"}, 2));
  ASSERT_TRUE(job.ok());
  ASSERT_TRUE(w.RunUntil([&] {
    return w.State(job->id) == JobState::kSucceeded && !Log(w, job->id).empty();
  })) << "state "
      << server::JobStateName(w.State(job->id)) << " reason "
      << w.core->GetJob(w.admin, job->id)->reason;

  // The inventory and the samples came through the fake NVML: 8 H100s, one in MIG mode.
  auto node = w.core->GetNode(w.admin, "sim-node");
  ASSERT_TRUE(node.ok());
  const protocol::json shown = protocol::NodeStatusToJson(*node);  // as GET /nodes/{name} answers
  EXPECT_TRUE(shown["simulated"].get<bool>());
  EXPECT_EQ(shown["gpus"].size(), 8u);
  EXPECT_EQ(shown["samples"].size(), 8u);
  EXPECT_EQ(shown["state"], "ready");

  const auto done = w.core->GetJob(w.admin, job->id);
  EXPECT_EQ(done->exit_code, 0);
  EXPECT_EQ(Log(w, job->id), "devices=" + done->assignment->cuda_visible_devices +
                                 " job=" + std::to_string(job->id) + "\n");
  EXPECT_EQ(done->assignment->gpu_indices.size(), 2u);
}

TEST(NodeAgent, FailingJobAndCancelReportExitStatus) {
  World w("cancel");
  auto fails = w.core->Submit(w.alice, Spec({"sh", "-c", "echo oops >&2; exit 3"}));
  auto sleeper = w.core->Submit(w.alice, Spec({"sleep", "300"}, 1));
  ASSERT_TRUE(fails.ok() && sleeper.ok());
  ASSERT_TRUE(w.RunUntil([&] {
    return IsTerminal(w.State(fails->id)) && w.State(sleeper->id) == JobState::kRunning;
  }));
  auto f = w.core->GetJob(w.admin, fails->id);
  EXPECT_EQ(f->state, JobState::kFailed);
  EXPECT_EQ(f->exit_code, 3);
  ASSERT_TRUE(w.RunUntil(
      [&] { return w.core->ReadLog(w.admin, fails->id, "stderr", 0)->data == "oops\n"; }));

  ASSERT_TRUE(w.core->Cancel(w.alice, sleeper->id).ok());
  ASSERT_TRUE(w.RunUntil([&] { return IsTerminal(w.State(sleeper->id)); }));
  auto c = w.core->GetJob(w.admin, sleeper->id);
  EXPECT_EQ(c->state, JobState::kCancelled);
  EXPECT_EQ(c->signal, 15);  // SIGTERM reached the job (sleep dies of it)
}

TEST(NodeAgent, PreemptedJobIsStoppedRequeuedAndRunsAgain) {
  World w("preempt");
  // A best-effort job on every plain GPU (7 of 8: GPU 3 is in MIG mode).
  server::JobSpec be = Spec({"sleep", "300"}, 7);
  be.preemptible = true;
  auto victim = w.core->Submit(w.alice, be);
  ASSERT_TRUE(victim.ok());
  ASSERT_TRUE(w.RunUntil([&] { return w.State(victim->id) == JobState::kRunning; }));
  auto guaranteed = w.core->Submit(w.alice, Spec({"sh", "-c", "echo guaranteed"}, 4));
  ASSERT_TRUE(guaranteed.ok());
  ASSERT_TRUE(w.RunUntil([&] { return w.State(guaranteed->id) == JobState::kSucceeded; }));
  auto v = w.core->GetJob(w.admin, victim->id);
  EXPECT_GE(v->preemptions, 1);
  EXPECT_GE(v->requeues, 1);
  // Requeued, then placed again once the guaranteed job finished.
  ASSERT_TRUE(w.RunUntil([&] { return w.State(victim->id) == JobState::kRunning; }));
  ASSERT_TRUE(w.core->Cancel(w.alice, victim->id).ok());
  ASSERT_TRUE(w.RunUntil([&] { return IsTerminal(w.State(victim->id)); }));
}

// The agent refuses a start order for root whatever the server says: the job fails with the
// node's reason instead of running.
TEST(NodeAgent, RootJobsAreRefusedUnlessAllowed) {
  if (::geteuid() != 0) GTEST_SKIP() << "only a root agent switches users";
  World w("root", std::chrono::seconds(1), /*allow_root=*/false);
  server::JobSpec spec = Spec({"sh", "-c", "id -u"});
  spec.user = "root";
  auto job = w.core->Submit(w.admin, spec);
  ASSERT_TRUE(job.ok());
  ASSERT_TRUE(w.RunUntil([&] { return IsTerminal(w.State(job->id)); }));
  auto j = w.core->GetJob(w.admin, job->id);
  EXPECT_EQ(j->state, JobState::kFailed);
  EXPECT_NE(j->reason.find("does not run jobs as root"), std::string::npos) << j->reason;
  EXPECT_EQ(Log(w, job->id), "");
}

}  // namespace
}  // namespace stoker::node
