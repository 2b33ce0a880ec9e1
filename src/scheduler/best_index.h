#pragma once
// BestIndex: per-node scores with the best node always at hand, for the policies' score index.
//
// Two levels: nodes are grouped in blocks of kBlock consecutive ids, each block remembers its
// best node, and a tournament tree over the blocks keeps the overall best at the root (each
// inner entry is the better child: higher score, on equal scores the lower node id, which is
// always the left child). Best() is the node a full scan would pick: the highest score, lowest
// id among ties, over the listed nodes. A change to a node that neither was nor becomes its
// block's best costs O(1); otherwise the block is rescanned and O(log blocks) tree entries
// repaired; nothing allocates. Build() after many changes costs one pass.
//
// Leaves may live in a LeafArena shared by many indexes over the same nodes (one per request
// shape): a policy keeps every shape's index current at every change of a node, so the arena
// puts one block's leaves of all indexes next to each other (a change then touches one small
// region instead of one distant page per index; scattered pages were most of a decision's time).

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "scheduler/resources.h"

namespace stoker::scheduler {

class LeafArena;

class BestIndex {
 public:
  static constexpr int32_t kBlock = 32;

  struct Entry {
    int64_t score = 0;
    int32_t node = -1;  // -1: none
  };
  struct Leaf {
    int64_t score = 0;
    std::array<uint8_t, kMaxGpusPerNode> gpus{};  // the caller's choice of GPUs on the node
    uint8_t listed = 0;
    uint8_t tag = 0;
  };

  // `n` nodes, none listed, all tags 0; the leaves are the index's own.
  void Reset(int32_t n);
  // The same with the leaves in `arena`'s slot `slot` (the arena must be for `n` nodes).
  void Reset(int32_t n, LeafArena& arena, int32_t slot);
  int32_t size() const { return n_; }

  // Lists node `i` with `score` (or changes its score); Update() then repairs the index.
  void SetLeaf(int32_t i, int64_t score) {
    Leaf& l = leaf(i);
    l.score = score;
    l.listed = 1;
  }
  // Unlists node `i` (its score is kept, so Relist() can bring it back).
  void UnsetLeaf(int32_t i) { leaf(i).listed = 0; }
  void RelistLeaf(int32_t i) { leaf(i).listed = 1; }
  // Repairs the index after a change of node `i`. Call it after each single change (Build()
  // after several): it relies on every other node being as the index last saw it.
  void Update(int32_t i);
  // Repairs the whole index (after many leaf changes: O(nodes), cheaper than one Update each).
  void Build();

  bool listed(int32_t i) const { return leaf(i).listed != 0; }
  int64_t score(int32_t i) const { return leaf(i).score; }
  // A byte per node for the caller (kept beside the score, so setting it costs no extra cache
  // line); the index ignores it.
  uint8_t tag(int32_t i) const { return leaf(i).tag; }
  void set_tag(int32_t i, uint8_t t) { leaf(i).tag = t; }
  // The caller's GPUs for node `i`, stored beside its score.
  uint8_t* gpus(int32_t i) { return leaf(i).gpus.data(); }
  // Asks the CPU to load what Update(i) will read (callers with many indexes to update issue
  // these first, so the cache misses overlap instead of queueing).
  void Prefetch(int32_t i) const {
    __builtin_prefetch(&leaf(i), 1);
    __builtin_prefetch(&block_best(i / kBlock), 1);
  }
  // The listed node with the highest score, lowest id on ties; -1 when none is listed.
  int32_t Best() const {
    if (n_ == 0) return -1;
    const int32_t b = leaves_ > 1 ? tree_[1].node : block_best(0).node;
    return b >= 0 && leaf(b).listed ? b : -1;
  }

 private:
  Leaf& leaf(int32_t i) {
    return base_[static_cast<size_t>(i / kBlock) * block_stride_ +
                 static_cast<size_t>(i % kBlock) * elem_stride_];
  }
  const Leaf& leaf(int32_t i) const {
    return base_[static_cast<size_t>(i / kBlock) * block_stride_ +
                 static_cast<size_t>(i % kBlock) * elem_stride_];
  }
  Entry& block_best(int32_t b) { return best_[static_cast<size_t>(b) * best_stride_]; }
  const Entry& block_best(int32_t b) const { return best_[static_cast<size_t>(b) * best_stride_]; }
  // Tree entry k: inner entries in tree_, the bottom level (k >= leaves_) the block bests.
  const Entry& entry(int32_t k) const { return k < leaves_ ? tree_[k] : block_best(k - leaves_); }
  void ResetTree(int32_t n);
  // Entry k := the better of entries 2k and 2k+1; the left one holds lower node ids.
  void Combine(int32_t k) {
    const Entry& a = entry(2 * k);
    const Entry& b = entry(2 * k + 1);
    tree_[k] = b.node >= 0 && (a.node < 0 || b.score > a.score) ? b : a;
  }
  // Best listed node of block `b`.
  Entry ScanBlock(int32_t b) const;
  void RepairPath(int32_t b);

  int32_t n_ = 0;
  int32_t leaves_ = 1;  // power of two >= number of blocks
  Leaf* base_ = nullptr;
  size_t block_stride_ = kBlock;  // leaves from one block's first leaf to the next block's
  size_t elem_stride_ = 1;        // leaves from one node's leaf to the next node's
  Entry* best_ = nullptr;         // the best of each block (leaves_ entries)
  size_t best_stride_ = 1;        // entries from one block's best to the next block's
  std::vector<Leaf> own_;         // the leaves when not in an arena
  std::vector<Entry> own_best_;   // the block bests when not in an arena
  std::vector<Entry> tree_;       // [1, leaves_) inner entries
};

// Leaves and block bests of up to `slots` BestIndexes over the same `n` nodes, laid out block by
// block: block b holds kBlock leaves of slot 0, then kBlock of slot 1, ...; the block bests of
// block b of all slots are adjacent too. On Linux the memory asks for huge pages (tens of MB on
// large clusters, touched at random: fewer TLB misses).
class LeafArena {
 public:
  // Allocates for `n` nodes and `slots` indexes (all previous slots' leaves are invalid).
  void Reset(int32_t n, int32_t slots);
  int32_t nodes() const { return n_; }
  int32_t slots() const { return slots_; }

 private:
  friend class BestIndex;
  struct Free {
    void operator()(BestIndex::Leaf* p) const;
  };
  int32_t n_ = 0;
  int32_t slots_ = 0;
  int32_t blocks_ = 0;  // block bests per slot: a power of two >= the blocks
  std::unique_ptr<BestIndex::Leaf[], Free> leaves_;
  std::vector<BestIndex::Entry> best_;
};

}  // namespace stoker::scheduler
