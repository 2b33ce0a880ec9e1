// One scheduling pass at large scale (docs/performance.md): the pass as the server runs it,
// without the server (its view building and durable writes are measured by server_bench).
//
// The cluster: N nodes x 8 GPUs, about 70 % of the GPUs held by active jobs (whole GPUs and
// shares, a third preemptible, started at different times), with 1.5:1 oversubscription; the
// queue: 1,000 jobs of the same mix (guaranteed and preemptible, whole GPUs, shares, CPU only).
// The pass object is kept across iterations, as the server keeps it.
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <memory>
#include <string>
#include <vector>

#include "core/huge_pages.h"
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
    v.memory_mib = int64_t{1024} * 1024;
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

// The decision of server_bench's BM_SchedulingPass100kJobs10kNodes alone: 10,000 idle nodes x 8
// GPUs and 100,000 queued jobs of its mix (60 % one or two whole GPUs, 30 % shares, 10 % CPU
// only), as the server's first pass sees them (a new pass object, fragmentation sampled). About
// 80 % are placed; the rest wait.
pass::PassInput IdleClusterDeepQueue(int nodes, int queued) {
  pass::PassInput in;
  in.sample_fragmentation = true;
  for (int n = 0; n < nodes; ++n) {
    pass::NodeView v;
    v.name = "node" + std::to_string(n);
    v.cpu_milli = 96000;
    v.memory_mib = 1 << 20;
    for (uint32_t g = 0; g < 8; ++g) {
      v.gpus.push_back(pass::GpuView{
          g, n % 2 ? "NVIDIA H100 80GB HBM3" : "NVIDIA A100-SXM4-80GB", 81920, false, {}});
    }
    in.nodes.push_back(std::move(v));
  }
  for (int i = 0; i < queued; ++i) {
    pass::JobView j;
    j.id = i + 1;
    j.submit_ms = 1'700'000'000'000 + i;
    j.cpu_milli = 4000;
    j.memory_mib = 16384;
    if (i % 10 < 6) {
      j.gpus = 1 + i % 2;
    } else if (i % 10 < 9) {
      j.gpu_milli = 250 + 50 * (i % 5);
    }
    in.queued.push_back(j);
  }
  return in;
}

void BM_SchedulingPassDeepQueue(benchmark::State& state) {
  const pass::PassInput in =
      IdleClusterDeepQueue(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  const std::string policy(scheduler::kDefaultPolicyName);
  auto fifo = queue::CreateQueuePolicy("fifo").value();
  const pass::PassOptions options{policy, true, 1000};
  pass::PassStats last;
  for (auto _ : state) {
    state.PauseTiming();
    auto p = std::make_unique<pass::SchedulingPass>(
        scheduler::CreatePlacementPolicy(policy, scheduler::PolicyConfig{}).value());
    state.ResumeTiming();
    pass::Decision d = p->Run(in, *fifo, options);
    benchmark::DoNotOptimize(d);
    last = d.stats;
    state.PauseTiming();
    d = {};
    p.reset();
    state.ResumeTiming();
  }
  state.counters["placed"] = last.placed;
  state.counters["blocked"] = last.blocked;
}
BENCHMARK(BM_SchedulingPassDeepQueue)
    ->Args({10000, 100000})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Iterations(3);

// What a large pass pays for memory it writes first: 64 MiB freshly mapped (as a first pass's
// 100,000 job views, 80,000 actions and copies of the placed jobs are), one byte written per
// 4 KiB page, then unmapped; /0 in 4 KiB pages (one fault each), /1 with AdviseHugePages first
// (one fault per 2 MiB where the kernel has huge pages to give). The ratio is what the advice
// saves per byte; each fault's cost depends on the machine (under a hypervisor it is mostly
// the hypervisor's).
void BM_FreshBuffer(benchmark::State& state) {
  constexpr size_t kBytes = size_t{64} << 20;
  const bool advise = state.range(0) != 0;
  for (auto _ : state) {
    void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      state.SkipWithError("mmap failed");
      break;
    }
    auto* bytes = static_cast<volatile unsigned char*>(p);
    if (advise) AdviseHugePages(p, kBytes);
    for (size_t i = 0; i < kBytes; i += 4096) bytes[i] = 1;
    munmap(p, kBytes);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBytes));
}
BENCHMARK(BM_FreshBuffer)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace stoker

BENCHMARK_MAIN();
