#pragma once
// Fragmentation-gradient descent (FGD, Weng et al., ATC'23) and the fragment measure it uses.
//
// F(node) = sum over typical shapes p of freq(p) * frag_p(node), where frag_p is all of the
// node's idle GPU milli when p cannot run there (too little CPU, too few GPUs with room for p,
// GPU model not allowed) and otherwise the idle milli on GPUs individually too small for p.
// CPU-only typical shapes count all idle GPU milli (as the published code does).

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "scheduler/policy.h"

namespace stoker::scheduler {

// Typical shapes with normalised frequencies, ready for fast evaluation.
class FragModel {
 public:
  FragModel() = default;
  explicit FragModel(const TypicalShapes& typical);

  // F for a node of `model` with `cpu_free` and the GPUs' free milli `left[0..num_gpus)`.
  // With `blocked`, also the summed frequency of the shapes that count all idle milli there
  // (CPU-only shapes and those that cannot run on the node; freq_sum() when nothing is idle).
  double NodeFrag(int64_t cpu_free, const int16_t* left, int num_gpus, GpuModelId model,
                  double* blocked = nullptr) const;
  double NodeFrag(const NodeState& n) const {
    return NodeFrag(n.free_cpu_milli, n.gpu_free_milli.data(), n.num_gpus, n.gpu_model);
  }
  bool empty() const { return shapes_.empty(); }
  // Sum of the typical shapes' frequencies (1, or 0 when empty). Placing a request that takes
  // k idle milli-GPU from a node lowers its F by at most k * freq_sum(): no shape's fragment
  // falls by more than the idle milli taken (score bounds rely on this).
  double freq_sum() const { return freq_sum_; }
  // Summed frequency of the GPU shapes needing more than `milli` on one GPU.
  double FreqAbove(int32_t milli) const;
  //
  // Bounds on the fall of F when a request takes idle milli from a node (F before minus F
  // after), with B = NodeFrag's `blocked` for the node before: whole GPUs (k milli in all, on
  // fully free GPUs) at most k * B, since a shape that can run keeps its small GPUs and one
  // that cannot loses exactly k; a share of m milli on a GPU with f free at most
  // m * (B + FreqAbove(f)), since only shapes for which that GPU is too small lose m more (the
  // bound takes the smallest f >= m on the node). Never more than F before.

 private:
  friend class FragVariants;
  struct Item {
    int64_t cpu_milli;
    int32_t num_gpu;
    int32_t gpu_milli;
    GpuModelMask models;
    double freq;
    int32_t threshold;  // index of gpu_milli in thresholds_
  };
  // Shapes share few distinct per-GPU sizes (openb default: 30 GPU shapes, 12 sizes), so the GPUs
  // with room for each size and the idle milli on the others are counted once per size, from
  // the node's GPUs sorted by free milli, instead of once per shape.
  static constexpr size_t kMaxThresholds = 64;  // beyond this, count per shape (no stack tables)
  bool Tabled() const { return thresholds_.size() <= kMaxThresholds; }
  // fit[t] = GPUs with left >= thresholds_[t]; small[t] = idle milli on the others.
  void CountBySize(const int16_t* left, int num_gpus, int64_t idle, int32_t* fit,
                   int64_t* small) const;
  // The same for one shape, directly.
  static void CountForShape(const Item& p, const int16_t* left, int num_gpus, int32_t* fit,
                            int64_t* small);
  std::vector<Item> shapes_;
  std::vector<int32_t> thresholds_;  // distinct gpu_milli of shapes_, descending
  double cpu_only_freq_ = 0;         // summed frequency of CPU-only shapes
  double freq_sum_ = 0;
  std::vector<double> freq_above_;  // per thresholds_[t]: summed freq of shapes needing >= it
};

// NodeFrag of several variants of one node state that each lower one GPU's free milli (a share
// request tried on each GPU): the per-shape counts are taken once in Prepare(), and each variant
// adjusts them in O(typical shapes) instead of O(typical shapes x GPUs). The result equals
// NodeFrag of the variant bit for bit (same terms, same order of addition).
class FragVariants {
 public:
  void Prepare(const FragModel& model, int64_t cpu_free, const int16_t* left, int num_gpus,
               GpuModelId gpu_model);
  // NodeFrag with one GPU's free milli `from` lowered to `to` (0 <= to <= from).
  double WithChange(int32_t from, int32_t to) const;

 private:
  const FragModel* model_ = nullptr;
  int64_t idle_ = 0;
  // Per typical shape: -1 when it cannot run here at all, else GPUs with room for it.
  std::vector<int32_t> fit_;
  std::vector<int64_t> small_;  // idle milli on GPUs too small for the shape
};

// Idle milli-GPU a placement of `r` takes from a node, for score bounds; -1 for MIG (its milli
// equivalent rounds per GPU, so bounds use only "F after >= 0" for it).
inline int64_t IdleMilliTaken(const Request& r) {
  return r.IsMig() ? -1 : int64_t{r.num_gpu} * r.gpu_milli;
}

// Upper bound on F before minus F after for placing `r` on node state `n` with F `frag` and
// NodeFrag's `blocked` (see FragModel::freq_sum).
double FragDropBound(const FragModel& model, const Request& r, const NodeState& n, double frag,
                     double blocked);

// FGD's published node score for a fall of F by `drop` milli-GPU: 100 x sigmoid(drop / 1000),
// truncated to an integer.
int64_t FgdScore(double drop);
// An upper bound on FgdScore(d) for every d <= `drop`, at most one above FgdScore(drop), without
// an exp(): the levels' thresholds are tabled (score bounds are computed at every change).
int64_t FgdScoreAtMost(double drop);

// Cluster-wide fragment (milli-GPU) under `model`, for the reported metrics.
double ClusterFrag(const ClusterState& cluster, const FragModel& model);

// "fgd": offline typical shapes from config.typical_shapes (learned online when absent).
// "fgd-online": typical shapes learned from Observe()d requests, refreshed at 1, 2, 4, ...,
// 512 observations and then every 512.
std::unique_ptr<PlacementPolicy> MakeFgdPolicy(const PolicyConfig& config);
std::unique_ptr<PlacementPolicy> MakeFgdOnlinePolicy(const PolicyConfig& config);

// Online typical-shape learner shared by fgd-online and stoker.
class ShapeLearner {
 public:
  explicit ShapeLearner(int coverage_pct) : coverage_pct_(coverage_pct) {}
  // Counts the request; returns true when the typical set was refreshed (callers then rebuild
  // their FragModel from typical()).
  bool Observe(const Request& r);
  const TypicalShapes& typical() const { return typical_; }
  int64_t observed() const { return observed_; }
  // Every shape observed so far with its count (typical or not).
  const std::map<PodShape, int64_t>& counts() const { return counts_; }

 private:
  int coverage_pct_;
  std::map<PodShape, int64_t> counts_;
  int64_t observed_ = 0;
  int64_t next_refresh_ = 1;
  TypicalShapes typical_;
};

}  // namespace stoker::scheduler
