#pragma once
// The explicit list of placement policies (no static self-registration: the list below is the
// whole truth and the linker cannot drop one silently).

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "scheduler/policy.h"

namespace stoker::scheduler {

// The default policy's name ("stoker").
inline constexpr std::string_view kDefaultPolicyName = "stoker";

// NotFound (listing the valid names) for an unknown policy.
Result<std::unique_ptr<PlacementPolicy>> CreatePlacementPolicy(std::string_view name,
                                                               const PolicyConfig& config);
// All names, baselines first, then fgd-online, weighted and stoker.
std::vector<std::string> PlacementPolicyNames();

}  // namespace stoker::scheduler
