// The compact heartbeat form's cadence through the real agent path: a node loop whose GPUs come
// from the fake NVML (the real dlopen path), sampling every second of a manual clock, reports to
// the real server over HTTP at the interval the server directs, and at once when a job it runs
// changes phase. The server hands its observers every second of samples with its own time.

#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "node/node_agent.h"
#include "node_world.h"
#include "nvml/simulated.h"
#include "telemetry/sampler.h"
#include "telemetry/snapshot_json.h"

namespace stoker::node {
namespace {
using server::JobState;
using server::Principal;
using server::Role;
using testing::Me;

struct Seconds : server::ServerObserver {
  void OnHeartbeat(const std::string&, const std::vector<GpuSample>& gpus, WallTime at) override {
    std::lock_guard lock(mu);
    times.push_back(at);
    sizes.push_back(gpus.size());
  }
  std::mutex mu;
  std::vector<WallTime> times;
  std::vector<size_t> sizes;
};

struct CadenceWorld {
  CadenceWorld() : srv("cadence", Options(), &clock) {
    srv.core->AddObserver(&seen);
    auto src = nvml::OpenSimulatedGpuSource("h100-mig-node");
    EXPECT_TRUE(src.ok()) << src.status().ToString();
    source = std::move(*src);
    sampler = std::make_unique<telemetry::Sampler>(source.get(), &clock, nullptr,
                                                   telemetry::SamplerOptions{});
    agent = std::make_unique<NodeAgent>(
        srv.Agent("node-a"), &clock, BuildInventory("node-a", source.get()), GpuSamplesFeed{[this] {
          telemetry::TelemetrySnapshot snap;
          sampler->Snapshot(&snap);
          return telemetry::ReportSamples(snap);
        }});
  }
  ~CadenceWorld() {
    for (int i = 0; i < 100 && srv.CancelAll(); ++i) Second();
  }
  // One node and 0.25 reports a second: the server directs 4 s.
  static server::ServerOptions Options() {
    server::ServerOptions so;
    so.heartbeat_rate = 0.25;
    return so;
  }
  // One second: the GPUs sampled, the agent's round (Tick, as Run does), a scheduling pass.
  void Second() {
    clock.Advance(std::chrono::seconds(1));
    for (uint32_t i = 0; i < sampler->gpu_count(); ++i) sampler->SampleOnce(i);
    Status s = agent->Tick();
    EXPECT_TRUE(s.ok()) << s.ToString();
    srv.core->RunSchedulingPass();
  }
  JobState State(int64_t id) { return srv.core->GetJob(srv.admin, id)->state; }

  ManualClock clock{MonoTime(std::chrono::seconds(1)), SystemClock().WallNow()};
  testing::ServerOverHttp srv;
  Seconds seen;
  std::unique_ptr<GpuSource> source;
  std::unique_ptr<telemetry::Sampler> sampler;
  std::unique_ptr<NodeAgent> agent;
};

TEST(ReportCadence, ReportsAtTheDirectedIntervalWithEverySecondsSamples) {
  CadenceWorld w;
  w.Second();  // registers and reports its first second
  ASSERT_EQ(w.agent->reports(), 1);
  EXPECT_EQ(w.agent->report_interval(), std::chrono::seconds(4));
  // 40 more seconds: reports every 4 s (the first after the node's phase within the interval).
  for (int i = 0; i < 40; ++i) w.Second();
  EXPECT_GE(w.agent->reports(), 1 + 9);
  EXPECT_LE(w.agent->reports(), 1 + 10);
  // Every second reached the observers, in order, one second apart, with all 8 GPUs; the
  // seconds not yet reported are the ones since the last report.
  std::lock_guard lock(w.seen.mu);
  ASSERT_GE(w.seen.times.size(), 41u - 4);
  ASSERT_LE(w.seen.times.size(), 41u);
  // (Times travel as Unix seconds in a double: equal within a microsecond.)
  auto near = [](Duration a, Duration b) {
    return std::chrono::abs(a - b) < std::chrono::microseconds(1);
  };
  for (size_t i = 1; i < w.seen.times.size(); ++i) {
    EXPECT_TRUE(near(w.seen.times[i] - w.seen.times[i - 1], std::chrono::seconds(1))) << i;
    EXPECT_EQ(w.seen.sizes[i], 8u) << i;
  }
  EXPECT_TRUE(near(w.seen.times.front().time_since_epoch(),
                   (w.clock.WallNow() - std::chrono::seconds(40)).time_since_epoch()));
}

// A job's start and end reach the server within the second they happen, not at the next report
// interval (4 s here).
TEST(ReportCadence, JobPhaseChangesAreReportedAtOnce) {
  CadenceWorld w;
  for (int i = 0; i < 6; ++i) w.Second();
  ASSERT_EQ(w.agent->report_interval(), std::chrono::seconds(4));
  server::JobSpec spec;
  spec.command = {"sh", "-c", "sleep 0.5"};
  spec.gpus = 1;
  spec.cpu_milli = 100;
  spec.memory_mib = 64;
  auto job = w.srv.core->Submit(Principal{Me(), Role::kUser}, spec);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  w.srv.core->RunSchedulingPass();
  ASSERT_EQ(w.State(job->id), JobState::kAssigned);
  // The start order comes with the node's next report (within the interval), which launches it.
  auto launched = [&] {
    for (const runner::JobStatus& st : w.agent->runner().Poll()) {
      if (st.job_id == std::to_string(job->id)) return true;
    }
    return false;
  };
  for (int i = 0; i < 8 && !launched(); ++i) w.Second();
  ASSERT_TRUE(launched());
  // Running: said within the next seconds (its phase changed), not 4 s after the last report.
  int seconds = 0;
  while (w.State(job->id) != JobState::kRunning && seconds < 3) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    w.Second();
    ++seconds;
  }
  ASSERT_EQ(w.State(job->id), JobState::kRunning) << seconds << " s after its launch";
  // It exits (real time); the seconds after that report it.
  seconds = 0;
  while (!IsTerminal(w.State(job->id)) && seconds < 3) {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    w.Second();
    ++seconds;
  }
  EXPECT_EQ(w.State(job->id), JobState::kSucceeded) << seconds << " s after its start";
}

}  // namespace
}  // namespace stoker::node
