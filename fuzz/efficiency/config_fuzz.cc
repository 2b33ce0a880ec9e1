// libFuzzer target: the efficiency config loader (YAML, alert rules) must reject bad input with
// a Status, never crash. Seeds: docs/efficiency.md examples, deploy/ files.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "efficiency/alerts.h"
#include "efficiency/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto cfg = stoker::efficiency::LoadConfigYaml(text, "fuzz");
  if (cfg.ok()) {
    // A loaded config must build an engine without tripping over its own rules.
    stoker::efficiency::AlertEngine engine(cfg->alerting, cfg->zones.metric);
    (void)engine.Evaluate(stoker::WallTime{});
  }
  return 0;
}
