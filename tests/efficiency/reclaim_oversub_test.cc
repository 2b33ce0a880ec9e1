#include <gtest/gtest.h>

#include "efficiency/idle_reclaim.h"
#include "test_util.h"

namespace stoker::efficiency {
namespace {

using namespace std::chrono_literals;
using testing::T0;

class FakeActions : public ReclaimActions {
 public:
  Status Warn(const JobInfo& j, const std::string&) override { return Record("warn " + j.id); }
  Status Requeue(const JobInfo& j, const std::string&) override {
    return Record("requeue " + j.id);
  }
  Status Cancel(const JobInfo& j, const std::string&) override { return Record("cancel " + j.id); }
  Status Record(std::string s) {
    calls.push_back(std::move(s));
    return Status::Ok();
  }
  std::vector<std::string> calls;
};

JobInfo Job(std::string id, std::vector<std::string> gpus) {
  JobInfo j;
  j.id = std::move(id);
  j.user = "alice";
  j.start = T0();
  j.gpus = std::move(gpus);
  return j;
}

// Feeds `minutes` of samples every 30 s: `activity(gpu, minute)` in milli-percent.
template <typename F>
void Feed(IdleReclaimer& r, const JobInfo& j, int from_min, int to_min, F activity) {
  for (int s = from_min * 60; s < to_min * 60; s += 30) {
    for (const auto& g : j.gpus)
      r.Observe(j.id, g, T0() + std::chrono::seconds(s), activity(g, s / 60));
  }
}

TEST(IdleReclaimTest, WarnsAtSixtyActsAtOneTwentyWithEvidence) {
  StaticJobDirectory dir;
  dir.Upsert(Job("j1", {"g0", "g1"}));
  FakeActions act;
  IdleReclaimer r(IdleReclaimPolicy{}, dir, act);
  Feed(r, *dir.Find("j1"), 0, 59, [](auto&, int) { return 0; });
  EXPECT_TRUE(r.Evaluate(T0() + 59min).empty());
  Feed(r, *dir.Find("j1"), 59, 61, [](auto&, int) { return 0; });
  auto recs = r.Evaluate(T0() + 61min);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].action, ReclaimAction::kWarn);
  EXPECT_EQ(recs[0].evidence.idle_gpus, 2);
  EXPECT_EQ(recs[0].evidence.samples, 2 * 122);
  EXPECT_EQ(recs[0].evidence.window_start, T0());
  EXPECT_EQ(recs[0].evidence.max_activity_milli, 0);
  EXPECT_TRUE(r.Evaluate(T0() + 62min).empty());  // warned once
  Feed(r, *dir.Find("j1"), 61, 121, [](auto&, int) { return 0; });
  recs = r.Evaluate(T0() + 121min);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].action, ReclaimAction::kRequeue);
  EXPECT_EQ(act.calls, (std::vector<std::string>{"warn j1", "requeue j1"}));
  EXPECT_EQ(r.log().size(), 2u);
}

TEST(IdleReclaimTest, OneBusyGpuOrOneActiveSampleKeepsTheJob) {
  StaticJobDirectory dir;
  dir.Upsert(Job("j1", {"g0", "g1"}));
  FakeActions act;
  IdleReclaimer r(IdleReclaimPolicy{}, dir, act);
  // g1 busy throughout: not all GPUs idle.
  Feed(r, *dir.Find("j1"), 0, 130,
       [](const std::string& g, int) { return g == "g1" ? 50'000 : 0; });
  EXPECT_TRUE(r.Evaluate(T0() + 130min).empty());
  // Fraction 0.5: one idle GPU of two is enough.
  IdleReclaimPolicy half;
  half.min_idle_gpu_fraction = 0.5;
  IdleReclaimer r2(half, dir, act);
  Feed(r2, *dir.Find("j1"), 0, 61,
       [](const std::string& g, int) { return g == "g1" ? 50'000 : 0; });
  EXPECT_EQ(r2.Evaluate(T0() + 61min).size(), 1u);
  // A single active sample at minute 50 restarts the idle window.
  dir.Upsert(Job("j2", {"g2"}));
  IdleReclaimer r3(IdleReclaimPolicy{}, dir, act);
  Feed(r3, *dir.Find("j2"), 0, 100, [](auto&, int m) { return m == 50 ? 1'000 : 0; });
  EXPECT_TRUE(r3.Evaluate(T0() + 100min).empty());
  EXPECT_EQ(r3.IdleFor(*dir.Find("j2"), T0() + 100min),
            48min + 30s);  // idle from 51:00 to the last sample at 99:30
}

TEST(IdleReclaimTest, GapsInSamplesAreNotEvidence) {
  StaticJobDirectory dir;
  dir.Upsert(Job("j1", {"g0"}));
  FakeActions act;
  IdleReclaimer r(IdleReclaimPolicy{}, dir, act);
  Feed(r, *dir.Find("j1"), 0, 40, [](auto&, int) { return 0; });
  Feed(r, *dir.Find("j1"), 70, 100, [](auto&, int) { return 0; });  // 30-minute hole
  EXPECT_TRUE(r.Evaluate(T0() + 100min).empty());
  // And stale data at evaluation time does not count either.
  EXPECT_EQ(r.IdleFor(*dir.Find("j1"), T0() + 200min), 0s);
}

TEST(IdleReclaimTest, ExemptionsDryRunAndCancelPolicy) {
  StaticJobDirectory dir;
  JobInfo inter = Job("inter", {"g0"});
  inter.interactive = true;
  JobInfo vip = Job("vip", {"g1"});
  vip.user = "root";
  dir.Upsert(inter);
  dir.Upsert(vip);
  dir.Upsert(Job("plain", {"g2"}));
  FakeActions act;
  IdleReclaimPolicy p;
  p.exempt_users = {"root"};
  p.dry_run = true;
  p.action = IdleReclaimPolicy::Action::kCancel;
  IdleReclaimer r(p, dir, act);
  for (const auto& j : dir.Running()) Feed(r, j, 0, 125, [](auto&, int) { return 0; });
  auto recs = r.Evaluate(T0() + 125min);
  recs = r.log();
  auto recs2 = r.Evaluate(T0() + 126min);
  int exempt = 0, warns = 0, cancels = 0;
  for (const auto& rec : r.log()) {
    EXPECT_TRUE(rec.dry_run);
    exempt += rec.action == ReclaimAction::kExempt;
    warns += rec.action == ReclaimAction::kWarn;
    cancels += rec.action == ReclaimAction::kCancel;
  }
  EXPECT_EQ(exempt, 2);
  EXPECT_EQ(warns, 1);
  EXPECT_EQ(cancels, 1);
  EXPECT_TRUE(act.calls.empty());  // dry run touches nothing
}

}  // namespace
}  // namespace stoker::efficiency
