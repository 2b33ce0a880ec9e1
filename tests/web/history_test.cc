// The dashboard's GPU history: samples become per-bucket means in a bounded ring, columns
// aggregate buckets, a user sees only their own jobs in the cells, and fragmentation samples
// come back for the window asked.
#include "web/history.h"

#include <gtest/gtest.h>

namespace stoker::web {
namespace {
using server::Fragmentation;
using server::Job;
using server::JobState;
using server::Principal;
using server::Role;

const WallTime kT0 = WallTime(std::chrono::seconds(1767225600));  // a bucket boundary

GpuSample Sample(uint32_t index, WallTime at, uint32_t util, uint64_t used_gib,
                 double sm_active = -1) {
  GpuSample s;
  s.id.index = index;
  s.id.uuid = "GPU-" + std::to_string(index);
  s.id.name = "NVIDIA H100 80GB HBM3";
  s.timestamp = at;
  s.util_gpu_pct = Field<uint32_t>::Of(util);
  s.memory_total_bytes = Field<uint64_t>::Of(uint64_t{80} << 30);
  s.memory_used_bytes = Field<uint64_t>::Of(used_gib << 30);
  if (sm_active >= 0) s.gpm.sm_active = Field<double>::Of(sm_active);
  return s;
}

Job RunningJob(int64_t id, const std::string& user, const std::string& node,
               std::vector<uint32_t> gpus) {
  Job j;
  j.id = id;
  j.user = user;
  j.state = JobState::kRunning;
  j.assignment = protocol::Assignment{};
  j.assignment->node = node;
  j.assignment->gpu_indices = std::move(gpus);
  return j;
}

TEST(History, BucketsAreMeansAndColumnsAggregateBuckets) {
  ManualClock clock;  // its wall clock starts at kT0
  History h(&clock, {.bucket = std::chrono::seconds(10), .span = std::chrono::hours(1)});
  // Bucket 0: 20 and 40 -> 30; bucket 1: 90. Memory 40 GiB of 80 = 50 %.
  h.OnHeartbeat("n1", {Sample(0, kT0, 20, 40, 0.5)}, kT0);
  h.OnHeartbeat("n1", {Sample(0, kT0 + std::chrono::seconds(5), 40, 40, 0.7)}, kT0);
  h.OnHeartbeat("n1", {Sample(0, kT0 + std::chrono::seconds(12), 90, 40)}, kT0);
  const Principal admin{"root", Role::kAdmin};
  const WallTime now = kT0 + std::chrono::seconds(19);
  json one = h.Gpus(admin, std::chrono::seconds(20), 100, "", now);
  ASSERT_EQ(one["gpus"].size(), 1u);
  EXPECT_EQ(one["columns"], 2);
  EXPECT_EQ(one["step_ms"], 10000);
  EXPECT_EQ(one["start_ms"],
            std::chrono::duration_cast<std::chrono::milliseconds>(kT0.time_since_epoch()).count());
  EXPECT_EQ(one["gpus"][0]["util"], json::parse("[30, 90]"));
  EXPECT_EQ(one["gpus"][0]["mem"], json::parse("[50, 50]"));
  EXPECT_EQ(one["gpus"][0]["sm"], json::parse("[60, null]"));  // no SM reading in bucket 1
  // One column for both buckets: the mean over the three samples.
  json merged = h.Gpus(admin, std::chrono::seconds(20), 1, "", now);
  EXPECT_EQ(merged["columns"], 1);
  EXPECT_EQ(merged["gpus"][0]["util"], json::parse("[50]"));
  // A window with no samples yet in its early columns gives nulls there.
  json wide = h.Gpus(admin, std::chrono::seconds(60), 100, "", now);
  EXPECT_EQ(wide["columns"], 6);
  EXPECT_EQ(wide["gpus"][0]["util"], json::parse("[null, null, null, null, 30, 90]"));
  EXPECT_TRUE(h.Gpus(admin, std::chrono::seconds(60), 100, "other-node", now)["gpus"].empty());
}

TEST(History, RingIsBoundedBySpanAndGpuCount) {
  ManualClock clock;  // its wall clock starts at kT0
  History h(&clock,
            {.bucket = std::chrono::seconds(1), .span = std::chrono::seconds(10), .max_gpus = 2});
  for (int i = 0; i < 100; ++i) {
    const WallTime t = kT0 + std::chrono::seconds(i);
    h.OnHeartbeat(
        "n1", {Sample(0, t, static_cast<uint32_t>(i), 1), Sample(1, t, 1, 1), Sample(2, t, 1, 1)},
        t);
  }
  const json out = h.Gpus(Principal{"root", Role::kAdmin}, std::chrono::hours(1), 1000, "",
                          kT0 + std::chrono::seconds(99));
  ASSERT_EQ(out["gpus"].size(), 2u);    // the third GPU is beyond max_gpus
  EXPECT_EQ(out["dropped_gpus"], 100);  // and each of its samples is counted
  EXPECT_EQ(out["columns"], 11);        // the window is cut to the span
  const json& util = out["gpus"][0]["util"];
  EXPECT_EQ(util.front(), 89);  // the oldest kept bucket
  EXPECT_EQ(util.back(), 99);
}

TEST(History, UsersSeeTheirOwnJobsInCellsAndOnlyThatOthersWereBusy) {
  ManualClock clock;  // its wall clock starts at kT0
  History h(&clock, {.bucket = std::chrono::seconds(10)});
  h.OnJobChanged(RunningJob(7, "alice", "n1", {0}));
  h.OnJobChanged(RunningJob(8, "bob", "n1", {1}));
  h.OnHeartbeat("n1", {Sample(0, kT0, 50, 1), Sample(1, kT0, 60, 1), Sample(2, kT0, 0, 0)}, kT0);
  const WallTime now = kT0 + std::chrono::seconds(5);
  auto jobs_of = [](const json& out) {
    std::vector<int64_t> v;
    for (const json& g : out["gpus"]) v.push_back(g["job"][0].get<int64_t>());
    return v;
  };
  const json alice = h.Gpus(Principal{"alice", Role::kUser}, std::chrono::seconds(10), 1, "", now);
  EXPECT_EQ(jobs_of(alice), (std::vector<int64_t>{7, -1, 0}));
  EXPECT_EQ(alice["job_users"], json::parse(R"({"7":"alice"})"));
  const json admin = h.Gpus(Principal{"root", Role::kAdmin}, std::chrono::seconds(10), 1, "", now);
  EXPECT_EQ(jobs_of(admin), (std::vector<int64_t>{7, 8, 0}));
  EXPECT_EQ(admin["job_users"], json::parse(R"({"7":"alice","8":"bob"})"));
  // The job ends: later buckets show the GPU free, earlier ones keep the job.
  Job done = RunningJob(7, "alice", "n1", {0});
  done.state = JobState::kSucceeded;
  h.OnJobChanged(done);
  const WallTime later = kT0 + std::chrono::seconds(10);
  h.OnHeartbeat("n1", {Sample(0, later, 0, 0)}, later);
  const json after = h.Gpus(Principal{"alice", Role::kUser}, std::chrono::seconds(20), 10, "n1",
                            later + std::chrono::seconds(1));
  EXPECT_EQ(after["gpus"][0]["job"], json::parse("[7, 0]"));
}

TEST(History, AJobThatEndsOrMovesLeavesTheGpusOtherJobsTookAlone) {
  ManualClock clock;  // its wall clock starts at kT0
  History h(&clock, {.bucket = std::chrono::seconds(10)});
  const Principal admin{"root", Role::kAdmin};
  auto jobs_at = [&](WallTime t) {
    h.OnHeartbeat("n1", {Sample(0, t, 50, 1), Sample(1, t, 50, 1)}, t);
    const json out = h.Gpus(admin, std::chrono::seconds(10), 1, "", t + std::chrono::seconds(5));
    std::vector<int64_t> v;
    for (const json& g : out["gpus"]) v.push_back(g["job"][0].get<int64_t>());
    return v;
  };
  h.OnJobChanged(RunningJob(7, "alice", "n1", {0}));
  h.OnJobChanged(RunningJob(8, "bob", "n1", {0}));  // a share of the same GPU, shown last
  EXPECT_EQ(jobs_at(kT0), (std::vector<int64_t>{8, 0}));
  Job done = RunningJob(7, "alice", "n1", {0});
  done.state = JobState::kSucceeded;
  h.OnJobChanged(done);  // job 7 ends: the GPU is still job 8's
  EXPECT_EQ(jobs_at(kT0 + std::chrono::seconds(10)), (std::vector<int64_t>{8, 0}));
  h.OnJobChanged(RunningJob(8, "bob", "n1", {1}));  // requeued and placed on the other GPU
  EXPECT_EQ(jobs_at(kT0 + std::chrono::seconds(20)), (std::vector<int64_t>{0, 8}));
  Job moved = RunningJob(8, "bob", "n1", {1});
  moved.state = JobState::kCancelled;
  h.OnJobChanged(moved);
  EXPECT_EQ(jobs_at(kT0 + std::chrono::seconds(30)), (std::vector<int64_t>{0, 0}));
}

TEST(History, MigInstancesGetRowsOfTheirOwnWithTheirJob) {
  ManualClock clock;  // its wall clock starts at kT0
  History h(&clock, {.bucket = std::chrono::seconds(10)});
  GpuSample gpu = Sample(3, kT0, 0, 30);  // NVML reports no utilization for a MIG GPU's work
  gpu.mig_enabled = Field<bool>::Of(true);
  for (uint32_t gi : {1u, 2u}) {
    MigInstance m;
    m.gpu_instance_id = gi;
    m.profile = "3g.40gb";
    m.uuid = "MIG-" + std::to_string(gi);
    m.slices = 3;
    m.memory_total_bytes = Field<uint64_t>::Of(uint64_t{40} << 30);
    m.memory_used_bytes = Field<uint64_t>::Of(uint64_t{10 * gi} << 30);
    if (gi == 1) m.gpm.sm_active = Field<double>::Of(0.8);  // the other has no GPM reading
    gpu.mig_instances.push_back(m);
  }
  Job j = RunningJob(9, "alice", "n1", {3});
  j.assignment->mig_uuid = "MIG-2";
  h.OnJobChanged(j);
  h.OnHeartbeat("n1", {gpu}, kT0);
  const WallTime now = kT0 + std::chrono::seconds(5);
  const json out = h.Gpus(Principal{"bob", Role::kUser}, std::chrono::seconds(10), 1, "", now);
  ASSERT_EQ(out["gpus"].size(), 3u);  // the GPU, then its two instances
  EXPECT_FALSE(out["gpus"][0].contains("mig_instance"));
  EXPECT_TRUE(out["gpus"][0]["mig"]);
  const json& one = out["gpus"][1];
  EXPECT_EQ(one["mig_instance"], json::parse(R"({"uuid":"MIG-1","profile":"3g.40gb","slices":3})"));
  EXPECT_EQ(one["util"], json::parse("[80]"));  // its SM activity stands in
  EXPECT_EQ(one["mem"], json::parse("[25]"));   // 10 GiB of the instance's 40
  EXPECT_EQ(one["job"], json::parse("[0]"));
  const json& two = out["gpus"][2];
  EXPECT_EQ(two["util"], json::parse("[null]"));  // no reading is not 0 %
  EXPECT_EQ(two["mem"], json::parse("[50]"));
  EXPECT_EQ(two["job"], json::parse("[-1]"));  // alice's job, seen by bob
  const json mine = h.Gpus(Principal{"alice", Role::kUser}, std::chrono::seconds(10), 1, "", now);
  EXPECT_EQ(mine["gpus"][2]["job"], json::parse("[9]"));
}

// Power efficiency per GPU on the dashboard: the estimates of the GPU's latest sample, by the
// reports' formula, while that sample is in the window; null where SM activity is missing.
TEST(History, GpuRowsCarryTheLatestTflopsPerWattEstimate) {
  ManualClock clock;
  History h(&clock, {.bucket = std::chrono::seconds(10), .span = std::chrono::hours(1)});
  GpuSample busy = Sample(0, kT0, 90, 40, 0.5);
  busy.gpm.tensor_active = Field<double>::Of(0.2);
  busy.power_mw = Field<uint32_t>::Of(500'000);
  h.OnHeartbeat("n1", {busy, Sample(1, kT0, 90, 40)}, kT0);
  const Principal admin{"root", Role::kAdmin};
  json g = h.Gpus(admin, std::chrono::seconds(60), 100, "", kT0 + std::chrono::seconds(5))["gpus"];
  ASSERT_EQ(g.size(), 2u);
  // H100: 989 tensor, 67 FP32 TFLOPS: 0.2 x 989 + 0.3 x 67 = 217.9, over 500 W.
  EXPECT_NEAR(g[0]["tflops_estimate"].get<double>(), 217.9, 1e-9);
  EXPECT_NEAR(g[0]["tflops_per_watt_estimate"].get<double>(), 217.9 / 500, 1e-12);
  EXPECT_TRUE(g[1]["tflops_estimate"].is_null());  // no SM activity: no estimate
  EXPECT_TRUE(g[1]["tflops_per_watt_estimate"].is_null());
  // Once its latest sample is older than the window, the estimate is not shown.
  g = h.Gpus(admin, std::chrono::seconds(60), 100, "", kT0 + std::chrono::minutes(5))["gpus"];
  EXPECT_TRUE(g[0]["tflops_per_watt_estimate"].is_null());
}

// A report's seconds in one call (the compact form) leave the history exactly as one call per
// second: the same buckets, jobs, MIG rows, labels, latest estimates and rows dropped beyond
// max_gpus (here 6: GPU 0, its two instances, GPUs 1 and 2 and the first instance of GPU 3 fit).
TEST(History, AReportIsTheSameAsOneCallPerSecond) {
  ManualClock clock;  // its wall clock starts at kT0
  const HistoryOptions o{
      .bucket = std::chrono::seconds(10), .span = std::chrono::hours(1), .max_gpus = 6};
  History per_second(&clock, o), by_report(&clock, o);
  std::vector<server::SampleTick> ticks;
  for (int t = 0; t < 25; ++t) {
    const WallTime at = kT0 + std::chrono::seconds(t);
    server::SampleTick tick{at, {}};
    for (uint32_t g = 0; g < 5; ++g) {
      if (g == 2 && t >= 20) continue;  // its latest sample is an earlier second's
      GpuSample s = Sample(g, at, static_cast<uint32_t>((7 * t + 13 * g) % 101),
                           static_cast<uint64_t>((t + g) % 80), (t % 3) * 0.3);
      s.power_mw = Field<uint32_t>::Of(static_cast<uint32_t>(200'000 + 1'000 * t));
      s.gpm.tensor_active = Field<double>::Of(0.01 * t);
      if (g == 0 || g == 3) {
        s.mig_enabled = Field<bool>::Of(true);
        for (uint32_t gi : {1u, 2u}) {
          MigInstance m;
          m.gpu_instance_id = gi;
          m.profile = "3g.40gb";
          m.uuid = gi == 1 ? "MIG-" + std::to_string(g) : "";  // the other named GI.CI
          m.slices = 3;
          m.memory_total_bytes = Field<uint64_t>::Of(uint64_t{40} << 30);
          m.memory_used_bytes = Field<uint64_t>::Of(uint64_t{(t + gi) % 40} << 30);
          m.gpm.sm_active = Field<double>::Of(0.02 * t);
          s.mig_instances.push_back(m);
        }
      }
      tick.gpus.push_back(std::move(s));
    }
    ticks.push_back(std::move(tick));
  }
  Job whole = RunningJob(5, "alice", "n1", {1});
  Job slice = RunningJob(6, "bob", "n1", {0});
  slice.assignment->mig_uuid = "MIG-0";
  for (History* h : {&per_second, &by_report}) {
    h->OnJobChanged(whole);
    h->OnJobChanged(slice);
  }
  for (const server::SampleTick& t : ticks) per_second.OnHeartbeat("n1", t.gpus, t.at);
  const std::span<const server::SampleTick> all(ticks);
  by_report.OnReport("n1", all.subspan(0, 10));  // reports of 10 s, 10 s and 5 s
  by_report.OnReport("n1", all.subspan(10, 10));
  by_report.OnReport("n1", all.subspan(20));
  const WallTime now = kT0 + std::chrono::seconds(25);
  for (const Principal& who : {Principal{"root", Role::kAdmin}, Principal{"alice", Role::kUser}}) {
    for (int points : {1, 3, 100}) {
      const json want = per_second.Gpus(who, std::chrono::minutes(1), points, "", now);
      EXPECT_EQ(by_report.Gpus(who, std::chrono::minutes(1), points, "", now), want)
          << who.name << ", " << points << " points";
    }
  }
  const json out =
      by_report.Gpus(Principal{"root", Role::kAdmin}, std::chrono::minutes(1), 3, "", now);
  EXPECT_EQ(out["gpus"].size(), 6u);
  EXPECT_GT(out["dropped_gpus"].get<int64_t>(), 0);
  EXPECT_FALSE(out["gpus"][0]["tflops_per_watt_estimate"].is_null());
}

TEST(History, FragmentationSamplesForTheWindow) {
  ManualClock clock;  // its wall clock starts at kT0
  History h(&clock);
  for (int m = 0; m < 3; ++m) {
    h.OnFragmentation(Fragmentation{.fragmented_gpu_milli = 500.0 * m,
                                    .free_gpu_milli = 4000,
                                    .total_gpu_milli = 8000,
                                    .typical_shapes = 2},
                      kT0 + std::chrono::minutes(m));
  }
  const json all = h.FragmentationSeries(std::chrono::hours(1), kT0 + std::chrono::minutes(2));
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[2]["fragmented_gpu_milli"], 1000.0);
  EXPECT_EQ(all[0]["total_gpu_milli"], 8000);
  const json last = h.FragmentationSeries(std::chrono::seconds(90), kT0 + std::chrono::minutes(2));
  EXPECT_EQ(last.size(), 2u);
}

}  // namespace
}  // namespace stoker::web
