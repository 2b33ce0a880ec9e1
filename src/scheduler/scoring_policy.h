#pragma once
// Shared skeleton of the node-scoring policies: filter feasible nodes, let the policy score each
// one (and pick the GPUs inside it), keep the best. Ties go to the lowest node id, or, for the
// published baselines, to a uniformly random one among the tied (as the Kubernetes scheduler the
// published simulator runs on does), drawn from the policy's seeded Rng.
//
// Score cache: a policy whose node score depends only on (node state, request shape) can enable
// it. Scores are kept per (request shape, node) together with the node's version; a placement
// changes one node's version, so the next request of the same shape rescores only that node.
// Results are identical with and without the cache (tested).

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "scheduler/policy.h"
#include "scheduler/rng.h"

namespace stoker::scheduler {

enum class TieBreak { kLowestNodeId, kRandom };

class ScoringPolicy : public PlacementPolicy {
 public:
  ScoringPolicy(std::string name, TieBreak tie_break, uint64_t seed, bool cacheable)
      : name_(std::move(name)), tie_break_(tie_break), rng_(seed), cacheable_(cacheable) {}

  std::string_view Name() const override { return name_; }
  PlacementResult Place(const Request& r, const ClusterState& cluster) override;

  // Turns the score cache off (tests compare cached and uncached results).
  void DisableCache() { cacheable_ = false; }

 protected:
  // Scores a node on which `r` fits (higher is better) and fills the GPUs to use (num_gpu entries)
  // in `gpus`. Return false to skip the node.
  virtual bool ScoreNode(const Request& r, const ClusterState& cluster, int32_t node,
                         int64_t* score, uint8_t* gpus) = 0;
  // Called once per Place() before any ScoreNode (per-request precomputation).
  virtual void BeginRequest(const Request& /*r*/, const ClusterState& /*cluster*/) {}
  // Drops every cached score (call when the scoring function itself changes, e.g. a new
  // typical-shape distribution).
  void InvalidateCache() { shape_ids_.clear(); slots_.clear(); }
  Rng& rng() { return rng_; }

 private:
  struct Entry {
    uint64_t version = 0;  // 0 = empty
    int64_t score = 0;
    bool ok = false;
    uint8_t gpus[kMaxGpusPerNode] = {};
  };
  using ShapeKey = std::tuple<int64_t, int32_t, int32_t, int64_t, uint64_t, int, std::string>;
  std::vector<Entry>* CacheFor(const Request& r, int32_t num_nodes);

  std::string name_;
  TieBreak tie_break_;
  Rng rng_;
  bool cacheable_;
  static constexpr size_t kMaxCachedShapes = 128;
  std::map<ShapeKey, size_t> shape_ids_;
  std::vector<std::vector<Entry>> slots_;
  size_t next_evict_ = 0;
};

// Helpers used by several policies.
// GPU for a share request: the fitting GPU with the least free milli (best fit), lowest index on
// ties; -1 if none.
int BestFitShareGpu(const NodeState& n, int32_t gpu_milli);
// GPU for a MIG request: the fitting GPU with the fewest free slices; -1 if none.
int BestFitMigGpu(const NodeState& n, int slices);
// Default GPU choice for any request shape: best fit for share/MIG, lowest fully free for whole.
bool DefaultGpuChoice(const Request& r, const NodeState& n, uint8_t* gpus);

}  // namespace stoker::scheduler
