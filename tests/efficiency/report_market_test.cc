#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "efficiency/market.h"
#include "efficiency/records.h"
#include "efficiency/report.h"
#include "test_util.h"

namespace stoker::efficiency {
namespace {

using namespace std::chrono_literals;

// Two hours, samples every 30 s: job "train" on 2 H100s (GPU-a busy with no tensor use,
// GPU-b idle), job "tiny" on 1 H100 at 8 % with 4 GB.
std::string Fixture() {
  std::ostringstream o;
  const int64_t t0 = 1'767'225'600;
  o << R"({"type":"job","id":"train","user":"alice","team":"ml","start":)" << t0 << R"(,"end":)"
    << t0 + 7200 << R"(,"gpus":["GPU-a","GPU-b"],"gpu_model":"H100"})"
    << "\n";
  o << R"({"type":"job","id":"tiny","user":"bob","team":"web","start":)" << t0 << R"(,"end":)"
    << t0 + 7200 << R"(,"gpus":["GPU-c"],"gpu_model":"H100"})"
    << "\n";
  for (int s = 0; s < 7200; s += 30) {
    const int64_t t = t0 + s;
    o << R"({"type":"sample","t":)" << t
      << R"(,"node":"n1","gpu":"GPU-a","model":"NVIDIA H100 80GB HBM3","job":"train","util":90,"sm_active":0.6,"tensor_active":0.0,"mem_used":40000000000,"mem_total":80000000000,"power_w":500})"
      << "\n";
    o << R"({"type":"sample","t":)" << t
      << R"(,"node":"n1","gpu":"GPU-b","model":"NVIDIA H100 80GB HBM3","job":"train","util":0,"sm_active":0.0,"tensor_active":0.0,"power_w":70})"
      << "\n";
    o << R"({"type":"sample","t":)" << t
      << R"(,"node":"n2","gpu":"GPU-c","model":"NVIDIA H100 80GB HBM3","job":"tiny","util":8,"mem_used":4000000000,"power_w":100})"
      << "\n";
  }
  return o.str();
}

TEST(RecordsTest, ReadsJobsAndSamplesAndRejectsBadLinesNamingLineAndField) {
  std::istringstream in(Fixture());
  auto r = ReadRecordsJsonl(in, "fx.jsonl");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->jobs.size(), 2u);
  EXPECT_EQ(r->samples.size(), 3u * 240);
  std::istringstream bad(
      "{\"type\":\"job\",\"id\":\"x\",\"start\":1}\n{\"type\":\"sample\",\"t\":5,\"gpu\":\"g\","
      "\"util\":140}\n");
  auto e = ReadRecordsJsonl(bad, "bad.jsonl");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("bad.jsonl:2:41: util: value 140 out of range [0, 100]"),
            std::string::npos)
      << e.status().message();
  std::istringstream junk("not json\n");
  EXPECT_NE(ReadRecordsJsonl(junk, "j").status().message().find("j:1:1: not valid JSON"),
            std::string::npos);
  // A missing field names the line (its object's column); a wrong type the value's column.
  std::istringstream missing("\n{\"type\":\"sample\",\"gpu\":\"g\"}\n");
  EXPECT_EQ(ReadRecordsJsonl(missing, "m.jsonl").status().message(), "m.jsonl:2:1: t: missing");
  std::istringstream wrong("{\"type\":\"job\",\"id\":7,\"start\":1}\n");
  EXPECT_EQ(ReadRecordsJsonl(wrong, "w.jsonl").status().message(),
            "w.jsonl:1:20: id: expected a string, got '7'");
  // A line longer than the bound is refused without being held whole.
  std::istringstream longline(std::string(kMaxRecordLineBytes + 1, ' ') + "\n");
  EXPECT_EQ(ReadRecordsJsonl(longline, "l.jsonl").status().message(),
            "l.jsonl:1: line larger than 1 MiB");
  std::istringstream type("{\"type\":\"nope\"}\n");
  EXPECT_FALSE(ReadRecordsJsonl(type, "t").ok());
  // Round trip.
  std::istringstream again(SampleToJson(r->samples[0]) + "\n" + JobToJson(r->jobs[0]) + "\n");
  auto rt = ReadRecordsJsonl(again, "rt");
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  EXPECT_EQ(rt->samples[0].t, r->samples[0].t);
  EXPECT_EQ(rt->jobs[0].info.gpus, r->jobs[0].info.gpus);
  // Every field of a job survives the export: the flags the zone plans and alerts read too.
  JobRecord flagged = r->jobs[0];
  flagged.info.movable = true;
  flagged.info.memory_bound = true;
  flagged.info.interactive = true;
  flagged.info.preemptible = true;
  std::istringstream flags(JobToJson(flagged) + "\n");
  auto fl = ReadRecordsJsonl(flags, "flags");
  ASSERT_TRUE(fl.ok()) << fl.status().ToString();
  ASSERT_EQ(fl->jobs.size(), 1u);
  EXPECT_TRUE(fl->jobs[0].info.movable);
  EXPECT_TRUE(fl->jobs[0].info.memory_bound);
  EXPECT_TRUE(fl->jobs[0].info.interactive);
  EXPECT_TRUE(fl->jobs[0].info.preemptible);
  EXPECT_EQ(JobToJson(fl->jobs[0]), JobToJson(flagged));
}

