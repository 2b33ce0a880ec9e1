#pragma once
// Zones: every GPU and every job is classified over a sliding window of its activity
// (gold 70-90 % keep, silver 50-70 % consolidate, bronze < 50 % reclaim, hot > 90 % watch).
// O(1) amortized per sample; no clock reads: time comes from the samples.

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/enum_table.h"
#include "core/gpu.h"
#include "efficiency/config.h"
#include "efficiency/window.h"

namespace stoker::efficiency {

enum class Zone : uint8_t { kUnknown, kBronze, kSilver, kGold, kHot };
inline constexpr EnumTable<Zone, 5> kZoneNames{"zone",
                                               {{{Zone::kUnknown, "unknown"},
                                                 {Zone::kBronze, "bronze"},
                                                 {Zone::kSilver, "silver"},
                                                 {Zone::kGold, "gold"},
                                                 {Zone::kHot, "hot"}}}};
constexpr const auto& NamesOf(Zone) { return kZoneNames; }
inline const char* ZoneName(Zone v) { return kZoneNames.CName(v); }

// Classifies a mean activity (milli-percent) with the configured bands.
Zone Classify(const ZoneConfig& cfg, int64_t mean_milli);

struct ZoneStatus {
  std::string key;  // GPU key or job id
  Zone zone = Zone::kUnknown;
  int64_t mean_milli = 0;  // mean activity over the window
  int64_t peak_milli = 0;
  int64_t samples = 0;
  int64_t zero_samples = 0;
  Duration covered{0};
  ActivityMetric metric = ActivityMetric::kAuto;  // what the last sample was measured with
  WallTime last_sample{};
};

struct ZoneTransition {
  WallTime at{};
  std::string key;
  bool is_job = false;
  Zone from = Zone::kUnknown;
  Zone to = Zone::kUnknown;
};

// Not thread-safe: the owner (server heartbeat path, simulator, CLI) serialises calls.
class ZoneTracker {
  struct Track;

 public:
  explicit ZoneTracker(ZoneConfig cfg) : cfg_(cfg) {}

  // The server's path: a GPU's track found once by key; the handle stays valid as long as the
  // tracker (GPU tracks are never dropped).
  class GpuRef {
   public:
    bool valid() const { return entry_ != nullptr; }
    const std::string& key() const { return entry_->first; }

   private:
    friend class ZoneTracker;
    std::pair<const std::string, Track>* entry_ = nullptr;
  };
  GpuRef TrackGpu(const std::string& key);
  // ObserveActivity for the GPU `gpu` refers to.
  void ObserveActivity(GpuRef gpu, WallTime t, int64_t activity_milli, ActivityMetric metric,
                       std::span<const std::string> jobs);

  // Feeds one GPU sample; `jobs` are the jobs allocated to that GPU (JobsOnGpu(sample) or the
  // server's allocation table). Samples without a usable activity figure are skipped.
  void Observe(const GpuSample& sample, std::span<const std::string> jobs);
  // The lower-level entry used by the simulator: activity already in milli-percent.
  void ObserveActivity(const std::string& gpu_key, WallTime t, int64_t activity_milli,
                       ActivityMetric metric, std::span<const std::string> jobs);

  ZoneStatus Gpu(const std::string& key) const;
  ZoneStatus Job(const std::string& id) const;
  std::vector<ZoneStatus> Gpus() const;  // sorted by key
  // The same, in no order (SortByKey sorts them later, off the caller's lock).
  std::vector<ZoneStatus> GpusUnsorted() const;
  std::vector<ZoneStatus> Jobs() const;
  static void SortByKey(std::vector<ZoneStatus>* statuses);
  void ForgetJob(const std::string& id) { jobs_.erase(id); }

  // Zone changes since the last call (the history reports and events are built from).
  std::vector<ZoneTransition> TakeTransitions();
  const ZoneConfig& config() const { return cfg_; }

 private:
  struct Track {
    explicit Track(Duration span) : window(span) {}
    SlidingWindow window;
    Zone zone = Zone::kUnknown;
    ActivityMetric metric = ActivityMetric::kAuto;
  };
  ZoneStatus StatusOf(const std::string& key, const Track& t) const;
  void Update(const std::string& key, bool is_job, Track& t, WallTime at, int64_t v,
              ActivityMetric m);

  ZoneConfig cfg_;
  std::unordered_map<std::string, Track> gpus_;
  std::unordered_map<std::string, Track> jobs_;
  std::vector<ZoneTransition> transitions_;
};

// ---- Consolidation (silver and bronze jobs packed together) ----

enum class ShareMode : uint8_t { kTimeSlicing, kMps, kMig };
inline constexpr EnumTable<ShareMode, 3> kShareModeNames{
    "share mode",
    {{{ShareMode::kTimeSlicing, "time-slicing"},
      {ShareMode::kMps, "mps"},
      {ShareMode::kMig, "mig"}}}};
constexpr const auto& NamesOf(ShareMode) { return kShareModeNames; }
inline const char* ShareModeName(ShareMode v) { return kShareModeNames.CName(v); }

struct JobLoad {
  std::string job;
  std::string user;
  std::string gpu_model;  // e.g. "H100"
  int gpus = 1;
  int64_t mean_milli = 0;  // mean activity
  uint64_t memory_peak_bytes = 0;
  uint64_t gpu_memory_bytes = 0;  // the GPU's total memory
  bool mig_capable = false;
  bool movable = false;  // may be migrated now (checkpointable); else applied at next start
};

struct PackGroup {
  std::vector<std::string> jobs;
  ShareMode mode = ShareMode::kTimeSlicing;
  std::string mig_layout;  // for kMig, e.g. "3g.40gb+2g.20gb+2g.20gb"
  int64_t combined_milli = 0;
  uint64_t combined_memory_bytes = 0;
  bool apply_now = false;  // every job in the group is movable
  int gpus_freed = 0;
  std::string reason;
};

struct ConsolidationPlan {
  std::vector<PackGroup> groups;
  int gpus_freed = 0;
};

// First-fit decreasing of single-GPU silver/bronze jobs into GPUs of the same model, so the
// packed activity stays at or below the gold ceiling and memory fits with 10 % headroom.
// MIG when every job fits a MIG slice on a MIG-capable model; MPS when one user owns the group
// (MPS shares an address-space server, so it is not offered across users); time-slicing else.
ConsolidationPlan PlanConsolidation(std::vector<JobLoad> jobs, const ZoneConfig& zones);

}  // namespace stoker::efficiency
