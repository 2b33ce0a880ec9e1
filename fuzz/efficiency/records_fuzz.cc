// libFuzzer target: the JSON-lines record reader and the report built from what it accepts.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "efficiency/records.h"
#include "efficiency/report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  auto recs = stoker::efficiency::ReadRecordsJsonl(in, "fuzz");
  if (recs.ok() && recs->samples.size() < 5000) {
    auto cfg = stoker::efficiency::LoadConfigYaml("");
    (void)stoker::efficiency::RenderJson(stoker::efficiency::BuildReport(*recs, *cfg));
  }
  return 0;
}
