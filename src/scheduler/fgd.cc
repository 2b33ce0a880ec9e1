#include "scheduler/fgd.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>

#include "scheduler/scoring_policy.h"

namespace stoker::scheduler {

FragModel::FragModel(const TypicalShapes& typical) {
  const double total = static_cast<double>(typical.total);
  for (const TypicalShape& t : typical.shapes) {
    const double freq = total > 0 ? static_cast<double>(t.count) / total : 0.0;
    freq_sum_ += freq;
    if (t.shape.num_gpu == 0 || t.shape.gpu_milli == 0) {
      cpu_only_freq_ += freq;
      continue;
    }
    shapes_.push_back(
        {t.shape.cpu_milli, t.shape.num_gpu, t.shape.gpu_milli, t.shape.allowed_models, freq, 0});
    thresholds_.push_back(t.shape.gpu_milli);
  }
  std::sort(thresholds_.begin(), thresholds_.end(), std::greater<>());
  thresholds_.erase(std::unique(thresholds_.begin(), thresholds_.end()), thresholds_.end());
  freq_above_.assign(thresholds_.size(), 0.0);
  for (Item& p : shapes_) {
    p.threshold = static_cast<int32_t>(
        std::lower_bound(thresholds_.begin(), thresholds_.end(), p.gpu_milli, std::greater<>()) -
        thresholds_.begin());
    for (int32_t t = p.threshold; t < static_cast<int32_t>(thresholds_.size()); ++t)
      freq_above_[t] += p.freq;
  }
}

double FragModel::FreqAbove(int32_t milli) const {
  // thresholds_ descend; freq_above_[t] covers the shapes needing >= thresholds_[t].
  double f = 0;
  for (size_t t = 0; t < thresholds_.size() && thresholds_[t] > milli; ++t) f = freq_above_[t];
  return f;
}

void FragModel::CountBySize(const int16_t* left, int num_gpus, int64_t idle, int32_t* fit,
                            int64_t* small) const {
  std::array<int32_t, kMaxGpusPerNode> v{};
  for (int g = 0; g < num_gpus; ++g) v[g] = left[g];
  for (int i = 1; i < num_gpus; ++i) {  // insertion sort, descending: at most 8 values
    const int32_t x = v[i];
    int k = i;
    for (; k > 0 && v[k - 1] < x; --k) v[k] = v[k - 1];
    v[k] = x;
  }
  int j = 0;
  int64_t roomy = 0;  // free milli of the GPUs counted in fit
  for (size_t t = 0; t < thresholds_.size(); ++t) {
    while (j < num_gpus && v[j] >= thresholds_[t]) roomy += v[j++];
    fit[t] = j;
    small[t] = idle - roomy;
  }
}

void FragModel::CountForShape(const Item& p, const int16_t* left, int num_gpus, int32_t* fit,
                              int64_t* small) {
  *fit = 0;
  *small = 0;
  for (int g = 0; g < num_gpus; ++g) {
    if (left[g] >= p.gpu_milli) {
      ++*fit;
    } else {
      *small += left[g];
    }
  }
}

double FragModel::NodeFrag(int64_t cpu_free, const int16_t* left, int num_gpus, GpuModelId model,
                           double* blocked) const {
  int64_t idle = 0;
  for (int g = 0; g < num_gpus; ++g) idle += left[g];
  if (blocked) *blocked = freq_sum_;
  if (idle == 0) return 0.0;
  const double idle_d = static_cast<double>(idle);
  double f = cpu_only_freq_ * idle_d;
  double b = cpu_only_freq_;  // summed apart from f, so f's terms and order stay as they were
  const GpuModelMask bit = GpuModelTable::Bit(model);
  std::array<int32_t, kMaxThresholds> fit_by_size;
  std::array<int64_t, kMaxThresholds> small_by_size;
  const bool tabled = Tabled();
  if (tabled) CountBySize(left, num_gpus, idle, fit_by_size.data(), small_by_size.data());
  for (const Item& p : shapes_) {
    if ((p.models != 0 && (p.models & bit) == 0) || cpu_free < p.cpu_milli) {
      f += p.freq * idle_d;
      b += p.freq;
      continue;
    }
    int32_t fit = 0;
    int64_t small = 0;
    if (tabled) {
      fit = fit_by_size[p.threshold];
      small = small_by_size[p.threshold];
    } else {
      CountForShape(p, left, num_gpus, &fit, &small);
    }
    f += p.freq * static_cast<double>(fit >= p.num_gpu ? small : idle);
    if (fit < p.num_gpu) b += p.freq;
  }
  if (blocked) *blocked = b;
  return f;
}

void FragVariants::Prepare(const FragModel& model, int64_t cpu_free, const int16_t* left,
                           int num_gpus, GpuModelId gpu_model) {
  model_ = &model;
  idle_ = 0;
  for (int g = 0; g < num_gpus; ++g) idle_ += left[g];
  const size_t k = model.shapes_.size();
  fit_.resize(k);
  small_.resize(k);
  const GpuModelMask bit = GpuModelTable::Bit(gpu_model);
  std::array<int32_t, FragModel::kMaxThresholds> fit_by_size;
  std::array<int64_t, FragModel::kMaxThresholds> small_by_size;
  const bool tabled = model.Tabled();
  if (tabled) model.CountBySize(left, num_gpus, idle_, fit_by_size.data(), small_by_size.data());
  for (size_t i = 0; i < k; ++i) {
    const FragModel::Item& p = model.shapes_[i];
    if ((p.models != 0 && (p.models & bit) == 0) || cpu_free < p.cpu_milli) {
      fit_[i] = -1;
      continue;
    }
    if (tabled) {
      fit_[i] = fit_by_size[p.threshold];
      small_[i] = small_by_size[p.threshold];
    } else {
      FragModel::CountForShape(p, left, num_gpus, &fit_[i], &small_[i]);
    }
  }
}

double FragVariants::WithChange(int32_t from, int32_t to) const {
  const int64_t idle = idle_ - (from - to);
  if (idle == 0) return 0.0;
  const double idle_d = static_cast<double>(idle);
  double f = model_->cpu_only_freq_ * idle_d;
  const size_t k = fit_.size();
  for (size_t i = 0; i < k; ++i) {
    const FragModel::Item& p = model_->shapes_[i];
    if (fit_[i] < 0) {
      f += p.freq * idle_d;
      continue;
    }
    int fit = fit_[i];
    int64_t small = small_[i];
    if (from >= p.gpu_milli) {
      if (to < p.gpu_milli) {
        --fit;
        small += to;
      }
    } else {
      small += to - from;
    }
    f += p.freq * static_cast<double>(fit >= p.num_gpu ? small : idle);
  }
  return f;
}

double FragDropBound(const FragModel& model, const Request& r, const NodeState& n, double frag,
                     double blocked) {
  if (r.IsMig()) return frag;
  const double taken = static_cast<double>(IdleMilliTaken(r));
  double per_milli = blocked;
  if (r.IsGpuShare()) {
    int32_t smallest = kMilliPerGpu;  // the fullest GPU with room (no GPU: no placement)
    for (int g = 0; g < n.num_gpus; ++g) {
      const int32_t f = n.gpu_free_milli[g];
      if (f >= r.gpu_milli && f < smallest) smallest = f;
    }
    per_milli += model.FreqAbove(smallest);
  }
  return std::min(frag, taken * std::min(per_milli, model.freq_sum()));
}

double ClusterFrag(const ClusterState& cluster, const FragModel& model) {
  double sum = 0;
  for (int32_t n = 0; n < cluster.num_nodes(); ++n) sum += model.NodeFrag(cluster.node(n));
  return sum;
}

bool ShapeLearner::Observe(const Request& r) {
  ++counts_[ShapeOf(r)];
  ++observed_;
  if (observed_ < next_refresh_) return false;
  next_refresh_ = observed_ < 512 ? observed_ * 2 : observed_ + 512;
  typical_ = TypicalShapesFromCounts(counts_, coverage_pct_);
  return true;
}

namespace {

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// kLevelFrom[k - 1]: the fall of F at which FgdScore reaches k (k = 1 .. 99), lowered by far more
// than the rounding of the sigmoid (so a fall just below a threshold may be counted one level
// up, never one down).
const std::array<double, 99> kLevelFrom = []() noexcept {
  std::array<double, 99> t{};
  for (int k = 1; k <= 99; ++k) t[k - 1] = 1000.0 * std::log(k / (100.0 - k)) - 1e-3;
  return t;
}();

}  // namespace

int64_t FgdScore(double drop) { return static_cast<int64_t>(Sigmoid(drop / 1000.0) * 100.0); }

int64_t FgdScoreAtMost(double drop) {
  // Beyond this the sigmoid rounds to 1 in double precision.
  if (drop > 36000.0) return 100;
  return std::upper_bound(kLevelFrom.begin(), kLevelFrom.end(), drop) - kLevelFrom.begin();
}

namespace {

class FgdPolicy final : public ScoringPolicy {
 public:
  FgdPolicy(std::string name, const PolicyConfig& config, bool online)
      : ScoringPolicy(std::move(name), TieBreak::kLowestNodeId, config.seed, true),
        online_(online || !config.typical_shapes.has_value()),
        learner_(config.typical_coverage_pct) {
    if (!online_) model_ = FragModel(*config.typical_shapes);
  }

