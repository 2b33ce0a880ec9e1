#include "efficiency/sim_idle.h"

#include <gtest/gtest.h>

namespace stoker::efficiency {
namespace {

using namespace std::chrono_literals;

constexpr sim::SimMs kMin = 60'000;

TEST(IdlenessModelTest, ShareAndFractionsFollowTheModelDeterministically) {
  std::vector<sim::SimJobSpec> jobs(10'000);
  for (auto& j : jobs) j.duration_ms = 100 * kMin;
  IdlenessModel m;
  auto a = DrawIdleness(jobs, m);
  auto b = DrawIdleness(jobs, m);
  int idle = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].idle_ms, b[i].idle_ms);
    EXPECT_EQ(a[i].busy_ms + a[i].idle_ms, 100 * kMin);
    if (a[i].idle_ms > 0) {
      ++idle;
      EXPECT_GE(a[i].idle_ms, 20 * kMin);
    }
  }
  EXPECT_NEAR(idle / 10'000.0, 0.36, 0.02);
}

TEST(DecideReclaimTest, EngineCutsTheIdleTailAtTheFirstCheckPastActAfter) {
  IdleReclaimPolicy p;  // warn 60 min, act 120 min
  // 30 min busy, 5 h idle: idle from 30 min; act once idle >= 120 min at a 15-min check.
  ReclaimDecision d = DecideReclaim({30 * kMin, 300 * kMin}, 2, p, 60s, 15min);
  EXPECT_TRUE(d.acted);
  EXPECT_EQ(d.warnings, 1);
  EXPECT_EQ(d.run_ms, 165 * kMin);  // last idle sample 149 min (idle 119 min) -> next check 165
  // An idle tail shorter than act_after is never cut.
  d = DecideReclaim({30 * kMin, 100 * kMin}, 1, p, 60s, 15min);
  EXPECT_FALSE(d.acted);
  EXPECT_EQ(d.run_ms, 130 * kMin);
  // Exempted (interactive) work is not modelled here; a disabled policy never acts.
  p.enabled = false;
  EXPECT_FALSE(DecideReclaim({0, 600 * kMin}, 1, p, 60s, 15min).acted);
}

TEST(CompareReclaimTest, ReclaimFreesIdleGpuHoursAndShortensQueueing) {
  // A saturated 2x4 cluster: 200 jobs of 1-4 GPUs arriving every 10 minutes.
  std::vector<sim::SimJobSpec> jobs;
  for (int i = 0; i < 200; ++i) {
    sim::SimJobSpec j;
    j.name = "j" + std::to_string(i);
    j.submit_ms = i * 10 * kMin;
    j.duration_ms = (180 + (i * 37) % 240) * kMin;
    j.gpus = 1 + i % 4;
    jobs.push_back(j);
  }
  sim::JobsSimOptions opt;
  opt.cluster = {2, 4};
  EfficiencySimOptions o;
  auto r = CompareReclaim(jobs, opt, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);  // static, reclaim, reclaim+oversub
  const VariantResult& st = (*r)[0];
  const VariantResult& rc = (*r)[1];
  EXPECT_EQ(st.jobs_reclaimed, 0);
  EXPECT_GT(rc.jobs_reclaimed, 0);
  EXPECT_GT(rc.gpu_hours_reclaimed, 0);
  EXPECT_EQ(st.report.jobs_completed, 200);
  EXPECT_EQ(rc.report.jobs_completed, 200);
  // Same useful work in less time: higher used-GPU utilisation, shorter queues.
  EXPECT_NEAR(st.busy_gpu_hours, rc.busy_gpu_hours, 1e-6);
  EXPECT_GT(rc.used_gpu_utilization_pct, st.used_gpu_utilization_pct);
  EXPECT_LT(rc.report.queue_delay_s.mean, st.report.queue_delay_s.mean);
}

}  // namespace
}  // namespace stoker::efficiency
