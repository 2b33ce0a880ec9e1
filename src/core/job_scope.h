#pragma once
// The Stoker job cgroup convention, defined once so the runner (which launches jobs) and the
// agent's attribution (which maps GPU processes back to jobs) agree:
//   every process of Stoker job <id> runs in a systemd scope or cgroup directory named
//   "stoker-job-<id>.scope" (anywhere in the hierarchy, e.g.
//   /system.slice/stoker.slice/stoker-job-42.scope), and has STOKER_JOB_ID=<id> in its
//   environment. Job ids use [A-Za-z0-9_.-] only.

#include <string>
#include <string_view>

namespace stoker {

inline constexpr std::string_view kStokerJobScopePrefix = "stoker-job-";
inline constexpr std::string_view kStokerJobScopeSuffix = ".scope";
inline constexpr std::string_view kStokerJobEnvVar = "STOKER_JOB_ID";

// True when `job_id` may be used in the scope name (non-empty, [A-Za-z0-9_.-], ≤ 128 chars).
inline bool IsValidStokerJobId(std::string_view job_id) {
  if (job_id.empty() || job_id.size() > 128 || job_id == "." || job_id == "..") return false;
  for (char c : job_id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// "stoker-job-42.scope": the cgroup leaf name a launcher must use for job `id`.
inline std::string StokerJobScopeName(std::string_view job_id) {
  std::string s(kStokerJobScopePrefix);
  s.append(job_id);
  s.append(kStokerJobScopeSuffix);
  return s;
}

}  // namespace stoker
