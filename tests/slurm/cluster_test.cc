// The adapter against a real Slurm 22.05 (the slurm_cluster ctest fixture: 4 nodes g1..g4 with
// 8 file-backed GPUs each). Tests share the cluster (RESOURCE_LOCK) and cancel their jobs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <thread>

#include "cluster_util.h"
#include "core/clock.h"
#include "slurm/client.h"
#include "slurm/controller.h"
#include "telemetry/attribution.h"

namespace stoker::slurm {
namespace {

using testing::kConf;
using testing::kDir;
using testing::Sh;
using testing::WaitFor;

uint32_t Submit(const std::string& args) {
  return static_cast<uint32_t>(
      std::stoul(Sh("cd " + kDir + " && sbatch --parsable -o /dev/null " + args)));
}

class SlurmCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = std::make_unique<CommandSlurmClient>(
        CommandClientOptions{kConf, "", std::chrono::seconds(30)});
    auto nodes = client_->Nodes();
    ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
    ASSERT_EQ(nodes->size(), 4u) << "the slurm_cluster fixture brings up 4 nodes";
  }
  void TearDown() override {
    Sh("scancel --full -u $(id -un) || true");
    WaitFor([&] { return Sh("squeue -h -o %i").empty(); });
  }
  SlurmJob Job(uint32_t id) {
    auto jobs = client_->Jobs();
    EXPECT_TRUE(jobs.ok()) << jobs.status().ToString();
    if (jobs.ok()) {
      for (const SlurmJob& j : *jobs) {
        if (j.id == id) return j;
      }
    }
    return {};
  }
  std::unique_ptr<CommandSlurmClient> client_;
};

TEST_F(SlurmCluster, WeightsFollowTheScoreAndComeBackAfterReconfigure) {
  const uint32_t busy = Submit("-w g3 --gres=gpu:6 --wrap 'sleep 120'");
  ASSERT_TRUE(WaitFor([&] { return Job(busy).Running(); }));
  auto c = SlurmController::Create(client_.get(), {}).value();
  ASSERT_TRUE(c->Cycle().ok());
  auto weight_of = [&](const std::string& name) {
    auto nodes = client_->Nodes();
    if (!nodes.ok()) return int64_t{-1};
    for (const SlurmNode& n : *nodes) {
      if (n.name == name) return n.weight;
    }
    return int64_t{-1};
  };
  // The partly used node is Stoker's first choice for the next GPU job: lowest weight.
  const int64_t g3 = weight_of("g3");
  EXPECT_LT(g3, weight_of("g1"));
  EXPECT_LT(g3, weight_of("g2"));
  EXPECT_LT(g3, weight_of("g4"));
  EXPECT_GT(c->metrics().weight_updates, 0);
  // A reconfigure reverts weights to slurm.conf (all 1); the next cycle puts them back.
  Sh("scontrol reconfigure");
  ASSERT_TRUE(WaitFor([&] { return weight_of("g1") == 1; }));
  ASSERT_TRUE(c->Cycle().ok());
  EXPECT_LT(weight_of("g3"), weight_of("g1"));
  // And Slurm itself now sends an unsteered 1-GPU job to the low-weight node.
  const uint32_t small = Submit("--gres=gpu:1 --wrap 'sleep 60'");
  ASSERT_TRUE(WaitFor([&] { return Job(small).Running(); }));
  EXPECT_EQ(Job(small).nodes, std::vector<std::string>{"g3"});
}

