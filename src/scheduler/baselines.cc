#include "scheduler/baselines.h"

#include <algorithm>

#include "scheduler/scoring_policy.h"

namespace stoker::scheduler {
namespace {

constexpr int64_t kMaxNodeScore = 100;  // Kubernetes framework.MaxNodeScore

double MaxCpu(const ClusterState& c) {
  return static_cast<double>(std::max<int64_t>(1, c.max_node_cpu_milli()));
}
double MaxGpu(const ClusterState& c) {
  return static_cast<double>(std::max<int64_t>(1, int64_t{c.max_node_gpus()} * kMilliPerGpu));
}

// Random: every feasible node equally likely; inside it a random fitting GPU for a share, the
// lowest-index free GPUs for whole GPUs (as the published simulator's random GPU selector).
class RandomPolicy final : public ScoringPolicy {
 public:
  explicit RandomPolicy(uint64_t seed) : ScoringPolicy("random", TieBreak::kRandom, seed, false) {}

 protected:
  bool ScoreNode(const Request& r, const ClusterState& cluster, int32_t node, int64_t* score,
                 uint8_t* gpus) override {
    *score = 0;
    const NodeState& n = cluster.node(node);
    if (!r.IsGpuShare() && !r.IsMig()) return DefaultGpuChoice(r, n, gpus);
    int k = 0;
    for (int g = 0; g < n.num_gpus; ++g) {
      const bool ok =
          r.IsMig() ? n.gpu_free_slices[g] >= MigSlices(r.mig) : n.gpu_free_milli[g] >= r.gpu_milli;
      if (ok && rng().Uniform(static_cast<uint64_t>(++k)) == 0) gpus[0] = static_cast<uint8_t>(g);
    }
    return k > 0;
  }
};

// DotProd (Tetris-style, as published): node vector [free CPU, free GPU milli summed over the
// node] and pod vector [CPU, GPU milli], both divided by the largest node; score =
// int(100 * (1 - dot/2)): the node with the smallest dot product wins. GPU: best fit.
class DotProdPolicy final : public ScoringPolicy {
 public:
  explicit DotProdPolicy(uint64_t seed)
      : ScoringPolicy("dotprod", TieBreak::kLowestNodeId, seed, true) {}

 protected:
  bool ScoreNode(const Request& r, const ClusterState& c, int32_t node, int64_t* score,
                 uint8_t* gpus) override {
    const NodeState& n = c.node(node);
    if (!DefaultGpuChoice(r, n, gpus)) return false;
    const double mc = MaxCpu(c), mg = MaxGpu(c);
    const double dot =
        (static_cast<double>(n.free_cpu_milli) / mc) * (static_cast<double>(r.cpu_milli) / mc) +
        (static_cast<double>(n.free_gpu_milli) / mg) *
            (static_cast<double>(r.TotalGpuMilli()) / mg);
    *score = static_cast<int64_t>(static_cast<double>(kMaxNodeScore) * (1.0 - dot / 2.0));
    return true;
  }
};

// GpuClustering (as published): nodes hosting only pods of the request's GPU class score
// (75, 100], nodes whose classes include it (50, 75], idle nodes (25, 50], others (0, 25]; inside
// a tier, less free GPU scores higher. CPU-only requests score 0 everywhere. GPU: best fit.
class ClusteringPolicy final : public ScoringPolicy {
 public:
  explicit ClusteringPolicy(uint64_t seed)
      : ScoringPolicy("clustering", TieBreak::kLowestNodeId, seed, true) {}

 protected:
  bool ScoreNode(const Request& r, const ClusterState& c, int32_t node, int64_t* score,
                 uint8_t* gpus) override {
    const NodeState& n = c.node(node);
    if (!DefaultGpuChoice(r, n, gpus)) return false;
    const int cls = GpuClassOf(r);
    if (cls < 0) {
      *score = 0;
      return true;
    }
    int classes = 0;
    for (uint16_t count : n.class_pods) classes += count > 0 ? 1 : 0;
    const int64_t max_gpu = int64_t{c.max_node_gpus()} * kMilliPerGpu;
    const int64_t base =
        kMaxNodeScore / 4 * (max_gpu - n.free_gpu_milli) / std::max<int64_t>(1, max_gpu);
    int64_t tier;
    if (n.class_pods[cls] > 0) {
      tier = classes == 1 ? 3 : 2;
    } else {
      tier = classes == 0 ? 1 : 0;
    }
    *score = base + kMaxNodeScore * tier / 4;
    return true;
  }
};

// GpuPacking (as published): a request goes first onto already used GPUs (fuller first), then
// onto free GPUs of partly used nodes (fewer free GPUs consumed first), then onto idle nodes
// (smaller first). CPU-only requests score 0 everywhere. GPU: best fit.
class PackingPolicy final : public ScoringPolicy {
 public:
  explicit PackingPolicy(uint64_t seed)
      : ScoringPolicy("packing", TieBreak::kLowestNodeId, seed, true) {}

