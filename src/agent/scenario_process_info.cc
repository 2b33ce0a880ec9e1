#include "agent/scenario_process_info.h"

namespace stoker::agent {

ScenarioProcessInfo::ScenarioProcessInfo(const fakenvml::Scenario& scenario) {
  for (const fakenvml::ProcessSpec& p : scenario.processes) {
    telemetry::ProcessFacts f;
    f.name = p.name;
    // One cgroup v2 line, the form /proc/<pid>/cgroup has on current systems.
    if (!p.cgroup.empty()) f.cgroup = "0::" + p.cgroup + "\n";
    f.uid = p.uid;
    f.user = p.user;
    facts_[p.pid] = std::move(f);
  }
}

Result<telemetry::ProcessFacts> ScenarioProcessInfo::Lookup(uint32_t pid) const {
  auto it = facts_.find(pid);
  if (it == facts_.end()) return NotFound("pid " + std::to_string(pid) + " is not in the scenario");
  return it->second;
}

}  // namespace stoker::agent
