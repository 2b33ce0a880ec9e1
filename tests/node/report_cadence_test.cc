// The compact heartbeat form's cadence through the real agent path: a node loop whose GPUs come
// from the fake NVML (the real dlopen path), sampling every second of a manual clock, reports to
// the real server over HTTP at the interval the server directs, and at once when a job it runs
// changes phase. The server hands its observers every second of samples with its own time.

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "http/listener.h"
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

// In front of the real server's API: while `down`, every request fails fast (503 at once);
// it notes when (on the test's clock) each heartbeat reached it, and moves the test's clock on
// by `answer_time` while it answers one (a round trip that takes time).
struct FlakyFront final : http::Handler {
  FlakyFront(const http::Handler* real, ManualClock* clock) : real(real), clock(clock) {}
  http::Response Handle(const http::Request& r) const override {
    if (r.path.ends_with("/heartbeat")) {
      std::lock_guard lock(mu);
      heartbeats.push_back(clock->Now());
      clock->Advance(answer_time);
    }
    if (down.load()) return {503, R"({"error":"unavailable"})"};
    return real->Handle(r);
  }
  std::vector<MonoTime> Heartbeats() const {
    std::lock_guard lock(mu);
    return heartbeats;
  }
  const http::Handler* real;
  ManualClock* clock;
  Duration answer_time{};
  std::atomic<bool> down{false};
  mutable std::mutex mu;
  mutable std::vector<MonoTime> heartbeats;
};

