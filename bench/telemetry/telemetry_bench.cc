// Agent cost benchmarks (docs/performance.md, "Agent (issue 2)"):
//  - BM_SourceCopyOnly / BM_SampleTick: the agent's own work per GPU per sample is
//    BM_SampleTick minus BM_SourceCopyOnly (the in-memory source's copy stands in for NVML).
//  - BM_SampleTickFakeNvml: the same tick through the real dlopen path into the fake NVML.
//  - BM_RenderMetrics: /metrics for 8 GPUs (~50 series each) and 200 processes.
//  - BM_SnapshotAndRender: what one scrape costs end to end (cache copy + render).
//  - BM_SimulatedHourRss: RSS at start / middle / end of 3600 ticks of 8 GPUs (counters).

#include <benchmark/benchmark.h>

#include <fstream>
#include <string>

#include "support/fake_gpu_source.h"
#include "telemetry/attribution.h"
#include "telemetry/metrics_renderer.h"
#include "telemetry/sampler.h"

#if __has_include("nvml/simulated.h")
#include "nvml/simulated.h"
#define STOKER_BENCH_HAVE_NVML 1
#endif

namespace stoker::telemetry {
namespace {

using stoker::testing::FakeGpuSource;
using stoker::testing::MakeH100Sample;

// Answers like /proc would for a process in a Slurm job, from memory (no I/O in the loop).
class StaticProcessInfo final : public ProcessInfo {
 public:
  Result<ProcessFacts> Lookup(uint32_t pid) const override {
    ProcessFacts f;
    f.name = "python";
    f.cgroup = "0::/system.slice/slurmstepd.scope/job_" + std::to_string(pid / 25) + "/step_0\n";
    f.user = "user" + std::to_string(pid % 7);
    return f;
  }
};

std::vector<GpuSample> EightGpus(size_t total_processes) {
  std::vector<GpuSample> gpus;
  for (uint32_t i = 0; i < 8; ++i) gpus.push_back(MakeH100Sample(i, total_processes / 8));
  return gpus;
}

void BM_SourceCopyOnly(benchmark::State& state) {
  FakeGpuSource source(EightGpus(static_cast<size_t>(state.range(0))));
  GpuSample scratch;
  for (auto _ : state) {
    benchmark::DoNotOptimize(source.Sample(0, &scratch));
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_SourceCopyOnly)->Arg(0)->Arg(200);

void BM_SampleTick(benchmark::State& state) {
  FakeGpuSource source(EightGpus(static_cast<size_t>(state.range(0))));
  SystemClock clock;
  StaticProcessInfo info;
  Attributor attributor(&info, &clock);
  Sampler sampler(&source, &clock, &attributor, SamplerOptions{});
  for (auto _ : state) sampler.SampleOnce(0);
}
BENCHMARK(BM_SampleTick)->Arg(0)->Arg(200);

#ifdef STOKER_BENCH_HAVE_NVML
void BM_SampleTickFakeNvml(benchmark::State& state) {
  auto source = nvml::OpenSimulatedGpuSource("h100-mig-node");
  if (!source.ok()) {
    state.SkipWithError(source.status().ToString().c_str());
    return;
  }
  SystemClock clock;
  Sampler sampler(source->get(), &clock, nullptr, SamplerOptions{});
  TelemetrySnapshot snap;
  for (auto _ : state) sampler.SampleOnce(0);
  sampler.Snapshot(&snap);
  state.counters["agent_ns"] = static_cast<double>(snap.gpus[0].last_agent_duration.count());
  state.counters["nvml_ns"] = static_cast<double>(snap.gpus[0].last_source_duration.count());
}
BENCHMARK(BM_SampleTickFakeNvml);
#endif

TelemetrySnapshot BenchSnapshot(size_t processes) {
  FakeGpuSource source(EightGpus(processes));
  ManualClock clock;
  StaticProcessInfo info;
  Attributor attributor(&info, &clock);
  Sampler sampler(&source, &clock, &attributor, SamplerOptions{});
  for (uint32_t i = 0; i < 8; ++i) sampler.SampleOnce(i);
  TelemetrySnapshot snap;
  sampler.Snapshot(&snap);
  snap.gpus[3].xid_counts[13] = 2;
  snap.gpus[3].last_xid = 13;
  snap.host = ReadHostStats();
  return snap;
}

void BM_RenderMetrics(benchmark::State& state) {
  const TelemetrySnapshot snap = BenchSnapshot(200);
  MetricsRenderer renderer(RendererOptions{
      .hostname = "gpu-node-017", .version = "0.1.0", .dcgm_compat = state.range(0) != 0});
  std::string out;
  size_t series = 0;
  for (auto _ : state) {
    renderer.Render(snap, &out);
    benchmark::DoNotOptimize(out.data());
  }
  for (char c : out) series += c == '\n';
  state.counters["bytes"] = static_cast<double>(out.size());
  state.counters["lines"] = static_cast<double>(series);
}
BENCHMARK(BM_RenderMetrics)->Arg(0)->Arg(1);

void BM_SnapshotAndRender(benchmark::State& state) {
  FakeGpuSource source(EightGpus(200));
  ManualClock clock;
  StaticProcessInfo info;
  Attributor attributor(&info, &clock);
  Sampler sampler(&source, &clock, &attributor, SamplerOptions{});
  for (uint32_t i = 0; i < 8; ++i) sampler.SampleOnce(i);
  MetricsRenderer renderer(RendererOptions{.hostname = "gpu-node-017"});
  TelemetrySnapshot snap;
  std::string out;
  for (auto _ : state) {
    sampler.Snapshot(&snap);
    renderer.Render(snap, &out);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_SnapshotAndRender);

double RssMiB() {
  std::ifstream in("/proc/self/status");
  std::string key;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("VmRSS:")) return std::stod(line.substr(6)) / 1024.0;
  }
  return -1;
}

// 8 GPUs sampled at 1 s for one simulated hour (3600 ticks each, ManualClock: no real waiting),
// scraped every 15 s, with processes coming and going (pids change every 10 min).
void BM_SimulatedHourRss(benchmark::State& state) {
  for (auto _ : state) {
    std::vector<GpuSample> gpus = EightGpus(200);
    FakeGpuSource source(gpus);
    ManualClock clock;
    StaticProcessInfo info;
    Attributor attributor(&info, &clock);
    Sampler sampler(&source, &clock, &attributor, SamplerOptions{});
    MetricsRenderer renderer(RendererOptions{.hostname = "gpu-node-017"});
    TelemetrySnapshot snap;
    std::string out;
    double start = 0, middle = 0;
    for (int tick = 0; tick < 3600; ++tick) {
      if (tick % 600 == 0) {
        for (uint32_t g = 0; g < 8; ++g) {
          for (GpuProcess& p : gpus[g].processes) p.pid += 100000;
          source.SetSample(g, gpus[g]);
        }
      }
      for (uint32_t g = 0; g < 8; ++g) sampler.SampleOnce(g);
      if (tick % 15 == 0) {
        sampler.Snapshot(&snap);
        renderer.Render(snap, &out);
      }
      clock.Advance(std::chrono::seconds(1));
      if (tick == 0) start = RssMiB();
      if (tick == 1800) middle = RssMiB();
    }
    state.counters["rss_start_MiB"] = start;
    state.counters["rss_middle_MiB"] = middle;
    state.counters["rss_end_MiB"] = RssMiB();
    state.counters["attribution_cache"] = static_cast<double>(attributor.cache_size());
  }
}
BENCHMARK(BM_SimulatedHourRss)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace stoker::telemetry

BENCHMARK_MAIN();
