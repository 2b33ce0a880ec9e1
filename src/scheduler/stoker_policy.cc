#include "scheduler/stoker_policy.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <vector>

#include "scheduler/fgd.h"
#include "scheduler/scoring_policy.h"

namespace stoker::scheduler {
namespace {

// Differences in expected waste smaller than this (milli-GPU) are treated as equal, so the
// consistent packing order below decides (1/25 GPU: the resolution of FGD's published integer
// score near zero).
constexpr double kWasteQuantumMilli = 40.0;
// Weight of stranded GPU capacity (GPUs left without the CPU to use them) against FGD fragment.
constexpr double kStrandedWeight = 1.0;

// "stoker": expected waste = FGD fragment (typical shapes learned online from Observe()) plus GPU
// capacity stranded by a lack of CPU, given the CPU:GPU ratio of the GPU work seen so far.
// The placement that least increases the expected waste wins (quantised); ties go to the most
// packed node (least free GPU, then least free CPU), then to the lowest node id. CPU-only work
// therefore lands on nodes whose GPUs are already taken, where its CPU strands nothing.
class StokerPolicy final : public ScoringPolicy {
 public:
  StokerPolicy(const PolicyConfig& config, StokerOptions options)
      : ScoringPolicy("stoker", TieBreak::kLowestNodeId, config.seed, true),
        options_(options),
        learner_(config.typical_coverage_pct) {}

  void Observe(const Request& r) override {
    if (r.num_gpu > 0) {
      cpu_seen_ += r.cpu_milli;
      gpu_seen_ += r.TotalGpuMilli();
    }
    if (!learner_.Observe(r)) return;
    const double cpu_per_gpu =
        gpu_seen_ > 0 ? static_cast<double>(cpu_seen_) / static_cast<double>(gpu_seen_) : 0.0;
    std::vector<std::pair<PodShape, double>> candidate = Frequencies(learner_.typical());
    if (!Moved(candidate, cpu_per_gpu)) return;
    model_ = FragModel(learner_.typical());
    adopted_ = std::move(candidate);
    cpu_per_gpu_milli_ = cpu_per_gpu;
    ++adoptions_;
    InvalidateCache();
    before_.clear();
  }

  int64_t adoptions() const { return adoptions_; }

  // See StokerScoreAndBound.
  bool ScoreAndBound(const Request& r, const ClusterState& c, int32_t node, int64_t* score,
                     int64_t* bound) {
    uint8_t gpus[kMaxGpusPerNode];
    if (!c.Fits(node, r) || !ScoreNode(r, c, node, score, gpus)) return false;
    *bound = ScoreBound(r, c, node);
    return true;
  }

 protected:
  bool EagerExactCatchUp() const override { return options_.eager_catch_up; }

