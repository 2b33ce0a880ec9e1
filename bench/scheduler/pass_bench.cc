// One scheduling pass at large scale (docs/performance.md): the pass as the server runs it,
// without the server (its view building and durable writes are measured by server_bench).
//
// The cluster: N nodes x 8 GPUs, about 70 % of the GPUs held by active jobs (whole GPUs and
// shares, a third preemptible, started at different times), with 1.5:1 oversubscription; the
// queue: 1,000 jobs of the same mix (guaranteed and preemptible, whole GPUs, shares, CPU only).
// The pass object is kept across iterations, as the server keeps it.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "scheduler/pass/pass.h"
#include "scheduler/queue/queue_policy.h"
#include "scheduler/registry.h"
#include "scheduler/rng.h"

namespace stoker {
namespace {

pass::PassInput Scenario(int nodes, int queued) {
  scheduler::Rng rng(42);
  pass::PassInput in;
  int64_t id = 1;
  for (int n = 0; n < nodes; ++n) {
    pass::NodeView v;
    v.name = "node" + std::to_string(n);
    v.cpu_milli = 128000;
    v.memory_mib = 1024 * 1024;
    for (uint32_t g = 0; g < 8; ++g) {
      v.gpus.push_back(pass::GpuView{g, n % 4 == 0 ? "A100" : "H100", 81920, false, {}});
    }
    // Active work on GPUs 0..4 or 0..5: whole GPUs and pairs of shares.
    const int busy = 5 + static_cast<int>(rng.Next() % 2);
    for (int g = 0; g < busy; ++g) {
      const bool share = rng.Next() % 3 == 0;
      const int parts = share ? 2 : 1;
      for (int k = 0; k < parts; ++k) {
        pass::JobView j;
        j.id = id++;
        j.phase = pass::JobPhase::kRunning;
        j.cpu_milli = 4000;
        j.memory_mib = 16384;
        j.preemptible = rng.Next() % 3 == 0;
        j.priority = static_cast<int32_t>(rng.Next() % 3);
        j.start_ms = static_cast<int64_t>(rng.Next() % 1000000);
        pass::JobPlacement p;
        p.node = v.name;
        if (share) {
          j.gpu_milli = 500;
          p.shares.emplace_back(static_cast<uint8_t>(g), 500);
        } else {
          j.gpus = 1;
          p.shares.emplace_back(static_cast<uint8_t>(g), 1000);
        }
        j.placement = p;
        in.active.push_back(j);
      }
    }
    in.nodes.push_back(std::move(v));
  }
  for (int i = 0; i < queued; ++i) {
    pass::JobView j;
    j.id = id++;
    j.submit_ms = i;
    j.cpu_milli = 2000 + 2000 * static_cast<int64_t>(rng.Next() % 4);
    j.memory_mib = 8192;
    j.preemptible = rng.Next() % 2 == 0;
    j.priority = static_cast<int32_t>(rng.Next() % 3);
    switch (rng.Next() % 6) {
      case 0:
        break;  // CPU only
      case 1:
      case 2:
        j.gpu_milli = 100 * (1 + static_cast<int32_t>(rng.Next() % 9));
        break;
      default:
        j.gpus = 1 << (rng.Next() % 4);  // 1, 2, 4 or 8
    }
    in.queued.push_back(j);
  }
  return in;
}

void BM_SchedulingPass(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const int queued = static_cast<int>(state.range(1));
  const pass::PassInput in = Scenario(nodes, queued);
  const std::string policy(scheduler::kDefaultPolicyName);
  pass::SchedulingPass p(
      scheduler::CreatePlacementPolicy(policy, scheduler::PolicyConfig{}).value());
  auto fifo = queue::CreateQueuePolicy("fifo").value();
  const pass::PassOptions options{policy, true, 1500};
  pass::PassStats last;
  for (auto _ : state) {
    pass::Decision d = p.Run(in, *fifo, options);
    benchmark::DoNotOptimize(d);
    last = d.stats;
  }
  state.counters["gpus"] = nodes * 8.0;
  state.counters["active_jobs"] = static_cast<double>(in.active.size());
  state.counters["placed"] = last.placed;
  state.counters["oversubscribed"] = last.oversubscribed;
  state.counters["preempted"] = last.preempted;
  state.counters["blocked"] = last.blocked;
}
BENCHMARK(BM_SchedulingPass)
    ->Args({1250, 1000})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2.0);
// 100,000 GPUs: one pass per run (it takes seconds to minutes, see docs/performance.md).
BENCHMARK(BM_SchedulingPass)
    ->Args({12500, 1000})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);

}  // namespace
}  // namespace stoker

BENCHMARK_MAIN();
