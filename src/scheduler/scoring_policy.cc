#include "scheduler/scoring_policy.h"

#include <limits>

namespace stoker::scheduler {

PlacementResult ScoringPolicy::Place(const Request& r, const ClusterState& cluster) {
  if (auto infeasible = CheckFeasible(r, cluster)) return *infeasible;
  BeginRequest(r, cluster);
  int32_t best_node = -1;
  int64_t best_score = std::numeric_limits<int64_t>::min();
  uint64_t ties = 0;
  uint8_t gpus[kMaxGpusPerNode];
  uint8_t best_gpus[kMaxGpusPerNode] = {};
  const int32_t n = cluster.num_nodes();
  std::vector<Entry>* cache = cacheable_ ? CacheFor(r, n) : nullptr;
  for (int32_t node = 0; node < n; ++node) {
    if (!cluster.Fits(node, r)) continue;
    int64_t score = 0;
    if (cache != nullptr) {
      Entry& e = (*cache)[node];
      const uint64_t v = cluster.node(node).version;
      if (e.version != v) {
        e.version = v;
        e.ok = ScoreNode(r, cluster, node, &e.score, e.gpus);
      }
      if (!e.ok) continue;
      score = e.score;
      std::copy(e.gpus, e.gpus + r.num_gpu, gpus);
    } else if (!ScoreNode(r, cluster, node, &score, gpus)) {
      continue;
    }
    bool take = false;
    if (best_node < 0 || score > best_score) {
      take = true;
      ties = 1;
    } else if (score == best_score && tie_break_ == TieBreak::kRandom) {
      // Reservoir sampling: each of the k tied nodes ends up chosen with probability 1/k.
      ++ties;
      take = rng_.Uniform(ties) == 0;
    }
    if (take) {
      best_node = node;
      best_score = score;
      std::copy(gpus, gpus + r.num_gpu, best_gpus);
    }
  }
  if (best_node < 0) {
    return PlacementResult{PlacementStatus::kNoCapacityNow, {}, "no node has room now"};
  }
  return PlacementResult{PlacementStatus::kPlaced, MakePlacement(r, best_node, best_gpus), {}};
}

std::vector<ScoringPolicy::Entry>* ScoringPolicy::CacheFor(const Request& r, int32_t num_nodes) {
  // Memory and the best-effort flag only decide feasibility (checked before the cache), so they
  // are not part of the key: fewer distinct shapes, fewer evictions.
  ShapeKey key{r.cpu_milli, r.num_gpu, r.gpu_milli, r.gpu_memory_mib, r.allowed_models,
               MigSlices(r.mig), r.job_class};
  auto it = shape_ids_.find(key);
  size_t slot;
  if (it != shape_ids_.end()) {
    slot = it->second;
  } else if (slots_.size() < kMaxCachedShapes) {
    slot = slots_.size();
    slots_.emplace_back();
    shape_ids_.emplace(std::move(key), slot);
  } else {
    // Evict round-robin: reuse a slot for the new shape.
    slot = next_evict_;
    next_evict_ = (next_evict_ + 1) % kMaxCachedShapes;
    for (auto i = shape_ids_.begin(); i != shape_ids_.end(); ++i) {
      if (i->second == slot) {
        shape_ids_.erase(i);
        break;
      }
    }
    std::fill(slots_[slot].begin(), slots_[slot].end(), Entry{});
    shape_ids_.emplace(std::move(key), slot);
  }
  std::vector<Entry>& v = slots_[slot];
  if (v.size() != static_cast<size_t>(num_nodes)) v.assign(num_nodes, Entry{});
  return &v;
}

int BestFitShareGpu(const NodeState& n, int32_t gpu_milli) {
  int best = -1;
  for (int g = 0; g < n.num_gpus; ++g) {
    const int32_t f = n.gpu_free_milli[g];
    if (f >= gpu_milli && (best < 0 || f < n.gpu_free_milli[best])) best = g;
  }
  return best;
}

int BestFitMigGpu(const NodeState& n, int slices) {
  int best = -1;
  for (int g = 0; g < n.num_gpus; ++g) {
    const int f = n.gpu_free_slices[g];
    if (f >= slices && (best < 0 || f < n.gpu_free_slices[best])) best = g;
  }
  return best;
}

bool DefaultGpuChoice(const Request& r, const NodeState& n, uint8_t* gpus) {
  if (r.num_gpu == 0) return true;
  if (r.IsMig()) {
    const int g = BestFitMigGpu(n, MigSlices(r.mig));
    if (g < 0) return false;
    gpus[0] = static_cast<uint8_t>(g);
    return true;
  }
  if (r.IsGpuShare()) {
    const int g = BestFitShareGpu(n, r.gpu_milli);
    if (g < 0) return false;
    gpus[0] = static_cast<uint8_t>(g);
    return true;
  }
  return PickFullyFreeGpus(n, r.num_gpu, gpus);
}

}  // namespace stoker::scheduler
