#include "efficiency/replay.h"

#include <gtest/gtest.h>

#include <sstream>

#include "test_util.h"

namespace stoker::efficiency {
namespace {

// 3 hours at 30 s: "idle" holds GPU-a at 0 %, "busy" GPU-b at 80 %, "low1"/"low2" GPU-c/GPU-d
// at 30 % and 25 % (silver/bronze, packable), GPU-e lost at 01:00 for job "crash".
RecordSet Fixture() {
  std::ostringstream o;
  const int64_t t0 = 1'767'225'600;
  for (const char* j : {"idle", "busy", "low1", "low2", "crash"}) {
    o << R"({"type":"job","id":")" << j << R"(","user":"u","start":)" << t0 << "}\n";
  }
  for (int s = 0; s < 3 * 3600; s += 30) {
    auto line = [&](const char* gpu, const char* job, int util) {
      o << R"({"type":"sample","t":)" << t0 + s << R"(,"gpu":")" << gpu << R"(","job":")" << job
        << R"(","model":"NVIDIA A100-SXM4-80GB","util":)" << util
        << R"(,"mem_used":5000000000,"mem_total":80000000000})"
        << "\n";
    };
    line("GPU-a", "idle", 0);
    line("GPU-b", "busy", 80);
    line("GPU-c", "low1", 30);
    line("GPU-d", "low2", 25);
  }
  std::istringstream in(o.str());
  auto r = ReadRecordsJsonl(in, "fixture");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

TEST(ReplayTest, ZonesAndConsolidationPlan) {
  const auto cfg = LoadConfigYaml("");
  ZoneReplay z = ReplayZones(Fixture(), *cfg);
  ASSERT_EQ(z.jobs.size(), 4u);
  std::map<std::string, Zone> zone;
  for (const auto& j : z.jobs) zone[j.key] = j.zone;
  EXPECT_EQ(zone["busy"], Zone::kGold);
  EXPECT_EQ(zone["idle"], Zone::kBronze);
  EXPECT_EQ(zone["low1"], Zone::kBronze);
  ASSERT_EQ(z.plan.groups.size(), 1u);
  EXPECT_EQ(z.plan.groups[0].jobs, (std::vector<std::string>{"low1", "low2"}));
  EXPECT_EQ(z.plan.groups[0].mode, ShareMode::kMig);  // A100, 5 GB each
}

TEST(ReplayTest, AlertsFireForTheIdleJobOnly) {
  const auto cfg = LoadConfigYaml("");
  AlertReplay a = ReplayAlerts(Fixture(), *cfg);
  std::set<std::string> idle_jobs;
  for (const auto& x : a.fired) {
    if (x.rule == "JobGpusIdle") idle_jobs.insert(x.subject);
  }
  EXPECT_EQ(idle_jobs, (std::set<std::string>{"idle"}));
  EXPECT_TRUE(a.errors.empty());
}

TEST(ReplayTest, ReclaimWarnsThenActsOnTheIdleJobInDryRun) {
  const auto cfg = LoadConfigYaml("");
  auto log = ReplayReclaim(Fixture(), *cfg);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].job, "idle");
  EXPECT_EQ(log[0].action, ReclaimAction::kWarn);
  EXPECT_EQ(log[1].action, ReclaimAction::kRequeue);
  EXPECT_TRUE(log[1].dry_run);
  // Checks run every 15 min: the warning comes at the first check past 60 min of idleness.
  EXPECT_EQ(log[0].at - testing::T0(), std::chrono::minutes(75));
  EXPECT_EQ(log[1].at - testing::T0(), std::chrono::minutes(135));
}

}  // namespace
}  // namespace stoker::efficiency