  void Observe(const Request& r) override {
    if (!online_) return;
    if (learner_.Observe(r)) {
      model_ = FragModel(learner_.typical());
      InvalidateCache();
      before_.clear();
    }
  }

 protected:
  bool ScoreNode(const Request& r, const ClusterState& c, int32_t node, int64_t* score,
                 uint8_t* gpus) override {
    const NodeState& n = c.node(node);
    const double before = FragBefore(c, node);
    std::array<int16_t, kMaxGpusPerNode> left = n.gpu_free_milli;
    const int64_t cpu_after = n.free_cpu_milli - r.cpu_milli;
    if (r.IsGpuShare()) {
      // Try every GPU with room (one per distinct free amount: equal amounts score equally and
      // the lowest index wins, as in the published code).
      int best_gpu = -1;
      int64_t best = 0;
      variants_.Prepare(model_, cpu_after, left.data(), n.num_gpus, n.gpu_model);
      for (int g = 0; g < n.num_gpus; ++g) {
        if (n.gpu_free_milli[g] < r.gpu_milli) continue;
        bool seen = false;
        for (int h = 0; h < g && !seen; ++h) seen = n.gpu_free_milli[h] == n.gpu_free_milli[g];
        if (seen) continue;
        const double after =
            variants_.WithChange(n.gpu_free_milli[g], n.gpu_free_milli[g] - r.gpu_milli);
        const int64_t s = FgdScore(before - after);
        if (best_gpu < 0 || s > best) {
          best = s;
          best_gpu = g;
        }
      }
      if (best_gpu < 0) return false;
      gpus[0] = static_cast<uint8_t>(best_gpu);
      *score = best;
      return true;
    }
    if (!DefaultGpuChoice(r, n, gpus)) return false;
    for (int i = 0; i < r.num_gpu; ++i) {
      const int g = gpus[i];
      left[g] =
          static_cast<int16_t>(r.IsMig() ? MigSlicesToMilli(n.gpu_free_slices[g] - MigSlices(r.mig))
                                         : n.gpu_free_milli[g] - r.gpu_milli);
    }
    const double after = model_.NodeFrag(cpu_after, left.data(), n.num_gpus, n.gpu_model);
    *score = FgdScore(before - after);
    return true;
  }

