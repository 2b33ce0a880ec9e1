#pragma once
// Bytes embedded into the binary at build time (see CMakeLists.txt): the full fake NVML library
// and the built-in scenarios from scenarios/*.yaml.

#include <string_view>
#include <vector>

namespace stoker::fakenvml {

std::string_view EmbeddedFakeNvmlLibrary();

struct EmbeddedScenario {
  std::string_view name;  // file name without .yaml
  std::string_view text;
};
const std::vector<EmbeddedScenario>& EmbeddedScenarios();

}  // namespace stoker::fakenvml
