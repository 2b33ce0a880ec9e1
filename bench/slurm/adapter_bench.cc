// Cost of the Slurm adapter per scheduling cycle at 1,000 nodes: parsing sinfo/squeue answers
// and the decision step; parsing also at 10,000 nodes and 100,000 jobs. The answers are the
// recorded ones from the real test cluster (tests/slurm/testdata), scaled: each node record is the
// recorded g1 renamed n0001..n1000 with 0..8 GPUs in use; each running job is the recorded 2-GPU
// job moved to a node; pending held jobs are the recorded held job. Usage:
// build/bench/slurm/slurm_adapter_bench
#include <benchmark/benchmark.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "slurm/controller.h"
#include "slurm/model.h"

namespace stoker::slurm {
namespace {

nlohmann::json Load(const std::string& name) {
  std::ifstream in(std::string(STOKER_SOURCE_DIR) + "/tests/slurm/testdata/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

struct Answers {
  std::string sinfo, squeue;
};

// `pretty`: indented as Slurm prints its answers; compact where the indented answer would pass
// the adapter's 256 MiB bound (100,000 jobs indented are about 330 MB).
Answers Scaled(int nodes, int held, bool pretty = true) {
  nlohmann::json si = Load("sinfo-22.05.json");
  nlohmann::json sq = Load("squeue-22.05.json");
  const nlohmann::json node = si["nodes"][0];
  const nlohmann::json running = sq["jobs"][2];  // RUNNING, gpu:2(IDX:0-1)
  const nlohmann::json pending = sq["jobs"][4];  // held, stoker:steer, 4 GPUs
  si["nodes"] = nlohmann::json::array();
  sq["jobs"] = nlohmann::json::array();
  uint32_t id = 100;
  for (int i = 1; i <= nodes; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "n%04d", i);
    nlohmann::json n = node;
    n["name"] = name;
    const int used = 2 * ((i * 7) % 5);  // 0, 2, 4, 6, 8 GPUs used
    n["gres_used"] = "gpu:" + std::to_string(used);
    n["state"] = used == 0 ? "idle" : used == 8 ? "allocated" : "mixed";
    n["alloc_cpus"] = used;
    si["nodes"].push_back(n);
    for (int g = 0; g < used; g += 2) {
      nlohmann::json j = running;
      j["job_id"] = id++;
      j["nodes"] = name;
      j["gres_detail"] = {"gpu:2(IDX:" + std::to_string(g) + "-" + std::to_string(g + 1) + ")"};
      sq["jobs"].push_back(j);
    }
  }
  for (int k = 0; k < held; ++k) {
    nlohmann::json j = pending;
    j["job_id"] = id++;
    j["tres_per_node"] = "gres:gpu:" + std::to_string(1 + k % 4);
    sq["jobs"].push_back(j);
  }
  const int indent = pretty ? 2 : -1;
  return {si.dump(indent), sq.dump(indent)};
}

void BM_ParseSinfo(benchmark::State& state) {
  const Answers a = Scaled(static_cast<int>(state.range(0)), 0);
  for (auto _ : state) benchmark::DoNotOptimize(ParseSinfoJson(a.sinfo));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * a.sinfo.size()));
}
BENCHMARK(BM_ParseSinfo)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

// Args: nodes, held jobs (about two running jobs per node besides), indented (1) or compact (0).
void BM_ParseSqueue(benchmark::State& state) {
  const Answers a = Scaled(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
                           state.range(2) != 0);
  size_t jobs = 0;
  for (auto _ : state) {
    auto r = ParseSqueueJson(a.squeue);
    jobs = r.ok() ? r->size() : 0;
    benchmark::DoNotOptimize(r);
  }
  state.counters["jobs"] = static_cast<double>(jobs);
  state.counters["MB"] = static_cast<double>(a.squeue.size()) / 1e6;
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * a.squeue.size()));
}
BENCHMARK(BM_ParseSqueue)
    ->Args({1000, 100, 1})
    ->Args({10000, 100, 1})
    ->Args({10000, 80000, 0})
    ->Unit(benchmark::kMillisecond);

// Decide() alone over parsed snapshots: model build, steering of `held` jobs, weights.
void BM_Decide(benchmark::State& state) {
  const Answers a = Scaled(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  SlurmSnapshot snap{ParseSinfoJson(a.sinfo).value(), ParseSqueueJson(a.squeue).value()};
  auto policies = DecisionPolicies::Create({}).value();
  size_t steered = 0, weights = 0;
  for (auto _ : state) {
    Decision d = Decide(snap, policies, {});
    steered = d.steer.size();
    weights = d.weights.size();
    benchmark::DoNotOptimize(d);
  }
  state.counters["steered"] = static_cast<double>(steered);
  state.counters["weights"] = static_cast<double>(weights);
}
BENCHMARK(BM_Decide)->Args({1000, 0})->Args({1000, 100})->Unit(benchmark::kMillisecond);

// One whole cycle without the commands themselves: parse both answers, then decide.
void BM_Cycle(benchmark::State& state) {
  const Answers a = Scaled(static_cast<int>(state.range(0)), 100);
  auto policies = DecisionPolicies::Create({}).value();
  for (auto _ : state) {
    SlurmSnapshot snap{ParseSinfoJson(a.sinfo).value(), ParseSqueueJson(a.squeue).value()};
    benchmark::DoNotOptimize(Decide(snap, policies, {}));
  }
}
BENCHMARK(BM_Cycle)->Arg(1000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace stoker::slurm

BENCHMARK_MAIN();
