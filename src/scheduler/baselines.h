#pragma once
// The published baselines of the FGD paper (ATC'23) and the weighted policy. Definitions and the
// exact normalisation are in docs/scheduling.md.

#include <memory>

#include "scheduler/policy.h"

namespace stoker::scheduler {

std::unique_ptr<PlacementPolicy> MakeRandomPolicy(const PolicyConfig& config);
std::unique_ptr<PlacementPolicy> MakeBestFitPolicy(const PolicyConfig& config);

}  // namespace stoker::scheduler
