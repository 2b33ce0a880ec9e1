#include "scheduler/scoring_policy.h"

#include <algorithm>
#include <limits>

namespace stoker::scheduler {

PlacementResult ScoringPolicy::Place(const Request& r, const ClusterState& cluster) {
  if (auto infeasible = CheckFeasible(r, cluster)) return *infeasible;
  BeginRequest(r, cluster);
  if (cacheable_ && tie_break_ == TieBreak::kLowestNodeId) return PlaceIndexed(r, cluster);
  return PlaceScan(r, cluster);
}

PlacementResult ScoringPolicy::PlaceScan(const Request& r, const ClusterState& cluster) {
  int32_t best_node = -1;
  int64_t best_score = std::numeric_limits<int64_t>::min();
  uint64_t ties = 0;
  uint8_t gpus[kMaxGpusPerNode];
  uint8_t best_gpus[kMaxGpusPerNode] = {};
  const int32_t n = cluster.num_nodes();
  for (int32_t node = 0; node < n; ++node) {
    if (!cluster.Fits(node, r)) continue;
    int64_t score = 0;
    if (!ScoreNode(r, cluster, node, &score, gpus)) continue;
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

void ScoringPolicy::Refresh(ShapeIndex& idx, const Request& shape, const ClusterState& cluster,
                            int32_t node) {
  int64_t score = 0;
  if (cluster.Fits(node, shape) && ScoreNode(shape, cluster, node, &score, idx.best.gpus(node))) {
    idx.best.SetLeaf(node, score);
  } else {
    idx.best.UnsetLeaf(node);
  }
}

void ScoringPolicy::Mark(ShapeIndex& idx, const ClusterState& cluster, int32_t node, bool bounds) {
  if (!bounds) {
    Refresh(idx, idx.shape, cluster, node);
    return;
  }
  if (cluster.Fits(node, idx.shape)) {
    idx.best.SetLeaf(node, ScoreBound(idx.shape, cluster, node));
    idx.best.set_tag(node, 1);
  } else {
    idx.best.UnsetLeaf(node);
    idx.best.set_tag(node, 0);
  }
}

void ScoringPolicy::CatchUp(ShapeIndex& idx, const ClusterState& cluster, bool bounds) {
  const int32_t n = cluster.num_nodes();
  const uint64_t end = cluster.journal_end();
  // Rebuild when the index is for another cluster history, or catching up would cost about as
  // much as marking every node.
  if (idx.history != cluster.history_id() || idx.journal_pos < cluster.journal_begin() ||
      idx.best.size() != n || end - idx.journal_pos > static_cast<uint64_t>(n)) {
    const auto slot = static_cast<int32_t>(&idx - slots_.data());
    EnsureArena(n, slot + 1);
    idx.history = cluster.history_id();
    idx.best.Reset(n, arena_, slot);
    for (int32_t node = 0; node < n; ++node) Mark(idx, cluster, node, bounds);
    idx.best.Build();
  } else if (idx.journal_pos != end) {
    // Many changes: repair the index once (O(nodes)) rather than once per change. A node
    // changed several times is marked again each time (cheaper than remembering it).
    const bool bulk = (end - idx.journal_pos) * 16 > static_cast<uint64_t>(n);
    for (uint64_t pos = idx.journal_pos; pos < end; ++pos) {
      const int32_t node = cluster.journal_at(pos);
      Mark(idx, cluster, node, bounds);
      if (!bulk) idx.best.Update(node);
    }
    if (bulk) idx.best.Build();
  }
  idx.journal_pos = end;
}

void ScoringPolicy::CatchUpOthers(const ShapeIndex& idx, const ClusterState& cluster) {
  const uint64_t end = cluster.journal_end();
  const int32_t n = cluster.num_nodes();
  const size_t count = slots_.size();
  uint64_t budget = kEagerBudget;
  for (size_t k = 0; k < count && budget > 0; ++k) {
    const size_t slot = (eager_cursor_ + k) % count;
    ShapeIndex& other = slots_[slot];
    // An index that must be rebuilt anyway is left to its next request.
    if (&other == &idx || other.history != cluster.history_id() ||
        other.journal_pos < cluster.journal_begin() || other.best.size() != n ||
        end - other.journal_pos > static_cast<uint64_t>(n)) {
      continue;
    }
    const uint64_t stop = std::min(end, other.journal_pos + budget);
    for (uint64_t pos = other.journal_pos; pos < stop; ++pos) {
      const int32_t node = cluster.journal_at(pos);
      Refresh(other, other.shape, cluster, node);
      other.best.Update(node);
    }
    budget -= stop - other.journal_pos;
    other.journal_pos = stop;
    // Out of budget: the next decision resumes with this shape.
    if (stop < end) eager_cursor_ = slot;
  }
}

void ScoringPolicy::EnsureArena(int32_t n, int32_t slots) {
  if (arena_.nodes() == n && arena_.slots() >= slots) return;
  // Room for twice the slots in use (at least 16, at most kMaxCachedShapes): a cluster with few
  // request shapes does not pay for 128, and the arena is re-laid at most a few times.
  int32_t room = std::max(16, arena_.nodes() == n ? arena_.slots() : 0);
  while (room < slots) room *= 2;
  room = std::min(room, static_cast<int32_t>(kMaxCachedShapes));
  arena_.Reset(n, room);
  for (ShapeIndex& slot : slots_) slot.history = 0;
}

void ScoringPolicy::RebuildInvalidated(const ShapeIndex& idx, const ClusterState& cluster) {
  following_.clear();
  for (ShapeIndex& slot : slots_) {
    if (&slot != &idx && slot.key_history == cluster.history_id() &&
        slot.history != cluster.history_id()) {
      following_.push_back(&slot);
    }
  }
  if (following_.empty()) return;
  const int32_t n = cluster.num_nodes();
  int32_t slots = 0;
  for (const ShapeIndex* slot : following_) {
    slots = std::max(slots, static_cast<int32_t>(slot - slots_.data()) + 1);
  }
  EnsureArena(n, slots);
  for (ShapeIndex* slot : following_) {
    slot->history = cluster.history_id();
    slot->journal_pos = cluster.journal_end();
    slot->best.Reset(n, arena_, static_cast<int32_t>(slot - slots_.data()));
  }
  for (int32_t node = 0; node < n; ++node) {
    for (ShapeIndex* slot : following_) Mark(*slot, cluster, node, true);
  }
  // Score the tops exactly now as well: every node holds a bound, and otherwise each shape's
  // next request would score its pile of bounds at the top (hundreds of nodes) itself.
  for (ShapeIndex* slot : following_) {
    slot->best.Build();
    ResolveTop(*slot, cluster, std::numeric_limits<uint64_t>::max());
  }
}

void ScoringPolicy::InvalidateNodes(const ClusterState& cluster,
                                    const std::vector<int32_t>& nodes) {
  const bool bounds = HasScoreBound();
  following_.clear();
  for (ShapeIndex& slot : slots_) {
    if (slot.history == 0) continue;
    if (slot.history != cluster.history_id() || slot.best.size() != cluster.num_nodes()) {
      slot.history = 0;
      continue;
    }
    following_.push_back(&slot);
  }
  // Node by node across the shapes, as MarkEveryShape (the node's data is computed once).
  for (const int32_t node : nodes) {
    for (ShapeIndex* slot : following_) {
      Mark(*slot, cluster, node, bounds);
      slot->best.Update(node);
    }
  }
  if (bounds && cluster.num_nodes() >= kEagerMinNodes) {
    for (ShapeIndex* slot : following_) {
      ResolveTop(*slot, cluster, std::numeric_limits<uint64_t>::max());
    }
  }
}

uint64_t ScoringPolicy::ResolveTop(ShapeIndex& idx, const ClusterState& cluster, uint64_t budget) {
  uint64_t used = 0;
  for (int32_t node = idx.best.Best(); node >= 0 && idx.best.tag(node) != 0 && used < budget;
       node = idx.best.Best()) {
    idx.best.set_tag(node, 0);
    Refresh(idx, idx.shape, cluster, node);
    idx.best.Update(node);
    ++used;
  }
  return used;
}

void ScoringPolicy::MarkEveryShape(const ClusterState& cluster) {
  // Node by node, each node across the shapes: one node's leaves of all shapes lie together in
  // the arena, and the policy's per-node data (F and B, cached per node version) is computed
  // at the first shape and reused by the others.
  const uint64_t end = cluster.journal_end();
  following_.clear();
  uint64_t from = end;
  for (ShapeIndex& other : slots_) {
    if (other.history != cluster.history_id() || other.journal_pos < cluster.journal_begin() ||
        end - other.journal_pos > kEagerMaxLag) {
      continue;
    }
    following_.push_back(&other);
    from = std::min(from, other.journal_pos);
  }
  for (uint64_t pos = from; pos < end; ++pos) {
    const int32_t node = cluster.journal_at(pos);
    for (ShapeIndex* other : following_) {
      if (other->journal_pos > pos) continue;
      Mark(*other, cluster, node, true);
      other->best.Update(node);
    }
  }
  for (ShapeIndex* other : following_) other->journal_pos = end;
  marked_changes_ = end - from;
}

void ScoringPolicy::ResolveOthers(const ShapeIndex& idx, const ClusterState& cluster) {
  // Decisions that marked few changes do more of this work, those that marked many none (they
  // are the slow ones already).
  uint64_t budget = marked_changes_ >= kResolveSpan ? 0 : (kResolveSpan - marked_changes_) * 8;
  const size_t count = slots_.size();
  for (size_t k = 0; k < count && budget > 0; ++k) {
    const size_t slot = (resolve_cursor_ + k) % count;
    ShapeIndex& other = slots_[slot];
    if (&other == &idx || other.history != cluster.history_id() ||
        other.journal_pos != cluster.journal_end()) {
      continue;
    }
    budget -= ResolveTop(other, cluster, budget);
    if (budget == 0) resolve_cursor_ = slot;
  }
}

PlacementResult ScoringPolicy::PlaceIndexed(const Request& r, const ClusterState& cluster) {
  const bool bounds = HasScoreBound();
  ShapeIndex& idx = IndexFor(r, cluster.history_id());
  // The index lists nodes where the shape fits with any memory: memory varies per request and
  // is checked on the best nodes (it rarely binds, so few are set aside).
  idx.shape = r;
  idx.shape.memory_mib = 0;
  if (!bounds && EagerExactCatchUp() && cluster.num_nodes() >= kEagerMinNodes) {
    CatchUpOthers(idx, cluster);
  } else if (bounds && cluster.num_nodes() >= kEagerMinNodes) {
    RebuildInvalidated(idx, cluster);
    // Marking a change costs a bound and a tree repair, so every cached shape of this cluster
    // follows every change: no shape builds up a backlog to catch up on when it is next
    // requested (a rare shape would otherwise rescan thousands of changed nodes at once).
    MarkEveryShape(cluster);
    for (ShapeIndex& other : slots_) {
      if (&other != &idx && other.history == cluster.history_id()) CatchUp(other, cluster, bounds);
    }
  }
  CatchUp(idx, cluster, bounds);
  // Best node first. A node holding a bound is scored exactly and put back (its score is at
  // most the bound, so once the best entry is exact it beats every bound: the scan's choice).
  // One without the memory is set aside (unlisted) and the next best taken, in the scan's
  // order (score, then node id). The set-aside nodes are listed again afterwards.
  PlacementResult result{PlacementStatus::kNoCapacityNow, {}, "no node has room now"};
  set_aside_.clear();
  for (int32_t node = idx.best.Best(); node >= 0; node = idx.best.Best()) {
    if (bounds && idx.best.tag(node)) {
      idx.best.set_tag(node, 0);
      Refresh(idx, idx.shape, cluster, node);
      idx.best.Update(node);
      continue;
    }
    if (r.memory_mib <= 0 || cluster.Fits(node, r)) {
      result = PlacementResult{
          PlacementStatus::kPlaced, MakePlacement(r, node, idx.best.gpus(node)), {}};
      break;
    }
    set_aside_.push_back(node);
    idx.best.UnsetLeaf(node);
    idx.best.Update(node);
  }
  for (const int32_t node : set_aside_) {
    idx.best.RelistLeaf(node);
    idx.best.Update(node);
  }
  if (bounds && cluster.num_nodes() >= kEagerMinNodes) ResolveOthers(idx, cluster);
  return result;
}

ScoringPolicy::ShapeIndex& ScoringPolicy::IndexFor(const Request& r, uint64_t history) {
  // Memory is checked per request (see PlaceIndexed), so it is not part of the key: fewer
  // distinct shapes. The cluster history is: a caller that alternates between a cluster and a
  // trial copy of it (preemption, backfill) keeps an index for each instead of rebuilding.
  ShapeKey key{r.cpu_milli,      r.num_gpu,     r.gpu_milli, r.gpu_memory_mib, r.allowed_models,
               MigSlices(r.mig), r.best_effort, r.job_class, history};
  ++tick_;
  if (auto it = shape_ids_.find(key); it != shape_ids_.end()) {
    last_used_[it->second] = tick_;
    return slots_[it->second];
  }
  size_t slot;
  if (slots_.size() < kMaxCachedShapes) {
    // Reserved once: slots never move (their number is their place in the arena).
    if (slots_.capacity() < kMaxCachedShapes) slots_.reserve(kMaxCachedShapes);
    slot = slots_.size();
    slots_.emplace_back();
    last_used_.push_back(tick_);
  } else {
    // Evict the least recently used shape and reuse its memory.
    slot = static_cast<size_t>(std::min_element(last_used_.begin(), last_used_.end()) -
                               last_used_.begin());
    for (auto i = shape_ids_.begin(); i != shape_ids_.end(); ++i) {
      if (i->second == slot) {
        shape_ids_.erase(i);
        break;
      }
    }
    slots_[slot].history = 0;
    last_used_[slot] = tick_;
  }
  slots_[slot].key_history = history;
  shape_ids_.emplace(std::move(key), slot);
  return slots_[slot];
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
