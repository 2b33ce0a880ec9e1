// The efficiency engine as the server feeds it: what one second of one node's samples (8 GPUs)
// costs in EfficiencyService, the observer every heartbeat reaches. At 10,000 agents that is
// 10,000 node-seconds a second, so this cost times 10,000 is the share of a core it takes.
//
//   BM_ObserverPerSecond/NODES: each report's seconds handed over one call per second
//                               (OnHeartbeat, as the server did before reports were batched)
//   BM_ObserverReport/NODES/TICKS: a report of TICKS seconds in one call (OnReport, what the
//                               server does now)
// Items are node-seconds, so items_per_second and the time per item compare across the two.
// One GPU in eight holds a job (the engine's job path: job alerts, idle tracking).
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "integration/efficiency_service.h"
#include "support/placed_jobs.h"

namespace stoker::efficiency {
namespace {

using namespace std::chrono_literals;

constexpr int kGpusPerNode = 8;

WallTime T0() { return WallTime(std::chrono::seconds(1'767'225'600)); }

std::string NodeName(int n) { return "node-" + std::to_string(n); }

// A sample like the load test's simulated H100s: utilisation, memory, power, temperature and
// GPM ratios, identity filled in as the server fills it from the node's inventory.
GpuSample Sample(int node, int gpu, int second) {
  GpuSample s;
  s.id.index = static_cast<uint32_t>(gpu);
  char uuid[64];
  std::snprintf(uuid, sizeof uuid, "GPU-%08x-0000-4000-8000-%012x", node, gpu);
  s.id.uuid = uuid;
  s.id.name = "NVIDIA H100 80GB HBM3";
  const uint32_t util = static_cast<uint32_t>((node * 7 + gpu * 13 + second) % 101);
  s.util_gpu_pct = Field<uint32_t>::Of(util);
  s.util_mem_pct = Field<uint32_t>::Of(util / 2);
  s.memory_total_bytes = Field<uint64_t>::Of(80ull << 30);
  s.memory_used_bytes = Field<uint64_t>::Of((10ull + static_cast<uint64_t>(gpu)) << 30);
  s.temperature_c = Field<uint32_t>::Of(45 + util / 4);
  s.power_mw = Field<uint32_t>::Of(100'000 + util * 5'000);
  s.gpm.sm_active = Field<double>::Of(util / 110.0);
  s.gpm.tensor_active = Field<double>::Of(util / 300.0);
  s.gpm.dram_bw_util = Field<double>::Of(util / 200.0);
  return s;
}

// The server's default configuration: the built-in alert rules.
EfficiencyConfig Config() {
  EfficiencyConfig cfg;
  cfg.alerting.rules = BuiltinRules();
  return cfg;
}

struct Fleet {
  explicit Fleet(int nodes) : nodes(nodes), service(Config(), nullptr) {
    // One GPU in eight holds a running one-GPU job.
    for (int n = 0; n < nodes; ++n) {
      server::Job j;
      j.id = n + 1;
      j.user = "alice";
      j.state = server::JobState::kRunning;
      j.spec.gpus = 1;
      j.submit_ms = j.start_ms = T0().time_since_epoch() / 1ms;
      server::Assignment a;
      a.node = NodeName(n);
      a.gpu_indices = {static_cast<uint32_t>(n % kGpusPerNode)};
      j.assignment = a;
      service.OnJobChanged(j);
    }
    names.reserve(static_cast<size_t>(nodes));
    for (int n = 0; n < nodes; ++n) names.push_back(NodeName(n));
  }
  // The report of `node` for round `round` (each round is `ticks` seconds).
  std::vector<server::SampleTick> Report(int node, int64_t round, int ticks) const {
    std::vector<server::SampleTick> out(static_cast<size_t>(ticks));
    for (int k = 0; k < ticks; ++k) {
      const int second = static_cast<int>(round * ticks + k);
      out[static_cast<size_t>(k)].at = T0() + std::chrono::seconds(second);
      for (int g = 0; g < kGpusPerNode; ++g) {
        GpuSample s = Sample(node, g, second);
        s.timestamp = out[static_cast<size_t>(k)].at;
        out[static_cast<size_t>(k)].gpus.push_back(std::move(s));
      }
    }
    return out;
  }
  int nodes;
  EfficiencyService service;
  std::vector<std::string> names;
};

// Reports are built before the timed loop (a pool reused round after round with their times
// moved on), so only the observer's work is measured.
template <typename Feed>
void Run(benchmark::State& state, int ticks, Feed feed) {
  const int nodes = static_cast<int>(state.range(0));
  Fleet fleet(nodes);
  constexpr int kPool = 64;
  std::vector<std::vector<server::SampleTick>> pool;
  for (int i = 0; i < kPool; ++i) pool.push_back(fleet.Report(i % nodes, 0, ticks));
  int node = 0;
  int64_t round = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto& report = pool[static_cast<size_t>(node % kPool)];
    for (int k = 0; k < ticks; ++k) {
      const WallTime at = T0() + std::chrono::seconds(round * ticks + k);
      report[static_cast<size_t>(k)].at = at;
      for (GpuSample& s : report[static_cast<size_t>(k)].gpus) s.timestamp = at;
    }
    state.ResumeTiming();
    feed(fleet, fleet.names[static_cast<size_t>(node)], report);
    if (++node == nodes) {
      node = 0;
      ++round;
    }
  }
  state.SetItemsProcessed(state.iterations() * ticks);
}

void BM_ObserverPerSecond(benchmark::State& state) {
  const int ticks = static_cast<int>(state.range(1));
  Run(state, ticks,
      [](Fleet& f, const std::string& node, const std::vector<server::SampleTick>& report) {
        for (const server::SampleTick& t : report) f.service.OnHeartbeat(node, t.gpus, t.at);
      });
}
BENCHMARK(BM_ObserverPerSecond)->Args({1000, 10})->Args({10000, 10});

void BM_ObserverReport(benchmark::State& state) {
  const int ticks = static_cast<int>(state.range(1));
  Run(state, ticks,
      [](Fleet& f, const std::string& node, const std::vector<server::SampleTick>& report) {
        f.service.OnReport(node, report);
      });
}
BENCHMARK(BM_ObserverReport)->Args({1000, 10})->Args({10000, 10})->Args({10000, 1});

// BM_ServiceJobChanges/<jobs>: <jobs> one-GPU jobs placed on as many GPUs, then each ended,
// through the engine's observer interface: what it does for the jobs a scheduling pass changes
// (up to 80,000 in one pass on 10,000 nodes). Per item: one job's change with up to <jobs> GPUs
// held; it should not grow with <jobs>.
void BM_ServiceJobChanges(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const std::vector<server::Job> jobs =
      testing::PlacedOneGpuJobs(n, kGpusPerNode, T0().time_since_epoch() / 1ms);
  for (auto _ : state) {
    state.PauseTiming();
    auto service = std::make_unique<EfficiencyService>(Config(), nullptr);
    state.ResumeTiming();
    for (const server::Job& j : jobs) service->OnJobChanged(j);
    for (server::Job j : jobs) {
      j.state = server::JobState::kSucceeded;
      j.end_ms = j.submit_ms + 1000;
      service->OnJobChanged(j);
    }
    state.PauseTiming();
    service.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * 2 * n);
}
BENCHMARK(BM_ServiceJobChanges)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

// BM_ServicePassNotify: what the engine does in the notify phase of the server's 100,000-job
// pass (BM_SchedulingPass100kJobs10kNodesObserved): 10,000 nodes x 8 GPUs have reported once,
// 100,000 jobs of the server benchmark's mix (60 % one or two whole GPUs, 30 % shares, 10 % no
// GPU) were submitted (each told as queued), and the pass placed 80,000 of them, told here as
// one batch. Timed: that batch only. Per item: one placed job.
void BM_ServicePassNotify(benchmark::State& state) {
  constexpr int kNodes = 10000;
  constexpr int kJobs = 100000;
  constexpr int kPlaced = 80000;
  const int64_t t0_ms = T0().time_since_epoch() / 1ms;
  std::vector<server::Job> queued(kJobs);
  for (int i = 0; i < kJobs; ++i) {
    server::Job& j = queued[static_cast<size_t>(i)];
    j.id = i + 1;
    j.user = "user" + std::to_string(i % 50);
    j.submit_ms = t0_ms + i;
    j.spec.command = {"train"};
    j.spec.cpu_milli = 4000;
    j.spec.memory_mib = 16384;
    if (i % 10 < 6) {
      j.spec.gpus = 1 + i % 2;
    } else if (i % 10 < 9) {
      j.spec.gpu_milli = 250 + 50 * (i % 5);
    }
  }
  // Placed in order: each node's GPUs filled one whole GPU per job (shares and CPU-only jobs
  // take a GPU index too, as a share does), cycling over the nodes.
  std::vector<server::Job> placed(queued.begin(), queued.begin() + kPlaced);
  for (int i = 0; i < kPlaced; ++i) {
    server::Job& j = placed[static_cast<size_t>(i)];
    j.state = server::JobState::kAssigned;
    server::Assignment a;
    a.node = NodeName((i / kGpusPerNode) % kNodes);
    const int gpus = j.spec.gpus > 0 ? j.spec.gpus : (j.spec.gpu_milli > 0 ? 1 : 0);
    for (int g = 0; g < gpus; ++g) {
      a.gpu_indices.push_back(static_cast<uint32_t>((i + g) % kGpusPerNode));
    }
    a.gpu_milli = j.spec.gpu_milli > 0 ? j.spec.gpu_milli : 1000;
    j.assignment = a;
  }
  for (auto _ : state) {
    state.PauseTiming();
    auto service = std::make_unique<EfficiencyService>(Config(), nullptr);
    for (int n = 0; n < kNodes; ++n) {
      std::vector<server::SampleTick> report(1);
      report[0].at = T0();
      for (int g = 0; g < kGpusPerNode; ++g) {
        GpuSample s = Sample(n, g, 0);
        s.timestamp = T0();
        report[0].gpus.push_back(std::move(s));
      }
      service->OnReport(NodeName(n), report);
    }
    for (const server::Job& j : queued) service->OnJobChanged(j);
    state.ResumeTiming();
    service->OnJobsChanged(placed);
    state.PauseTiming();
    service.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kPlaced);
}
BENCHMARK(BM_ServicePassNotify)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace stoker::efficiency

BENCHMARK_MAIN();
