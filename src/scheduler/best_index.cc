#include "scheduler/best_index.h"

#include <algorithm>

namespace stoker::scheduler {

void BestIndex::Reset(int32_t n) {
  n_ = n;
  const int32_t blocks = (n + kBlock - 1) / kBlock;
  leaves_ = 1;
  while (leaves_ < blocks) leaves_ *= 2;
  score_.assign(n, 0);
  listed_.assign(n, 0);
  tree_.assign(2 * static_cast<size_t>(leaves_), -1);
  tree_score_.assign(2 * static_cast<size_t>(leaves_), 0);
}

int32_t BestIndex::ScanBlock(int32_t b) const {
  const int32_t begin = b * kBlock;
  const int32_t end = std::min(n_, begin + kBlock);
  int32_t best = -1;
  for (int32_t i = begin; i < end; ++i) {
    if (listed_[i] && (best < 0 || score_[i] > score_[best])) best = i;
  }
  return best;
}

void BestIndex::RepairPath(int32_t b) {
  for (int32_t k = (leaves_ + b) / 2; k >= 1; k /= 2) Combine(k);
}

void BestIndex::Update(int32_t i) {
  const int32_t b = i / kBlock;
  const int32_t block_best = tree_[leaves_ + b];
  if (block_best == i) {
    SetBlockBest(b, ScanBlock(b));  // the best changed: it may have fallen below another
  } else if (listed_[i] && (block_best < 0 || score_[i] > score_[block_best] ||
                            (score_[i] == score_[block_best] && i < block_best))) {
    SetBlockBest(b, i);
  } else {
    return;  // neither was nor is the block's best: nothing above it changes
  }
  RepairPath(b);
}

void BestIndex::Build() {
  const int32_t blocks = (n_ + kBlock - 1) / kBlock;
  for (int32_t b = 0; b < blocks; ++b) SetBlockBest(b, ScanBlock(b));
  for (int32_t k = leaves_ - 1; k >= 1; --k) Combine(k);
}

}  // namespace stoker::scheduler
