#pragma once
// Placement policies: given a request and the cluster, choose a node and the GPUs inside it.
// Every policy shares one feasibility filter (ClusterState::Fits / AnyNodeCouldEverFit), so a
// request is reported kInfeasible by all policies alike when no node could EVER host it
// (9 GPUs, an unknown model, more CPU than any node), instead of being queued forever.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "scheduler/cluster.h"
#include "scheduler/resources.h"

namespace stoker::scheduler {

enum class PlacementStatus {
  kPlaced,         // `placement` is valid; the caller applies it with ClusterState::Allocate
  kNoCapacityNow,  // feasible in principle, no room now: queue and retry
  kInfeasible,     // no node could ever satisfy it: report, do not queue
};

struct PlacementResult {
  PlacementStatus status = PlacementStatus::kNoCapacityNow;
  Placement placement;
  std::string reason;  // empty when placed

  bool placed() const { return status == PlacementStatus::kPlaced; }
};

// A pod shape as FGD's "typical pod" distribution sees it (memory is not part of the shape).
struct PodShape {
  int64_t cpu_milli = 0;
  int32_t num_gpu = 0;
  int32_t gpu_milli = 0;  // per GPU
  GpuModelMask allowed_models = 0;
  // NOLINTNEXTLINE(modernize-use-nullptr): false positive on a defaulted <=> (llvm issue 53961)
  friend auto operator<=>(const PodShape&, const PodShape&) = default;
};
PodShape ShapeOf(const Request& r);

struct TypicalShape {
  PodShape shape;
  int64_t count = 0;  // occurrences; frequency = count / TypicalShapes::total
};
// The most frequent shapes that together cover `coverage_pct` of the pods (FGD's typical pods).
struct TypicalShapes {
  std::vector<TypicalShape> shapes;  // most frequent first
  int64_t total = 0;                 // sum of counts over `shapes`
};
// FGD's published procedure over a whole pod list (CPU-only pods included): count identical
// shapes, sort by count (ties by shape), take shapes until coverage_pct of the pods is covered.
TypicalShapes ComputeTypicalShapes(const std::vector<Request>& pods, int coverage_pct = 95);
TypicalShapes TypicalShapesFromCounts(const std::map<PodShape, int64_t>& counts, int coverage_pct);

struct ClassWeights {
  int32_t alpha = 5;  // weight of (1 - node utilisation): prefer emptier nodes (spreading)
  int32_t beta = 5;   // weight of request/available: prefer tight fits (packing)
};

struct PolicyConfig {
  uint64_t seed = 42;  // all random choices (random policy, published tie-breaking)
  // weighted: per job class; unknown classes use default_weights.
  std::map<std::string, ClassWeights, std::less<>> class_weights = {{"recsys", {3, 7}},
                                                                    {"cv", {5, 5}}};
  ClassWeights default_weights{5, 5};
  // fgd: the offline typical-shape distribution (published protocol: from the whole pod list).
  // When absent, fgd learns it online from Observe(), like fgd-online.
  std::optional<TypicalShapes> typical_shapes;
  int32_t typical_coverage_pct = 95;
};

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  virtual std::string_view Name() const = 0;
  // Chooses a placement; does not modify the cluster (the caller allocates on kPlaced).
  virtual PlacementResult Place(const Request& r, const ClusterState& cluster) = 0;
  // Called once for every request that arrives (placed or not), before Place(). Policies that
  // learn the workload (fgd-online, stoker) update their model here.
  virtual void Observe(const Request& /*r*/) {}
  // Whether the policy scores nodes by their utilization (GpuUseMilli: measured where the
  // cluster has measurements, allocated share where not), so a decision can say which it used.
  virtual bool UsesUtilization() const { return false; }
};

// Shared pre-check: kInfeasible with a reason if `r` is malformed or no node could ever host it;
// nullopt when placement should proceed.
std::optional<PlacementResult> CheckFeasible(const Request& r, const ClusterState& cluster);

// The placement of `r` on `node` using the given GPUs (for whole/MIG/share requests), built
// from the request's amounts. `gpus` must hold num_gpu indices.
Placement MakePlacement(const Request& r, int32_t node, const uint8_t* gpus);

// Lowest-index fully free GPUs for a whole-GPU request; returns false if there are too few.
bool PickFullyFreeGpus(const NodeState& n, int32_t count, uint8_t* out);

}  // namespace stoker::scheduler
