#pragma once
// Stoker's default placement policy ("stoker"). See docs/scheduling.md for the design.

#include <memory>

#include "scheduler/policy.h"

namespace stoker::scheduler {

std::unique_ptr<PlacementPolicy> MakeStokerPolicy(const PolicyConfig& config);

}  // namespace stoker::scheduler
