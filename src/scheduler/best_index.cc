#include "scheduler/best_index.h"

namespace stoker::scheduler {

void BestIndex::Reset(int32_t n) {
  n_ = n;
  leaves_ = 1;
  while (leaves_ < n) leaves_ *= 2;
  score_.assign(n, 0);
  listed_.assign(n, 0);
  tree_.assign(2 * static_cast<size_t>(leaves_), -1);
  for (int32_t i = 0; i < n; ++i) tree_[leaves_ + i] = i;
  Build();
}

void BestIndex::Update(int32_t i) {
  for (int32_t k = (leaves_ + i) / 2; k >= 1; k /= 2)
    tree_[k] = Better(tree_[2 * k], tree_[2 * k + 1]);
}

void BestIndex::Build() {
  for (int32_t k = leaves_ - 1; k >= 1; --k) tree_[k] = Better(tree_[2 * k], tree_[2 * k + 1]);
}

}  // namespace stoker::scheduler