TEST(ReportTest, PerJobPerOwnerClusterAndAdvice) {
  std::istringstream in(Fixture());
  auto recs = ReadRecordsJsonl(in, "fx");
  ASSERT_TRUE(recs.ok());
  auto cfg = LoadConfigYaml("price_per_gpu_hour: {H100: 3.0, '*': 1.0}");
  ASSERT_TRUE(cfg.ok());
  Report r = BuildReport(*recs, *cfg);
  ASSERT_EQ(r.jobs.size(), 2u);
  const JobReport& train = r.jobs[1];  // sorted by id
  EXPECT_EQ(r.jobs[0].id, "tiny");
  EXPECT_EQ(train.id, "train");
  EXPECT_EQ(train.gpus, 2);
  EXPECT_NEAR(train.alloc_gpu_hours, 4.0, 1e-9);
  // GPU-a: 60 % for 2 h (less the first 30 s interval) = ~1.2 GPU-h used; GPU-b: ~2 h idle.
  EXPECT_NEAR(train.used_gpu_hours, 0.6 * (7170.0 / 3600), 1e-6);
  EXPECT_NEAR(train.idle_gpu_hours, 7170.0 / 3600, 1e-6);
  EXPECT_NEAR(train.avg_util_pct, 45, 1e-6);
  EXPECT_EQ(train.peak_util_pct, 90);
  ASSERT_TRUE(train.avg_tensor_pct.has_value());
  EXPECT_EQ(*train.avg_tensor_pct, 0);
  // Estimate: GPU-a 0.6 x 67 FP32 TFLOPS, GPU-b 0: mean 20.1 per GPU, x 2 GPUs.
  ASSERT_TRUE(train.achieved_tflops.has_value());
  EXPECT_NEAR(*train.achieved_tflops, 0.6 * 67, 1e-6);
  EXPECT_NEAR(*train.peak_tflops, 2 * 989, 1e-9);
  // Power efficiency: 40.2 estimated TFLOPS over the GPUs' 500 W + 70 W.
  ASSERT_TRUE(train.tflops_per_watt.has_value());
  EXPECT_NEAR(*train.tflops_per_watt, 0.6 * 67 / 570.0, 1e-9);
  ASSERT_TRUE(train.energy_kwh.has_value());
  EXPECT_NEAR(*train.energy_kwh, (500 + 70) * 7170.0 / 3.6e6, 1e-6);
  EXPECT_EQ(train.cost_micro, 12'000'000);  // 4 GPU-h x 3.0
  EXPECT_EQ(train.mem_peak_bytes, 40'000'000'000u);
  EXPECT_FALSE(train.zone_history.empty());

  ASSERT_EQ(r.users.size(), 2u);
  EXPECT_EQ(r.users[0].name, "alice");
  EXPECT_NEAR(r.users[0].idle_gpu_hours, 7170.0 / 3600, 1e-6);
  ASSERT_EQ(r.audit.size(), 1u);
  EXPECT_EQ(r.audit[0].quarter, "2026-Q1");
  EXPECT_NEAR(r.cluster_alloc_gpu_hours, 6.0, 1e-9);

  auto has = [&](const std::string& job, const std::string& kind) {
    for (const auto& a : r.advice)
      if (a.subject == job && a.kind == kind) return true;
    return false;
  };
  EXPECT_TRUE(has("train", "mixed-precision"));
  EXPECT_TRUE(has("train", "fewer-gpus"));
  EXPECT_TRUE(has("tiny", "mig"));
  EXPECT_FALSE(has("tiny", "mixed-precision"));  // no GPM data: no claim

  // Fragmentation: no free GPUs anywhere while both jobs run.
  ASSERT_FALSE(r.timeline.empty());
  EXPECT_FALSE(r.timeline[1].fragmentation_pct.has_value());
  EXPECT_EQ(r.timeline[1].gpus_allocated, 3);
}

TEST(ReportTest, RenderersProduceWellFormedOutput) {
  std::istringstream in(Fixture());
  auto recs = ReadRecordsJsonl(in, "fx");
  ASSERT_TRUE(recs.ok());
  Report r = BuildReport(*recs, *LoadConfigYaml(""));
  auto j = nlohmann::json::parse(RenderJson(r));
  EXPECT_EQ(j["jobs"].size(), 2u);
  EXPECT_EQ(j["jobs"][1]["id"], "train");
  EXPECT_TRUE(j["jobs"][1].contains("achieved_tflops_estimate"));
  EXPECT_NEAR(j["jobs"][1]["tflops_per_watt_estimate"].get<double>(), 0.6 * 67 / 570.0, 1e-9);
  const std::string csv = RenderCsv(r);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  EXPECT_EQ(csv.rfind("job,user,team", 0), 0u);
  // Without a chart script: the chart places say so, and nothing is scripted.
  const std::string html = RenderHtml(r);
  EXPECT_NE(html.find("<div id='chart-cluster'><p><i>(chart not drawn"), std::string::npos);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  // With one (the dashboard's bundle in production; web_test checks that one): the report's
  // JSON for it, then the script, both inline, so the file still needs nothing else.
  const std::string charted = RenderHtml(r, "drawCharts();");
  const size_t data = charted.find("<script type='application/json' id='stoker-report-data'>");
  ASSERT_NE(data, std::string::npos);
  EXPECT_NE(charted.find("\"id\":\"train\"", data), std::string::npos);
  EXPECT_NE(charted.find("<script>drawCharts();</script>", data), std::string::npos);
  EXPECT_EQ(charted.find("chart not drawn"), std::string::npos);
  EXPECT_NE(RenderText(r).find("estimates"), std::string::npos);
}

TEST(ReportTest, SchedulerFragmentationIsChartedPerBucket) {
  std::istringstream in(Fixture());
  auto recs = ReadRecordsJsonl(in, "fx");
  ASSERT_TRUE(recs.ok());
  Report plain = BuildReport(*recs, *LoadConfigYaml(""));
  ASSERT_GE(plain.timeline.size(), 2u);
  EXPECT_FALSE(plain.timeline[0].fgd_fragmentation_pct.has_value());
  EXPECT_EQ(RenderHtml(plain).find("FGD measure"), std::string::npos);
  // Two samples in the first bucket (10 % and 30 % of 8 GPUs), none in the second.
  const WallTime t0 = plain.timeline[0].start;
  recs->fragmentation = {{t0, 800, 8000}, {t0 + std::chrono::seconds(1), 2400, 8000}};
  Report r = BuildReport(*recs, *LoadConfigYaml(""));
  ASSERT_TRUE(r.timeline[0].fgd_fragmentation_pct.has_value());
  EXPECT_DOUBLE_EQ(*r.timeline[0].fgd_fragmentation_pct, 20.0);
  EXPECT_FALSE(r.timeline[1].fgd_fragmentation_pct.has_value());
  auto j = nlohmann::json::parse(RenderJson(r));
  EXPECT_DOUBLE_EQ(j["timeline"][0]["fgd_fragmentation_pct"].get<double>(), 20.0);
  EXPECT_TRUE(j["timeline"][1]["fgd_fragmentation_pct"].is_null());
  EXPECT_NE(RenderHtml(r).find("FGD measure"), std::string::npos);
}

TEST(MarketTest, ChargesPricesDiscountsAndTierGate) {
  MarketConfig c;
  c.guaranteed_price = {{"H100", 3'000'000}, {"*", 1'000'000}};
  c.preemptible_price = {{"*", 1'000'000}};
  c.reclaimed_discount_pct = 40;
  c.budgets = {{"ml", 10'000'000}};
  MemoryLedgerStore store;
  ComputeMarket m(c, store);
  ASSERT_TRUE(m.Load().ok());
  ASSERT_TRUE(m.GrantInitialBudgets(testing::T0()).ok());
  EXPECT_EQ(m.Balance("ml"), 10'000'000);
  EXPECT_EQ(m.PricePerGpuHour("NVIDIA H100 80GB HBM3", Tier::kGuaranteed, false), 3'000'000);
  EXPECT_EQ(m.PricePerGpuHour("A100", Tier::kGuaranteed, false), 1'000'000);
  EXPECT_EQ(m.PricePerGpuHour("A100", Tier::kPreemptible, true), 600'000);
  // 2 GPUs x 1 h on H100 = 6 credits; an idle hour on one GPU is charged too, recorded apart.
  auto e = m.Charge(
      {"ml", "j1", "H100", Tier::kGuaranteed, 2 * 1000 * 3600, false, false, testing::T0()});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->micro_credits, -6'000'000);
  e = m.Charge({"ml", "j1", "H100", Tier::kGuaranteed, 1000 * 3600, true, false, testing::T0()});
  EXPECT_EQ(e->kind, LedgerKind::kIdleCharge);
  EXPECT_EQ(m.Balance("ml"), 1'000'000);
  EXPECT_EQ(m.AllowedTier("ml"), Tier::kGuaranteed);
  // Half a GPU for 30 min on reclaimed capacity: 0.25 GPU-h x 0.6 = 0.15 credits.
  e = m.Charge({"ml", "p1", "A100", Tier::kPreemptible, 500 * 1800, false, true, testing::T0()});
  EXPECT_EQ(e->micro_credits, -150'000);
  e = m.Charge({"ml", "j2", "H100", Tier::kGuaranteed, 1000 * 3600, false, false, testing::T0()});
  EXPECT_LT(m.Balance("ml"), 0);
  EXPECT_EQ(m.AllowedTier("ml"), Tier::kPreemptible);
  EXPECT_FALSE(m.MayRun("ml", Tier::kGuaranteed));
  EXPECT_TRUE(m.MayRun("ml", Tier::kPreemptible));
  EXPECT_FALSE(m.Grant("ml", -5, testing::T0(), "").ok());
  // Sequence numbers are 1..n.
  for (size_t i = 0; i < m.entries().size(); ++i)
    EXPECT_EQ(m.entries()[i].seq, static_cast<int64_t>(i + 1));
}

TEST(MarketTest, JsonlLedgerPersistsAndReplays) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("stoker-ledger-" + std::to_string(::getpid()) + ".jsonl");
  std::filesystem::remove(path);
  MarketConfig c;
  c.guaranteed_price = {{"*", 2'000'000}};
  {
    JsonlLedgerStore store(path.string());
    ComputeMarket m(c, store);
    ASSERT_TRUE(m.Load().ok());
    ASSERT_TRUE(m.Grant("t", 5'000'000, testing::T0(), "q1").ok());
    ASSERT_TRUE(
        m.Charge({"t", "j", "X", Tier::kGuaranteed, 1000 * 3600, false, false, testing::T0()})
            .ok());
  }
  JsonlLedgerStore store(path.string());
  ComputeMarket again(c, store);
  ASSERT_TRUE(again.Load().ok());
  EXPECT_EQ(again.Balance("t"), 3'000'000);
  EXPECT_EQ(again.entries().size(), 2u);
  // A hand-edited ledger with a gap in seq is refused.
  {
    std::ofstream(path, std::ios::app)
        << R"({"seq":7,"at_ns":0,"team":"t","kind":"grant","micro_credits":1})"
        << "\n";
  }
  EXPECT_FALSE(again.Load().ok());
  std::filesystem::remove(path);
}

// The ledger's kind and tier are their table names on disk; an unknown one is refused with the
// names allowed, no longer read as some other value.
TEST(Market, LedgerKindAndTierAreTheirNamesAndUnknownOnesAreRefused) {
  LedgerEntry e;
  e.seq = 3;
  e.team = "t";
  e.kind = LedgerKind::kIdleCharge;
  e.micro_credits = -5;
  e.job = "j";
  e.tier = Tier::kPreemptible;
  const std::string line = LedgerEntryToJson(e);
  EXPECT_EQ(line, R"({"at_ns":0,"gpu_model":"","job":"j","kind":"idle_charge","micro_credits":-5,)"
                  R"("milli_gpu_seconds":0,"note":"","reclaimed":false,"seq":3,"team":"t",)"
                  R"("tier":"preemptible"})");
  auto back = LedgerEntryFromJson(line, "ledger:1");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->kind, LedgerKind::kIdleCharge);
  EXPECT_EQ(back->tier, Tier::kPreemptible);
  // No tier: guaranteed, as before.
  back = LedgerEntryFromJson(R"({"seq":1,"at_ns":0,"team":"t","kind":"grant","micro_credits":1})",
                             "ledger:1");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->tier, Tier::kGuaranteed);

  auto bad = LedgerEntryFromJson(
      R"({"seq":1,"at_ns":0,"team":"t","kind":"gift","micro_credits":1})", "ledger:4");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("ledger:4: ", 0), 0u) << bad.status().message();
  EXPECT_NE(
      bad.status().message().find("unknown ledger kind 'gift' (" + kLedgerKindNames.List() + ")"),
      std::string::npos)
      << bad.status().message();
  bad = LedgerEntryFromJson(
      R"({"seq":1,"at_ns":0,"team":"t","kind":"grant","micro_credits":1,"tier":"gold"})",
      "ledger:5");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown tier 'gold' (" + kTierNames.List() + ")"),
            std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace stoker::efficiency
