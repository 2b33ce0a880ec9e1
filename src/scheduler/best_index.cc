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
}

void BestIndex::Reset(int32_t n) {
  ResetTree(n);
  own_key_.assign(static_cast<size_t>(n), 0);
  own_meta_.assign(static_cast<size_t>(n), Meta{});
  own_best_.assign(static_cast<size_t>(leaves_), BlockBest{});
  own_tree_.assign(static_cast<size_t>(leaves_), Entry{});
  tree_ = own_tree_.data();
  key_ = own_key_.data();
  meta_ = own_meta_.data();
  block_stride_ = kBlock;
  best_ = own_best_.data();
  best_stride_ = 1;
}

void BestIndex::Reset(int32_t n, LeafArena& arena, int32_t slot) {
  if (n == 0 || arena.n_ != n || slot < 0 || slot >= arena.slots_) {
    Reset(n);  // nothing to share (or a caller's slip): own storage
    return;
  }
  ResetTree(n);
  own_key_ = {};
  own_meta_ = {};
  own_best_ = {};
  own_tree_ = {};
  block_stride_ = static_cast<size_t>(kBlock) * static_cast<size_t>(arena.slots_);
  key_ = arena.keys_.get() + static_cast<size_t>(slot) * kBlock;
  meta_ = arena.metas_.get() + static_cast<size_t>(slot) * kBlock;
  best_ = arena.best_.data() + slot;
  tree_ = arena.tree_.data() + slot;
  best_stride_ = static_cast<size_t>(arena.slots_);
  for (int32_t i = 0; i < n; ++i) {
    key(i) = 0;
    meta(i) = Meta{};
  }
  for (int32_t b = 0; b < leaves_; ++b) {
    block_best(b) = BlockBest{};
    tree(b) = Entry{};
  }
}

void BestIndex::ScanBlock(int32_t b) {
  BlockBest& best = block_best(b);
  const int64_t* k = &key(b * kBlock);  // a block's scores are contiguous
  best.node = -1;
  best.score = 0;
  for (uint32_t rest = best.listed; rest != 0; rest &= rest - 1) {
    const int j = __builtin_ctz(rest);  // ascending: the first of equal scores is kept
    if (best.node < 0 || k[j] > best.score) {
      best.score = k[j];
      best.node = b * kBlock + j;
    }
  }
}

void BestIndex::RepairPath(int32_t b) {
  // Above an entry that comes out as it was, nothing changes either.
  for (int32_t k = (leaves_ + b) / 2; k >= 1; k /= 2) {
    const Entry before = tree(k);
    Combine(k);
    if (tree(k).node == before.node && tree(k).score == before.score) break;
  }
}

void BestIndex::Update(int32_t i) {
  const int32_t b = i / kBlock;
  BlockBest& best = block_best(b);
  const bool is_listed = (best.listed & Bit(i)) != 0;
  const int64_t s = key(i);
  if (best.node == i) {
    if (is_listed && s >= best.score) {
      best.score = s;  // the best rose: still the best
    } else {
      ScanBlock(b);  // the best fell: another may be better now
    }
  } else if (is_listed && (best.node < 0 || s > best.score || (s == best.score && i < best.node))) {
    best.score = s;
    best.node = i;
  } else {
    return;  // neither was nor is the block's best: nothing above it changes
  }
  RepairPath(b);
}

void BestIndex::Build() {
  const int32_t blocks = (n_ + kBlock - 1) / kBlock;
  for (int32_t b = 0; b < blocks; ++b) ScanBlock(b);
  for (int32_t k = leaves_ - 1; k >= 1; --k) Combine(k);
}

void LeafArena::Free::operator()(void* p) const { std::free(p); }

namespace {

// `bytes` of storage; from one huge page up, rounded up to whole huge pages and asked to be
// backed by them (a hint), below that cache-line aligned (small clusters: no 2 MB minimum).
void* HugeAlloc(size_t bytes) {
  constexpr size_t kHugePage = size_t{2} << 20;
  constexpr size_t kLine = 64;
  const bool huge = bytes >= kHugePage;
  const size_t align = huge ? kHugePage : kLine;
  const size_t rounded = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (p == nullptr) throw std::bad_alloc();
#ifdef __linux__
  if (huge) (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
  return p;
}

}  // namespace

void LeafArena::Reset(int32_t n, int32_t slots) {
  keys_.reset();
  metas_.reset();
  best_.clear();
  tree_.clear();
  n_ = 0;
  slots_ = 0;
  const size_t blocks = (static_cast<size_t>(n) + BestIndex::kBlock - 1) / BestIndex::kBlock;
  const size_t count = blocks * BestIndex::kBlock * static_cast<size_t>(slots);
  if (count == 0) return;
  size_t tree_blocks = 1;
  while (tree_blocks < blocks) tree_blocks *= 2;
  best_.assign(tree_blocks * static_cast<size_t>(slots), BestIndex::BlockBest{});
  tree_.assign(tree_blocks * static_cast<size_t>(slots), BestIndex::Entry{});
  auto* keys = static_cast<int64_t*>(HugeAlloc(count * sizeof(int64_t)));
  std::uninitialized_value_construct_n(keys, count);
  keys_.reset(keys);
  auto* metas = static_cast<BestIndex::Meta*>(HugeAlloc(count * sizeof(BestIndex::Meta)));
  std::uninitialized_value_construct_n(metas, count);
  metas_.reset(metas);
  n_ = n;
  slots_ = slots;
}

}  // namespace stoker::scheduler
