#include "telemetry/sampler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "support/fake_gpu_source.h"

namespace stoker::telemetry {
namespace {

using namespace std::chrono_literals;
using stoker::testing::FakeGpuSource;
using stoker::testing::MakeH100Sample;

SamplerOptions Options(Duration interval = 1s) {
  SamplerOptions o;
  o.interval = interval;
  o.watch_events = false;
  return o;
}

// Records the (manual) time of every read of GPU 0 and optionally makes reads slow.
struct ReadLog {
  std::mutex mu;
  std::vector<MonoTime> times;
  std::vector<MonoTime> Get() {
    std::lock_guard lock(mu);
    return times;
  }
};

TEST(SamplerTest, TicksOnAnAbsoluteScheduleDespiteSlowReads) {
  ManualClock clock;
  FakeGpuSource source({MakeH100Sample(0, 0)});
  ReadLog log;
  source.before_read = [&](uint32_t) {
    {
      std::lock_guard lock(log.mu);
      log.times.push_back(clock.Now());
    }
    clock.Advance(300ms);  // every read takes 300 ms of (manual) time
    return Status::Ok();
  };
  Sampler sampler(&source, &clock, nullptr, Options());
  const MonoTime t0 = clock.Now();
  ASSERT_TRUE(sampler.Start().ok());
  for (int k = 1; k <= 5; ++k) {
    ASSERT_TRUE(source.WaitForReads(0, k)) << "tick " << k - 1 << " never sampled";
    // A drifting sampler (sleep interval after each read) would next read at +1.3 s, not +1 s,
    // and the wait above would time out.
    clock.Set(t0 + k * 1s);
  }
  ASSERT_TRUE(source.WaitForReads(0, 6));
  sampler.Stop();
  const auto times = log.Get();
  ASSERT_GE(times.size(), 6u);
  for (size_t k = 0; k < 6; ++k) EXPECT_EQ(times[k], t0 + static_cast<int>(k) * 1s) << k;
  TelemetrySnapshot snap;
  sampler.Snapshot(&snap);
  EXPECT_EQ(snap.gpus[0].skipped_ticks_total, 0u);
  EXPECT_GE(snap.gpus[0].samples_total, 6u);
}

TEST(SamplerTest, OverrunningReadSkipsTicksAndCountsThem) {
  ManualClock clock;
  FakeGpuSource source({MakeH100Sample(0, 0)});
  ReadLog log;
  std::atomic<int> reads{0};
  source.before_read = [&](uint32_t) {
    {
      std::lock_guard lock(log.mu);
      log.times.push_back(clock.Now());
    }
    if (reads++ == 1) clock.Advance(2500ms);  // the second read overruns by 2.5 intervals
    return Status::Ok();
  };
  Sampler sampler(&source, &clock, nullptr, Options());
  const MonoTime t0 = clock.Now();
  ASSERT_TRUE(sampler.Start().ok());
  ASSERT_TRUE(source.WaitForReads(0, 1));
  clock.Set(t0 + 1s);
  ASSERT_TRUE(source.WaitForReads(0, 2));  // ends at t0 + 3.5 s: ticks 2 and 3 are missed
  clock.Set(t0 + 4s);
  ASSERT_TRUE(source.WaitForReads(0, 3));
  sampler.Stop();
  const auto times = log.Get();
  ASSERT_GE(times.size(), 3u);
  EXPECT_EQ(times[0], t0);
  EXPECT_EQ(times[1], t0 + 1s);
  EXPECT_EQ(times[2], t0 + 4s);
  TelemetrySnapshot snap;
  sampler.Snapshot(&snap);
  EXPECT_EQ(snap.gpus[0].skipped_ticks_total, 2u);
}

TEST(SamplerTest, HungGpuDoesNotStallOthersOrScrapes) {
  ManualClock clock;
  FakeGpuSource source({MakeH100Sample(0, 1), MakeH100Sample(1, 1), MakeH100Sample(2, 1)});
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  source.before_read = [&](uint32_t index) {
    if (index == 1) {  // GPU 1 hangs inside the driver until released
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return release; });
    }
    return Status::Ok();
  };
  Sampler sampler(&source, &clock, nullptr, Options());
  const MonoTime t0 = clock.Now();
  ASSERT_TRUE(sampler.Start().ok());
  for (int k = 1; k <= 3; ++k) {
    ASSERT_TRUE(source.WaitForReads(0, k));
    ASSERT_TRUE(source.WaitForReads(2, k));
    clock.Set(t0 + k * 1s);
  }
  TelemetrySnapshot snap;
  sampler.Snapshot(&snap);  // must not block on GPU 1
  EXPECT_TRUE(snap.gpus[0].have_sample);
  EXPECT_TRUE(snap.gpus[2].have_sample);
  EXPECT_FALSE(snap.gpus[1].have_sample);
  EXPECT_EQ(source.reads(1), 0u);
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  sampler.Stop();
}

