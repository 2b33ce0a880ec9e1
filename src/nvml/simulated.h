#pragma once
// `--simulate`: the fake NVML library (src/fakenvml) embedded in the binary, loaded through the
// same dlopen path as the real driver, playing a scenario (built-in name or YAML/JSON file).

#include <memory>
#include <string>
#include <vector>

#include "core/gpu_source.h"
#include "core/status.h"
#include "fakenvml/scenario.h"

namespace stoker::nvml {

// Built-in scenarios for --simulate: name + one-line description.
struct BuiltinScenario {
  std::string name;
  std::string description;
};
std::vector<BuiltinScenario> BuiltinScenarios();

// `name_or_path` is a built-in name or a scenario file (YAML or JSON). Loads the fake NVML
// library through the same dlopen path (OpenNvmlGpuSource) and tells it which scenario to play.
// The returned source reports simulated() == true and Describe() contains "simulated".
// The fake library is the embedded copy unless STOKER_FAKE_NVML_LIB names another file.
Result<std::unique_ptr<GpuSource>> OpenSimulatedGpuSource(const std::string& name_or_path);

// The parsed scenario behind `name_or_path` (same resolution as OpenSimulatedGpuSource), e.g. to
// attribute simulated processes to jobs from their scenario cgroup paths.
Result<fakenvml::Scenario> LoadSimulatedScenario(const std::string& name_or_path);

// Environment variable that overrides the embedded fake library path.
inline constexpr const char* kFakeNvmlLibEnv = "STOKER_FAKE_NVML_LIB";

}  // namespace stoker::nvml
