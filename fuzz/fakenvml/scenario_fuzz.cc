// Fuzzes ParseScenario: any input must yield a Scenario or an error Status, never a crash, a
// sanitizer report, or an exception escaping (yaml-cpp throws; the parser converts at the edge).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fakenvml/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  stoker::Result<stoker::fakenvml::Scenario> sc =
      stoker::fakenvml::ParseScenario(text, "fuzz.yaml");
  if (!sc.ok()) {
    // Every error names the source.
    if (sc.status().message().find("fuzz.yaml") == std::string::npos) __builtin_trap();
    return 0;
  }
  // A valid scenario must be evaluable everywhere the fake library evaluates it.
  double sink = 0;
  for (const auto& g : sc->gpus) {
    for (const auto* tl : {&g.util, &g.power_w, &g.mem_used_mib, &g.tensor_active}) {
      sink += tl->At(0) + tl->At(1e6) + tl->Integral(0, 600) + tl->Max();
    }
  }
  for (const auto& p : sc->processes) sink += p.used_memory_mib.At(p.start);
  if (std::isnan(sink)) __builtin_trap();
  return 0;
}
