#include "scheduler/stoker_policy.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <set>
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
// Reserve (see StokerPolicy::Reserve): shapes expected to arrive fewer times than this before
// the cluster is full, or whose supply runs short with a probability below kReserveMinTail, are
// left out; new weights are adopted when some shape's probability moved by more than
// kReserveTailStep.
constexpr double kReserveMinArrivals = 0.05;
constexpr double kReserveMinTail = 0.01;
constexpr double kReserveTailStep = 0.05;
// The reserve's hedge (see ReserveClasses): while less than this share of the cluster's GPUs is
// allocated, a class's expected arrivals are taken at the upper bound of its rate at this
// normal quantile (2.33: one-sided 99 %) instead of at the rate seen.
constexpr double kHedgeBelowAllocated = 0.6;
constexpr double kHedgeQuantile = 2.33;

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
    all_cpu_seen_ += r.cpu_milli;
    // A GPU model set not seen before starts its pool at once (see Reserve()): capacity that only
    // some pods can use is protected from the first such pod, not from the next refresh.
    if (r.num_gpu > 0 && r.allowed_models != 0 && pinned_masks_.insert(r.allowed_models).second) {
      reserve_due_ = true;
    }
    if (!learner_.Observe(r)) return;
    reserve_due_ = true;
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

  // Follows the supply of every shape seen (see Reserve()) and adopts new reserve weights when
  // they moved.
  void BeginRequest(const Request& /*r*/, const ClusterState& c) override {
    TrackSupply(c);
    std::vector<ReserveClass> fresh = ReserveClasses(c);
    if (ReserveMoved(fresh)) {
      // Only the nodes with a slot of a class whose weight changed score differently (a node
      // without one has no reserve to lose, before or after any placement); the others keep
      // their scores.
      ChangedNodes(reserve_, fresh, c, &changed_nodes_);
      reserve_ = std::move(fresh);
      ++reserve_adoptions_;
      before_.clear();
      InvalidateNodes(c, changed_nodes_);
    }
  }
  int64_t reserve_adoptions() const { return reserve_adoptions_; }
  int64_t exact_scorings() const { return exact_scorings_; }

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
  // FragModel) plus ReserveLossBound, less one milli for the rounding of the sums.
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
    const int64_t growth = static_cast<int64_t>(
        std::floor((stranded_change - drop + ReserveLossBound(r, n, node, b.reserve) - 1.0) /
                   kWasteQuantumMilli));
    return Score(growth, n);
  }
  // A lower bound on the reserve the placement takes (reserve before minus after; see
  // Reserve()): whole GPUs are taken lowest index first, as ScoreNode takes them, so their loss
  // is exact; a share's GPU is not known here, so only its CPU counts (slots never grow when a
  // GPU's free milli shrinks). Without it the bounds of the nodes that hold reserve would
  // promise scores their exact scoring never gives, and every decision would score many of
  // them. Computed from the node's slot units (BeforeOf), class by class in O(1).
  double ReserveLossBound(const Request& r, const NodeState& n, int32_t node,
                          double reserve_before) const {
    if (reserve_before <= 0 || r.IsMig()) return 0.0;
    int removed = 0;
    if (!r.IsGpuShare()) removed = std::min(r.num_gpu, before_[node].whole);
    return std::max(0.0,
                    reserve_before - ReserveFromUnits(n.free_cpu_milli - r.cpu_milli, UnitsOf(node),
                                                      n.gpu_model, removed, 0, 0));
  }
  bool ScoreNode(const Request& r, const ClusterState& c, int32_t node, int64_t* score,
                 uint8_t* gpus) override {
    ++exact_scorings_;
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
        const double waste = WasteOneChange(cpu_after, node, n.gpu_free_milli[g], r.gpu_milli, n);
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
    const double reserve = Reserve(cpu_free, left, n.num_gpus, n.gpu_model);
    if (cpu_per_gpu_milli_ <= 0) return frag - reserve;
    double gpu_free = 0;
    for (int g = 0; g < n.num_gpus; ++g) gpu_free += left[g];
    return frag + Stranded(cpu_free, gpu_free) - reserve;
  }

  // Waste(cpu_free, left) for the state Prepare()d in variants_ (node `node`) with a GPU of
  // `from` free milli lowered by `take` (same terms and order as Waste, so the same value).
  double WasteOneChange(int64_t cpu_free, int32_t node, int32_t from, int32_t take,
                        const NodeState& n) const {
    const double frag = variants_.WithChange(from, from - take);
    double reserve = 0;
    if (!reserve_.empty()) {
      reserve = ReserveFromUnits(cpu_free, UnitsOf(node), n.gpu_model, 0, from, from - take);
    }
    if (cpu_per_gpu_milli_ <= 0) return frag - reserve;
    double gpu_free = 0;
    for (int g = 0; g < n.num_gpus; ++g) gpu_free += n.gpu_free_milli[g];
    gpu_free -= take;
    return frag + Stranded(cpu_free, gpu_free) - reserve;
  }

  // Reserve: the capacity a node still offers to the request shapes whose supply runs short.
  // For each shape p seen so far, its slots on a node are the disjoint placements of p that fit
  // the node's free GPUs and CPU; over the cluster, S_p slots. Until the cluster is full about
  // lambda_p more pods of shape p arrive (p's share of the requests seen times the requests
  // that the free GPU and CPU capacity can still take). Taking one of p's slots costs, in
  // expectation, p's GPU milli times P(N >= S_p) with N ~ Poisson(lambda_p): the chance that
  // the slot taken is one a later p-pod would have needed. Scarce shapes (picky by GPU model,
  // by GPU count or by CPU) thereby keep the capacity only they can use, at the loads where the
  // cluster is not yet full and every refused pod is a loss. The weights are recomputed when
  // the learned statistics are, and adopted when they moved (every score changes).
  //
  // Shapes alone miss demand that is spread over many shapes: pods pinned to a GPU model come in
  // many sizes, none of them scarce by itself, while together they need more of that model than
  // it has left. So each GPU model set that pinned pods name is followed as a pool too: its
  // demand is every pod pinned within it, its slots those of a representative pod of the pool
  // (the 90th percentile of its pods' CPU and of their milli per GPU, one GPU: pinned pods
  // differ, and a slot only the small ones fit is worth little to the others), and a slot taken
  // is counted as needed with at least the share of the pool's slots its pods are expected to
  // take (lambda / S): the tail alone would wait until the model is nearly gone, and by then
  // the pinned pods' sizes decide, not their number.
  struct ReserveClass {
    PodShape shape;  // a pool: its representative pod
    bool pool = false;
    double weight = 0;  // milli-GPU lost per slot taken
    double tail = 0;    // the probability the slot is needed
  };
  static int64_t Slots(const PodShape& p, int64_t cpu_free, const int16_t* left, int num_gpus,
                       GpuModelId model) {
    if (p.allowed_models != 0 && (p.allowed_models & GpuModelTable::Bit(model)) == 0) return 0;
    int64_t slots = 0;
    if (p.gpu_milli >= kMilliPerGpu) {
      int whole = 0;
      for (int g = 0; g < num_gpus; ++g) whole += left[g] >= kMilliPerGpu ? 1 : 0;
      slots = whole / std::max(1, p.num_gpu);
    } else {
      for (int g = 0; g < num_gpus; ++g) slots += left[g] / std::max(1, p.gpu_milli);
    }
    if (p.cpu_milli > 0) slots = std::min(slots, std::max<int64_t>(0, cpu_free) / p.cpu_milli);
    return slots;
  }
  double Reserve(int64_t cpu_free, const int16_t* left, int num_gpus, GpuModelId model) const {
    double r = 0;
    for (const ReserveClass& c : reserve_) {
      r += c.weight * static_cast<double>(Slots(c.shape, cpu_free, left, num_gpus, model));
    }
    return r;
  }
  // Slots() split in two: a class's GPU units on a node (whole GPUs for a class of whole GPUs,
  // else the pods of its milli each GPU holds, summed; 0 where the model is not allowed), kept
  // per node with its Before, and the slots those units and the free CPU give. Reserve() of the
  // node with `removed` fully free GPUs taken and one GPU lowered from `from` to `to` milli, in
  // the same terms and order (so the same value), in O(1) per class instead of a pass over the
  // GPUs: the score bound of every changed node in every cached shape needs it.
  static int32_t Units(const PodShape& p, const int16_t* left, int num_gpus, GpuModelId model) {
    if (p.allowed_models != 0 && (p.allowed_models & GpuModelTable::Bit(model)) == 0) return 0;
    int32_t units = 0;
    if (p.gpu_milli >= kMilliPerGpu) {
      for (int g = 0; g < num_gpus; ++g) units += left[g] >= kMilliPerGpu ? 1 : 0;
    } else {
      for (int g = 0; g < num_gpus; ++g) units += left[g] / std::max(1, p.gpu_milli);
    }
    return units;
  }
  static int32_t UnitsOfGpu(const PodShape& p, int32_t milli) {
    return p.gpu_milli >= kMilliPerGpu ? (milli >= kMilliPerGpu ? 1 : 0)
                                       : milli / std::max(1, p.gpu_milli);
  }
  double ReserveFromUnits(int64_t cpu_free, const int32_t* units, GpuModelId model, int removed,
                          int32_t from, int32_t to) const {
    double r = 0;
    for (size_t i = 0; i < reserve_.size(); ++i) {
      const PodShape& p = reserve_[i].shape;
      int64_t slots = 0;
      if (p.allowed_models == 0 || (p.allowed_models & GpuModelTable::Bit(model)) != 0) {
        const int32_t u = units[i] - removed * UnitsOfGpu(p, kMilliPerGpu) + UnitsOfGpu(p, to) -
                          UnitsOfGpu(p, from);
        slots = p.gpu_milli >= kMilliPerGpu ? u / std::max(1, p.num_gpu) : u;
        if (p.cpu_milli > 0) slots = std::min(slots, std::max<int64_t>(0, cpu_free) / p.cpu_milli);
      }
      r += reserve_[i].weight * static_cast<double>(slots);
    }
    return r;
  }
  const int32_t* UnitsOf(int32_t node) const {
    return before_units_.data() + static_cast<size_t>(node) * reserve_.size();
  }
  // P(N >= s) for N ~ Poisson(lambda): summed exactly for small lambda, by the normal
  // approximation (continuity-corrected) beyond.
  static double PoissonTail(double lambda, int64_t s) {
    if (s <= 0) return 1.0;
    if (lambda <= 0) return 0.0;
    const double sd = std::sqrt(lambda);
    const double x = static_cast<double>(s);
    if (x > lambda + 12 * sd + 30) return 0.0;
    if (lambda > 64) return 0.5 * std::erfc((x - 0.5 - lambda) / (sd * std::sqrt(2.0)));
    double term = std::exp(-lambda), below = 0;  // P(N = k), P(N < k)
    for (int64_t k = 0; k < s; ++k) {
      below += term;
      term *= lambda / static_cast<double>(k + 1);
    }
    return std::clamp(1.0 - below, 0.0, 1.0);
  }
  // The shapes whose supply is followed: every GPU shape seen, with its slots on every node and
  // in all. Rebuilt when the learner refreshes its counts or the cluster is another one;
  // otherwise the nodes changed since the last decision are recounted (the cluster's journal).
  struct Candidate {
    PodShape shape;
    bool pool = false;
    double milli = 0;    // GPU milli of one pod
    double share = 0;    // of the requests seen, with the larger shapes' (see AtLeast)
    int64_t supply = 0;  // slots in the cluster
    double lambda = -1;  // when `tail` was computed
    int64_t tail_supply = -1;
    double tail = 0;
  };
  void TrackSupply(const ClusterState& c) {
    const bool same_cluster =
        c.history_id() == supply_history_ && c.journal_begin() <= supply_journal_pos_ &&
        c.journal_end() - supply_journal_pos_ <= static_cast<uint64_t>(c.num_nodes());
    if (reserve_due_ || !same_cluster) {
      reserve_due_ = false;
      supply_history_ = c.history_id();
      std::vector<Candidate> previous = std::move(candidates_);
      candidates_.clear();
      const double observed = static_cast<double>(std::max<int64_t>(1, learner_.observed()));
      for (const auto& [shape, count] : learner_.counts()) {
        if (shape.num_gpu == 0 || shape.gpu_milli == 0) continue;
        // Single-GPU pods with a choice of model are left to the fragment and the stranded
        // term: their slots are everywhere, and reserving them (measured) only deflected work
        // from where it packed best.
        if (shape.num_gpu < 2 && shape.allowed_models == 0) continue;
        Candidate k;
        k.shape = shape;
        k.milli = static_cast<double>(shape.num_gpu) * shape.gpu_milli;
        k.share = static_cast<double>(count) / observed;
        candidates_.push_back(k);
      }
      // A shape's slots are wanted by its own pods and by every larger shape's (at least its
      // CPU, GPUs and milli per GPU, on a subset of its GPU models): those fit nowhere else.
      std::vector<double> wanted(candidates_.size(), 0.0);
      for (size_t i = 0; i < candidates_.size(); ++i) {
        for (const Candidate& q : candidates_) {
          if (AtLeast(q.shape, candidates_[i].shape)) wanted[i] += q.share;
        }
      }
      for (size_t i = 0; i < candidates_.size(); ++i) candidates_[i].share = wanted[i];
      // Pools: the model sets that pinned pods name, each with every pod pinned within it.
      std::set<GpuModelMask> masks;
      for (const auto& [shape, count] : learner_.counts()) {
        if (shape.allowed_models != 0 && shape.num_gpu > 0) masks.insert(shape.allowed_models);
      }
      // Once pods are seen to pin GPU models, every model is expected to be named by them until
      // its own pinned pods are seen (a prior: the first pod pinned to a small model may come
      // after the policy has filled it with pods that had a choice). Which model pinned pods
      // name is not known in advance, so each model is taken to be named at least as often as
      // any other (an equal share of the pinned pods) and at least in proportion to its GPUs:
      // in proportion to GPUs alone, a small model's pool had the same per-slot weight as the
      // large ones, and packing onto its small nodes filled it long before its own pinned pods
      // arrived (FGD's `gpuspec05`, whose pinned pods favour the small P100 and T4).
      struct ModelCap {
        int64_t gpus = 0, max_cpu = 0;
        int max_gpus = 0;
      };
      std::map<GpuModelId, ModelCap> caps;
      int64_t gpus = 0;
      for (int32_t node = 0; node < c.num_nodes(); ++node) {
        const NodeSpec& spec = c.spec(node);
        if (spec.num_gpus == 0) continue;
        ModelCap& cap = caps[spec.gpu_model];
        cap.gpus += spec.num_gpus;
        cap.max_cpu = std::max(cap.max_cpu, spec.cpu_milli);
        cap.max_gpus = std::max(cap.max_gpus, spec.num_gpus);
        gpus += spec.num_gpus;
      }
      // A pool's representative pod: over the pinned pods within `within` (0: all of them) that
      // some node of `room` could host, the 90th percentile of CPU per GPU and of milli per GPU.
      auto pool = [&](GpuModelMask within, GpuModelMask room) {
        std::vector<std::pair<int64_t, int64_t>> cpu, milli;  // value, count
        int64_t pods = 0;
        for (const auto& [shape, count] : learner_.counts()) {
          if (shape.allowed_models == 0 || shape.num_gpu == 0 ||
              (within != 0 && (shape.allowed_models & ~within) != 0)) {
            continue;
          }
          bool fits = false;
          for (const auto& [model, cap] : caps) {
            fits = fits || ((room & GpuModelTable::Bit(model)) != 0 &&
                            shape.cpu_milli <= cap.max_cpu && shape.num_gpu <= cap.max_gpus);
          }
          if (!fits) continue;
          pods += count;
          cpu.emplace_back(shape.cpu_milli / shape.num_gpu, count);
          milli.emplace_back(shape.gpu_milli, count);
        }
        Candidate k;
        k.pool = true;
        k.shape = {Percentile90(cpu, pods), 1, static_cast<int32_t>(Percentile90(milli, pods)),
                   room};
        k.milli = static_cast<double>(k.shape.gpu_milli);
        k.share = static_cast<double>(pods) / observed;
        return k;
      };
      std::map<GpuModelMask, Candidate> pools;
      for (GpuModelMask mask : masks) pools[mask] = pool(mask, mask);
      if (!masks.empty() && gpus > 0) {
        int64_t pinned = 0;
        for (const auto& [shape, count] : learner_.counts()) {
          if (shape.allowed_models != 0 && shape.num_gpu > 0) pinned += count;
        }
        for (const auto& [model, cap] : caps) {
          const GpuModelMask mask = GpuModelTable::Bit(model);
          const double pinned_share = static_cast<double>(pinned) / observed;
          const double prior =
              std::max(pinned_share * static_cast<double>(cap.gpus) / static_cast<double>(gpus),
                       pinned_share / static_cast<double>(caps.size()));
          auto it = pools.find(mask);
          if (it == pools.end()) {
            Candidate k = pool(0, mask);
            k.share = prior;
            pools[mask] = k;
          } else {
            it->second.share = std::max(it->second.share, prior);
          }
        }
      }
      std::erase_if(pools, [](const auto& p) { return p.second.milli <= 0; });
      for (const auto& [mask, k] : pools) candidates_.push_back(k);
      const size_t m = candidates_.size();
      // The same classes on the same cluster (the usual refresh: only their shares moved): the
      // slots already counted stand, and the journal brings them up to date below. Otherwise
      // every node is counted again.
      bool same = same_cluster && previous.size() == m;
      for (size_t i = 0; same && i < m; ++i) {
        same = previous[i].shape == candidates_[i].shape && previous[i].pool == candidates_[i].pool;
      }
      if (same) {
        for (size_t i = 0; i < m; ++i) candidates_[i].supply = previous[i].supply;
        for (uint64_t pos = supply_journal_pos_; pos < c.journal_end(); ++pos) {
          CountSlots(c, c.journal_at(pos), m, false);
        }
      } else {
        node_slots_.assign(static_cast<size_t>(c.num_nodes()) * m, 0);
        for (int32_t node = 0; node < c.num_nodes(); ++node) CountSlots(c, node, m, true);
      }
    } else {
      const size_t m = candidates_.size();
      for (uint64_t pos = supply_journal_pos_; pos < c.journal_end(); ++pos) {
        CountSlots(c, c.journal_at(pos), m, false);
      }
    }
    supply_journal_pos_ = c.journal_end();
  }
  // The value below which 90 % of the `total` counted values lie.
  static int64_t Percentile90(std::vector<std::pair<int64_t, int64_t>>& values, int64_t total) {
    std::sort(values.begin(), values.end());
    int64_t seen = 0;
    for (const auto& [value, count] : values) {
      seen += count;
      if (10 * seen >= 9 * total) return value;
    }
    return values.empty() ? 0 : values.back().first;
  }
  // Whether every node that fits `q` fits `p` too.
  static bool AtLeast(const PodShape& q, const PodShape& p) {
    const bool models = p.allowed_models == 0 ||
                        (q.allowed_models != 0 && (q.allowed_models & ~p.allowed_models) == 0);
    return models && q.cpu_milli >= p.cpu_milli && q.num_gpu >= p.num_gpu &&
           q.gpu_milli >= p.gpu_milli;
  }
  void CountSlots(const ClusterState& c, int32_t node, size_t m, bool fresh) {
    const NodeState& n = c.node(node);
    int32_t* slots = node_slots_.data() + static_cast<size_t>(node) * m;
    for (size_t i = 0; i < m; ++i) {
      const int32_t now =
          static_cast<int32_t>(Slots(candidates_[i].shape, n.free_cpu_milli,
                                     n.gpu_free_milli.data(), n.num_gpus, n.gpu_model));
      candidates_[i].supply += now - (fresh ? 0 : slots[i]);
      slots[i] = now;
    }
  }
  std::vector<ReserveClass> ReserveClasses(const ClusterState& c) {
    std::vector<ReserveClass> out;
    const int64_t observed = learner_.observed();
    if (observed <= 0) return out;
    // Requests the free capacity can still take: GPU-bound or CPU-bound, whichever ends first.
    const double gpu_per_pod = static_cast<double>(gpu_seen_) / static_cast<double>(observed);
    const double cpu_per_pod = static_cast<double>(all_cpu_seen_) / static_cast<double>(observed);
    const double free_gpu = static_cast<double>(c.total_gpu_milli() - c.allocated_gpu_milli());
    const double free_cpu = static_cast<double>(c.total_cpu_milli() - c.allocated_cpu_milli());
    double horizon = std::numeric_limits<double>::infinity();
    if (gpu_per_pod > 0) horizon = std::min(horizon, free_gpu / gpu_per_pod);
    if (cpu_per_pod > 0) horizon = std::min(horizon, free_cpu / cpu_per_pod);
    if (!std::isfinite(horizon)) return out;
    // The hedge. A class's share is learned from the few of its pods seen so far, and an order
    // that brings them late makes it look rarer than it is (FGD's `multigpu50`, seed 44: the
    // 8-GPU pods of 120 CPUs were 0.29 % of the pods seen at 20 % allocated against 0.76 % of
    // the list, so their G3 nodes went to pods that had a choice, and eleven of them were
    // refused before 91 % arrived where fgd, which knows the list, refused five). While the
    // cluster is mostly free, a slot kept for a class that does not come costs little (the pod
    // that had a choice fits elsewhere) and a pod refused later costs its whole request, so the
    // reserve plans for the upper confidence bound of the class's rate: for k pods among n,
    // (k + z^2/2 + z sqrt(k + z^2/4)) / n (the Wilson bound of a Poisson count). As the cluster
    // fills, keeping slots costs placements elsewhere and the rate seen is used as it is.
    const bool hedge = static_cast<double>(c.allocated_gpu_milli()) <
                       kHedgeBelowAllocated * static_cast<double>(c.total_gpu_milli());
    const double seen = static_cast<double>(observed);
    for (Candidate& k : candidates_) {
      double share = k.share;
      if (hedge && !k.pool) {
        constexpr double z = kHedgeQuantile;
        const double count = k.share * seen;
        share = (count + z * z / 2 + z * std::sqrt(count + z * z / 4)) / seen;
      }
      const double lambda = share * horizon;
      if (lambda < kReserveMinArrivals) continue;
      // The tail is recomputed when the supply changed or the expectation moved by 1 %.
      if (k.supply != k.tail_supply || std::abs(lambda - k.lambda) > 0.01 * k.lambda) {
        k.tail = PoissonTail(lambda, k.supply);
        if (k.pool) {
          k.tail = std::max(
              k.tail, k.supply > 0 ? std::min(1.0, lambda / static_cast<double>(k.supply)) : 1.0);
        }
        k.lambda = lambda;
        k.tail_supply = k.supply;
      }
      if (k.tail < kReserveMinTail) continue;
      out.push_back({k.shape, k.pool, k.milli * k.tail, k.tail});
    }
    return out;
  }
  // The nodes whose score a change of the reserve from `from` to `to` can move: those with a
  // slot of a class whose weight differs (or that is in one set only).
  static void ChangedNodes(const std::vector<ReserveClass>& from,
                           const std::vector<ReserveClass>& to, const ClusterState& c,
                           std::vector<int32_t>* nodes) {
    std::vector<const PodShape*> moved;
    auto weight_in = [](const std::vector<ReserveClass>& set, const ReserveClass& k) {
      for (const ReserveClass& other : set) {
        if (other.shape == k.shape && other.pool == k.pool) return other.weight;
      }
      return -1.0;  // not in the set
    };
    for (const ReserveClass& k : from) {
      if (weight_in(to, k) != k.weight) moved.push_back(&k.shape);
    }
    for (const ReserveClass& k : to) {
      if (weight_in(from, k) != k.weight) moved.push_back(&k.shape);
    }
    nodes->clear();
    for (int32_t node = 0; node < c.num_nodes(); ++node) {
      const NodeState& n = c.node(node);
      for (const PodShape* p : moved) {
        if (Slots(*p, n.free_cpu_milli, n.gpu_free_milli.data(), n.num_gpus, n.gpu_model) > 0) {
          nodes->push_back(node);
          break;
        }
      }
    }
  }
  // Whether new reserve weights differ enough from those in use to rebuild every score.
  bool ReserveMoved(const std::vector<ReserveClass>& fresh) const {
    if (fresh.size() != reserve_.size()) return true;
    for (size_t i = 0; i < fresh.size(); ++i) {
      if (fresh[i].shape != reserve_[i].shape || fresh[i].pool != reserve_[i].pool ||
          std::abs(fresh[i].tail - reserve_[i].tail) > kReserveTailStep) {
        return true;
      }
    }
    return false;
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
    double reserve = 0;
    int whole = 0;  // fully free GPUs
  };
  const Before& BeforeOf(const ClusterState& c, int32_t node) {
    if (before_.size() != static_cast<size_t>(c.num_nodes())) before_.assign(c.num_nodes(), {});
    const size_t m = reserve_.size();
    if (before_units_.size() != static_cast<size_t>(c.num_nodes()) * m) {
      before_units_.assign(static_cast<size_t>(c.num_nodes()) * m, 0);
      for (Before& each : before_) each.version = 0;
    }
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
      b.whole = 0;
      for (int g = 0; g < n.num_gpus; ++g) b.whole += n.gpu_free_milli[g] >= kMilliPerGpu ? 1 : 0;
      int32_t* units = before_units_.data() + static_cast<size_t>(node) * m;
      for (size_t i = 0; i < m; ++i) {
        units[i] = Units(reserve_[i].shape, n.gpu_free_milli.data(), n.num_gpus, n.gpu_model);
      }
      b.reserve = ReserveFromUnits(n.free_cpu_milli, units, n.gpu_model, 0, 0, 0);
      // stranded is 0 before any CPU:GPU ratio is known
      b.waste = cpu_per_gpu_milli_ <= 0 ? b.frag - b.reserve : b.frag + b.stranded - b.reserve;
    }
    return b;
  }
  double WasteBefore(const ClusterState& c, int32_t node) { return BeforeOf(c, node).waste; }

  StokerOptions options_;
  ShapeLearner learner_;
  std::vector<std::pair<PodShape, double>> adopted_;  // frequencies model_ was built from
  int64_t adoptions_ = 0;
  FragModel model_;
  FragVariants variants_;                // scratch for share requests
  int64_t cpu_seen_ = 0, gpu_seen_ = 0;  // GPU requests only
  int64_t all_cpu_seen_ = 0;             // every request
  std::vector<ReserveClass> reserve_;    // shapes in short supply, sorted by shape
  int64_t reserve_adoptions_ = 0;
  int64_t exact_scorings_ = 0;           // ScoreNode calls (benchmarks: the work the bounds leave)
  bool reserve_due_ = true;              // the candidates are rebuilt at the next decision
  std::set<GpuModelMask> pinned_masks_;  // model sets named by the requests seen
  std::vector<Candidate> candidates_;
  std::vector<int32_t> node_slots_;     // per node, per candidate
  std::vector<int32_t> changed_nodes_;  // ChangedNodes' result
  uint64_t supply_history_ = 0;
  uint64_t supply_journal_pos_ = 0;
  double cpu_per_gpu_milli_ = 0;
  std::vector<Before> before_;
  std::vector<int32_t> before_units_;  // per node, per reserve class: see Units()
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

int64_t StokerReserveAdoptions(const PlacementPolicy& stoker) {
  const auto* p = dynamic_cast<const StokerPolicy*>(&stoker);
  return p != nullptr ? p->reserve_adoptions() : 0;
}

int64_t StokerExactScorings(const PlacementPolicy& stoker) {
  const auto* p = dynamic_cast<const StokerPolicy*>(&stoker);
  return p != nullptr ? p->exact_scorings() : 0;
}

}  // namespace stoker::scheduler
