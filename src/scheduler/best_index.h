#pragma once
// BestIndex: per-node scores with the best node always at hand, for the policies' score index.
//
// Two levels: nodes are grouped in blocks of kBlock consecutive ids, each block remembers its
// best node, and a tournament tree over the blocks keeps the overall best at the root (each
// inner entry is the better child: higher score, on equal scores the lower node id, which is
// always the left child). Best() is the node a full scan would pick: the highest score, lowest
// id among ties, over the listed nodes. A change to a node that neither was nor becomes its
// block's best costs O(1); otherwise the block is rescanned and the tree repaired up to the
// first entry that comes out unchanged; nothing allocates. Build() after many changes costs one
// pass.
//
// The storage of many indexes over the same nodes (a policy keeps one per request shape, and
// every change of a node marks it in all of them) may be one LeafArena: per block, the scores
// of one index are contiguous (a rescan reads kBlock x 8 bytes), the blocks' listed bits sit in
// their best entry, and one node's data of all indexes lies in one small region.

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

  BestIndex() = default;
  // Holds pointers into its own storage or an arena: a copy would share them. A move keeps
  // them valid (a vector's buffer moves with it).
  BestIndex(const BestIndex&) = delete;
  BestIndex& operator=(const BestIndex&) = delete;
  BestIndex(BestIndex&&) = default;
  BestIndex& operator=(BestIndex&&) = default;

  // Per node, beside the score: the caller's choice of GPUs on the node and a byte for it.
  struct Meta {
    std::array<uint8_t, kMaxGpusPerNode> gpus{};
    uint8_t tag = 0;
  };
  // A block's best node and which of its nodes are listed (bit j: node kBlock * block + j).
  struct BlockBest {
    int64_t score = 0;
    int32_t node = -1;  // -1: none
    uint32_t listed = 0;
  };

  // `n` nodes, none listed, all tags 0; the storage is the index's own.
  void Reset(int32_t n);
  // The same with the storage in `arena`'s slot `slot` (an arena for another node count: own).
  void Reset(int32_t n, LeafArena& arena, int32_t slot);
  int32_t size() const { return n_; }

  // Lists node `i` with `score` (or changes its score); Update() then repairs the index.
  void SetLeaf(int32_t i, int64_t score) {
    key(i) = score;
    block_best(i / kBlock).listed |= Bit(i);
  }
  // Unlists node `i` (its score is kept, so Relist() can bring it back).
  void UnsetLeaf(int32_t i) { block_best(i / kBlock).listed &= ~Bit(i); }
  void RelistLeaf(int32_t i) { block_best(i / kBlock).listed |= Bit(i); }
  // Repairs the index after a change of node `i`. Call it after each single change (Build()
  // after several): it relies on every other node being as the index last saw it.
  void Update(int32_t i);
  // Repairs the whole index (after many leaf changes: O(nodes), cheaper than one Update each).
  void Build();

  bool listed(int32_t i) const { return (block_best(i / kBlock).listed & Bit(i)) != 0; }
  int64_t score(int32_t i) const { return key(i); }
  // A byte per node for the caller; the index ignores it.
  uint8_t tag(int32_t i) const { return meta(i).tag; }
  void set_tag(int32_t i, uint8_t t) { meta(i).tag = t; }
  // The caller's GPUs for node `i`.
  uint8_t* gpus(int32_t i) { return meta(i).gpus.data(); }
  // The listed node with the highest score, lowest id on ties; -1 when none is listed.
  int32_t Best() const {
    if (n_ == 0) return -1;
    const int32_t b = leaves_ > 1 ? tree(1).node : block_best(0).node;
    return b >= 0 && listed(b) ? b : -1;
  }

 private:
  friend class LeafArena;
  struct Entry {
    int64_t score = 0;
    int32_t node = -1;  // -1: none
  };
  static uint32_t Bit(int32_t i) { return uint32_t{1} << (i % kBlock); }
  size_t Offset(int32_t i) const {
    return static_cast<size_t>(i / kBlock) * block_stride_ + static_cast<size_t>(i % kBlock);
  }
  int64_t& key(int32_t i) { return key_[Offset(i)]; }
  int64_t key(int32_t i) const { return key_[Offset(i)]; }
  Meta& meta(int32_t i) { return meta_[Offset(i)]; }
  const Meta& meta(int32_t i) const { return meta_[Offset(i)]; }
  BlockBest& block_best(int32_t b) { return best_[static_cast<size_t>(b) * best_stride_]; }
  const BlockBest& block_best(int32_t b) const {
    return best_[static_cast<size_t>(b) * best_stride_];
  }
  Entry& tree(int32_t k) { return tree_[static_cast<size_t>(k) * best_stride_]; }
  const Entry& tree(int32_t k) const { return tree_[static_cast<size_t>(k) * best_stride_]; }
  // Tree entry k: inner entries in tree(), the bottom level (k >= leaves_) the block bests.
  Entry entry(int32_t k) const {
    if (k < leaves_) return tree(k);
    const BlockBest& b = block_best(k - leaves_);
    return {b.score, b.node};
  }
  void ResetTree(int32_t n);
  // Entry k := the better of entries 2k and 2k+1; the left one holds lower node ids.
  void Combine(int32_t k) {
    const Entry a = entry(2 * k);
    const Entry b = entry(2 * k + 1);
    tree(k) = b.node >= 0 && (a.node < 0 || b.score > a.score) ? b : a;
  }
  // Sets block `b`'s best to its best listed node.
  void ScanBlock(int32_t b);
  void RepairPath(int32_t b);

  int32_t n_ = 0;
  int32_t leaves_ = 1;  // power of two >= number of blocks
  int64_t* key_ = nullptr;
  Meta* meta_ = nullptr;
  size_t block_stride_ = kBlock;  // keys (and metas) from one block's first to the next block's
  BlockBest* best_ = nullptr;     // leaves_ entries
  Entry* tree_ = nullptr;         // [1, leaves_) inner entries
  size_t best_stride_ = 1;        // from one block best (or tree entry) to the next
  std::vector<int64_t> own_key_;  // the storage when not in an arena
  std::vector<Meta> own_meta_;
  std::vector<BlockBest> own_best_;
  std::vector<Entry> own_tree_;
};

// Storage of up to `slots` BestIndexes over the same `n` nodes, block by block: block b holds
// kBlock scores of slot 0, then kBlock of slot 1, ... (and likewise the metas and, one per slot,
// the block bests). On Linux the scores and metas ask for huge pages (tens of MB on large
// clusters, touched at random: fewer TLB misses).
class LeafArena {
 public:
  // Allocates for `n` nodes and `slots` indexes (all previous slots' storage is invalid).
  void Reset(int32_t n, int32_t slots);
  int32_t nodes() const { return n_; }
  int32_t slots() const { return slots_; }

 private:
  friend class BestIndex;
  struct Free {
    void operator()(void* p) const;
  };
  int32_t n_ = 0;
  int32_t slots_ = 0;
  std::unique_ptr<int64_t[], Free> keys_;
  std::unique_ptr<BestIndex::Meta[], Free> metas_;
  // Per block (a power of two of them), per slot; likewise the inner tree entries: one node's
  // path through the tree of every slot is a run of adjacent entries per level.
  std::vector<BestIndex::BlockBest> best_;
  std::vector<BestIndex::Entry> tree_;
};

}  // namespace stoker::scheduler
