// stoker_waste_analysis: where does the unallocated GPU capacity of a static packing run go?
// A diagnostic for policy design (not a test): runs the published protocol (same shuffle and
// inflation as `stoker sim packing`) with one policy and decomposes the free GPU milli at
// 100 % arrived and at the end (130 %):
//   usable        - some pod shape of the workload still fits the node (capacity arrivals
//                   could have used; nothing structural prevents it)
//   cpu-stranded  - a shape fits the GPUs but no GPU shape has the CPU it needs there
//   mem-stranded  - likewise for memory (CPU is enough)
//   share-frag    - partial GPUs on nodes where no shape fits the GPUs at all
//   whole-nofit   - fully free GPUs on such nodes (e.g. model constraints)
// It also prints upper bounds (CPU and GPU demanded vs capacity) and the pods that failed after
// 100 % by request class.
//
// Usage: stoker_waste_analysis NODES.csv PODS.csv POLICY SEED [SEED...]
//        stoker_waste_analysis --csv NODES.csv PODS.csv POLICY SEED [SEED...]
// --csv prints the mean curve over the seeds as `stoker sim packing --csv -` does (same library
// calls: RunPacking, MeanCurve, PackingCsvRows), for builds without the CLI.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "scheduler/fgd.h"
#include "scheduler/registry.h"
#include "sim/packing.h"
#include "sim/packing_trace.h"

namespace {

using stoker::scheduler::ClusterState;
using stoker::scheduler::NodeState;
using stoker::scheduler::Request;

struct Breakdown {
  double usable = 0, cpu = 0, mem = 0, share_frag = 0, whole_nofit = 0;
  double free_partial = 0, free_whole = 0;
  std::map<int, double> frag_by_free;  // partial GPUs: free milli bucketed by 50
};

const char* ClassName(const Request& r) {
  if (r.IsCpuOnly()) return "cpu-only";
  if (r.IsGpuShare()) return "share";
  static const char* kNames[] = {"",      "1-gpu", "2-gpu", "3-gpu", "4-gpu",
                                 "5-gpu", "6-gpu", "7-gpu", "8-gpu"};
  return kNames[r.num_gpu];
}

Breakdown Decompose(const ClusterState& c, const std::vector<Request>& shapes) {
  Breakdown b;
  for (int32_t n = 0; n < c.num_nodes(); ++n) {
    const NodeState& s = c.node(n);
    if (s.free_gpu_milli == 0) continue;
    for (int g = 0; g < s.num_gpus; ++g) {
      const int f = s.gpu_free_milli[g];
      if (f == 1000) b.free_whole += f;
      if (f > 0 && f < 1000) {
        b.free_partial += f;
        b.frag_by_free[f / 50 * 50] += f;
      }
    }
    bool any_fits = false, gpu_fits = false, cpu_ok = false;
    for (const Request& r : shapes) {
      if (r.IsCpuOnly()) continue;
      if (c.Fits(n, r)) {
        any_fits = true;
        break;
      }
      // GPU part alone: enough GPUs with room and an allowed model?
      Request gpu_only = r;
      gpu_only.cpu_milli = 0;
      gpu_only.memory_mib = 0;
      if (c.Fits(n, gpu_only)) {
        gpu_fits = true;
        Request no_mem = r;
        no_mem.memory_mib = 0;
        if (c.Fits(n, no_mem)) cpu_ok = true;
      }
    }
    const double free = s.free_gpu_milli;
    if (any_fits) {
      b.usable += free;
    } else if (gpu_fits) {
      (cpu_ok ? b.mem : b.cpu) += free;
    } else {
      for (int g = 0; g < s.num_gpus; ++g) {
        const int f = s.gpu_free_milli[g];
        (f == 1000 ? b.whole_nofit : b.share_frag) += f;
      }
    }
  }
  return b;
}

void Print(const char* label, const ClusterState& c, const Breakdown& b) {
  const double total = static_cast<double>(c.total_gpu_milli()) / 100.0;  // -> percent
  std::printf("%s: alloc %.2f %%  free %.2f %% (whole GPUs %.2f, partial %.2f)\n", label,
              static_cast<double>(c.allocated_gpu_milli()) / total,
              static_cast<double>(c.total_gpu_milli() - c.allocated_gpu_milli()) / total,
              b.free_whole / total, b.free_partial / total);
  std::printf(
      "  usable %.2f  cpu-stranded %.2f  mem-stranded %.2f  share-frag %.2f  whole-nofit %.2f  (%% "
      "of cluster)\n",
      b.usable / total, b.cpu / total, b.mem / total, b.share_frag / total, b.whole_nofit / total);
  std::printf("  partial GPUs by free milli (bucket: %% of cluster):");
  for (const auto& [k, v] : b.frag_by_free) std::printf(" %d:%.2f", k, v / total);
  std::printf("\n  CPU used %.1f %%, memory used %.1f %%\n",
              100.0 * static_cast<double>(c.allocated_cpu_milli()) /
                  static_cast<double>(c.total_cpu_milli()),
              100.0 * static_cast<double>(c.allocated_memory_mib()) /
                  static_cast<double>(c.total_memory_mib()));
}

}  // namespace

