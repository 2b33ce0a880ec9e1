#pragma once
// What the engine needs from the rest of Stoker, as small interfaces: the server (or the
// simulator, or an offline JSON export) implements them. No HTTP or SQLite in this library.

#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/enum_table.h"
#include "core/status.h"

namespace stoker::efficiency {

enum class Tier : uint8_t { kGuaranteed, kPreemptible };
inline constexpr EnumTable<Tier, 2> kTierNames{
    "tier", {{{Tier::kGuaranteed, "guaranteed"}, {Tier::kPreemptible, "preemptible"}}}};
constexpr const auto& NamesOf(Tier) { return kTierNames; }
inline const char* TierName(Tier v) { return kTierNames.CName(v); }

struct JobInfo {
  std::string id;
  std::string user;
  std::string team;
  std::string job_class;  // scheduler class / QOS / partition
  bool interactive = false;
  bool preemptible = false;  // best-effort tier
  bool movable = false;      // may be migrated at once (checkpointable)
  bool memory_bound = false;
  WallTime start{};
  std::vector<std::string> gpus;  // GPU keys (UUIDs)
  std::string gpu_model;          // e.g. "H100"
};

class JobDirectory {
 public:
  virtual ~JobDirectory() = default;
  virtual std::optional<JobInfo> Find(const std::string& job) const = 0;
  virtual std::vector<JobInfo> Running() const = 0;
};

// What the engine's idle reclaim does to a job, applied by the server/scheduler (or the
// simulator). Errors are recorded, never fatal. (Named apart from server::JobActions, the
// server's actions by job id, which the server's adapter implements it with.)
class ReclaimActions {
 public:
  virtual ~ReclaimActions() = default;
  virtual Status Warn(const JobInfo& job, const std::string& message) = 0;
  virtual Status Requeue(const JobInfo& job, const std::string& reason) = 0;
  virtual Status Cancel(const JobInfo& job, const std::string& reason) = 0;
};

// A plain in-memory directory (tests, offline tools, the simulator).
class StaticJobDirectory final : public JobDirectory {
 public:
  void Upsert(JobInfo j);
  void Remove(const std::string& id);
  std::optional<JobInfo> Find(const std::string& job) const override;
  std::vector<JobInfo> Running() const override;

 private:
  std::vector<JobInfo> jobs_;
};

}  // namespace stoker::efficiency
