#pragma once
// The published baselines of the FGD paper (ATC'23), reproduced from the semantics of its
// simulator (integer 0..100 node scores, random choice among equal scores), and the weighted
// policy. Exact definitions are in docs/scheduling.md.

#include <memory>

#include "scheduler/policy.h"

namespace stoker::scheduler {

std::unique_ptr<PlacementPolicy> MakeRandomPolicy(const PolicyConfig& config);
std::unique_ptr<PlacementPolicy> MakeDotProdPolicy(const PolicyConfig& config);
std::unique_ptr<PlacementPolicy> MakeClusteringPolicy(const PolicyConfig& config);
std::unique_ptr<PlacementPolicy> MakePackingPolicy(const PolicyConfig& config);
std::unique_ptr<PlacementPolicy> MakeBestFitPolicy(const PolicyConfig& config);
std::unique_ptr<PlacementPolicy> MakeWeightedPolicy(const PolicyConfig& config);

}  // namespace stoker::scheduler