struct CadenceWorld {
  // `rate`: reports a second the server wants (one node: it directs 1 / rate seconds);
  // `front`: the agent reaches the server through a FlakyFront.
  explicit CadenceWorld(double rate = 0.25, bool front = false)
      : srv("cadence", Options(rate), &clock) {
    srv.core->AddObserver(&seen);
    NodeOptions options = srv.Agent("node-a");
    if (front) {
      flaky = std::make_unique<FlakyFront>(srv.api.get(), &clock);
      flaky_http = std::make_unique<http::Listener>(
          flaky.get(), http::ListenerOptions{.host = "127.0.0.1", .port = 0, .threads = 2});
      EXPECT_TRUE(flaky_http->Start().ok());
      options.server_url = flaky_http->url();
    }
    auto src = nvml::OpenSimulatedGpuSource("h100-mig-node");
    EXPECT_TRUE(src.ok()) << src.status().ToString();
    source = std::move(*src);
    sampler = std::make_unique<telemetry::Sampler>(source.get(), &clock, nullptr,
                                                   telemetry::SamplerOptions{});
    agent = std::make_unique<NodeAgent>(options, &clock, BuildInventory("node-a", source.get()),
                                        GpuSamplesFeed{[this] {
                                          telemetry::TelemetrySnapshot snap;
                                          sampler->Snapshot(&snap);
                                          return telemetry::ReportSamples(snap);
                                        }});
  }
  ~CadenceWorld() {
    for (int i = 0; i < 100 && srv.CancelAll(); ++i) Second();
  }
  // One node and `rate` reports a second: the server directs 1 / rate seconds (4 s at 0.25).
  static server::ServerOptions Options(double rate) {
    server::ServerOptions so;
    so.heartbeat_rate = rate;
    return so;
  }
  // One second: the GPUs sampled, the agent's round (Tick, as Run does: on a fixed one-second
  // schedule, whatever time the last round took), a scheduling pass. The round is expected to
  // succeed unless the server is down (`expect_ok` false).
  void Second(bool expect_ok = true) {
    tick += std::chrono::seconds(1);
    clock.Set(std::max(tick, clock.Now()));
    for (uint32_t i = 0; i < sampler->gpu_count(); ++i) sampler->SampleOnce(i);
    Status s = agent->Tick();
    if (expect_ok) {
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
    srv.core->RunSchedulingPass();
  }
  JobState State(int64_t id) { return srv.core->GetJob(srv.admin, id)->state; }

  ManualClock clock{MonoTime(std::chrono::seconds(1)), SystemClock().WallNow()};
  MonoTime tick = clock.Now();
  testing::ServerOverHttp srv;
  Seconds seen;
  std::unique_ptr<FlakyFront> flaky;
  std::unique_ptr<http::Listener> flaky_http;
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

// The agent reports in its own slot of the directed interval, so its reports come exactly one
// interval apart even when each answer takes time (here 300 ms of the test's clock): not the
// interval plus the round trip, rounded up to the next one-second round (5 s instead of 4).
TEST(ReportCadence, ReportsComeOneIntervalApartWhenAnswersTakeTime) {
  CadenceWorld w(/*rate=*/0.25, /*front=*/true);
  w.flaky->answer_time = std::chrono::milliseconds(300);
  for (int i = 0; i < 41; ++i) w.Second();
  ASSERT_EQ(w.agent->report_interval(), std::chrono::seconds(4));
  const std::vector<MonoTime> beats = w.flaky->Heartbeats();
  // The first report (second 1) hears the interval; the node's slot then falls within the next
  // 4 s of its answer (1.3 s to 5.3 s, by the wall clock's phase), so the second report comes
  // at second 2 to 6, and the 41 seconds hold at least eight more after it.
  ASSERT_GE(beats.size(), 2u + 8);
  // From the second report on, each report comes 4 s after the previous one, in the same round
  // of its second.
  for (size_t i = 2; i < beats.size(); ++i) {
    EXPECT_EQ(beats[i] - beats[i - 1], std::chrono::seconds(4)) << "report " << i;
  }
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

// A server that fails fast: the agent does not retry every second but backs off, each wait
// doubling up to the 8 s interval the server directed, jittered; the seconds sampled meanwhile
// all reach the server with the first report it answers.
TEST(ReportCadence, FailedReportsBackOffUpToTheIntervalAndKeepTheirSeconds) {
  CadenceWorld w(/*rate=*/0.125, /*front=*/true);
  for (int i = 0; i < 12; ++i) w.Second();
  ASSERT_EQ(w.agent->report_interval(), std::chrono::seconds(8));
  const int64_t answered = w.agent->reports();
  const size_t before = w.flaky->Heartbeats().size();
  w.flaky->down = true;
  const MonoTime outage = w.clock.Now();
  constexpr int kOutage = 90;  // seconds, under the 120 the agent keeps
  for (int i = 0; i < kOutage; ++i) w.Second(/*expect_ok=*/false);
  EXPECT_EQ(w.agent->reports(), answered);
  std::vector<MonoTime> tries = w.flaky->Heartbeats();
  tries.erase(tries.begin(), tries.begin() + static_cast<std::ptrdiff_t>(before));
  // Every second would be 90; one per 8 s at most about 11 (plus the first short waits).
  ASSERT_GE(tries.size(), 10u);
  EXPECT_LE(tries.size(), 20u) << "retries every few seconds, not backing off";
  EXPECT_GE(w.agent->failures(), static_cast<int>(tries.size()) - 1);
  // The first retry waits no more than the interval; no wait is over the interval (plus the
  // round's second); from the fourth failure on, each is at least half of it.
  EXPECT_LE(tries.front() - outage, std::chrono::seconds(8 + 1));
  for (size_t i = 1; i < tries.size(); ++i) {
    const Duration wait = tries[i] - tries[i - 1];
    EXPECT_LE(wait, std::chrono::seconds(8 + 1)) << "retry " << i;
    EXPECT_GE(wait, std::chrono::seconds(1)) << "retry " << i;
    if (i >= 4) {
      EXPECT_GE(wait, std::chrono::seconds(4)) << "retry " << i;
    }
  }
  // The waits are jittered, not all equal.
  std::set<int64_t> waits;
  for (size_t i = 4; i < tries.size(); ++i) {
    waits.insert(std::chrono::duration_cast<std::chrono::seconds>(tries[i] - tries[i - 1]).count());
  }
  EXPECT_GE(waits.size(), 2u);

  // Back: the next retry is answered and carries every second of the outage.
  w.flaky->down = false;
  for (int i = 0; i < 9 && w.agent->reports() == answered; ++i) w.Second(false);
  ASSERT_GT(w.agent->reports(), answered) << "no report answered 9 s after the server came back";
  EXPECT_EQ(w.agent->failures(), 0);
  std::lock_guard lock(w.seen.mu);
  auto near = [](Duration a, Duration b) {
    return std::chrono::abs(a - b) < std::chrono::microseconds(1);
  };
  for (size_t i = 1; i < w.seen.times.size(); ++i) {
    EXPECT_TRUE(near(w.seen.times[i] - w.seen.times[i - 1], std::chrono::seconds(1)))
        << "a gap in the seconds the server saw, at " << i;
  }
  EXPECT_GE(w.seen.times.size(), 12u + kOutage);
}

}  // namespace
}  // namespace stoker::node
