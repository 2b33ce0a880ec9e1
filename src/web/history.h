#pragma once
// The recent past for the web dashboard: every GPU's utilization, SM activity and memory use in
// fixed time buckets, with the job that held the GPU, and the scheduler's fragmentation samples.
// The server keeps only each node's latest samples; the dashboard's heatmap and fragmentation
// chart need a span of time, so this observer (fed by the server's heartbeats, job changes and
// fragmentation samples) keeps a bounded ring per GPU, and its API extension serves it:
//
//   GET /api/v1/history/gpus?window=1h&points=240&node=   users and admins
//   GET /api/v1/history/fragmentation?window=24h          users and admins
//
// A MIG GPU also gets a row per MIG instance (slice), after its own: NVML has no utilization per
// instance, so a slice's `util` is its SM activity (GPM), its memory is the instance's, and its
// job is the one placed on that instance (a MIG job names its instance's UUID).
//
// Memory is bounded: `span / bucket` points per row (24 bytes each), at most `max_gpus` rows
// (later ones are counted as dropped), and job owners for the jobs seen within the span.
// Each GPU's row also carries the power-efficiency estimates of its latest sample (TFLOPS and
// TFLOPS per watt, as the efficiency reports compute them), when that sample is in the window.
// A user sees which of their own jobs held a cell; a cell held by another user's job says only
// that it was busy (job -1), like /allocations hides other users' jobs.

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/key_owners.h"
#include "server/api.h"
#include "server/server.h"

namespace stoker::web {

using json = nlohmann::json;

struct HistoryOptions {
  Duration bucket = std::chrono::seconds(30);  // one point per GPU per bucket (mean of samples)
  Duration span = std::chrono::hours(24);      // how far back points are kept
  size_t max_gpus = 20000;
};

class History final : public server::ServerObserver, public server::ApiExtension {
 public:
  // `clock` (not owned) says when "now" is for the routes' windows.
  explicit History(const Clock* clock, HistoryOptions options = {});

  // ServerObserver.
  void OnHeartbeat(const std::string& node, const std::vector<GpuSample>& gpus,
                   WallTime at) override;
  // A report's seconds together: each GPU's and slice's row found once per report, its job
  // looked up once, its estimate taken from its latest sample only (what one call per second
  // leaves); every second is still recorded at its own time.
  void OnReport(const std::string& node, std::span<const server::SampleTick> ticks) override;
  void OnJobChanged(const server::Job& job) override;
  void OnJobsChanged(std::span<const server::Job> jobs) override;  // one lock for them all
  void OnFragmentation(const server::Fragmentation& f, WallTime at) override;

  // ApiExtension.
  void AddRoutes(http::Router* router) override;
  json OpenApiPaths() const override;

  // The answers of the two routes (also called by tests). `now` is the end of the window.
  json Gpus(const server::Principal& who, Duration window, int points, const std::string& node,
            WallTime now) const;
  json FragmentationSeries(Duration window, WallTime now) const;

 private:
  struct Point {
    int64_t bucket = 0;                              // bucket number (ms since epoch / bucket)
    int64_t job = 0;                                 // job on the GPU in that bucket (0: none)
    uint16_t util_sum = 0, sm_sum = 0, mem_sum = 0;  // sums of percents over `count` samples
    uint8_t sm_count = 0, count = 0;                 // SM activity is absent on some GPUs
  };
  struct Ring {
    std::string node;
    uint32_t index = 0;
    std::string name;
    std::string uuid;
    bool mig = false;
    // A MIG instance's row: its UUID, profile ("3g.40gb") and GPU slices; empty for a GPU.
    std::string mig_uuid, mig_profile;
    uint32_t mig_slices = 0;
    // ESTIMATES from the GPU's latest sample (efficiency::EstimateSample): achieved TFLOPS and
    // TFLOPS per watt; absent where the model's peaks, SM activity or power are unknown.
    std::optional<double> tflops, tflops_per_watt;
    WallTime estimated_at{};
    std::vector<Point> points;  // circular, capacity = span / bucket
    size_t head = 0;            // next slot to write once full
    bool full = false;
    const Point* Last() const;
  };
  struct FragPoint {
    int64_t ts_ms = 0;
    double fragmented_gpu_milli = 0;
    int64_t free_gpu_milli = 0, total_gpu_milli = 0;
    int typical_shapes = 0;
  };

  int64_t BucketOf(WallTime t) const;
  void PruneJobsLocked(int64_t oldest_bucket);
  void OnJobChangedLocked(const server::Job& job);
  // How many jobs the table keeps before it first prunes those no longer seen.
  size_t JobsBound() const { return 4 * opt_.max_gpus + 1024; }
  // The ring for `key`, made on first use; nullptr (and counted) beyond max_gpus.
  Ring* RingLocked(const std::string& key);
  // Records `seconds` (each one second's samples of `node`, in time order): the one place the
  // observer's two entries meet.
  void RecordSecondsLocked(const std::string& node,
                           std::span<const std::vector<GpuSample>* const> seconds);
  // Adds one reading (percents; SM activity absent when nullopt) to `r`'s bucket at `t`.
  void RecordLocked(Ring& r, WallTime t, std::optional<double> util, std::optional<double> sm,
                    double mem, int64_t job);

  const Clock* clock_;
  HistoryOptions opt_;
  size_t capacity_;
  mutable std::mutex mu_;
  std::map<std::string, Ring> rings_;  // "node/index", guarded by mu_
  int64_t dropped_gpus_ = 0;           // samples of GPUs beyond max_gpus, guarded by mu_
  // The job holding each GPU now, by node and GPU index (0: none), beside the GPUs each job was
  // set on (JobInfo::gpus): core/key_owners.h's ForgetHeld, without a hash node per GPU and per
  // job (a pass places 80,000 jobs at once). Guarded by mu_.
  std::unordered_map<std::string, std::vector<int64_t>> holder_;
  KeyOwners<std::pair<std::string, std::string>, int64_t> mig_holder_;  // (node, MIG UUID), mu_
  size_t prune_at_ = 0;  // jobs_'s size past which the next change prunes it; mu_
  struct JobInfo {
    std::string user;
    int64_t last_bucket = 0;
    bool active = false;
    // The GPUs it was set on (node, index); another job may have taken one since.
    std::vector<std::pair<std::string, uint32_t>> gpus;
  };
  // The job holding GPU `index` of `node`, or 0.
  int64_t HolderLocked(const std::string& node, uint32_t index) const;
  std::unordered_map<int64_t, JobInfo> jobs_;  // guarded by mu_
  std::vector<FragPoint> frag_;                // circular, guarded by mu_
  size_t frag_head_ = 0;
};

}  // namespace stoker::web
