#include "scheduler/policy.h"

#include <algorithm>
#include <map>
#include <string>

namespace stoker::scheduler {

PodShape ShapeOf(const Request& r) {
  PodShape s;
  s.cpu_milli = r.cpu_milli;
  s.num_gpu = r.num_gpu;
  s.gpu_milli = r.IsMig() ? MigSlicesToMilli(MigSlices(r.mig)) : r.gpu_milli;
  s.allowed_models = r.allowed_models;
  return s;
}

TypicalShapes ComputeTypicalShapes(const std::vector<Request>& pods, int coverage_pct) {
  std::map<PodShape, int64_t> counts;
  for (const Request& r : pods) ++counts[ShapeOf(r)];
  return TypicalShapesFromCounts(counts, coverage_pct);
}

TypicalShapes TypicalShapesFromCounts(const std::map<PodShape, int64_t>& counts, int coverage_pct) {
  std::vector<TypicalShape> all;
  all.reserve(counts.size());
  for (const auto& [shape, count] : counts) all.push_back({shape, count});
  // Most frequent first; equal counts: the larger shape first (the published order sorts by
  // (count, shape) ascending and reverses it).
  std::sort(all.begin(), all.end(), [](const TypicalShape& a, const TypicalShape& b) {
    if (a.count != b.count) return a.count > b.count;
    if (a.shape.cpu_milli != b.shape.cpu_milli) return a.shape.cpu_milli > b.shape.cpu_milli;
    if (a.shape.gpu_milli != b.shape.gpu_milli) return a.shape.gpu_milli > b.shape.gpu_milli;
    if (a.shape.num_gpu != b.shape.num_gpu) return a.shape.num_gpu > b.shape.num_gpu;
    return a.shape.allowed_models > b.shape.allowed_models;
  });
  TypicalShapes out;
  int64_t n = 0;
  for (const auto& [shape, count] : counts) n += count;
  int64_t covered = 0;
  for (const TypicalShape& t : all) {
    // Take shapes while covered < coverage_pct% of pods (integer comparison, no rounding).
    if (covered * 100 >= static_cast<int64_t>(coverage_pct) * n) break;
    out.shapes.push_back(t);
    covered += t.count;
  }
  out.total = covered;
  return out;
}

std::optional<PlacementResult> CheckFeasible(const Request& r, const ClusterState& cluster) {
  Status valid = ValidateRequest(r);
  if (!valid.ok()) {
    return PlacementResult{PlacementStatus::kInfeasible, {}, valid.message()};
  }
  if (!cluster.AnyNodeCouldEverFit(r)) {
    return PlacementResult{PlacementStatus::kInfeasible,
                           {},
                           "no node in the cluster could ever host this request (CPU " +
                               std::to_string(r.cpu_milli) + "m, memory " +
                               std::to_string(r.memory_mib) + " MiB, " + std::to_string(r.num_gpu) +
                               " GPU(s), model constraint)"};
  }
  return std::nullopt;
}

Placement MakePlacement(const Request& r, int32_t node, const uint8_t* gpus) {
  Placement p;
  p.node = node;
  p.cpu_milli = r.cpu_milli;
  p.memory_mib = r.memory_mib;
  p.best_effort = r.best_effort;
  p.num_gpus = static_cast<uint8_t>(r.num_gpu);
  for (int i = 0; i < r.num_gpu; ++i) {
    p.gpus[i].gpu = gpus[i];
    if (r.IsMig()) {
      p.gpus[i].mig_slices = static_cast<uint8_t>(MigSlices(r.mig));
    } else {
      p.gpus[i].milli = static_cast<int16_t>(r.gpu_milli);
    }
  }
  return p;
}

bool PickFullyFreeGpus(const NodeState& n, int32_t count, uint8_t* out) {
  int32_t got = 0;
  for (int g = 0; g < n.num_gpus && got < count; ++g) {
    if (n.gpu_free_milli[g] == kMilliPerGpu) out[got++] = static_cast<uint8_t>(g);
  }
  return got == count;
}

}  // namespace stoker::scheduler
