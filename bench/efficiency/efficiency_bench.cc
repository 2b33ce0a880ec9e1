// Per-sample cost of the engine's hot paths: the agent reports every GPU every few seconds,
// so zone tracking, alert evaluation and idle tracking must stay O(1) per sample.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "efficiency/alerts.h"
#include "efficiency/idle_reclaim.h"
#include "efficiency/window.h"
#include "efficiency/zones.h"

namespace stoker::efficiency {
namespace {

using namespace std::chrono_literals;

WallTime T0() { return WallTime(std::chrono::seconds(1'767'225'600)); }

GpuSample MakeSample(const std::string& uuid, const std::string& job) {
  GpuSample s;
  s.id.uuid = uuid;
  s.util_gpu_pct = Field<uint32_t>::Of(70);
  s.gpm.sm_active = Field<double>::Of(0.55);
  s.temperature_c = Field<uint32_t>::Of(60);
  GpuProcess p;
  p.job.kind = JobRef::Kind::kStoker;
  p.job.id = job;
  s.processes.push_back(p);
  return s;
}

// One window add at steady state (15-min window, 1 s samples = 900 entries).
void BM_SlidingWindowAdd(benchmark::State& state) {
  SlidingWindow w(15min);
  WallTime t = T0();
  int64_t v = 0;
  for (auto _ : state) {
    w.Add(t, v);
    t += 1s;
    v = (v + 7919) % 100'000;
  }
  benchmark::DoNotOptimize(w.sum());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SlidingWindowAdd);

// ZoneTracker::Observe over a cluster of N GPUs (one job per GPU), samples round-robin.
void BM_ZoneObserve(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  ZoneTracker z(ZoneConfig{});
  std::vector<GpuSample> samples;
  std::vector<std::vector<std::string>> jobs;
  for (int i = 0; i < n; ++i) {
    samples.push_back(MakeSample("GPU-" + std::to_string(i), "job-" + std::to_string(i)));
    jobs.push_back({"job-" + std::to_string(i)});
  }
  WallTime t = T0();
  int i = 0;
  for (auto _ : state) {
    samples[i].timestamp = t;
    z.Observe(samples[i], jobs[i]);
    if (++i == n) {
      i = 0;
      t += 5s;
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ZoneObserve)->Arg(8)->Arg(1024)->Arg(16384);

// AlertEngine::ObserveGpu with the built-in rules (all GPU-scope rules checked per sample).
void BM_AlertObserveGpu(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  AlertingConfig cfg;
  cfg.rules = BuiltinRules();
  AlertEngine e(cfg, ActivityMetric::kAuto);
  std::vector<GpuSample> samples;
  for (int i = 0; i < n; ++i)
    samples.push_back(MakeSample("GPU-" + std::to_string(i), "job-" + std::to_string(i)));
  WallTime t = T0();
  int i = 0;
  for (auto _ : state) {
    samples[i].timestamp = t;
    e.ObserveGpu(samples[i]);
    if (++i == n) {
      i = 0;
      t += 5s;
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AlertObserveGpu)->Arg(8)->Arg(1024);

// N GPUs with two pending alerts each (GpuSmWaste and GpuActivityDip).
void ObserveWastingGpus(AlertEngine& e, int n) {
  for (int i = 0; i < n; ++i) {
    GpuSample s = MakeSample("GPU-" + std::to_string(i), "job-" + std::to_string(i));
    s.util_gpu_pct = Field<uint32_t>::Of(90);
    s.gpm.sm_active = Field<double>::Of(0.2);
    s.timestamp = T0();
    e.ObserveGpu(s);
  }
}

// Evaluate() for a cluster with N GPUs' active (pending) alerts: inhibition, silences,
// grouping, and a copy of the active alerts.
void BM_AlertEvaluate(benchmark::State& state) {
  AlertingConfig cfg;
  cfg.rules = BuiltinRules();
  AlertEngine e(cfg, ActivityMetric::kAuto);
  ObserveWastingGpus(e, static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(e.Evaluate(T0() + 1s));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_AlertEvaluate)->Arg(1024)->Arg(80000)->Unit(benchmark::kMicrosecond);

// Apply(): what the server's evaluation runs under the efficiency service's lock, which every
// heartbeat's report also takes (no copy of the active alerts).
void BM_AlertApply(benchmark::State& state) {
  AlertingConfig cfg;
  cfg.rules = BuiltinRules();
  AlertEngine e(cfg, ActivityMetric::kAuto);
  ObserveWastingGpus(e, static_cast<int>(state.range(0)));
  for (auto _ : state) e.Apply(T0() + 1s);
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_AlertApply)->Arg(1024)->Arg(80000)->Unit(benchmark::kMicrosecond);

// IdleReclaimer::Observe per (job, GPU) sample.
void BM_IdleObserve(benchmark::State& state) {
  StaticJobDirectory dir;
  class NoActions final : public ReclaimActions {
   public:
    Status Warn(const JobInfo&, const std::string&) override { return Status::Ok(); }
    Status Requeue(const JobInfo&, const std::string&) override { return Status::Ok(); }
    Status Cancel(const JobInfo&, const std::string&) override { return Status::Ok(); }
  } actions;
  IdleReclaimer r(IdleReclaimPolicy{}, dir, actions);
  const int n = 1024;
  std::vector<std::string> jobs, gpus;
  for (int i = 0; i < n; ++i) {
    jobs.push_back("job-" + std::to_string(i));
    gpus.push_back("GPU-" + std::to_string(i));
  }
  WallTime t = T0();
  int i = 0;
  for (auto _ : state) {
    r.Observe(jobs[i], gpus[i], t, i % 3 == 0 ? 0 : 50'000);
    if (++i == n) {
      i = 0;
      t += 30s;
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_IdleObserve);

}  // namespace
}  // namespace stoker::efficiency

BENCHMARK_MAIN();
