// Idle reclaim of real Slurm jobs: four jobs run in the slurm_cluster fixture; their GPU
// activity comes from scripted samples whose processes are the jobs' real pids, attributed to
// the Slurm job ids by the agent's Attributor through /proc. Simulated time, 10 s per sample.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "cluster_util.h"
#include "core/clock.h"
#include "slurm/client.h"
#include "slurm/reclaim.h"
#include "support/fake_gpu_source.h"
#include "telemetry/attribution.h"

namespace stoker::slurm {
namespace {

using testing::kConf;
using testing::kDir;
using testing::Sh;
using testing::WaitFor;

struct RealJob {
  uint32_t id = 0;
  uint32_t pid = 0;
};

// Submits a batch job whose shell writes its pid, then waits for it to run.
RealJob Start(const std::string& name, const std::string& extra = "") {
  const std::string pidfile = kDir + "/reclaim-" + name + ".pid";
  Sh("rm -f " + pidfile);
  RealJob j;
  j.id = static_cast<uint32_t>(
      std::stoul(Sh("cd " + kDir + " && sbatch --parsable -o /dev/null -J " + name +
                    " --gres=gpu:1 " + extra + " --wrap 'echo $$ > " + pidfile + ".tmp; mv " +
                    pidfile + ".tmp " + pidfile + "; exec sleep 300'")));
  EXPECT_TRUE(WaitFor([&] { return std::ifstream(pidfile).good(); })) << name;
  std::ifstream(pidfile) >> j.pid;
  return j;
}

std::string JobField(uint32_t job, const std::string& key) {
  const std::string line = Sh("scontrol -o show job " + std::to_string(job));
  const size_t at = line.find(" " + key + "=");
  if (at == std::string::npos) return "";
  const size_t start = at + key.size() + 2;
  // Comment values may contain spaces: up to the next " Key=" of scontrol's fixed order.
  const size_t end = key == "Comment" ? line.find(" StdErr=", start) : line.find(' ', start);
  return line.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

TEST(SlurmReclaimCluster, BusyThenIdleJobIsWarnedAndRequeuedBusyAndExemptJobsAreNot) {
  const RealJob idle = Start("train-idle");
  const RealJob held = Start("train-holds-memory");
  const RealJob busy = Start("train-busy");
  const RealJob exempt = Start("interactive-notebook");
  ASSERT_TRUE(idle.pid && held.pid && busy.pid && exempt.pid);

  CommandSlurmClient client({kConf, "", std::chrono::seconds(30)});
  SlurmReclaimOptions o;
  o.idle.warn_after = std::chrono::minutes(2);
  o.idle.act_after = std::chrono::minutes(4);
  o.idle.action = efficiency::IdleReclaimPolicy::Action::kRequeue;
  o.memory_held.warn_after = std::chrono::minutes(1);
  o.memory_held.act_after = std::chrono::minutes(2);
  o.memory_held.action = efficiency::IdleReclaimPolicy::Action::kCancel;
  o.held_memory_min_bytes = uint64_t{1} << 30;
  const std::string hook_log = kDir + "/reclaim-hook.log";
  Sh("rm -f " + hook_log);
  o.hook = {
      "/bin/sh", "-c",
      "echo \"$STOKER_SLURM_JOB_ID $STOKER_RECLAIM_RULE $STOKER_RECLAIM_ACTION\" >> " + hook_log};
  o.audit_path = kDir + "/reclaim-audit.jsonl";
  Sh("rm -f " + o.audit_path);
  SlurmReclaim reclaim(&client, o);

  telemetry::ProcfsProcessInfo procs;
  SystemClock clock;
  telemetry::Attributor attributor(&procs, &clock, std::chrono::hours(1));
  const WallTime t0 = clock.WallNow();
  auto sample = [&](uint32_t gpu, uint32_t pid, bool active, uint64_t mem, WallTime t) {
    GpuSample s = stoker::testing::MakeH100Sample(gpu, 1);
    s.timestamp = t;
    s.processes[0].pid = pid;
    s.processes[0].used_memory_bytes = Field<uint64_t>::Of(mem);
    s.util_gpu_pct = Field<uint32_t>::Of(active ? 80 : 0);
    s.gpm.sm_active = Field<double>::Of(active ? 0.6 : 0.0);
    attributor.Attribute(&s);
    return s;
  };
  std::vector<SlurmReclaimRecord> all;
  for (int step = 0; step <= 36; ++step) {  // 6 minutes of samples
    const WallTime t = t0 + std::chrono::seconds(10 * step);
    const bool first_minute = step <= 6;
    auto jobs = client.Jobs();
    ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
    reclaim.UpdateJobs(*jobs);
    reclaim.Observe(sample(0, idle.pid, first_minute, 0, t));
    reclaim.Observe(sample(1, held.pid, first_minute, uint64_t{8} << 30, t));
    reclaim.Observe(sample(2, busy.pid, true, uint64_t{8} << 30, t));
    reclaim.Observe(sample(3, exempt.pid, false, uint64_t{8} << 30, t));
    for (auto& r : reclaim.Evaluate(t)) all.push_back(r);
    if (step == 20) {
      // Between the idle job's warning (2 min idle) and its requeue (4 min): warned in Slurm.
      EXPECT_NE(JobField(idle.id, "Comment").find("stoker idle-reclaim warning (idle)"),
                std::string::npos)
          << JobField(idle.id, "Comment");
    }
  }
  auto records_for = [&](uint32_t job) {
    std::vector<SlurmReclaimRecord> v;
    for (const auto& r : all) {
      if (r.record.job == std::to_string(job)) v.push_back(r);
    }
    return v;
  };
  // The busy-then-idle job: warned, then requeued, by the idle rule, with evidence that the
  // idle window began after the busy minute.
  auto ri = records_for(idle.id);
  ASSERT_EQ(ri.size(), 2u);
  EXPECT_EQ(ri[0].record.action, efficiency::ReclaimAction::kWarn);
  EXPECT_EQ(ri[1].record.action, efficiency::ReclaimAction::kRequeue);
  EXPECT_TRUE(ri[1].record.result.ok()) << ri[1].record.result.ToString();
  EXPECT_EQ(ri[1].rule, "idle");
  EXPECT_GE(ri[1].record.evidence.window_start, t0 + std::chrono::seconds(60));
  EXPECT_GT(ri[1].record.evidence.samples, 20);
  EXPECT_EQ(ri[1].record.evidence.max_activity_milli, 0);
  ASSERT_TRUE(WaitFor([&] { return JobField(idle.id, "Restarts") == "1"; }))
      << Sh("scontrol -o show job " + std::to_string(idle.id));
  // The job that held 8 GiB while idle: the memory rule warned after 1 minute and cancelled
  // after 2, per its policy.
  auto rh = records_for(held.id);
  ASSERT_EQ(rh.size(), 2u);
  EXPECT_EQ(rh[0].rule, "memory_held_while_idle");
  EXPECT_EQ(rh[1].record.action, efficiency::ReclaimAction::kCancel);
  EXPECT_EQ(rh[1].memory_held_bytes, uint64_t{8} << 30);
  ASSERT_TRUE(WaitFor([&] { return JobField(held.id, "JobState") == "CANCELLED"; }));
  // Busy: nothing. Exempt (interactive): recorded as exempt, never warned or touched.
  EXPECT_TRUE(records_for(busy.id).empty());
  auto re = records_for(exempt.id);
  ASSERT_FALSE(re.empty());
  for (const auto& r : re) EXPECT_EQ(r.record.action, efficiency::ReclaimAction::kExempt);
  EXPECT_EQ(JobField(busy.id, "JobState"), "RUNNING");
  EXPECT_EQ(JobField(exempt.id, "JobState"), "RUNNING");
  EXPECT_EQ(JobField(exempt.id, "Comment"), "");  // scontrol omits an empty Comment
  // The hook ran for each warning and action; the audit log has every record.
  const std::string hooks = Sh("cat " + hook_log);
  EXPECT_NE(hooks.find(std::to_string(idle.id) + " idle warn"), std::string::npos) << hooks;
  EXPECT_NE(hooks.find(std::to_string(idle.id) + " idle requeue"), std::string::npos) << hooks;
  EXPECT_NE(hooks.find(std::to_string(held.id) + " memory_held_while_idle cancel"),
            std::string::npos)
      << hooks;
  EXPECT_EQ(Sh("wc -l < " + o.audit_path), std::to_string(reclaim.audit().size()));
  EXPECT_EQ(reclaim.metrics().requeues, 1);
  EXPECT_EQ(reclaim.metrics().cancels, 1);
  Sh("scancel --full -u $(id -un) || true");
  WaitFor([&] { return Sh("squeue -h -o %i").empty(); });
}

}  // namespace
}  // namespace stoker::slurm