int main(int argc, char** argv) {
  const bool csv = argc > 1 && std::string(argv[1]) == "--csv";
  if (csv) {
    --argc;
    ++argv;
  }
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s NODES.csv PODS.csv POLICY SEED [SEED...]\n", argv[0]);
    return 2;
  }
  auto cluster = stoker::sim::LoadOpenbNodes(argv[1]);
  if (!cluster.ok()) {
    std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
    return 2;
  }
  auto pods = stoker::sim::LoadOpenbPods(argv[2], cluster->models());
  if (!pods.ok()) {
    std::fprintf(stderr, "%s\n", pods.status().ToString().c_str());
    return 2;
  }
  // Distinct request shapes (memory included: it decides fitting).
  std::vector<Request> shapes;
  {
    std::set<std::tuple<int64_t, int64_t, int32_t, int32_t, uint64_t>> seen;
    for (const Request& r : pods->pods) {
      if (seen.insert({r.cpu_milli, r.memory_mib, r.num_gpu, r.gpu_milli, r.allowed_models})
              .second) {
        shapes.push_back(r);
      }
    }
  }
  const auto typical = stoker::scheduler::ComputeTypicalShapes(pods->pods, 95);
  if (csv) {
    std::vector<stoker::sim::PackingCurve> runs;
    for (int a = 4; a < argc; ++a) {
      auto run = stoker::sim::RunPacking(*cluster, pods->pods, typical,
                                         {argv[3], std::strtoull(argv[a], nullptr, 10), 1300});
      if (!run.ok()) {
        std::fprintf(stderr, "%s\n", run.status().ToString().c_str());
        return 1;
      }
      runs.push_back(*run);
    }
    std::printf("%s", stoker::sim::PackingCsvRows(pods->workload, argv[3], argc - 4,
                                                  stoker::sim::MeanCurve(runs))
                          .c_str());
    return 0;
  }
  for (int a = 4; a < argc; ++a) {
    const uint64_t seed = std::strtoull(argv[a], nullptr, 10);
    stoker::scheduler::PolicyConfig config;
    config.seed = seed;
    config.typical_shapes = typical;
    auto policy = stoker::scheduler::CreatePlacementPolicy(argv[3], config);
    if (!policy.ok()) {
      std::fprintf(stderr, "%s\n", policy.status().ToString().c_str());
      return 2;
    }
    ClusterState c = *cluster;
    const int64_t total = c.total_gpu_milli();
    const auto seq = stoker::sim::ShuffleAndInflate(pods->pods, seed, 1300, total);
    int64_t arrived = 0, cpu_demand = 0, mem_demand = 0;
    bool printed100 = false;
    // Share pods on each GPU (node * 8 + gpu) -> their milli, to see which combinations leave
    // holes.
    std::map<int64_t, std::vector<int>> contents;
    std::map<std::string, std::pair<int64_t, int64_t>> failed_after;  // class -> (pods, GPU milli)
    std::map<std::string, int64_t> arrived_after;
    for (const Request& r : seq) {
      if (!printed100 && arrived * 100 >= total * 100) {
        std::printf("== %s seed %llu\n", argv[3], static_cast<unsigned long long>(seed));
        Print("at 100 % arrived", c, Decompose(c, shapes));
        printed100 = true;
      }
      arrived += r.TotalGpuMilli();
      cpu_demand += r.cpu_milli;
      mem_demand += r.memory_mib;
      (*policy)->Observe(r);
      auto res = (*policy)->Place(r, c);
      if (printed100) ++arrived_after[ClassName(r)];
      if (res.placed()) {
        if (!c.Allocate(res.placement).ok()) return 1;
        if (r.IsGpuShare())
          contents[int64_t{res.placement.node} * 8 + res.placement.gpus[0].gpu].push_back(
              r.gpu_milli);
      } else if (printed100) {
        auto& f = failed_after[ClassName(r)];
        ++f.first;
        f.second += r.TotalGpuMilli();
      }
    }
    Print("at the end (130 %)", c, Decompose(c, shapes));
    std::printf("  demand over the run: CPU %.1f %% of capacity, memory %.1f %%, GPU %.1f %%\n",
                100.0 * static_cast<double>(cpu_demand) / static_cast<double>(c.total_cpu_milli()),
                100.0 * static_cast<double>(mem_demand) / static_cast<double>(c.total_memory_mib()),
                100.0 * static_cast<double>(arrived) / static_cast<double>(total));
    std::map<std::string, std::pair<int64_t, int64_t>>
        combos;  // sorted contents -> (GPUs, hole milli)
    for (auto& [key, v] : contents) {
      const int hole = c.node(static_cast<int32_t>(key / 8)).gpu_free_milli[key % 8];
      if (hole < 30) continue;
      std::sort(v.begin(), v.end(), std::greater<>());
      std::string k;
      for (int m : v) k += std::to_string(m) + "+";
      k += c.node(static_cast<int32_t>(key / 8)).free_cpu_milli < 4000 ? "(cpu<4)" : "";
      combos[k].first++;
      combos[k].second += hole;
    }
    std::vector<std::pair<int64_t, std::string>> top;
    for (const auto& [k, v] : combos) top.push_back({v.second, k});
    std::sort(top.begin(), top.end(), std::greater<>());
    std::printf("  holes >= 30 milli by GPU contents (GPUs, %% of cluster):");
    for (size_t i = 0; i < top.size() && i < 25; ++i) {
      std::printf(" %s %lld %.2f,", top[i].second.c_str(),
                  static_cast<long long>(combos[top[i].second].first),
                  static_cast<double>(top[i].first) / static_cast<double>(total) * 100.0);
    }
    std::printf("\n");
    // Bound: the share pods this run placed, packed offline by best-fit decreasing (GPU milli
    // only, ignoring CPU and nodes). No placement of the same pods wastes much less than this.
    {
      std::vector<int> placed;
      for (const auto& [key, v] : contents) placed.insert(placed.end(), v.begin(), v.end());
      std::sort(placed.begin(), placed.end(), std::greater<>());
      std::multiset<int> holes;
      for (int m : placed) {
        auto it = holes.lower_bound(m);
        if (it == holes.end()) {
          holes.insert(1000 - m);
        } else {
          const int h = *it - m;
          holes.erase(it);
          holes.insert(h);
        }
      }
      int64_t bfd = 0;
      for (int h : holes) bfd += h;
      int64_t online = 0;
      for (const auto& [key, v] : contents)
        online += c.node(static_cast<int32_t>(key / 8)).gpu_free_milli[key % 8];
      std::map<int, int> by_milli;
      for (int m : placed) ++by_milli[m];
      std::printf("  share pods placed by milli:");
      for (const auto& [m, k] : by_milli) std::printf(" %dx%d", m, k);
      std::printf("\n");
      std::printf(
          "  share pods placed %zu on %zu GPUs; their holes %.2f %% of cluster; "
          "best-fit-decreasing offline: %zu GPUs, holes %.2f %%\n",
          placed.size(), contents.size(),
          100.0 * static_cast<double>(online) / static_cast<double>(total), holes.size(),
          100.0 * static_cast<double>(bfd) / static_cast<double>(total));
    }
    std::printf("  after 100 %%: arrived / failed (GPUs) by class:");
    for (const auto& [k, v] : arrived_after) {
      const auto f = failed_after[k];
      std::printf(" %s %lld/%lld (%.1f)", k.c_str(), static_cast<long long>(v),
                  static_cast<long long>(f.first), static_cast<double>(f.second) / 1000.0);
    }
    std::printf("\n");
  }
  return 0;
}