  // Score = -growth x 10^6 - packing terms of the node as it is (exact in the bound too), so
  // the bound needs a lower bound on growth: the waste after minus before is at least the
  // change of the stranded term (exact, O(1)) minus FragDropBound (F falls by at most that; see
  // FragModel), less one milli for the rounding of the sums.
  bool HasScoreBound() const override { return options_.score_bound; }
  int64_t ScoreBound(const Request& r, const ClusterState& c, int32_t node) override {
    const Before& b = BeforeOf(c, node);
    const NodeState& n = c.node(node);
    const double drop = FragDropBound(model_, r, n, b.frag, b.blocked);
    double stranded_change = -b.stranded;  // MIG: the stranded term after is at least 0
    if (!r.IsMig()) {
      stranded_change = Stranded(n.free_cpu_milli - r.cpu_milli,
                                 b.gpu_free - static_cast<double>(r.TotalGpuMilli())) -
                        b.stranded;
    }
    const int64_t growth =
        static_cast<int64_t>(std::floor((stranded_change - drop - 1.0) / kWasteQuantumMilli));
    return Score(growth, n);
  }
  bool ScoreNode(const Request& r, const ClusterState& c, int32_t node, int64_t* score,
                 uint8_t* gpus) override {
    const NodeState& n = c.node(node);
    const double before = WasteBefore(c, node);
    const int64_t cpu_after = n.free_cpu_milli - r.cpu_milli;
    std::array<int16_t, kMaxGpusPerNode> left = n.gpu_free_milli;
    double best = 0;
    if (r.IsGpuShare()) {
      // Try each distinct free amount; equal expected waste: the fuller GPU (best fit).
      int best_gpu = -1;
      variants_.Prepare(model_, cpu_after, left.data(), n.num_gpus, n.gpu_model);
      for (int g = 0; g < n.num_gpus; ++g) {
        if (n.gpu_free_milli[g] < r.gpu_milli) continue;
        bool seen = false;
        for (int h = 0; h < g && !seen; ++h) seen = n.gpu_free_milli[h] == n.gpu_free_milli[g];
        if (seen) continue;
        const double waste = WasteOneChange(cpu_after, n.gpu_free_milli[g], r.gpu_milli, n);
        if (best_gpu < 0 || waste < best - 1e-9 ||
            (waste <= best + 1e-9 && n.gpu_free_milli[g] < n.gpu_free_milli[best_gpu])) {
          best = waste;
          best_gpu = g;
        }
      }
      if (best_gpu < 0) return false;
      gpus[0] = static_cast<uint8_t>(best_gpu);
    } else {
      if (!DefaultGpuChoice(r, n, gpus)) return false;
      for (int i = 0; i < r.num_gpu; ++i) {
        const int g = gpus[i];
        left[g] = static_cast<int16_t>(
            r.IsMig() ? MigSlicesToMilli(n.gpu_free_slices[g] - MigSlices(r.mig))
                      : n.gpu_free_milli[g] - r.gpu_milli);
      }
      best = Waste(cpu_after, left.data(), n);
    }
    const int64_t growth = static_cast<int64_t>(std::floor((best - before) / kWasteQuantumMilli));
    *score = Score(growth, n);
    return true;
  }

 private:
  // Shape frequencies of a typical set, sorted by shape.
  static std::vector<std::pair<PodShape, double>> Frequencies(const TypicalShapes& t) {
    std::vector<std::pair<PodShape, double>> f;
    f.reserve(t.shapes.size());
    for (const TypicalShape& s : t.shapes) {
      f.emplace_back(
          s.shape, t.total > 0 ? static_cast<double>(s.count) / static_cast<double>(t.total) : 0.0);
    }
    std::sort(f.begin(), f.end());
    return f;
  }

  // Whether the candidate distribution differs enough from the adopted one to pay for
  // rebuilding every cached index. Total variation: half the summed absolute difference of the
  // frequencies (a shape absent from one side has frequency 0 there).
  bool Moved(const std::vector<std::pair<PodShape, double>>& candidate, double cpu_per_gpu) const {
    if (adoptions_ == 0 || options_.refresh_threshold <= 0) return true;
    double tv = 0;
    size_t i = 0, j = 0;
    while (i < adopted_.size() || j < candidate.size()) {
      if (j == candidate.size() ||
          (i < adopted_.size() && adopted_[i].first < candidate[j].first)) {
        tv += adopted_[i++].second;
      } else if (i == adopted_.size() || candidate[j].first < adopted_[i].first) {
        tv += candidate[j++].second;
      } else {
        tv += std::abs(adopted_[i++].second - candidate[j++].second);
      }
    }
    tv /= 2;
    const double cpu_change = cpu_per_gpu_milli_ > 0
                                  ? std::abs(cpu_per_gpu - cpu_per_gpu_milli_) / cpu_per_gpu_milli_
                                  : (cpu_per_gpu > 0 ? 1.0 : 0.0);
    return tv > options_.refresh_threshold || cpu_change > options_.refresh_threshold;
  }

  // Lexicographic: -growth, then fewer free GPU milli (0..8000), then less free CPU (0..99).
  static int64_t Score(int64_t growth, const NodeState& n) {
    return -growth * 1000000 - int64_t{n.free_gpu_milli} * 100 -
           std::clamp<int64_t>(n.free_cpu_milli / 2000, 0, 99);
  }