TEST_F(SlurmCluster, HeldGpuJobIsReleasedOntoThePolicysNode) {
  const uint32_t busy = Submit("-w g2 --gres=gpu:6 --wrap 'sleep 120'");
  ASSERT_TRUE(WaitFor([&] { return Job(busy).Running(); }));
  // Held with the steer marker: Slurm would start it on g1 (lowest name, equal weights);
  // stoker fills the 2 GPUs left on g2 (no fragment left behind).
  const uint32_t held = Submit("-H --comment=stoker:steer --gres=gpu:2 --wrap 'sleep 60'");
  const uint32_t unmarked = Submit("-H --gres=gpu:2 --wrap 'sleep 60'");
  ASSERT_TRUE(WaitFor([&] { return Job(held).Held() && Job(unmarked).Held(); }));
  ControllerOptions o;
  o.manage_weights = false;  // steering alone
  auto c = SlurmController::Create(client_.get(), o).value();
  auto d = c->Cycle();
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ(d->steer.size(), 1u);
  EXPECT_EQ(d->steer[0].job, held);
  EXPECT_EQ(d->steer[0].nodes, std::vector<std::string>{"g2"});
  EXPECT_EQ(c->metrics().jobs_steered, 1);
  ASSERT_TRUE(WaitFor([&] { return Job(held).Running(); }));
  EXPECT_EQ(Job(held).nodes, std::vector<std::string>{"g2"});
  EXPECT_TRUE(Job(unmarked).Held()) << "a user's own hold is not Stoker's to release";
}

// Deciding at submission: the fixture runs deploy/slurm/job_submit.lua (JobSubmitPlugins=lua),
// which reads the submit plan beside slurm.conf.
TEST_F(SlurmCluster, JobSubmitScriptPlacesMarkedJobsFromThePlanWithoutHolding) {
  const std::string plan = kDir + "/stoker-submit-plan";
  // The plan goes when the test ends, passed or not: later tests submit marked jobs too.
  struct RemovePlan {
    std::string path;
    ~RemovePlan() { std::remove(path.c_str()); }
  } remove_plan{plan};
  auto excluded = [&](uint32_t id) {
    return Sh("scontrol show job " + std::to_string(id) + " | grep -o 'ExcNodeList=[^ ]*' || true");
  };
  // The controller's own plan: no shard jobs here, so every node is allowed; the marked job is
  // never held and starts.
  ControllerOptions o;
  o.submit_plan = plan;
  auto c = SlurmController::Create(client_.get(), o).value();
  ASSERT_TRUE(c->Cycle().ok());
  const uint32_t placed = Submit("--comment=stoker:steer --gres=gpu:2 --wrap 'sleep 60'");
  EXPECT_FALSE(Job(placed).Held());
  ASSERT_TRUE(WaitFor([&] { return Job(placed).Running(); }));
  EXPECT_EQ(excluded(placed), "ExcNodeList=(null)");

  // A plan that restricts (as with shard jobs on g1-g3): 1 GPU on g4 only; 2 GPUs on g2 once,
  // so a second such job in the same plan is held; 3 GPUs nowhere: held.
  auto write_plan = [&](int64_t age_s, bool marker = true) {
    std::ofstream out(plan + ".tmp");
    out << "stoker-submit-plan 1\ngeneration 7\nwritten " << (::time(nullptr) - age_s)
        << "\nvalid_for 60\n"
        << (marker ? "marker stoker:steer\n" : "") << "nodes g1,g2,g3,g4\n"
        << "gpu 1 g4 -\ngpu 2 - g2\ngpu 3 - -\n";
    out.close();
    ASSERT_EQ(::rename((plan + ".tmp").c_str(), plan.c_str()), 0);
  };
  write_plan(0);
  const uint32_t one = Submit("--comment=stoker:steer --gres=gpu:1 --wrap 'sleep 60'");
  const uint32_t two = Submit("--comment=stoker:steer --gres=gpu:2 --wrap 'sleep 60'");
  const uint32_t two_more = Submit("--comment=stoker:steer --gres=gpu:2 --wrap 'sleep 60'");
  const uint32_t three = Submit("--comment=stoker:steer --gres=gpu:3 --wrap 'sleep 60'");
  const uint32_t unmarked = Submit("--gres=gpu:3 --wrap 'sleep 60'");
  EXPECT_EQ(excluded(one), "ExcNodeList=g[1-3]");
  EXPECT_EQ(excluded(two), "ExcNodeList=g[1,3-4]");
  EXPECT_TRUE(Job(two_more).Held()) << "g2 was offered once in this plan";
  EXPECT_TRUE(Job(three).Held());
  EXPECT_FALSE(Job(unmarked).Held());
  EXPECT_EQ(excluded(unmarked), "ExcNodeList=(null)");
  ASSERT_TRUE(WaitFor([&] { return Job(one).Running() && Job(two).Running(); }));
  EXPECT_EQ(Job(one).nodes, std::vector<std::string>{"g4"});
  EXPECT_EQ(Job(two).nodes, std::vector<std::string>{"g2"});
  // The jobs it held are the controller's, as with --hold: released onto a node.
  ControllerOptions steer;
  steer.manage_weights = false;
  auto s = SlurmController::Create(client_.get(), steer).value();
  auto d = s->Cycle();
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(s->metrics().jobs_steered, 2);
  ASSERT_TRUE(WaitFor([&] { return Job(two_more).Running() && Job(three).Running(); }));

  // A stale plan (the server stopped) steers and holds nothing.
  write_plan(120);
  const uint32_t late = Submit("--comment=stoker:steer --gres=gpu:3 --wrap 'sleep 60'");
  EXPECT_FALSE(Job(late).Held());
  EXPECT_EQ(excluded(late), "ExcNodeList=(null)");

  // A plan without a marker line holds nothing: the controller releases only marked jobs, so a
  // job held by such a plan would never be released.
  write_plan(0, false);
  const uint32_t any = Submit("--gres=gpu:3 --wrap 'sleep 60'");
  EXPECT_FALSE(Job(any).Held());
  EXPECT_EQ(excluded(any), "ExcNodeList=(null)");
}