TEST(SamplerTest, FailedReadsAreCountedAndFieldErrorsTallied) {
  ManualClock clock;
  GpuSample s = MakeH100Sample(0, 0);
  s.power_mw = Field<uint32_t>::Error(999);
  s.temperature_c = Field<uint32_t>::Unsupported();
  FakeGpuSource source({s, MakeH100Sample(1, 0)});
  source.before_read = [](uint32_t index) {
    return index == 1 ? Unavailable("GPU 1: NVML_ERROR_TIMEOUT") : Status::Ok();
  };
  Sampler sampler(&source, &clock, nullptr, Options());
  sampler.SampleOnce(0);
  sampler.SampleOnce(0);
  sampler.SampleOnce(1);
  TelemetrySnapshot snap;
  sampler.Snapshot(&snap);
  EXPECT_EQ(snap.gpus[0].samples_total, 2u);
  const auto fields = protocol::GpuScalarFields();
  for (size_t f = 0; f < fields.size(); ++f) {
    EXPECT_EQ(snap.gpus[0].field_errors_total[f], fields[f].key == "power_mw" ? 2u : 0u)
        << fields[f].key;
  }
  EXPECT_FALSE(snap.gpus[1].have_sample);
  EXPECT_EQ(snap.gpus[1].sample_errors_total, 1u);
  EXPECT_NE(snap.gpus[1].last_error.find("NVML_ERROR_TIMEOUT"), std::string::npos);
}

TEST(SamplerTest, XidCountersPersistAndLastXidClearsAfterHold) {
  ManualClock clock;
  FakeGpuSource source({MakeH100Sample(0, 0), MakeH100Sample(1, 0)});
  SamplerOptions o = Options();
  o.watch_events = true;
  o.xid_hold = 5min;
  Sampler sampler(&source, &clock, nullptr, o);
  ASSERT_TRUE(sampler.Start().ok());
  source.PushEvent(GpuEvent{.type = GpuEvent::Type::kXid, .gpu_index = 1, .xid = 79});
  source.PushEvent(GpuEvent{.type = GpuEvent::Type::kXid, .gpu_index = 1, .xid = 13});
  source.PushEvent(GpuEvent{.type = GpuEvent::Type::kXid, .gpu_index = 1, .xid = 13});
  source.PushEvent(GpuEvent{.type = GpuEvent::Type::kXid, .gpu_index = 7, .xid = 13});  // no GPU 7
  TelemetrySnapshot snap;
  for (int i = 0; i < 500; ++i) {
    sampler.Snapshot(&snap);
    if (snap.gpus[1].xid_counts[13] == 2) break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(snap.gpus[1].xid_counts[79], 1u);
  EXPECT_EQ(snap.gpus[1].xid_counts[13], 2u);
  EXPECT_EQ(snap.gpus[1].last_xid, 13u);
  EXPECT_TRUE(snap.gpus[0].xid_counts.empty());
  clock.Advance(5min + 1s);
  sampler.Snapshot(&snap);
  EXPECT_EQ(snap.gpus[1].last_xid, 0u);
  EXPECT_EQ(snap.gpus[1].xid_counts[13], 2u);
  sampler.Stop();
}

TEST(SamplerTest, RejectsIntervalsBelowMinimum) {
  ManualClock clock;
  FakeGpuSource source({MakeH100Sample(0, 0)});
  Sampler sampler(&source, &clock, nullptr, Options(50ms));
  EXPECT_EQ(sampler.Start().code(), StatusCode::kInvalidArgument);
}

TEST(SamplerTest, RunsWithoutAnySource) {
  ManualClock clock;
  Sampler sampler(nullptr, &clock, nullptr, Options());
  sampler.set_unavailable_reason("libnvidia-ml.so.1: not found");
  ASSERT_TRUE(sampler.Start().ok());
  TelemetrySnapshot snap;
  sampler.Snapshot(&snap);
  sampler.Stop();
  EXPECT_FALSE(snap.nvml_available);
  EXPECT_TRUE(snap.gpus.empty());
  EXPECT_EQ(snap.source_description, "libnvidia-ml.so.1: not found");
}

}  // namespace
}  // namespace stoker::telemetry
