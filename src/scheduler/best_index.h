#pragma once
// BestIndex: per-node scores with the best node always at hand, for the policies' score index.
//
// A tournament tree over node ids: each inner entry holds the better of its two children
// (higher score; on equal scores the lower node id, which is always the left child). Changing
// one node's score costs O(log nodes) comparisons and never allocates; listing every node at
// once and building costs O(nodes). Best() is the node a full scan would pick: the highest
// score, lowest id among ties, over the listed nodes. It replaced an ordered std::set of
// (score, node), whose insert/erase (with an allocation each) dominated a decision's cost.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stoker::scheduler {

class BestIndex {
 public:
  // `n` nodes, none listed.
  void Reset(int32_t n);
  int32_t size() const { return n_; }

  // Lists node `i` with `score` (or changes its score); Update() then repairs the tree.
  void SetLeaf(int32_t i, int64_t score) {
    score_[i] = score;
    listed_[i] = 1;
  }
  // Unlists node `i` (its score is kept, so Relist() can bring it back).
  void UnsetLeaf(int32_t i) { listed_[i] = 0; }
  void RelistLeaf(int32_t i) { listed_[i] = 1; }
  // Repairs the path from node `i` to the root after a leaf change.
  void Update(int32_t i);
  // Repairs the whole tree (after many leaf changes: O(nodes), cheaper than one Update each).
  void Build();

  bool listed(int32_t i) const { return listed_[i] != 0; }
  int64_t score(int32_t i) const { return score_[i]; }
  // The listed node with the highest score, lowest id on ties; -1 when none is listed.
  int32_t Best() const {
    if (n_ == 0) return -1;
    const int32_t b = tree_[1];
    return b >= 0 && listed_[b] ? b : -1;
  }

 private:
  // The better of two tree entries; `a` holds lower node ids than `b` (or is -1).
  int32_t Better(int32_t a, int32_t b) const {
    if (b < 0 || !listed_[b]) return a;
    if (a < 0 || !listed_[a]) return b;
    return score_[b] > score_[a] ? b : a;
  }

  int32_t n_ = 0;
  int32_t leaves_ = 1;  // power of two >= n_
  std::vector<int64_t> score_;
  std::vector<uint8_t> listed_;
  std::vector<int32_t> tree_;  // [1, leaves_) inner entries, [leaves_, 2*leaves_) leaves; -1 = none
};

}  // namespace stoker::scheduler