  // before - after <= before (F is never negative) and <= the idle milli taken times
  // freq_sum() (see FragModel). Half a milli of slack covers the rounding of the sums; the
  // score is monotone in before - after.
  bool HasScoreBound() const override { return true; }
  int64_t ScoreBound(const Request& r, const ClusterState& c, int32_t node) override {
    const Before& b = BeforeOf(c, node);
    const double drop = FragDropBound(model_, r, c.node(node), b.frag, b.blocked);
    return FgdScoreAtMost(drop + 0.5);
  }

 private:
  // F of a node's current state and its blocked frequency, cached per node version.
  struct Before {
    uint64_t version = 0;
    double frag = 0;
    double blocked = 0;
  };
  const Before& BeforeOf(const ClusterState& c, int32_t node) {
    if (before_.size() != static_cast<size_t>(c.num_nodes())) before_.assign(c.num_nodes(), {});
    Before& b = before_[node];
    const NodeState& n = c.node(node);
    if (b.version != n.version) {
      b.version = n.version;
      b.frag = model_.NodeFrag(n.free_cpu_milli, n.gpu_free_milli.data(), n.num_gpus, n.gpu_model,
                               &b.blocked);
    }
    return b;
  }
  double FragBefore(const ClusterState& c, int32_t node) { return BeforeOf(c, node).frag; }

  bool online_;
  ShapeLearner learner_;
  FragModel model_;
  FragVariants variants_;  // scratch for share requests
  std::vector<Before> before_;
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakeFgdPolicy(const PolicyConfig& config) {
  return std::make_unique<FgdPolicy>("fgd", config, false);
}

std::unique_ptr<PlacementPolicy> MakeFgdOnlinePolicy(const PolicyConfig& config) {
  return std::make_unique<FgdPolicy>("fgd-online", config, true);
}

}  // namespace stoker::scheduler
