#pragma once
// Shared skeleton of the node-scoring policies: filter feasible nodes, let the policy score each
// one (and pick the GPUs inside it), keep the best. Ties go to the lowest node id, or, for the
// published baselines, to a uniformly random one among the tied (as the Kubernetes scheduler the
// published simulator runs on does), drawn from the policy's seeded Rng.
//
// Score index: a policy whose node score depends only on (node state, request shape) can enable
// it. Per request shape the policy keeps every node's score in a BestIndex (a tournament tree
// over the nodes where the shape fits, memory aside); ClusterState's change journal says which
// nodes changed since the shape was last placed, so a decision rescores only those and then
// takes the best node, setting aside the few without the memory until one has it. The decision
// is the exhaustive scan's (highest score, lowest node id; tested with the index off). An index
// that has fallen too far behind (or belongs to another cluster) is rebuilt.
//
// With a score bound (HasScoreBound: fgd, stoker), changed nodes get a cheap upper bound instead
// of a score. On large clusters every cached shape of the cluster takes each change at the next
// decision (node by node, all shapes' leaves of a node being adjacent in one arena), so no shape
// builds up a backlog (a rare shape otherwise rescored thousands of changed nodes when it was
// next requested: the decision-time tail). A decision then scores exactly only the nodes whose
// bound reaches the top; once the top entry is exact it beats every bound. Each decision also
// scores a few bounded best nodes of other shapes, so that a rarely requested shape does not
// meet hundreds of bounds at its top.
// A policy without a bound can ask for exact rescoring instead (EagerExactCatchUp): the cached
// shapes rescore the changes within a budget per decision.

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "scheduler/best_index.h"
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

  // Turns the score index off: every decision scans every node (tests compare both).
  void DisableCache() { cacheable_ = false; }

 protected:
  // Scores a node on which `r` fits (higher is better) and fills the GPUs to use (num_gpu entries)
  // in `gpus`. Return false to skip the node.
  virtual bool ScoreNode(const Request& r, const ClusterState& cluster, int32_t node,
                         int64_t* score, uint8_t* gpus) = 0;
  // Called once per Place() before any ScoreNode (per-request precomputation).
  virtual void BeginRequest(const Request& /*r*/, const ClusterState& /*cluster*/) {}
  // Optional upper bound on ScoreNode's score for `r` on `node` (where `r` fits), much cheaper
  // than scoring. A policy that has one returns true from HasScoreBound(); its index then marks
  // changed nodes with their bound and scores exactly only the nodes whose bound could win.
  virtual bool HasScoreBound() const { return false; }
  virtual int64_t ScoreBound(const Request& /*r*/, const ClusterState& /*cluster*/,
                             int32_t /*node*/) {
    return std::numeric_limits<int64_t>::max();
  }
  // Without a score bound: whether the other cached shapes rescore the changes at each decision
  // (on clusters of kEagerMinNodes+; at most kEagerBudget rescorings per decision, round robin
  // over the shapes), instead of a shape catching up only when it is next requested. Same total
  // rescorings, spread evenly: a rare shape no longer rescores thousands of changed nodes in one
  // decision (the tail), at the price of a higher median.
  virtual bool EagerExactCatchUp() const { return false; }
  // Drops every cached score (call when the scoring function itself changes, e.g. a new
  // typical-shape distribution). The shapes stay cached: on clusters of kEagerMinNodes+ with a
  // score bound, the next decision rebuilds all of them at once, node by node (one long
  // decision per change of the scoring function instead of a slow decision for every shape at
  // its next request; cheaper in all, as each node's data is computed once); elsewhere each is
  // rebuilt when next requested.
  void InvalidateCache() {
    for (ShapeIndex& slot : slots_) slot.history = 0;
  }
  // Drops the cached scores of `nodes` only (call when the scoring function changed for those
  // nodes alone, e.g. stoker's reserve weights of shapes only they have room for): every cached
  // shape of this cluster history takes them again as it takes a change (a bound, or the score
  // without one) and, on clusters of kEagerMinNodes+ with a score bound, scores its top exactly
  // at once, as after InvalidateCache. The scores of the other nodes stay, exact ones included,
  // so the decisions that follow do not rescore the whole cluster. Shapes cached for another
  // cluster history are dropped whole.
  void InvalidateNodes(const ClusterState& cluster, const std::vector<int32_t>& nodes);
  Rng& rng() { return rng_; }

 private:
  // One request shape's index over the nodes of one cluster history.
  struct ShapeIndex {
    uint64_t history = 0;      // ClusterState::history_id() it reflects; 0 = empty
    uint64_t journal_pos = 0;  // journal entries before this are applied
    uint64_t key_history = 0;  // the history it is cached for (part of its key)
    Request shape;             // the request shape, memory 0
    // Per node: score and chosen GPUs, listed where the shape fits; with a score bound, tag 1 =
    // the leaf holds ScoreBound (GPUs not chosen). Leaves in arena_, slot = this slot's number.
    BestIndex best;
  };
  using ShapeKey =
      std::tuple<int64_t, int32_t, int32_t, int64_t, uint64_t, int, bool, std::string, uint64_t>;
  PlacementResult PlaceScan(const Request& r, const ClusterState& cluster);
  PlacementResult PlaceIndexed(const Request& r, const ClusterState& cluster);
  ShapeIndex& IndexFor(const Request& r, uint64_t history);
  // Rescores `node` into idx's leaves (the caller repairs the tree).
  void Refresh(ShapeIndex& idx, const Request& shape, const ClusterState& cluster, int32_t node);
  // Puts ScoreBound (or, unbounded policies, the score) of `node` into idx's leaves.
  void Mark(ShapeIndex& idx, const ClusterState& cluster, int32_t node, bool bounds);
  // Brings idx up to the cluster's journal end: rebuilt when it is for another history or too
  // far behind, else the changed nodes are marked.
  void CatchUp(ShapeIndex& idx, const ClusterState& cluster, bool bounds);
  // EagerExactCatchUp: rescores up to kEagerBudget journal entries into the cached shapes other
  // than idx, resuming where the previous decision stopped.
  void CatchUpOthers(const ShapeIndex& idx, const ClusterState& cluster);
  // With a score bound: scores exactly a few bounded best nodes of the cached shapes other
  // than idx (round robin; see kResolveSpan), so that a shape rarely meets a pile of bounds at the
  // top of its index when it is requested.
  void ResolveOthers(const ShapeIndex& idx, const ClusterState& cluster);
  // Scores exactly the bounded best node of idx, again while the best holds a bound, at most
  // `budget` times; returns how many it scored.
  uint64_t ResolveTop(ShapeIndex& idx, const ClusterState& cluster, uint64_t budget);
  // With a score bound on clusters of kEagerMinNodes+: marks the journal entries since the last
  // decision into every cached shape of the cluster that is at most kEagerMaxLag behind (the
  // others catch up on their own).
  void MarkEveryShape(const ClusterState& cluster);
  // Rebuilds, node by node, every cached shape of this cluster history whose scores were
  // dropped (InvalidateCache), except idx (rebuilt by its own catch-up).
  void RebuildInvalidated(const ShapeIndex& idx, const ClusterState& cluster);
  // Points arena_ at `n` nodes with room for slots [0, slots) (a new arena drops every slot's
  // scores).
  void EnsureArena(int32_t n, int32_t slots);

  std::string name_;
  TieBreak tie_break_;
  Rng rng_;
  bool cacheable_;
  // Shapes seen recently; least recently used evicted beyond this (an evicted shape is rebuilt
  // from scratch when it comes back). The arena holds all of them, ~18 bytes per node each:
  // ~24 MB at 10,000 nodes with all 128 (it grows 16, 32, 64, 128 with the shapes in use). openb's
  // default workload has 91 shapes: with 64 slots about one decision in 100 rebuilt an evicted
  // shape at 10,000 nodes (a slow decision each).
  static constexpr size_t kMaxCachedShapes = 128;
  // With a score bound, every cached shape follows every change only on clusters this large:
  // on smaller ones a shape's catch-up is bounded by the node count anyway, and marking every
  // shape at every change made the static packing run (1,213 nodes) ~1.5x slower.
  static constexpr int32_t kEagerMinNodes = 4096;
  // Rescorings per decision for EagerExactCatchUp: above the usual rate of changes x cached
  // shapes (~2.5 x 91 on the 10,000-node benchmark), so backlogs stay small, while a decision
  // with many changes (a large pod placed, several released) defers the excess instead of
  // paying it at once.
  static constexpr uint64_t kEagerBudget = 128;
  size_t eager_cursor_ = 0;
  // Bounded best nodes of other shapes scored exactly per decision (ResolveOthers): 8 x
  // (kResolveSpan - journal entries this decision marked), none from kResolveSpan on. On the
  // 10,000-node benchmark a decision leaves ~11 bounds at the tops on average (1.7 changes).
  // A flat 16 per decision gave p99 ~5-10 % higher (8: left piles that cost a later request
  // ~100 exact scorings; 24: a higher median, no lower tail).
  static constexpr uint64_t kResolveSpan = 4;
  size_t resolve_cursor_ = 0;
  // Journal entries the last MarkEveryShape marked (ResolveOthers' budget).
  uint64_t marked_changes_ = 0;
  // MarkEveryShape follows the shapes at most this many journal entries behind; a shape further
  // behind (new, just rebuilt for another history) catches up on its own.
  static constexpr uint64_t kEagerMaxLag = 256;
  std::vector<ShapeIndex*> following_;  // MarkEveryShape's and RebuildInvalidated's scratch
  LeafArena arena_;                     // every slot's storage, for the current node count
  std::map<ShapeKey, size_t> shape_ids_;
  std::vector<ShapeIndex> slots_;
  std::vector<uint64_t> last_used_;
  uint64_t tick_ = 0;
  std::vector<int32_t> set_aside_;  // nodes skipped for memory during one decision
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
