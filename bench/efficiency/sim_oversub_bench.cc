// Cost of oversubscription in the trace simulator: one JobsSim run of a synthetic busy trace
// with co-location off (preemptible jobs are ordinary jobs) and on (shares admitted and
// preempted by the scheduling pass's rules), and the three-variant comparison.
#include <benchmark/benchmark.h>

#include "efficiency/sim_idle.h"
#include "scheduler/queue/queue_policy.h"

namespace stoker::efficiency {
namespace {

constexpr sim::SimMs kMin = 60'000;

// A busy 16x8 cluster: gangs of 1-8 GPUs and a third short single-GPU preemptible jobs, some with
// idle tails, arriving every 2 minutes.
std::vector<sim::SimJobSpec> Trace(int n) {
  std::vector<sim::SimJobSpec> jobs;
  for (int i = 0; i < n; ++i) {
    sim::SimJobSpec j;
    j.name = "j" + std::to_string(i);
    j.submit_ms = i * 2 * kMin;
    j.preemptible = i % 3 == 0;
    j.gpus = j.preemptible ? 1 : 1 << (i % 4);
    j.duration_ms = (j.preemptible ? 5 + (i * 13) % 100 : 30 + (i * 37) % 900) * kMin;
    j.gpu_util = 0.6;
    j.idle_tail_ms = i % 5 == 0 ? j.duration_ms / 2 : 0;
    jobs.push_back(j);
  }
  return jobs;
}

void BM_JobsSimRun(benchmark::State& state) {
  const bool coloc = state.range(0) != 0;
  const std::vector<sim::SimJobSpec> jobs = Trace(static_cast<int>(state.range(1)));
  sim::JobsSimOptions opt;
  opt.cluster = {16, 8};
  OversubscriptionPolicy ratio;
  ratio.max_ratio_milli = 1500;
  if (coloc) opt.colocation = MakeCoLocation(ratio);
  int64_t preemptions = 0;
  for (auto _ : state) {
    auto q = queue::CreateQueuePolicy("fifo");
    auto s = sim::JobsSim::Create(jobs, std::move(*q), opt);
    auto r = (*s)->Run();
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    preemptions = r->preemptions;
    benchmark::DoNotOptimize(r->makespan_s);
  }
  state.counters["preemptions"] = static_cast<double>(preemptions);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(jobs.size()));
}
BENCHMARK(BM_JobsSimRun)->Args({0, 5000})->Args({1, 5000})->Unit(benchmark::kMillisecond);

void BM_CompareReclaimThreeVariants(benchmark::State& state) {
  std::vector<sim::SimJobSpec> jobs = Trace(static_cast<int>(state.range(0)));
  for (auto& j : jobs) {  // CompareReclaim draws tiers and idleness itself
    j.preemptible = false;
    j.gpu_util.reset();
    j.idle_tail_ms = 0;
  }
  sim::JobsSimOptions opt;
  opt.cluster = {16, 8};
  EfficiencySimOptions o;
  for (auto _ : state) {
    auto r = CompareReclaim(jobs, opt, o);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(r->back().report.makespan_s);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(jobs.size()));
}
BENCHMARK(BM_CompareReclaimThreeVariants)->Arg(5000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace stoker::efficiency

BENCHMARK_MAIN();
