#pragma once
// Shared skeleton of the node-scoring policies: filter feasible nodes, let the policy score each
// one (and pick the GPUs inside it), keep the best. Ties go to the lowest node id, or, for the
// published baselines, to a uniformly random one among the tied (as the Kubernetes scheduler the
// published simulator runs on does), drawn from the policy's seeded Rng.

#include <cstdint>
#include <string>
#include <string_view>

#include "scheduler/policy.h"
#include "scheduler/rng.h"

namespace stoker::scheduler {

enum class TieBreak { kLowestNodeId, kRandom };

class ScoringPolicy : public PlacementPolicy {
 public:
  ScoringPolicy(std::string name, TieBreak tie_break, uint64_t seed)
      : name_(std::move(name)), tie_break_(tie_break), rng_(seed) {}

  std::string_view Name() const override { return name_; }
  PlacementResult Place(const Request& r, const ClusterState& cluster) override;

 protected:
  // Scores a node on which `r` fits (higher is better) and fills the GPUs to use (num_gpu entries)
  // in `gpus`. Return false to skip the node.
  virtual bool ScoreNode(const Request& r, const ClusterState& cluster, int32_t node,
                         int64_t* score, uint8_t* gpus) = 0;
  // Called once per Place() before any ScoreNode (per-request precomputation).
  virtual void BeginRequest(const Request& /*r*/, const ClusterState& /*cluster*/) {}
  Rng& rng() { return rng_; }

 private:
  std::string name_;
  TieBreak tie_break_;
  Rng rng_;
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
