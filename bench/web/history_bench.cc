// The server's side of the dashboard's heatmap at 1,000 GPUs x 24 h (docs/performance.md, "Web
// dashboard at 1,000 GPUs"): a History with 125 nodes of 8 GPUs holding a full day of 30 s
// buckets (the default), filled through its observer interface as heartbeats would, then
//  - BM_HistoryGpus/<points>: GET /history/gpus?window=24h&points=N as the admin, the answer
//    built (every GPU, N columns of 2,880 / N buckets each) and serialized to JSON;
//  - BM_HistoryHeartbeat: one heartbeat of 8 samples into the full history (what every node's
//    heartbeat costs the server for the dashboard);
//  - BM_HistoryReport/<mig>: one node's 10-second report (the compact form at 10,000 nodes) of
//    8 GPUs, the first <mig> of them with 7 MIG instances each, through OnReport;
//  - BM_HistoryJobChanges/<jobs>: jobs placed and ended (below).
// A day cannot be backfilled through the API (the server takes samples within 5 minutes of its
// clock), so web/tests/perf.mjs measures the page on 240 columns of 1 s and this measures the
// route over a day; the page's cost depends on rows x columns, the same 1,000 x 240.
#include <benchmark/benchmark.h>

#include "support/placed_jobs.h"
#include "web/history.h"

namespace stoker::web {
namespace {

constexpr int kNodes = 125, kGpus = 8;
const WallTime kStart = WallTime(std::chrono::seconds(1767225600));
const WallTime kEnd = kStart + std::chrono::hours(24);

GpuSample Sample(uint32_t index, WallTime at, uint32_t util) {
  GpuSample s;
  s.id.index = index;
  s.id.uuid = "GPU-" + std::to_string(index);
  s.id.name = "NVIDIA H100 80GB HBM3";
  s.timestamp = at;
  s.util_gpu_pct = Field<uint32_t>::Of(util);
  s.memory_total_bytes = Field<uint64_t>::Of(uint64_t{80} << 30);
  s.memory_used_bytes = Field<uint64_t>::Of(uint64_t{40} << 30);
  s.gpm.sm_active = Field<double>::Of(0.5);
  return s;
}

std::string Node(int n) { return "node-" + std::to_string(n); }

// A day of one sample per GPU per 30 s bucket, in time order per node.
History& Full() {
  static ManualClock clock(MonoTime{}, kEnd);
  static History* h = [] {
    auto* h = new History(&clock);
    std::vector<GpuSample> beat(kGpus);
    for (WallTime t = kStart; t < kEnd; t += std::chrono::seconds(30)) {
      for (int n = 0; n < kNodes; ++n) {
        for (int g = 0; g < kGpus; ++g) {
          beat[g] = Sample(static_cast<uint32_t>(g), t,
                           static_cast<uint32_t>((n + g + t.time_since_epoch().count()) % 101));
        }
        h->OnHeartbeat(Node(n), beat, t);
      }
    }
    return h;
  }();
  return *h;
}

void BM_HistoryGpus(benchmark::State& state) {
  History& h = Full();
  const server::Principal admin{"admin", server::Role::kAdmin};
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string body =
        h.Gpus(admin, std::chrono::hours(24), static_cast<int>(state.range(0)), "", kEnd).dump();
    bytes = body.size();
    benchmark::DoNotOptimize(body.data());
  }
  state.counters["json_bytes"] = static_cast<double>(bytes);
  state.counters["gpus"] = kNodes * kGpus;
}
BENCHMARK(BM_HistoryGpus)->Arg(240)->Arg(60)->Unit(benchmark::kMillisecond);

void BM_HistoryHeartbeat(benchmark::State& state) {
  History& h = Full();
  std::vector<GpuSample> beat(kGpus);
  WallTime t = kEnd;
  int n = 0;
  for (auto _ : state) {
    for (int g = 0; g < kGpus; ++g) beat[g] = Sample(static_cast<uint32_t>(g), t, 50);
    h.OnHeartbeat(Node(n), beat, t);
    if (++n == kNodes) {
      n = 0;
      t += std::chrono::seconds(1);
    }
  }
}
BENCHMARK(BM_HistoryHeartbeat);

void BM_HistoryReport(benchmark::State& state) {
  History& h = Full();
  const int mig_gpus = static_cast<int>(state.range(0));
  constexpr int kTicks = 10;
  std::vector<server::SampleTick> ticks(kTicks);
  WallTime t = kEnd;
  int n = 0;
  for (int k = 0; k < kTicks; ++k) {
    ticks[k].gpus.resize(kGpus);
    for (int g = 0; g < kGpus; ++g) {
      GpuSample& s = ticks[k].gpus[g];
      s = Sample(static_cast<uint32_t>(g), t, 50);
      if (g >= mig_gpus) continue;
      s.mig_enabled = Field<bool>::Of(true);
      for (uint32_t m = 0; m < 7; ++m) {
        MigInstance mi;
        mi.uuid =
            "MIG-" + std::to_string(g) + "-" + std::to_string(m) + "-0123456789abcdef0123456789ab";
        mi.profile = "1g.10gb";
        mi.slices = 1;
        mi.memory_total_bytes = Field<uint64_t>::Of(uint64_t{10} << 30);
        mi.memory_used_bytes = Field<uint64_t>::Of(uint64_t{1} << 30);
        mi.gpm.sm_active = Field<double>::Of(0.25);
        s.mig_instances.push_back(mi);
      }
    }
  }
  for (auto _ : state) {
    for (int k = 0; k < kTicks; ++k) {  // each second's own time
      ticks[k].at = t + std::chrono::seconds(k);
      for (GpuSample& s : ticks[k].gpus) s.timestamp = ticks[k].at;
    }
    h.OnReport(Node(n), ticks);
    if (++n == kNodes) {
      n = 0;
      t += std::chrono::seconds(kTicks);
    }
  }
}
BENCHMARK(BM_HistoryReport)->Arg(0)->Arg(4);

// BM_HistoryJobChanges/<jobs>: <jobs> jobs placed, one GPU each, then each ended: what the
// history does for the jobs a scheduling pass changes (a pass on 10,000 nodes places up to
// 80,000 in one go). Per item: one job's change with up to <jobs> GPUs held; it should not grow
// with <jobs>.
void BM_HistoryJobChanges(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const std::vector<server::Job> jobs = testing::PlacedOneGpuJobs(n, kGpus, 0);
  ManualClock clock(MonoTime{}, kStart);
  for (auto _ : state) {
    History h(&clock);
    for (const server::Job& j : jobs) h.OnJobChanged(j);
    for (server::Job j : jobs) {
      j.state = server::JobState::kSucceeded;
      h.OnJobChanged(j);
    }
  }
  state.SetItemsProcessed(state.iterations() * 2 * n);
}
BENCHMARK(BM_HistoryJobChanges)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace stoker::web

BENCHMARK_MAIN();
