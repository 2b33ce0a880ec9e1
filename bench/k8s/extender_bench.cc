// Cost of one scheduler-extender call at kube-scheduler's scale, end to end inside the server:
// parse the ExtenderArgs body, decide over the cluster view, write the answer (the HTTP layer
// and the route table's checks are not included).
//
// Cluster: N nodes x 8 H100s; a seeded mix of GPU states: 30 % of GPUs with share claims
// (100..700 milli-GPU), 10 % held whole by a pod, 5 % with 20..79 GiB of memory held by
// processes no pod owns, the rest idle. Pod: a 300 milli-GPU share.
//
//   BM_Filter/N           nodeCacheCapable: true (NodeNames)
//   BM_Prioritize/N/C     the same, with C nodes' samples changed between calls (heartbeats
//                         arriving; the mirror in the scheduler model follows them node by node)
//   BM_FilterFullNodes/N  nodeCacheCapable: false: N full Node objects in and back out
//
// Usage: build/bench/k8s/k8s_extender_bench
#include <benchmark/benchmark.h>

#include <random>

#include "k8s/cluster_view.h"
#include "k8s/extender.h"
#include "k8s/extender_types.h"

namespace stoker::k8s {
namespace {
using nlohmann::json;

constexpr uint64_t kGiB = uint64_t{1} << 30;
const WallTime kNow = WallTime(std::chrono::seconds(1'747'040'000));

std::string NodeName(int i) { return "gpu-node-" + std::to_string(i); }

std::vector<GpuSample> NodeSamples(int node, std::mt19937_64& rng) {
  std::vector<GpuSample> out;
  for (uint32_t g = 0; g < 8; ++g) {
    GpuSample s;
    s.id.index = g;
    s.id.uuid = "GPU-" + std::to_string(node) + "-" + std::to_string(g);
    s.id.name = "NVIDIA H100 80GB HBM3";
    s.timestamp = kNow;
    s.memory_total_bytes = Field<uint64_t>::Of(80 * kGiB);
    uint64_t used = kGiB / 2;
    const int roll = static_cast<int>(rng() % 100);
    if (roll < 30) {
      const int32_t milli = 100 + static_cast<int32_t>(rng() % 7) * 100;
      GpuClaim c;
      c.job = {JobRef::Kind::kKubernetes, "ml/p" + std::to_string(rng() % 100000), "", "main"};
      c.gpu_milli = milli;
      s.claims.push_back(c);
    } else if (roll < 40) {
      GpuClaim c;
      c.job = {JobRef::Kind::kKubernetes, "ml/w" + std::to_string(rng() % 100000), "", "main"};
      c.whole = true;
      c.gpu_milli = 1000;
      s.claims.push_back(c);
    } else if (roll < 45) {
      GpuProcess p;
      p.pid = 100;
      p.used_memory_bytes = Field<uint64_t>::Of((20 + rng() % 60) * kGiB);
      used += p.used_memory_bytes.value();
      s.processes.push_back(p);
    }
    s.memory_used_bytes = Field<uint64_t>::Of(used);
    s.mig_enabled = Field<bool>::Of(false);
    out.push_back(std::move(s));
  }
  return out;
}

struct World {
  ClusterView view;
  std::vector<std::vector<GpuSample>> samples;
  std::string pod;
};

World MakeWorld(int nodes) {
  World w;
  std::mt19937_64 rng(7);
  for (int i = 0; i < nodes; ++i) {
    w.samples.push_back(NodeSamples(i, rng));
    w.view.Update(NodeName(i), GpusFromSamples(w.samples.back(), nullptr), kNow);
  }
  const json limits = {{"stoker.io/gpu-milli", "300"}, {"cpu", "2"}};
  w.pod = json{{"metadata", {{"name", "p"}, {"namespace", "ml"}, {"uid", "u-1"}}},
               {"spec",
                {{"containers",
                  json::array({{{"name", "main"},
                                {"resources", {{"limits", limits}, {"requests", limits}}}}})}}}}
              .dump();
  return w;
}

std::string NamesBody(const World& w, int nodes) {
  json names = json::array();
  for (int i = 0; i < nodes; ++i) names.push_back(NodeName(i));
  return R"({"Pod":)" + w.pod + R"(,"Nodes":null,"NodeNames":)" + names.dump() + "}";
}

void BM_Filter(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const World w = MakeWorld(n);
  const std::string body = NamesBody(w, n);
  size_t passed = 0;
  for (auto _ : state) {
    auto args = ParseExtenderArgs(body);
    const FilterOutcome out = FilterNodes(w.view, args->pod, args->node_names, {}, kNow);
    std::string answer = FilterResultJson(&*args, out);
    benchmark::DoNotOptimize(answer);
    passed = out.passed.size();
  }
  state.counters["passed"] = static_cast<double>(passed);
  state.counters["body_kb"] = static_cast<double>(body.size()) / 1024.0;
}
BENCHMARK(BM_Filter)->Arg(1000)->Arg(5000)->Unit(benchmark::kMillisecond);

void BM_Prioritize(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const int changed = static_cast<int>(state.range(1));
  World w = MakeWorld(n);
  const std::string body = NamesBody(w, n);
  Scorer scorer({});
  {
    auto args = ParseExtenderArgs(body);
    (void)scorer.Score(w.view, args->pod, args->node_names, kNow);  // builds the mirror
  }
  std::mt19937_64 rng(11);
  int top = 0;
  for (auto _ : state) {
    if (changed > 0) {
      state.PauseTiming();
      for (int k = 0; k < changed; ++k) {
        const int i = static_cast<int>(rng() % static_cast<uint64_t>(n));
        w.samples[i] = NodeSamples(i, rng);
        w.view.Update(NodeName(i), GpusFromSamples(w.samples[i], nullptr), kNow);
      }
      state.ResumeTiming();
    }
    auto args = ParseExtenderArgs(body);
    const std::vector<int64_t> scores = scorer.Score(w.view, args->pod, args->node_names, kNow);
    std::vector<HostPriority> list;
    list.reserve(scores.size());
    top = 0;
    for (size_t i = 0; i < scores.size(); ++i) {
      list.push_back({args->node_names[i], WireScore(scores[i])});
      top += scores[i] == 100;
    }
    std::string answer = HostPriorityListJson(list);
    benchmark::DoNotOptimize(answer);
  }
  state.counters["best_nodes"] = top;
}
BENCHMARK(BM_Prioritize)
    ->Args({1000, 0})
    ->Args({5000, 0})
    ->Args({5000, 50})
    ->Unit(benchmark::kMillisecond);

void BM_FilterFullNodes(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const World w = MakeWorld(n);
  // A Node object as the API server serializes it (labels, capacity, conditions, addresses,
  // node info; about 1.5 KB).
  json items = json::array();
  for (int i = 0; i < n; ++i) {
    const json cap = {{"cpu", "64"},
                      {"memory", "528093148Ki"},
                      {"pods", "110"},
                      {"stoker.io/gpu", "8"},
                      {"stoker.io/gpu-milli", "8k"},
                      {"ephemeral-storage", "960303848Ki"}};
    items.push_back(
        {{"metadata",
          {{"name", NodeName(i)},
           {"uid", "0c1e5a70-51f2-4b1e-9f0a-" + std::to_string(100000000000 + i)},
           {"resourceVersion", "48190"},
           {"labels",
            {{"kubernetes.io/hostname", NodeName(i)},
             {"kubernetes.io/arch", "amd64"},
             {"kubernetes.io/os", "linux"},
             {"nvidia.com/gpu.product", "H100-80GB-HBM3"}}}}},
         {"spec", {{"podCIDR", "10.244.1.0/24"}, {"podCIDRs", {"10.244.1.0/24"}}}},
         {"status",
          {{"capacity", cap},
           {"allocatable", cap},
           {"conditions", json::array({{{"type", "Ready"},
                                        {"status", "True"},
                                        {"lastHeartbeatTime", "2025-05-12T09:13:50Z"},
                                        {"lastTransitionTime", "2025-05-01T08:00:30Z"},
                                        {"reason", "KubeletReady"},
                                        {"message", "kubelet is posting ready status"}}})},
           {"addresses", json::array({{{"type", "InternalIP"}, {"address", "10.0.0.11"}},
                                      {{"type", "Hostname"}, {"address", NodeName(i)}}})},
           {"nodeInfo",
            {{"kernelVersion", "6.1.0-21-amd64"},
             {"osImage", "Debian GNU/Linux 12 (bookworm)"},
             {"containerRuntimeVersion", "containerd://1.7.13"},
             {"kubeletVersion", "v1.30.2"},
             {"operatingSystem", "linux"},
             {"architecture", "amd64"}}}}}});
  }
  const std::string body = R"({"Pod":)" + w.pod + R"(,"Nodes":)" +
                           json{{"metadata", json::object()}, {"items", items}}.dump() +
                           R"(,"NodeNames":null})";
  for (auto _ : state) {
    auto args = ParseExtenderArgs(body);
    const FilterOutcome out = FilterNodes(w.view, args->pod, args->node_names, {}, kNow);
    std::string answer = FilterResultJson(&*args, out);
    benchmark::DoNotOptimize(answer);
  }
  state.counters["body_kb"] = static_cast<double>(body.size()) / 1024.0;
}
BENCHMARK(BM_FilterFullNodes)->Arg(1000)->Arg(5000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace stoker::k8s

BENCHMARK_MAIN();
