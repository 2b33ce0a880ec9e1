#pragma once
// Process facts for `--simulate`: simulated processes do not exist in /proc, so their cgroup
// path, user and name come from the scenario, and the Attributor parses them exactly as it
// parses real /proc/<pid>/cgroup content.

#include <cstdint>
#include <unordered_map>

#include "fakenvml/scenario.h"
#include "telemetry/attribution.h"

namespace stoker::agent {

class ScenarioProcessInfo final : public telemetry::ProcessInfo {
 public:
  explicit ScenarioProcessInfo(const fakenvml::Scenario& scenario);
  Result<telemetry::ProcessFacts> Lookup(uint32_t pid) const override;

 private:
  std::unordered_map<uint32_t, telemetry::ProcessFacts> facts_;
};

}  // namespace stoker::agent
