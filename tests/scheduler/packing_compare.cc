// stoker_packing_compare: a diagnostic for policy design (not a test). Runs the published static
// packing protocol (as `stoker sim packing`) for several policies on one workload, optionally a
// generated variant (GPU-model constraints, multi-GPU-heavy), and prints the mean allocation at
// the arrival steps 50..130 % for each policy and each one's difference to the first policy.
//
// Usage: stoker_packing_compare NODES.csv PODS.csv SEEDS POLICY[,POLICY...] [SPEC_PCT [MGPU_PCT]]
//   e.g. stoker_packing_compare nodes.csv openb_pod_list_default.csv 42-45 fgd,stoker 20
// Env: THREADS (default 2); REF=reference_results.csv adds the published FGD row and each
// policy's difference to it; FAILS=PCT prints, for each seed and policy, the pods that found no
// room before PCT % arrived by class and GPU model, then their sum over the seeds (PLACED=1: also
// where the placed ones went; VERBOSE=1: the state of the nodes they could have used at each
// failure).
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "scheduler/policy.h"
#include "scheduler/registry.h"
#include "sim/packing.h"
#include "sim/packing_trace.h"
#include "sim/packing_workload.h"

namespace {

// "WHO before LIMIT%: key:count ..." on one line.
void PrintCounts(const std::string& who, double limit, const std::map<std::string, int>& counts) {
  std::printf("%s before %.0f%%:", who.c_str(), limit);
  for (const auto& [k, v] : counts) std::printf(" %s:%d", k.c_str(), v);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace stoker;
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s NODES PODS SEEDS POLICY[,POLICY] [SPEC_PCT [MGPU_PCT]]\n",
                 argv[0]);
    return 2;
  }
  auto cluster = sim::LoadOpenbNodes(argv[1]);
  if (!cluster.ok()) return std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str()), 1;
  auto pods = sim::LoadOpenbPods(argv[2], cluster->models());
  if (!pods.ok()) return std::fprintf(stderr, "%s\n", pods.status().ToString().c_str()), 1;
  std::string seeds_text = argv[3];
  std::vector<uint64_t> seeds;
  const size_t dash = seeds_text.find('-');
  if (dash == std::string::npos) {
    seeds.push_back(std::stoull(seeds_text));
  } else {
    for (uint64_t s = std::stoull(seeds_text.substr(0, dash));
         s <= std::stoull(seeds_text.substr(dash + 1)); ++s)
      seeds.push_back(s);
  }
  std::vector<std::string> policies;
  for (std::string p = argv[4]; !p.empty();) {
    const size_t comma = p.find(',');
    policies.push_back(p.substr(0, comma));
    p = comma == std::string::npos ? "" : p.substr(comma + 1);
  }
  sim::WorkloadVariant variant;
  if (argc > 5) variant.constrain_pct = std::atoi(argv[5]);
  if (argc > 6) variant.multi_gpu_pct = std::atoi(argv[6]);
  if (const char* upto = std::getenv("FAILS")) {
    // Pods that found no room before `upto` % arrived, by class and model constraint: each seed,
    // then the sum over the seeds.
    const double limit = std::atof(upto);
    std::map<std::string, std::map<std::string, int>> all_fails, all_placed;  // by policy
    for (const uint64_t seed : seeds) {
      auto w = sim::GenerateWorkload(pods->pods, *cluster, variant, seed);
      if (!w.ok()) return std::fprintf(stderr, "%s\n", w.status().ToString().c_str()), 1;
      for (const std::string& name : policies) {
        scheduler::PolicyConfig config;
        config.seed = seed;
        config.typical_shapes = scheduler::ComputeTypicalShapes(*w, 95);
        auto policy = scheduler::CreatePlacementPolicy(name, config);
        scheduler::ClusterState c = sim::ShuffleNodes(*cluster, seed);
        auto seq = sim::ShuffleAndInflate(*w, seed, 1300, c.total_gpu_milli());
        std::map<std::string, int> fails, placed;
        int64_t arrived = 0;
        for (const auto& r : seq) {
          arrived += r.TotalGpuMilli();
          if (100.0 * arrived / c.total_gpu_milli() > limit) break;
          (*policy)->Observe(r);
          auto res = (*policy)->Place(r, c);
          if (res.status == scheduler::PlacementStatus::kPlaced) {
            (void)c.Allocate(res.placement);
            const std::string m = c.models().Name(c.node(res.placement.node).gpu_model);
            const std::string cls = r.IsCpuOnly()    ? "cpu"
                                    : r.IsGpuShare() ? "share"
                                                     : std::to_string(r.num_gpu) + "gpu";
            ++placed[m + ":" + cls + (r.allowed_models ? "(pinned)" : "")];
            continue;
          }
          std::string key = r.IsCpuOnly()    ? "cpu"
                            : r.IsGpuShare() ? "share"
                                             : std::to_string(r.num_gpu) + "gpu";
          key += "/cpu" + std::to_string(r.cpu_milli / 1000);
          for (int m = 0; m < c.models().size(); ++m)
            if (r.allowed_models & scheduler::GpuModelTable::Bit(static_cast<uint8_t>(m)))
              key += "/" + c.models().Name(static_cast<uint8_t>(m));
          if (res.status == scheduler::PlacementStatus::kInfeasible) key += "/INFEASIBLE";
          if (std::getenv("VERBOSE") && r.allowed_models != 0) {
            // The nodes of the allowed models: free GPU milli and CPU.
            int64_t gpu = 0, cpu = 0, nodes = 0, fit_gpu = 0, fit_cpu = 0;
            for (int32_t nd = 0; nd < c.num_nodes(); ++nd) {
              const auto& ns = c.node(nd);
              if (ns.num_gpus == 0 ||
                  (r.allowed_models & scheduler::GpuModelTable::Bit(ns.gpu_model)) == 0)
                continue;
              ++nodes;
              gpu += ns.free_gpu_milli;
              cpu += ns.free_cpu_milli;
              int room = 0;
              for (int g = 0; g < ns.num_gpus; ++g) room += ns.gpu_free_milli[g] >= r.gpu_milli;
              if (room >= r.num_gpu) {
                ++fit_gpu;
                if (ns.free_cpu_milli >= r.cpu_milli) ++fit_cpu;
              }
            }
            std::printf(
                "  fail %s milli %d at %.1f%%: %lld nodes, free gpu %lld cpu %lld; gpu fits %lld, "
                "+cpu %lld\n",
                key.c_str(), r.gpu_milli, 100.0 * arrived / c.total_gpu_milli(), (long long)nodes,
                (long long)gpu, (long long)cpu, (long long)fit_gpu, (long long)fit_cpu);
          }
          if (std::getenv("VERBOSE") && r.num_gpu == 8) {
            // Nodes with 8 whole free GPUs, by free CPU, at the failure.
            int whole8 = 0, cpu_ok = 0;
            for (int32_t nd = 0; nd < c.num_nodes(); ++nd) {
              const auto& ns = c.node(nd);
              int w = 0;
              for (int g = 0; g < ns.num_gpus; ++g) w += ns.gpu_free_milli[g] == 1000;
              if (w == 8) {
                ++whole8;
                if (ns.free_cpu_milli >= r.cpu_milli) ++cpu_ok;
              }
            }
            std::printf("  fail %s at %.1f%%: nodes with 8 free GPUs %d, with the CPU %d\n",
                        key.c_str(), 100.0 * arrived / c.total_gpu_milli(), whole8, cpu_ok);
          }
          ++fails[key];
        }
        const std::string who = name + " seed " + std::to_string(seed);
        if (std::getenv("PLACED")) PrintCounts(who + " placed", limit, placed);
        PrintCounts(who + " failures", limit, fails);
        for (const auto& [k, v] : placed) all_placed[name][k] += v;
        for (const auto& [k, v] : fails) all_fails[name][k] += v;
      }
    }
    if (seeds.size() > 1) {
      const std::string over = " over " + std::to_string(seeds.size()) + " seeds";
      for (const std::string& name : policies) {
        if (std::getenv("PLACED")) PrintCounts(name + over + " placed", limit, all_placed[name]);
        PrintCounts(name + over + " failures", limit, all_fails[name]);
      }
    }
  }
  const size_t n = policies.size() * seeds.size();
  std::vector<sim::PackingCurve> curves(n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t j = next++; j < n; j = next++) {
      const uint64_t seed = seeds[j % seeds.size()];
      auto r = sim::RunPackingVariant(*cluster, pods->pods, variant, std::nullopt,
                                      {policies[j / seeds.size()], seed, 1300});
      if (!r.ok()) {
        std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
        std::abort();
      }
      curves[j] = *r;
    }
  };
  const int threads = std::getenv("THREADS") ? std::atoi(std::getenv("THREADS")) : 2;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  std::vector<sim::PackingCurve> means;
  for (size_t p = 0; p < policies.size(); ++p) {
    std::vector<sim::PackingCurve> runs(curves.begin() + static_cast<long>(p * seeds.size()),
                                        curves.begin() + static_cast<long>((p + 1) * seeds.size()));
    means.push_back(sim::MeanCurve(runs));
  }
  // Published FGD (REF=reference_results.csv) as a row, when the workload has one.
  std::vector<double> published;
  if (const char* ref = std::getenv("REF"); ref != nullptr && variant.empty()) {
    FILE* f = std::fopen(ref, "r");
    char line[4096];
    const std::string want = "openb_pod_list_" + pods->workload + ",06-FGD,gpu_alloc_pct,";
    while (f != nullptr && std::fgets(line, sizeof line, f) != nullptr) {
      std::string l = line;
      if (l.rfind(want, 0) != 0) continue;
      l = l.substr(want.size());
      l = l.substr(l.find(',') + 1);  // n_seeds
      for (size_t pos = 0; pos < l.size();) {
        const size_t c = l.find(',', pos);
        published.push_back(std::atof(l.substr(pos, c - pos).c_str()));
        if (c == std::string::npos) break;
        pos = c + 1;
      }
    }
    if (f != nullptr) std::fclose(f);
  }
  std::printf("%-28s %-12s", variant.Name(pods->workload).c_str(), "policy");
  for (int s = 50; s <= 130; s += 10) std::printf(" %7d", s);
  std::printf("   failed\n");
  for (size_t p = 0; p < policies.size(); ++p) {
    std::printf("%-28s %-12s", "", policies[p].c_str());
    for (int s = 50; s <= 130; s += 10) std::printf(" %7.2f", means[p].alloc_pct[s]);
    std::printf("   %lld\n", static_cast<long long>(means[p].pods_failed));
    if (p == 0) continue;
    std::printf("%-28s %-12s", "", ("  -" + policies[0]).c_str());
    double worst = 1e9;
    for (int s = 50; s <= 130; s += 10) {
      const double d = means[p].alloc_pct[s] - means[0].alloc_pct[s];
      worst = std::min(worst, d);
      std::printf(" %+7.2f", d);
    }
    std::printf("   worst %+.2f\n", worst);
  }
  if (published.size() == 14) {
    std::printf("%-28s %-12s", "", "published");
    for (int s = 50; s <= 130; s += 10)
      std::printf(" %7.2f", published[static_cast<size_t>(s / 10)]);
    std::printf("\n");
    for (size_t p = 0; p < policies.size(); ++p) {
      std::printf("%-28s %-12s", "", (policies[p] + "-pub").c_str());
      double worst = 1e9;
      for (int s = 50; s <= 130; s += 10) {
        const double d = means[p].alloc_pct[s] - published[static_cast<size_t>(s / 10)];
        worst = std::min(worst, d);
        std::printf(" %+7.2f", d);
      }
      std::printf("   worst %+.2f\n", worst);
    }
  }
  return 0;
}
