// The Slurm reclaim bridge's safety rules with a fake client: a job that vanished or restarted
// between the evidence and the action is not touched.
#include "slurm/reclaim.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "fake_client.h"

namespace stoker::slurm {
namespace {

SlurmJob Running(uint32_t id, int64_t start) {
  SlurmJob j;
  j.id = id;
  j.state = "RUNNING";
  j.start_time = start;
  j.user = "alice";
  j.partition = "gpu";
  return j;
}

GpuSample Idle(WallTime t, const std::string& job) {
  GpuSample s;
  s.id.uuid = "GPU-1";
  s.timestamp = t;
  s.util_gpu_pct = Field<uint32_t>::Of(0);
  GpuProcess p;
  p.pid = 10;
  p.used_memory_bytes = Field<uint64_t>::Of(0);
  p.job.kind = JobRef::Kind::kSlurm;
  p.job.id = job;
  s.processes.push_back(p);
  return s;
}

class SlurmReclaimSafety : public ::testing::TestWithParam<int> {};

// 0: the job restarted (same id, new start time); 1: it vanished; 2: it is still the same run.
TEST_P(SlurmReclaimSafety, ActsOnlyOnTheRunItObserved) {
  testing::FakeSlurmClient fake;
  fake.jobs = std::vector<SlurmJob>{Running(7, 100)};
  SlurmReclaimOptions o;
  o.idle.warn_after = std::chrono::minutes(1);
  o.idle.act_after = std::chrono::minutes(2);
  o.memory_held.enabled = false;
  SlurmReclaim r(&fake, o);
  r.UpdateJobs(*fake.jobs);
  const WallTime t0{std::chrono::seconds(1000)};
  for (int i = 0; i <= 18; ++i) {
    const WallTime t = t0 + std::chrono::seconds(10 * i);
    r.Observe(Idle(t, "7"));
    if (i == 11) {  // after the warning (1 min idle), before the action (2 min)
      if (GetParam() == 0) fake.jobs = std::vector<SlurmJob>{Running(7, 200)};
      if (GetParam() == 1) fake.jobs = std::vector<SlurmJob>{};
    }
    (void)r.Evaluate(t);
  }
  const bool requeued =
      std::find(fake.actions.begin(), fake.actions.end(), "requeue 7") != fake.actions.end();
  ASSERT_EQ(r.audit().size(), 2u);
  EXPECT_EQ(r.audit()[0].record.action, efficiency::ReclaimAction::kWarn);
  EXPECT_EQ(fake.actions[0].rfind("comment 7 stoker idle-reclaim warning (idle)", 0), 0u);
  if (GetParam() == 2) {
    EXPECT_TRUE(requeued);
    EXPECT_EQ(r.metrics().requeues, 1);
  } else {
    EXPECT_FALSE(requeued);
    EXPECT_EQ(r.metrics().refused_stale, 1);
    EXPECT_EQ(r.audit()[1].record.result.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(r.audit()[1].record.result.message().find(GetParam() == 0 ? "not the run observed"
                                                                        : "gone from Slurm"),
              std::string::npos)
        << r.audit()[1].record.result.ToString();
  }
  EXPECT_NE(ReclaimRecordJson(r.audit()[1]).find("\"rule\":\"idle\""), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Cases, SlurmReclaimSafety, ::testing::Values(0, 1, 2));

TEST(SlurmReclaim, UnreadableSlurmAtActionTimeMeansNoAction) {
  testing::FakeSlurmClient fake;
  fake.jobs = std::vector<SlurmJob>{Running(9, 100)};
  SlurmReclaimOptions o;
  o.idle.warn_after = std::chrono::minutes(1);
  o.idle.act_after = std::chrono::minutes(2);
  SlurmReclaim r(&fake, o);
  r.UpdateJobs(*fake.jobs);
  const WallTime t0{std::chrono::seconds(1000)};
  for (int i = 0; i <= 18; ++i) {
    if (i == 11) fake.jobs = Unavailable("squeue --json: Slurm reported errors");
    r.Observe(Idle(t0 + std::chrono::seconds(10 * i), "9"));
    (void)r.Evaluate(t0 + std::chrono::seconds(10 * i));
  }
  EXPECT_EQ(std::count(fake.actions.begin(), fake.actions.end(), "requeue 9"), 0);
  EXPECT_EQ(r.metrics().action_errors, 1);
}

}  // namespace
}  // namespace stoker::slurm
