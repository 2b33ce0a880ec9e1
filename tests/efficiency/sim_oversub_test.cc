// Oversubscription in the trace simulator: preemptible jobs co-located on GPUs up to the ratio,
// admitted and preempted by the scheduling pass's rules (pass::AdmitsPreemptible,
// pass::ShareVictims) in sim::JobsSim's co-location.
#include <gtest/gtest.h>

#include <map>

#include "efficiency/config.h"
#include "efficiency/sim_idle.h"
#include "scheduler/queue/queue_policy.h"

namespace stoker::efficiency {
namespace {

using namespace std::chrono_literals;

constexpr sim::SimMs kMin = 60'000;

sim::SimJobSpec Job(std::string name, sim::SimMs submit, sim::SimMs duration, int gpus,
                    bool preemptible, double util = 0.6, sim::SimMs idle_tail = 0) {
  sim::SimJobSpec j;
  j.name = std::move(name);
  j.submit_ms = submit;
  j.duration_ms = duration;
  j.gpus = gpus;
  j.preemptible = preemptible;
  j.gpu_util = util;
  j.idle_tail_ms = idle_tail;
  return j;
}

std::unique_ptr<sim::JobsSim> Simulate(std::vector<sim::SimJobSpec> jobs, sim::ClusterShape shape,
                                       int64_t ratio_milli, Duration grace,
                                       sim::SimObserver* observer = nullptr,
                                       double shared_speed = 1.0) {
  sim::JobsSimOptions opt;
  opt.cluster = shape;
  OversubscriptionPolicy p;
  p.max_ratio_milli = ratio_milli;
  p.grace = grace;
  opt.colocation = MakeCoLocation(p);
  if (opt.colocation) opt.colocation->shared_speed = shared_speed;
  auto queue = queue::CreateQueuePolicy("fifo");
  EXPECT_TRUE(queue.ok());
  auto simulator = sim::JobsSim::Create(std::move(jobs), std::move(*queue), opt);
  EXPECT_TRUE(simulator.ok()) << simulator.status().ToString();
  if (observer) (*simulator)->AddObserver(observer);
  auto report = (*simulator)->Run();
  EXPECT_TRUE(report.ok()) << report.status().ToString();
  return std::move(*simulator);
}

TEST(SimOversubTest, CoLocatedJobRunsOnTheActivityTheGuaranteedJobLeaves) {
  // One GPU: guaranteed A (10 min, 60 % busy) and preemptible P (2 min of work) arrive together.
  // P shares A's GPU at 40 % and finishes at 5 min; A is not slowed.
  auto s = Simulate({Job("A", 0, 10 * kMin, 1, false), Job("P", 0, 2 * kMin, 1, true)}, {1, 1},
                    1500, 2min);
  EXPECT_EQ(s->jobs()[0].first_start_ms, 0);
  EXPECT_EQ(s->jobs()[0].finish_ms, 10 * kMin);
  EXPECT_EQ(s->jobs()[1].first_start_ms, 0);
  EXPECT_EQ(s->jobs()[1].finish_ms, 5 * kMin);
  // A idle for its last 5 minutes: P gets 40 % until then (2 min of work), then the whole GPU.
  s = Simulate({Job("A", 0, 10 * kMin, 1, false, 0.6, 5 * kMin), Job("P", 0, 4 * kMin, 1, true)},
               {1, 1}, 1500, 2min);
  EXPECT_EQ(s->jobs()[1].finish_ms, 7 * kMin);
  EXPECT_EQ(s->jobs()[0].finish_ms, 10 * kMin);
}

TEST(SimOversubTest, InterferenceSlowsTheGuaranteedJobWhileWorkSharesItsGpu) {
  // As above with the guaranteed job at 0.8 of its speed while P shares its GPU: P still gets
  // 40 % and ends at 5 min; A does 4 min of work by then and 6 more alone: 11 min.
  auto s = Simulate({Job("A", 0, 10 * kMin, 1, false), Job("P", 0, 2 * kMin, 1, true)}, {1, 1},
                    1500, 2min, nullptr, 0.8);
  EXPECT_EQ(s->jobs()[1].finish_ms, 5 * kMin);
  EXPECT_EQ(s->jobs()[0].finish_ms, 11 * kMin);
  EXPECT_EQ(s->jobs()[0].host_rate, 1.0);
  // With a 5-minute idle tail: A's 5 busy minutes take 6.25 min beside P (P does 2.5 min of
  // work), the tail is not slowed (A ends at 11.25 min) and P gets the GPU for its last 1.5 min.
  s = Simulate({Job("A", 0, 10 * kMin, 1, false, 0.6, 5 * kMin), Job("P", 0, 4 * kMin, 1, true)},
               {1, 1}, 1500, 2min, nullptr, 0.8);
  EXPECT_EQ(s->jobs()[0].finish_ms, 11 * kMin + 15'000);
  EXPECT_EQ(s->jobs()[1].finish_ms, 7 * kMin + 45'000);
  // A gang is slowed while any one of its GPUs is shared: G (2 GPUs, 10 min) beside P (2 min of
  // work at 40 %: ends at 5 min) runs at 0.5 until then and ends at 12.5 min.
  s = Simulate({Job("G", 0, 10 * kMin, 2, false), Job("P", 0, 2 * kMin, 1, true)}, {1, 2}, 1500,
               2min, nullptr, 0.5);
  EXPECT_EQ(s->jobs()[1].finish_ms, 5 * kMin);
  EXPECT_EQ(s->jobs()[0].finish_ms, 12 * kMin + 30'000);
}

TEST(SimOversubTest, SharedSpeedOutsideZeroToOneIsRejected) {
  for (double speed : {0.0, -0.5, 1.5}) {
    sim::JobsSimOptions opt;
    opt.cluster = {1, 1};
    opt.colocation = sim::CoLocation{1500, 0, speed};
    auto queue = queue::CreateQueuePolicy("fifo");
    ASSERT_TRUE(queue.ok());
    auto simulator = sim::JobsSim::Create({Job("A", 0, kMin, 1, false)}, std::move(*queue), opt);
    ASSERT_FALSE(simulator.ok()) << speed;
    EXPECT_NE(simulator.status().ToString().find("shared speed"), std::string::npos);
  }
}

TEST(SimOversubTest, GuaranteedWorkPreemptsAfterTheGraceAndTheVictimRequeuesAndFinishes) {
  // P (10 min) runs alone; G (5 min) arrives at 3 min and takes the GPU. P keeps running through
  // the 2-minute grace, is preempted at 5 min (its 5 minutes of work lost: no checkpoint),
  // requeues, comes back beside G at 40 % (2 min of work by 10 min), then runs alone (8 min).
  auto s = Simulate({Job("P", 0, 10 * kMin, 1, true), Job("G", 3 * kMin, 5 * kMin, 1, false)},
                    {1, 1}, 1500, 2min);
  const sim::SimJob& p = s->jobs()[0];
  const sim::SimJob& g = s->jobs()[1];
  EXPECT_EQ(g.first_start_ms, 5 * kMin);  // blocked exactly the grace period
  EXPECT_EQ(g.finish_ms, 10 * kMin);
  EXPECT_EQ(p.preemptions, 1);
  EXPECT_EQ(p.lost_gpu_ms, 5 * kMin);
  EXPECT_EQ(p.state, sim::JobState::kDone);
  EXPECT_EQ(p.finish_ms, 18 * kMin);
  // Without a grace period G starts at once; P loses 3 minutes and ends at 3 + 5 + 8 = 16 min.
  s = Simulate({Job("P", 0, 10 * kMin, 1, true), Job("G", 3 * kMin, 5 * kMin, 1, false)}, {1, 1},
               1500, 0s);
  EXPECT_EQ(s->jobs()[1].first_start_ms, 3 * kMin);
  EXPECT_EQ(s->jobs()[0].lost_gpu_ms, 3 * kMin);
  EXPECT_EQ(s->jobs()[0].finish_ms, 16 * kMin);
}

// A busy mixed workload: guaranteed gangs of 1-8 GPUs and single-GPU preemptible jobs.
std::vector<sim::SimJobSpec> Mixed(int n) {
  std::vector<sim::SimJobSpec> jobs;
  for (int i = 0; i < n; ++i) {
    const bool pre = i % 3 == 0;
    const int gpus = pre ? 1 : 1 << (i % 4);
    const sim::SimMs dur = (10 + (i * 37) % 200) * kMin;
    jobs.push_back(Job("j" + std::to_string(i), i * 7 * kMin, dur, gpus, pre, 0.3 + 0.1 * (i % 6),
                       i % 5 == 0 ? dur / 2 : 0));
  }
  return jobs;
}

class Invariants : public sim::SimObserver {
 public:
  Invariants(int64_t ratio, sim::SimMs grace) : ratio_(ratio), grace_(grace) {}
  void OnAdvance(sim::SimMs, sim::SimMs, const sim::JobsSim& s) override {
    for (int32_t g = 0; g < static_cast<int32_t>(s.total_gpus()); ++g) {
      max_load = std::max(max_load, s.GpuLoadMilli(g));
      EXPECT_LE(s.GpuLoadMilli(g), ratio_) << "GPU " << g << " at " << s.now();
    }
  }
  void OnJobEvent(sim::SimMs now, sim::JobEventKind kind, queue::JobId id,
                  const sim::JobsSim& s) override {
    const sim::SimJob& j = s.jobs()[id];
    if (kind == sim::JobEventKind::kPreempt && j.spec.preemptible) ++preempted;
    if (kind != sim::JobEventKind::kStart || j.spec.preemptible) return;
    max_block = std::max(max_block, j.active_from_ms - now);
    EXPECT_LE(j.active_from_ms - now, grace_) << j.spec.name;
  }
  int64_t max_load = 0;
  sim::SimMs max_block = 0;
  int preempted = 0;

 private:
  int64_t ratio_;
  sim::SimMs grace_;
};

TEST(SimOversubTest, LoadNeverExceedsTheRatioAndGuaranteedJobsWaitAtMostTheGrace) {
  for (int64_t ratio : {1200, 1500}) {
    Invariants inv(ratio, 2 * kMin);
    auto s = Simulate(Mixed(600), {2, 8}, ratio, 2min, &inv);
    EXPECT_GT(inv.max_load, 1000) << "co-location must happen";
    EXPECT_GT(inv.preempted, 0) << "preemption must happen";
    EXPECT_EQ(inv.max_block, 2 * kMin);
    int64_t lost = 0;
    for (const auto& j : s->jobs()) {
      EXPECT_EQ(j.state, sim::JobState::kDone) << j.spec.name;  // preempted jobs requeue and finish
      lost += j.lost_gpu_ms;
    }
    EXPECT_GT(lost, 0);
  }
}

TEST(SimOversubTest, WithoutGraceGuaranteedJobsRunExactlyAsIfPreemptibleOnesDidNotExist) {
  const std::vector<sim::SimJobSpec> all = Mixed(600);
  std::vector<sim::SimJobSpec> guaranteed;
  for (const auto& j : all) {
    if (!j.preemptible) guaranteed.push_back(j);
  }
  auto with = Simulate(all, {2, 8}, 1500, 0s);
  auto without = Simulate(guaranteed, {2, 8}, 1500, 0s);
  std::map<std::string, std::pair<sim::SimMs, sim::SimMs>> ref;
  for (const auto& j : without->jobs()) ref[j.spec.name] = {j.first_start_ms, j.finish_ms};
  int preempted = 0;
  for (const auto& j : with->jobs()) {
    if (j.spec.preemptible) {
      preempted += j.preemptions;
      continue;
    }
    EXPECT_EQ(ref[j.spec.name].first, j.first_start_ms) << j.spec.name;
    EXPECT_EQ(ref[j.spec.name].second, j.finish_ms) << j.spec.name;
  }
  EXPECT_GT(preempted, 0);
}

std::vector<sim::SimJobSpec> TraceLike(int n) {
  std::vector<sim::SimJobSpec> jobs;
  for (int i = 0; i < n; ++i) {
    sim::SimJobSpec j;
    j.name = "t" + std::to_string(i);
    j.submit_ms = i * 5 * kMin;
    j.duration_ms = (i % 4 == 0 ? 20 + (i * 13) % 100 : 120 + (i * 37) % 600) * kMin;
    j.gpus = i % 4 == 0 ? 1 : 1 << (i % 3);
    jobs.push_back(j);
  }
  return jobs;
}

bool SamePercentiles(const sim::Percentiles& a, const sim::Percentiles& b) {
  return a.mean == b.mean && a.median == b.median && a.p99 == b.p99 && a.max == b.max;
}

TEST(CompareOversubTest, RatioOneGivesExactlyTheReclaimResult) {
  sim::JobsSimOptions opt;
  opt.cluster = {2, 4};
  EfficiencySimOptions o;
  o.oversub.max_ratio_milli = 1000;
  auto r = CompareReclaim(TraceLike(400), opt, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  const VariantResult& rc = (*r)[1];
  const VariantResult& ov = (*r)[2];
  EXPECT_EQ(ov.name, "reclaim+oversub");
  EXPECT_EQ(ov.report.makespan_s, rc.report.makespan_s);
  EXPECT_EQ(ov.report.mean_allocation_pct, rc.report.mean_allocation_pct);
  EXPECT_TRUE(SamePercentiles(ov.report.queue_delay_s, rc.report.queue_delay_s));
  EXPECT_TRUE(SamePercentiles(ov.report.jct_s, rc.report.jct_s));
  EXPECT_EQ(ov.used_gpu_utilization_pct, rc.used_gpu_utilization_pct);
  EXPECT_TRUE(SamePercentiles(ov.preemptible.jct_s, rc.preemptible.jct_s));
  EXPECT_EQ(ov.preemptible.preemptions, 0);
  EXPECT_GT(ov.preemptible.jobs, 0);
  EXPECT_GT(ov.guaranteed.jobs, 0);

  // At 1.5 the preemptible jobs co-locate: the variant differs and counts its preemptions.
  o.oversub.max_ratio_milli = 1500;
  auto r15 = CompareReclaim(TraceLike(400), opt, o);
  ASSERT_TRUE(r15.ok());
  EXPECT_NE((*r15)[2].preemptible.queue_delay_s.mean, (*r15)[1].preemptible.queue_delay_s.mean);
  EXPECT_EQ((*r15)[2].report.jobs_completed, 400);
  // Deterministic for a seed.
  auto again = CompareReclaim(TraceLike(400), opt, o);
  ASSERT_TRUE(again.ok());
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*again)[i].report.makespan_s, (*r15)[i].report.makespan_s);
    EXPECT_TRUE(SamePercentiles((*again)[i].preemptible.jct_s, (*r15)[i].preemptible.jct_s));
    EXPECT_EQ((*again)[i].preemptible.preemptions, (*r15)[i].preemptible.preemptions);
  }
}

TEST(CompareOversubTest, InterferenceSlowsOnlyTheCoLocatedVariantsGuaranteedJobs) {
  sim::JobsSimOptions opt;
  opt.cluster = {2, 4};
  EfficiencySimOptions o;
  o.oversub.max_ratio_milli = 1500;
  const std::vector<sim::SimJobSpec> jobs = TraceLike(400);
  auto plain = CompareReclaim(jobs, opt, o);
  o.shared_speed = kPublishedSharedSpeed;
  auto slowed = CompareReclaim(jobs, opt, o);
  ASSERT_TRUE(plain.ok() && slowed.ok());
  for (size_t i = 0; i < 2; ++i) {  // static and reclaim share no GPU: unchanged
    EXPECT_EQ((*slowed)[i].report.makespan_s, (*plain)[i].report.makespan_s);
    EXPECT_TRUE(SamePercentiles((*slowed)[i].guaranteed.jct_s, (*plain)[i].guaranteed.jct_s));
  }
  const VariantResult& a = (*plain)[2];
  const VariantResult& b = (*slowed)[2];
  EXPECT_EQ(b.report.jobs_completed, 400);
  EXPECT_GT(b.guaranteed.jct_s.mean, a.guaranteed.jct_s.mean);
  // The same work done: busy GPU time is the trace's, only spread over more time.
  EXPECT_EQ(b.busy_gpu_hours, a.busy_gpu_hours);
}

TEST(CompareOversubTest, PreemptibleJobsAreShortSingleGpuJobsDrawnBySeed) {
  std::vector<sim::SimJobSpec> jobs = TraceLike(2000);
  PreemptibleModel m;
  const std::vector<bool> a = DrawPreemptible(jobs, m);
  EXPECT_EQ(a, DrawPreemptible(jobs, m));
  int eligible = 0, picked = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const bool ok = jobs[i].gpus == 1 && jobs[i].duration_ms <= m.max_duration_ms;
    eligible += ok;
    picked += a[i];
    if (!ok) {
      EXPECT_FALSE(a[i]);
    }
  }
  EXPECT_NEAR(static_cast<double>(picked) / eligible, 0.5, 0.06);
  m.seed = 8;
  EXPECT_NE(a, DrawPreemptible(jobs, m));
}

TEST(CompareOversubTest, BadOversubscriptionIsRejectedNamingTheField) {
  OversubscriptionPolicy p;
  p.max_ratio_milli = 1600;
  Status s = ValidateOversubscription(p);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("oversubscription.max_ratio"), std::string::npos) << s.ToString();
  p.max_ratio_milli = 1500;
  p.grace = -1s;
  s = ValidateOversubscription(p);
  EXPECT_NE(s.message().find("oversubscription.grace"), std::string::npos) << s.ToString();
  EfficiencySimOptions o;
  o.oversub = p;
  sim::JobsSimOptions opt;
  opt.cluster = {1, 4};
  auto r = CompareReclaim(TraceLike(10), opt, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("oversubscription.grace"), std::string::npos);
  // The same fields from the configuration file.
  auto cfg = LoadConfigYaml("oversubscription: {max_ratio: 1.6}\n");
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().ToString().find("oversubscription.max_ratio"), std::string::npos);
  cfg = LoadConfigYaml("oversubscription: {grace: -2m}\n");
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().ToString().find("oversubscription.grace"), std::string::npos);
  // A preemptible gang cannot share one GPU.
  sim::JobsSimOptions so;
  so.cluster = {1, 4};
  OversubscriptionPolicy on;
  on.max_ratio_milli = 1500;
  so.colocation = MakeCoLocation(on);
  auto q = queue::CreateQueuePolicy("fifo");
  ASSERT_TRUE(q.ok());
  auto bad = sim::JobsSim::Create({Job("gang", 0, kMin, 2, true)}, std::move(*q), so);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'gang'"), std::string::npos);
}

}  // namespace
}  // namespace stoker::efficiency
