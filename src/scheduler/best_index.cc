#include "scheduler/best_index.h"

#include <algorithm>

namespace stoker::scheduler {

void BestIndex::Reset(int32_t n) {
  n_ = n;
  const int32_t blocks = (n + kBlock - 1) / kBlock;
  leaves_ = 1;
  while (leaves_ < blocks) leaves_ *= 2;
  leaf_.assign(n, Leaf{});
  tree_.assign(2 * static_cast<size_t>(leaves_), Entry{});
}

BestIndex::Entry BestIndex::ScanBlock(int32_t b) const {
  const int32_t begin = b * kBlock;
  const int32_t end = std::min(n_, begin + kBlock);
  Entry best;
  for (int32_t i = begin; i < end; ++i) {
    if (leaf_[i].listed && (best.node < 0 || leaf_[i].score > best.score)) {
      best = {leaf_[i].score, i};
    }
  }
  return best;
}

void BestIndex::RepairPath(int32_t b) {
  for (int32_t k = (leaves_ + b) / 2; k >= 1; k /= 2) Combine(k);
}

void BestIndex::Update(int32_t i) {
  const int32_t b = i / kBlock;
  Entry& block_best = tree_[leaves_ + b];
  const Leaf& leaf = leaf_[i];
  if (block_best.node == i) {
    if (leaf.listed && leaf.score >= block_best.score) {
      block_best.score = leaf.score;  // the best rose: still the best
    } else {
      block_best = ScanBlock(b);  // the best fell: another may be better now
    }
  } else if (leaf.listed && (block_best.node < 0 || leaf.score > block_best.score ||
                             (leaf.score == block_best.score && i < block_best.node))) {
    block_best = {leaf.score, i};
  } else {
    return;  // neither was nor is the block's best: nothing above it changes
  }
  RepairPath(b);
}

void BestIndex::Build() {
  const int32_t blocks = (n_ + kBlock - 1) / kBlock;
  for (int32_t b = 0; b < blocks; ++b) tree_[leaves_ + b] = ScanBlock(b);
  for (int32_t k = leaves_ - 1; k >= 1; --k) Combine(k);
}

}  // namespace stoker::scheduler
