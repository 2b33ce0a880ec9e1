// Throughput of the dynamic trace simulator (jobs simulated per second of wall time) on slices
// of the real traces, through the production placement policy. Results: docs/performance.md.

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>
#include <string>

#include "scheduler/queue/queue_policy.h"
#include "sim/jobs_sim.h"
#include "sim/traces.h"
#include "support/traces.h"

namespace stoker::sim {
namespace {

const Trace& CachedTrace(const std::string& rel, TraceFormat format) {
  static std::map<std::string, Trace> cache;
  auto it = cache.find(rel);
  if (it == cache.end()) {
    const std::string path = testing::TracePath(rel);
    if (path.empty()) {
      std::fprintf(stderr, "%s\n", testing::MissingTraceMessage(rel).c_str());
      std::abort();
    }
    auto t = LoadTrace(path, format);
    if (!t.ok()) {
      std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
      std::abort();
    }
    it = cache.emplace(rel, std::move(t).value()).first;
  }
  return it->second;
}

// args: number of jobs, queue policy index (0 fifo, 1 sjf, 2 srtf, 3 las), backfill (0/1).
void RunSim(benchmark::State& state, const std::string& rel, TraceFormat format,
            ClusterShape cluster) {
  const Trace& full = CachedTrace(rel, format);
  const size_t n = std::min<size_t>(static_cast<size_t>(state.range(0)), full.jobs.size());
  Trace slice;
  slice.jobs.assign(full.jobs.begin(), full.jobs.begin() + static_cast<std::ptrdiff_t>(n));
  const char* names[] = {"fifo", "sjf", "srtf", "las"};
  const char* queue = names[state.range(1)];
  const std::vector<SimJobSpec> jobs = JobsFromTrace(slice);
  int64_t completed = 0;
  for (auto _ : state) {
    JobsSimOptions opt;
    opt.cluster = cluster;
    opt.backfill = state.range(2) != 0 ? BackfillMode::kEasy : BackfillMode::kNone;
    auto sim = JobsSim::Create(jobs, std::move(queue::CreateQueuePolicy(queue)).value(), opt);
    if (!sim.ok()) {
      state.SkipWithError(sim.status().ToString().c_str());
      return;
    }
    auto rep = (*sim)->Run();
    if (!rep.ok()) {
      state.SkipWithError(rep.status().ToString().c_str());
      return;
    }
    completed = rep->jobs_completed;
    benchmark::DoNotOptimize(rep->jct_s.mean);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
  state.counters["completed"] = static_cast<double>(completed);
  state.SetLabel(std::string(queue) + (state.range(2) ? "+easy" : ""));
}

void BM_PhillySlice(benchmark::State& state) {
  RunSim(state, "philly/philly.csv", TraceFormat::kPhilly, ClusterShape{64, 8});
}
void BM_ItpCluster04(benchmark::State& state) {
  RunSim(state, "itp/cluster04.csv", TraceFormat::kItp, ClusterShape{128, 8});
}

BENCHMARK(BM_PhillySlice)
    ->Args({20000, 0, 0})
    ->Args({20000, 1, 0})
    ->Args({20000, 2, 0})
    ->Args({20000, 3, 0})
    ->Args({20000, 0, 1})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ItpCluster04)
    ->Args({15802, 0, 0})
    ->Args({15802, 2, 0})
    ->Args({15802, 0, 1})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace stoker::sim

BENCHMARK_MAIN();
