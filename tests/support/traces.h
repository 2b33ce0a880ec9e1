#pragma once
// Where the public traces live, for tests and benchmarks (docs/traces.md). Each file is looked
// up, in this order, in:
//   1. $STOKER_TRACES (a folder laid out like the published sets: openb/, itp/, philly/, ...),
//   2. ../shared/traces beside the checkout (our machines and CI),
//   3. data/traces inside the checkout (where scripts/fetch-traces.sh puts them).
// scripts/trace-path.sh implements the same order for the scripts and the README's examples.
//
// Tests ask for a trace with STOKER_TRACE_OR_SKIP (support/trace_test.h).

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace stoker::testing {

inline std::vector<std::string> TraceDirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("STOKER_TRACES"); env != nullptr && *env != '\0') {
    dirs.emplace_back(env);
  }
#ifdef STOKER_SHARED_DIR  // CMake's STOKER_SHARED_DIR, ../shared beside the checkout by default
  dirs.push_back(std::string(STOKER_SHARED_DIR) + "/traces");
#endif
#ifdef STOKER_SOURCE_DIR
  dirs.push_back(std::string(STOKER_SOURCE_DIR) + "/data/traces");
#endif
  return dirs;
}

// The path of `relative` (e.g. "openb/openb_pod_list_default.csv") in the first folder that has
// it; empty when none does.
inline std::string TracePath(const std::string& relative) {
  for (const std::string& dir : TraceDirs()) {
    const std::string path = dir + "/" + relative;
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) return path;
  }
  return {};
}

inline bool TracesRequired() {
  const char* v = std::getenv("STOKER_REQUIRE_TRACES");
  return v != nullptr && std::string(v) == "1";
}

inline std::string MissingTraceMessage(const std::string& relative) {
  std::string where;
  for (const std::string& dir : TraceDirs()) where += "\n  " + dir;
  return "trace " + relative + " not found in:" + where +
         "\nGet the public traces with scripts/fetch-traces.sh (into data/traces) or point "
         "STOKER_TRACES at a copy; see docs/traces.md.";
}

}  // namespace stoker::testing