TEST_F(SlurmCluster, VanishedJobsUnknownNodesAndUnreachableSlurmAreClearErrors) {
  Status s = client_->SetNodeWeight("nosuchnode", 3);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("Invalid node name"), std::string::npos) << s.ToString();
  const uint32_t done = Submit("--wrap true");
  ASSERT_TRUE(WaitFor([&] { return Job(done).state == "COMPLETED"; }));
  s = client_->SteerAndRelease(done, {"g1"});
  EXPECT_FALSE(s.ok());
  s = client_->Requeue(999999);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  // A controller that does not answer: the same cluster's config with another port.
  const std::string bad = kDir + "/unreachable.conf";
  Sh("sed 's/^SlurmctldPort=.*/SlurmctldPort=1/' " + kConf + " > " + bad);
  CommandSlurmClient unreachable({bad, "", std::chrono::seconds(30)});
  auto c = SlurmController::Create(&unreachable, {}).value();
  auto r = c->Cycle();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_EQ(c->metrics().read_errors_unreachable, 1);
}

// A process started by the real slurmd is attributed to its Slurm job: through its cgroup where
// Slurm uses cgroups, through SLURM_JOB_ID in its environment here (proctrack/linuxproc).
TEST_F(SlurmCluster, AgentAttributesSlurmdStartedProcessesToTheirJob) {
  const std::string pidfile = kDir + "/attr.pid";
  Sh("rm -f " + pidfile);
  const uint32_t id = Submit("--gres=gpu:1 --wrap 'echo $$ > " + pidfile + ".tmp; mv " + pidfile +
                             ".tmp " + pidfile + "; exec sleep 120'");
  ASSERT_TRUE(WaitFor([&] { return std::ifstream(pidfile).good(); }));
  uint32_t pid = 0;
  std::ifstream(pidfile) >> pid;
  ASSERT_GT(pid, 0u);
  telemetry::ProcfsProcessInfo info;
  SystemClock clock;
  telemetry::Attributor attributor(&info, &clock);
  const JobRef ref = attributor.AttributePid(pid);
  EXPECT_EQ(ref.kind, JobRef::Kind::kSlurm);
  EXPECT_EQ(ref.id, std::to_string(id));
  EXPECT_FALSE(ref.user.empty());
}

}  // namespace
}  // namespace stoker::slurm
