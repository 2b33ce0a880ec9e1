#pragma once
// Idle reclaim (after Princeton's cancel_zero_gpu_jobs, reference/telemetry.md 4.2): a job whose
// GPUs show no activity in every sample of a window is warned, then requeued or cancelled.
// Per (job, GPU) the reclaimer keeps the time idleness began, so a sample costs O(1); a gap in
// the samples restarts the clock because missing data is no evidence of idleness.

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/enum_table.h"
#include "efficiency/config.h"
#include "efficiency/jobs.h"

namespace stoker::efficiency {

enum class ReclaimAction : uint8_t { kWarn, kRequeue, kCancel, kExempt };
inline constexpr EnumTable<ReclaimAction, 4> kReclaimActionNames{
    "reclaim action",
    {{{ReclaimAction::kWarn, "warn"},
      {ReclaimAction::kRequeue, "requeue"},
      {ReclaimAction::kCancel, "cancel"},
      {ReclaimAction::kExempt, "exempt"}}}};
constexpr const auto& NamesOf(ReclaimAction) { return kReclaimActionNames; }
inline const char* ReclaimActionName(ReclaimAction v) { return kReclaimActionNames.CName(v); }

// The evidence behind an action: what was measured, over which window, against which policy.
struct ReclaimEvidence {
  WallTime window_start{};
  WallTime window_end{};
  int64_t samples = 0;             // samples in the idle window, over all the job's GPUs
  int64_t max_activity_milli = 0;  // highest reading in that window (<= threshold by definition)
  int gpus = 0;
  int idle_gpus = 0;
  int64_t idle_threshold_milli = 0;
  Duration warn_after{0};
  Duration act_after{0};
};

struct ReclaimRecord {
  WallTime at{};
  std::string job;
  std::string user;
  ReclaimAction action = ReclaimAction::kWarn;
  bool dry_run = false;
  Status result;  // what ReclaimActions returned
  std::string reason;
  ReclaimEvidence evidence;
};

// Not thread-safe: one owner serialises calls.
class IdleReclaimer {
 public:
  IdleReclaimer(IdleReclaimPolicy policy, const JobDirectory& jobs, ReclaimActions& actions)
      : policy_(std::move(policy)), jobs_(jobs), actions_(actions) {}

  // One reading of one of the job's GPUs (activity in milli-percent).
  void Observe(const std::string& job, const std::string& gpu, WallTime t, int64_t activity_milli);

  // Checks every running job and acts; returns the records made in this call (all are also
  // kept in log()). Warnings are issued once per idle period; acting requires a prior warning.
  std::vector<ReclaimRecord> Evaluate(WallTime now);

  const std::vector<ReclaimRecord>& log() const { return log_; }
  // How long the job has been idle by the policy's definition (0 when active or unknown).
  Duration IdleFor(const JobInfo& job, WallTime now) const;
  void Forget(const std::string& job) { state_.erase(job); }

 private:
  struct GpuIdle {
    WallTime idle_since{};  // first sample of the current idle run
    WallTime last_sample{};
    int64_t samples = 0;  // samples in the current idle run
    int64_t max_milli = 0;
    bool idle = false;
  };
  struct JobState {
    std::map<std::string, GpuIdle> gpus;
    bool warned = false;
    bool acted = false;
  };
  bool Exempt(const JobInfo& j, std::string* why) const;
  ReclaimEvidence Evidence(const JobInfo& j, const JobState& s, WallTime now) const;

  IdleReclaimPolicy policy_;
  const JobDirectory& jobs_;
  ReclaimActions& actions_;
  std::unordered_map<std::string, JobState> state_;
  std::vector<ReclaimRecord> log_;
};

}  // namespace stoker::efficiency
