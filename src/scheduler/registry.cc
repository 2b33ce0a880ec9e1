#include "scheduler/registry.h"

#include "scheduler/baselines.h"
#include "scheduler/fgd.h"
#include "scheduler/stoker_policy.h"

namespace stoker::scheduler {
namespace {

struct Entry {
  std::string_view name;
  std::unique_ptr<PlacementPolicy> (*make)(const PolicyConfig&);
};

// The whole list. Order: published baselines, then Stoker's.
constexpr Entry kPolicies[] = {
    {"random", &MakeRandomPolicy},         {"dotprod", &MakeDotProdPolicy},
    {"clustering", &MakeClusteringPolicy}, {"packing", &MakePackingPolicy},
    {"bestfit", &MakeBestFitPolicy},       {"fgd", &MakeFgdPolicy},
    {"fgd-online", &MakeFgdOnlinePolicy},  {"weighted", &MakeWeightedPolicy},
    {"stoker", &MakeStokerPolicy},
};

}  // namespace

Result<std::unique_ptr<PlacementPolicy>> CreatePlacementPolicy(std::string_view name,
                                                               const PolicyConfig& config) {
  for (const Entry& e : kPolicies) {
    if (e.name == name) return e.make(config);
  }
  std::string valid;
  for (const Entry& e : kPolicies) {
    if (!valid.empty()) valid += ", ";
    valid += e.name;
  }
  return NotFound("unknown placement policy '" + std::string(name) + "' (valid: " + valid + ")");
}

std::vector<std::string> PlacementPolicyNames() {
  std::vector<std::string> names;
  for (const Entry& e : kPolicies) names.emplace_back(e.name);
  return names;
}

}  // namespace stoker::scheduler
