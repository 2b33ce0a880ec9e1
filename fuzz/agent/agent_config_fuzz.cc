// libFuzzer over the agent's command-line value parsers (listen address, durations): any input
// must yield a value or an InvalidArgument, never a crash, hang or sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/agent_config.h"
#include "core/duration.h"
#include "telemetry/attribution.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto addr = stoker::agent::ParseListenAddress(text);
  if (addr.ok() && addr->host.empty()) __builtin_trap();
  auto d = stoker::ParseDuration(text);
  if (d.ok() && d->count() < 0) __builtin_trap();
  // The same bytes as a /proc/<pid>/cgroup file and an environment block.
  auto cg = stoker::telemetry::ParseCgroupFile(text);
  if (cg.job.known() && cg.job.id.empty()) __builtin_trap();
  (void)stoker::telemetry::FindEnvVar(text, "SLURM_JOB_ID");
  return 0;
}
