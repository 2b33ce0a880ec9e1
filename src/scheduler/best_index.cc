#include "scheduler/best_index.h"

#include <algorithm>
#include <cstdlib>
#include <new>

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace stoker::scheduler {

void BestIndex::ResetTree(int32_t n) {
  n_ = n;
  const int32_t blocks = (n + kBlock - 1) / kBlock;
  leaves_ = 1;
  while (leaves_ < blocks) leaves_ *= 2;
  tree_.assign(static_cast<size_t>(leaves_), Entry{});
}

void BestIndex::Reset(int32_t n) {
  ResetTree(n);
  own_.assign(static_cast<size_t>(n), Leaf{});
  base_ = own_.data();
  block_stride_ = kBlock;
  elem_stride_ = 1;
  own_best_.assign(static_cast<size_t>(leaves_), Entry{});
  best_ = own_best_.data();
  best_stride_ = 1;
}

void BestIndex::Reset(int32_t n, LeafArena& arena, int32_t slot) {
  if (n == 0 || arena.n_ != n || slot < 0 || slot >= arena.slots_) {
    Reset(n);  // nothing to share (or a caller's slip): own leaves
    return;
  }
  ResetTree(n);
  own_.clear();
  own_.shrink_to_fit();
  // Node-major within a block: one node's leaves of all slots are adjacent (a change marks
  // them all); a block's leaves of one slot are slots apart (read when its best falls).
  block_stride_ = static_cast<size_t>(kBlock) * static_cast<size_t>(arena.slots_);
  elem_stride_ = static_cast<size_t>(arena.slots_);
  base_ = arena.leaves_.get() + static_cast<size_t>(slot);
  for (int32_t i = 0; i < n; ++i) leaf(i) = Leaf{};
  own_best_.clear();
  own_best_.shrink_to_fit();
  best_ = arena.best_.data() + slot;
  best_stride_ = static_cast<size_t>(arena.slots_);
  for (int32_t b = 0; b < leaves_; ++b) block_best(b) = Entry{};
}

BestIndex::Entry BestIndex::ScanBlock(int32_t b) const {
  const int32_t begin = b * kBlock;
  const int32_t end = std::min(n_, begin + kBlock);
  Entry best;
  for (int32_t i = begin; i < end; ++i) {
    const Leaf& l = leaf(i);
    if (l.listed && (best.node < 0 || l.score > best.score)) best = {l.score, i};
  }
  return best;
}

void BestIndex::RepairPath(int32_t b) {
  // Above an entry that comes out as it was, nothing changes either.
  for (int32_t k = (leaves_ + b) / 2; k >= 1; k /= 2) {
    const Entry before = tree_[k];
    Combine(k);
    if (tree_[k].node == before.node && tree_[k].score == before.score) break;
  }
}

void BestIndex::Update(int32_t i) {
  const int32_t b = i / kBlock;
  Entry& best = block_best(b);
  const Leaf& l = leaf(i);
  if (best.node == i) {
    if (l.listed && l.score >= best.score) {
      best.score = l.score;  // the best rose: still the best
    } else {
      best = ScanBlock(b);  // the best fell: another may be better now
    }
  } else if (l.listed &&
             (best.node < 0 || l.score > best.score || (l.score == best.score && i < best.node))) {
    best = {l.score, i};
  } else {
    return;  // neither was nor is the block's best: nothing above it changes
  }
  RepairPath(b);
}

void BestIndex::Build() {
  const int32_t blocks = (n_ + kBlock - 1) / kBlock;
  for (int32_t b = 0; b < blocks; ++b) block_best(b) = ScanBlock(b);
  for (int32_t k = leaves_ - 1; k >= 1; --k) Combine(k);
}

void LeafArena::Free::operator()(BestIndex::Leaf* p) const { std::free(p); }

void LeafArena::Reset(int32_t n, int32_t slots) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t blocks = (static_cast<size_t>(n) + BestIndex::kBlock - 1) / BestIndex::kBlock;
  const size_t count = blocks * BestIndex::kBlock * static_cast<size_t>(slots);
  const size_t bytes = (count * sizeof(BestIndex::Leaf) + kHugePage - 1) / kHugePage * kHugePage;
  leaves_.reset();
  n_ = 0;
  slots_ = 0;
  blocks_ = 1;
  while (static_cast<size_t>(blocks_) < blocks) blocks_ *= 2;
  best_.assign(static_cast<size_t>(blocks_) * static_cast<size_t>(slots), BestIndex::Entry{});
  if (count == 0) return;
  void* p = std::aligned_alloc(kHugePage, bytes);
  if (p == nullptr) throw std::bad_alloc();
#ifdef __linux__
  (void)madvise(p, bytes, MADV_HUGEPAGE);  // a hint: without it the arena still works
#endif
  auto* leaves = static_cast<BestIndex::Leaf*>(p);
  std::uninitialized_value_construct_n(leaves, count);
  leaves_.reset(leaves);
  n_ = n;
  slots_ = slots;
}

}  // namespace stoker::scheduler