 protected:
  bool ScoreNode(const Request& r, const ClusterState& c, int32_t node, int64_t* score,
                 uint8_t* gpus) override {
    const NodeState& n = c.node(node);
    if (!DefaultGpuChoice(r, n, gpus)) return false;
    if (r.num_gpu == 0) {
      *score = 0;
      return true;
    }
    const int64_t full_free = n.full_free_gpus;
    if (full_free == n.num_gpus) {  // idle node
      *score = std::max<int64_t>(kMaxNodeScore / 3 - full_free, full_free);
      return true;
    }
    // GPUs in ascending order of free milli (stable): the first fitting ones are used.
    uint8_t order[kMaxGpusPerNode];
    for (int g = 0; g < n.num_gpus; ++g) order[g] = static_cast<uint8_t>(g);
    std::stable_sort(order, order + n.num_gpus, [&](uint8_t a, uint8_t b) {
      return n.gpu_free_milli[a] < n.gpu_free_milli[b];
    });
    const int32_t need_milli = r.IsMig() ? MigSlicesToMilli(MigSlices(r.mig)) : r.gpu_milli;
    int want = r.num_gpu, free_used = 0;
    int64_t free_pct_sum = 0;
    for (int i = 0; i < n.num_gpus && want > 0; ++i) {
      const int32_t left = n.gpu_free_milli[order[i]];
      if (need_milli <= left) {
        --want;
        if (left == kMilliPerGpu) ++free_used;
        free_pct_sum += left * 100 / kMilliPerGpu;
      }
    }
    if (want != 0) return false;
    if (free_used > 0) {
      *score = std::max<int64_t>(kMaxNodeScore / 2 - free_used, kMaxNodeScore / 3);
    } else {
      *score = std::max<int64_t>(kMaxNodeScore - free_pct_sum / 10, kMaxNodeScore / 2);
    }
    return true;
  }
};

// BestFit (as published): score = int(100 * (1 - sum over {CPU, GPU} of 0.5 * (free - request) /
// largest node)): the least leftover wins. GPU: best fit.
class BestFitPolicy final : public ScoringPolicy {
 public:
  explicit BestFitPolicy(uint64_t seed)
      : ScoringPolicy("bestfit", TieBreak::kLowestNodeId, seed, true) {}

 protected:
  bool ScoreNode(const Request& r, const ClusterState& c, int32_t node, int64_t* score,
                 uint8_t* gpus) override {
    const NodeState& n = c.node(node);
    if (!DefaultGpuChoice(r, n, gpus)) return false;
    const double left = static_cast<double>(n.free_cpu_milli - r.cpu_milli) / MaxCpu(c) * 0.5 +
                        static_cast<double>(n.free_gpu_milli - r.TotalGpuMilli()) / MaxGpu(c) * 0.5;
    *score = static_cast<int64_t>((1.0 - left) * static_cast<double>(kMaxNodeScore));
    return true;
  }
};

// Weighted: score = alpha * (1 - u) + beta * f, in parts per million, where for a GPU request
// u = the node's GPU utilization (GpuUseMilli: measured where the node's GPUs were measured,
// allocated share where not) and f = requested GPU milli / the node's free GPU milli (CPU
// instead of GPU for CPU-only requests, u then the allocated CPU share); alpha:beta per job
// class. Ties: lowest node id.
class WeightedPolicy final : public ScoringPolicy {
 public:
  explicit WeightedPolicy(const PolicyConfig& config)
      : ScoringPolicy("weighted", TieBreak::kLowestNodeId, config.seed, true), config_(config) {}
  bool UsesUtilization() const override { return true; }

 protected:
  void BeginRequest(const Request& r, const ClusterState&) override {
    auto it = config_.class_weights.find(r.job_class);
    weights_ = it != config_.class_weights.end() ? it->second : config_.default_weights;
  }
  bool ScoreNode(const Request& r, const ClusterState& c, int32_t node, int64_t* score,
                 uint8_t* gpus) override {
    const NodeState& n = c.node(node);
    if (!DefaultGpuChoice(r, n, gpus)) return false;
    int64_t cap, free, req, used;
    if (r.num_gpu > 0) {
      cap = int64_t{n.num_gpus} * kMilliPerGpu;
      free = n.free_gpu_milli;
      req = r.TotalGpuMilli();
      used = cap - free;
      if (n.measured_gpus != 0) {
        used = 0;
        for (int g = 0; g < n.num_gpus; ++g) used += GpuUseMilli(n, g);
      }
    } else {
      cap = c.spec(node).cpu_milli;
      free = n.free_cpu_milli;
      req = r.cpu_milli;
      used = cap - free;
    }
    const int64_t util_ppm = cap > 0 ? used * 1000000 / cap : 1000000;
    const int64_t fit_ppm = free > 0 ? std::min<int64_t>(req * 1000000 / free, 1000000) : 1000000;
    *score = int64_t{weights_.alpha} * (1000000 - util_ppm) + int64_t{weights_.beta} * fit_ppm;
    return true;
  }

 private:
  PolicyConfig config_;
  ClassWeights weights_;
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakeRandomPolicy(const PolicyConfig& config) {
  return std::make_unique<RandomPolicy>(config.seed);
}
std::unique_ptr<PlacementPolicy> MakeDotProdPolicy(const PolicyConfig& config) {
  return std::make_unique<DotProdPolicy>(config.seed);
}
std::unique_ptr<PlacementPolicy> MakeClusteringPolicy(const PolicyConfig& config) {
  return std::make_unique<ClusteringPolicy>(config.seed);
}
std::unique_ptr<PlacementPolicy> MakePackingPolicy(const PolicyConfig& config) {
  return std::make_unique<PackingPolicy>(config.seed);
}
std::unique_ptr<PlacementPolicy> MakeBestFitPolicy(const PolicyConfig& config) {
  return std::make_unique<BestFitPolicy>(config.seed);
}
std::unique_ptr<PlacementPolicy> MakeWeightedPolicy(const PolicyConfig& config) {
  return std::make_unique<WeightedPolicy>(config);
}

}  // namespace stoker::scheduler
