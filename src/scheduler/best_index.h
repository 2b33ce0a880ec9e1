#pragma once
// BestIndex: per-node scores with the best node always at hand, for the policies' score index.
//
// Two levels: nodes are grouped in blocks of kBlock consecutive ids, each block remembers its
// best node, and a tournament tree over the blocks keeps the overall best at the root (each
// inner entry is the better child: higher score, on equal scores the lower node id, which is
// always the left child). Changing one node's score rescans its block (contiguous memory) and
// repairs O(log blocks) tree entries, never allocating; Build() after many changes costs one
// pass over the scores. Best() is the node a full scan would pick: the highest score, lowest
// id among ties, over the listed nodes. A change to a node that neither was nor becomes its
// block's best costs O(1). The blocks keep a change cheap when a policy keeps many indexes (one
// per request shape) current at every change: a tree over single nodes touched ~14 scattered
// cache lines per change and was memory-bound.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stoker::scheduler {

class BestIndex {
 public:
  static constexpr int32_t kBlock = 32;

  // `n` nodes, none listed.
  void Reset(int32_t n);
  int32_t size() const { return n_; }

  // Lists node `i` with `score` (or changes its score); Update() then repairs the index.
  void SetLeaf(int32_t i, int64_t score) {
    score_[i] = score;
    listed_[i] = 1;
  }
  // Unlists node `i` (its score is kept, so Relist() can bring it back).
  void UnsetLeaf(int32_t i) { listed_[i] = 0; }
  void RelistLeaf(int32_t i) { listed_[i] = 1; }
  // Repairs the index after a change of node `i`. Call it after each single change (Build()
  // after several): it relies on every other node being as the index last saw it.
  void Update(int32_t i);
  // Repairs the whole index (after many leaf changes: O(nodes), cheaper than one Update each).
  void Build();

  bool listed(int32_t i) const { return listed_[i] != 0; }
  int64_t score(int32_t i) const { return score_[i]; }
  // The listed node with the highest score, lowest id on ties; -1 when none is listed.
  int32_t Best() const {
    if (n_ == 0) return -1;
    return tree_[1];
  }

 private:
  // Tree entry k := the better of entries 2k and 2k+1 (-1: none); the left one holds lower ids.
  // Entries carry their score, so a repair reads no node's leaf.
  void Combine(int32_t k) {
    const int32_t a = tree_[2 * k], b = tree_[2 * k + 1];
    const bool take_b = b >= 0 && (a < 0 || tree_score_[2 * k + 1] > tree_score_[2 * k]);
    tree_[k] = take_b ? b : a;
    tree_score_[k] = take_b ? tree_score_[2 * k + 1] : tree_score_[2 * k];
  }
  void SetBlockBest(int32_t b, int32_t node) {
    tree_[leaves_ + b] = node;
    if (node >= 0) tree_score_[leaves_ + b] = score_[node];
  }
  // Best listed node of block `b`, or -1.
  int32_t ScanBlock(int32_t b) const;
  void RepairPath(int32_t b);

  int32_t n_ = 0;
  int32_t leaves_ = 1;  // power of two >= number of blocks
  std::vector<int64_t> score_;
  std::vector<uint8_t> listed_;
  std::vector<int32_t> tree_;        // [1, leaves_) inner entries, [leaves_, 2*leaves_) block bests
  std::vector<int64_t> tree_score_;  // score of tree_[k]
};

}  // namespace stoker::scheduler
