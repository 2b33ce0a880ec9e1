#pragma once
// BestIndex: per-node scores with the best node always at hand, for the policies' score index.
//
// Two levels: nodes are grouped in blocks of kBlock consecutive ids, each block remembers its
// best node, and a tournament tree over the blocks keeps the overall best at the root (each
// inner entry is the better child: higher score, on equal scores the lower node id, which is
// always the left child). Best() is the node a full scan would pick: the highest score, lowest
// id among ties, over the listed nodes. A change to a node that neither was nor becomes its
// block's best costs O(1); otherwise the block (contiguous memory) is rescanned and O(log
// blocks) tree entries repaired; nothing allocates. Build() after many changes costs one pass.
// Leaves and tree entries carry their scores inline, so a change touches few cache lines: a
// policy keeps one index per request shape current at every change, and a tree over single
// nodes with scores kept apart (~14 scattered cache lines per change) was memory-bound.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stoker::scheduler {

class BestIndex {
 public:
  static constexpr int32_t kBlock = 32;

  // `n` nodes, none listed, all tags 0.
  void Reset(int32_t n);
  int32_t size() const { return n_; }

  // Lists node `i` with `score` (or changes its score); Update() then repairs the index.
  void SetLeaf(int32_t i, int64_t score) {
    leaf_[i].score = score;
    leaf_[i].listed = 1;
  }
  // Unlists node `i` (its score is kept, so Relist() can bring it back).
  void UnsetLeaf(int32_t i) { leaf_[i].listed = 0; }
  void RelistLeaf(int32_t i) { leaf_[i].listed = 1; }
  // Repairs the index after a change of node `i`. Call it after each single change (Build()
  // after several): it relies on every other node being as the index last saw it.
  void Update(int32_t i);
  // Repairs the whole index (after many leaf changes: O(nodes), cheaper than one Update each).
  void Build();

  bool listed(int32_t i) const { return leaf_[i].listed != 0; }
  int64_t score(int32_t i) const { return leaf_[i].score; }
  // A byte per node for the caller (kept beside the score, so setting it costs no extra cache
  // line); the index ignores it.
  uint8_t tag(int32_t i) const { return leaf_[i].tag; }
  void set_tag(int32_t i, uint8_t t) { leaf_[i].tag = t; }
  // Asks the CPU to load what Update(i) will read (callers with many indexes to update issue
  // these first, so the cache misses overlap instead of queueing).
  void Prefetch(int32_t i) const {
    __builtin_prefetch(&leaf_[i], 1);
    __builtin_prefetch(&tree_[leaves_ + i / kBlock], 1);
  }
  // The listed node with the highest score, lowest id on ties; -1 when none is listed.
  int32_t Best() const {
    if (n_ == 0) return -1;
    const int32_t b = tree_[1].node;
    return b >= 0 && leaf_[b].listed ? b : -1;
  }

 private:
  struct Leaf {
    int64_t score = 0;
    uint8_t listed = 0;
    uint8_t tag = 0;
  };
  struct Entry {
    int64_t score = 0;
    int32_t node = -1;  // -1: none
  };
  // Entry k := the better of entries 2k and 2k+1; the left one holds lower node ids.
  void Combine(int32_t k) {
    const Entry& a = tree_[2 * k];
    const Entry& b = tree_[2 * k + 1];
    tree_[k] = b.node >= 0 && (a.node < 0 || b.score > a.score) ? b : a;
  }
  // Best listed node of block `b`.
  Entry ScanBlock(int32_t b) const;
  void RepairPath(int32_t b);

  int32_t n_ = 0;
  int32_t leaves_ = 1;  // power of two >= number of blocks
  std::vector<Leaf> leaf_;
  std::vector<Entry> tree_;  // [1, leaves_) inner entries, [leaves_, 2*leaves_) block bests
};

}  // namespace stoker::scheduler