  // Weighted GPU milli that `cpu_free` cannot feed at the CPU:GPU ratio seen (0 before any).
  double Stranded(int64_t cpu_free, double gpu_free) const {
    if (cpu_per_gpu_milli_ <= 0) return 0.0;
    const double usable_by_cpu =
        static_cast<double>(std::max<int64_t>(0, cpu_free)) / cpu_per_gpu_milli_;
    return kStrandedWeight * std::max(0.0, gpu_free - usable_by_cpu);
  }

  // Expected waste of a node state (milli-GPU).
  double Waste(int64_t cpu_free, const int16_t* left, const NodeState& n) const {
    const double frag = model_.NodeFrag(cpu_free, left, n.num_gpus, n.gpu_model);
    if (cpu_per_gpu_milli_ <= 0) return frag;
    double gpu_free = 0;
    for (int g = 0; g < n.num_gpus; ++g) gpu_free += left[g];
    return frag + Stranded(cpu_free, gpu_free);
  }

  // Waste(cpu_free, left) for the state Prepare()d in variants_ with one GPU's free milli
  // `from` lowered by `take` (same terms and order as Waste, so the same value).
  double WasteOneChange(int64_t cpu_free, int32_t from, int32_t take, const NodeState& n) const {
    const double frag = variants_.WithChange(from, from - take);
    if (cpu_per_gpu_milli_ <= 0) return frag;
    double gpu_free = 0;
    for (int g = 0; g < n.num_gpus; ++g) gpu_free += n.gpu_free_milli[g];
    gpu_free -= take;
    return frag + Stranded(cpu_free, gpu_free);
  }

  // A node's current state, cached per node version: its waste (as Waste computes it) and the
  // parts the score bound needs.
  struct Before {
    uint64_t version = 0;
    double waste = 0;
    double frag = 0;
    double blocked = 0;  // see FragModel::NodeFrag
    double gpu_free = 0;
    double stranded = 0;
  };
  const Before& BeforeOf(const ClusterState& c, int32_t node) {
    if (before_.size() != static_cast<size_t>(c.num_nodes())) before_.assign(c.num_nodes(), {});
    Before& b = before_[node];
    const NodeState& n = c.node(node);
    if (b.version != n.version) {
      b.version = n.version;
      // The same terms in the same order as Waste(): the score's "before" is unchanged.
      b.frag = model_.NodeFrag(n.free_cpu_milli, n.gpu_free_milli.data(), n.num_gpus, n.gpu_model,
                               &b.blocked);
      b.gpu_free = 0;
      for (int g = 0; g < n.num_gpus; ++g) b.gpu_free += n.gpu_free_milli[g];
      b.stranded = Stranded(n.free_cpu_milli, b.gpu_free);
      b.waste = b.frag + b.stranded;  // stranded is 0 before any CPU:GPU ratio is known
    }
    return b;
  }
  double WasteBefore(const ClusterState& c, int32_t node) { return BeforeOf(c, node).waste; }

  StokerOptions options_;
  ShapeLearner learner_;
  std::vector<std::pair<PodShape, double>> adopted_;  // frequencies model_ was built from
  int64_t adoptions_ = 0;
  FragModel model_;
  FragVariants variants_;  // scratch for share requests
  int64_t cpu_seen_ = 0, gpu_seen_ = 0;
  double cpu_per_gpu_milli_ = 0;
  std::vector<Before> before_;
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakeStokerPolicy(const PolicyConfig& config) {
  return MakeStokerPolicy(config, StokerOptions{});
}

std::unique_ptr<PlacementPolicy> MakeStokerPolicy(const PolicyConfig& config,
                                                  StokerOptions options) {
  return std::make_unique<StokerPolicy>(config, options);
}

bool StokerScoreAndBound(PlacementPolicy& stoker, const Request& r, const ClusterState& c,
                         int32_t node, int64_t* score, int64_t* bound) {
  auto* p = dynamic_cast<StokerPolicy*>(&stoker);
  return p != nullptr && p->ScoreAndBound(r, c, node, score, bound);
}

int64_t StokerAdoptions(const PlacementPolicy& stoker) {
  const auto* p = dynamic_cast<const StokerPolicy*>(&stoker);
  return p != nullptr ? p->adoptions() : 0;
}

}  // namespace stoker::scheduler
