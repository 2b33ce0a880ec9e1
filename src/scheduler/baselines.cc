#include "scheduler/baselines.h"

#include "scheduler/scoring_policy.h"

namespace stoker::scheduler {
namespace {

// Random: every feasible node equally likely; inside it, a random fitting GPU.
class RandomPolicy final : public ScoringPolicy {
 public:
  explicit RandomPolicy(uint64_t seed) : ScoringPolicy("random", TieBreak::kRandom, seed) {}

 protected:
  bool ScoreNode(const Request& r, const ClusterState& cluster, int32_t node, int64_t* score,
                 uint8_t* gpus) override {
    *score = 0;
    return RandomGpus(r, cluster.node(node), gpus);
  }

 private:
  bool RandomGpus(const Request& r, const NodeState& n, uint8_t* gpus) {
    if (r.num_gpu == 0) return true;
    uint8_t fit[kMaxGpusPerNode];
    int k = 0;
    for (int g = 0; g < n.num_gpus; ++g) {
      const bool ok = r.IsMig() ? n.gpu_free_slices[g] >= MigSlices(r.mig)
                                : n.gpu_free_milli[g] >= r.gpu_milli;
      if (ok) fit[k++] = static_cast<uint8_t>(g);
    }
    if (k < r.num_gpu) return false;
    // Partial Fisher-Yates: the first num_gpu entries become a uniform random subset.
    for (int i = 0; i < r.num_gpu; ++i) {
      const int j = i + static_cast<int>(rng().Uniform(static_cast<uint64_t>(k - i)));
      std::swap(fit[i], fit[j]);
      gpus[i] = fit[i];
    }
    return true;
  }
};

// BestFit: the least leftover after placement, CPU and GPU weighted equally, each normalised by
// the largest node. score = -(sum of normalised leftovers), in parts per million.
class BestFitPolicy final : public ScoringPolicy {
 public:
  explicit BestFitPolicy(uint64_t seed) : ScoringPolicy("bestfit", TieBreak::kRandom, seed) {}

 protected:
  bool ScoreNode(const Request& r, const ClusterState& cluster, int32_t node, int64_t* score,
                 uint8_t* gpus) override {
    const NodeState& n = cluster.node(node);
    if (!DefaultGpuChoice(r, n, gpus)) return false;
    const int64_t max_cpu = std::max<int64_t>(1, cluster.max_node_cpu_milli());
    const int64_t max_gpu = std::max<int64_t>(1, int64_t{cluster.max_node_gpus()} * kMilliPerGpu);
    const int64_t cpu_left = n.free_cpu_milli - r.cpu_milli;
    const int64_t gpu_left = n.free_gpu_milli - r.TotalGpuMilli();
    *score = -(cpu_left * 500000 / max_cpu + gpu_left * 500000 / max_gpu);
    return true;
  }
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakeRandomPolicy(const PolicyConfig& config) {
  return std::make_unique<RandomPolicy>(config.seed);
}

std::unique_ptr<PlacementPolicy> MakeBestFitPolicy(const PolicyConfig& config) {
  return std::make_unique<BestFitPolicy>(config.seed);
}

}  // namespace stoker::scheduler
