#pragma once
// Queue policies: which waiting (and, for preemptive policies, running) job deserves GPUs first.
// A policy only orders jobs; placement stays with scheduler::PlacementPolicy, and the engine that
// owns the jobs (the trace simulator, the server) applies the decisions. Policies are pure
// functions of a JobView, so the same object serves the simulator and the live server.
//
// Durations are known in advance (as in the SJF/SRTF results of the Helios and Tiresias papers);
// a live deployment passes an estimate instead.

#include <compare>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace stoker::queue {

using JobId = uint64_t;
using TimeMs = int64_t;  // milliseconds (simulated or wall, the policy does not care)

// What a queue policy may look at. Elastic jobs progress in proportion to their allocation; all
// "time" fields are expressed at the job's full (max) allocation.
struct JobView {
  JobId id = 0;
  TimeMs submit_ms = 0;
  TimeMs duration_ms = 0;       // total run time at `gpus` GPUs (known or estimated)
  TimeMs remaining_ms = 0;      // what is left of it
  int64_t attained_gpu_ms = 0;  // GPU-milliseconds of service received so far (Tiresias LAS)
  int gpus = 0;                 // requested (max) GPUs
  int min_gpus = 0;             // elastic minimum; == gpus for rigid jobs
  int priority = 0;             // larger is more important
  bool running = false;
};

// Smaller keys are served first. `id` breaks ties so that orders are total and deterministic.
struct QueueKey {
  int64_t primary = 0;
  int64_t secondary = 0;
  JobId id = 0;
  // NOLINTNEXTLINE(modernize-use-nullptr): false positive on a defaulted <=> (llvm issue 53961)
  friend auto operator<=>(const QueueKey&, const QueueKey&) = default;
};

class QueuePolicy {
 public:
  virtual ~QueuePolicy() = default;
  virtual std::string_view Name() const = 0;
  virtual QueueKey Key(const JobView& job) const = 0;
  // A preemptive policy may stop a running job (which requeues and keeps its attained service)
  // when a waiting job with a smaller key needs the GPUs.
  virtual bool preemptive() const = 0;
  // For keys that change at discrete service levels (LAS demotion): the attained service in
  // GPU-ms at which the key of this job changes next, so an event engine can wake up then.
  // nullopt when it never changes at a discrete point.
  virtual std::optional<int64_t> NextKeyChangeGpuMs(const JobView& /*job*/) const {
    return std::nullopt;
  }
};

// First come, first served (submission time).
class FifoPolicy final : public QueuePolicy {
 public:
  std::string_view Name() const override { return "fifo"; }
  QueueKey Key(const JobView& j) const override { return {j.submit_ms, 0, j.id}; }
  bool preemptive() const override { return false; }
};

// Shortest job first, non-preemptive (oracle durations).
class SjfPolicy final : public QueuePolicy {
 public:
  std::string_view Name() const override { return "sjf"; }
  QueueKey Key(const JobView& j) const override { return {j.duration_ms, j.submit_ms, j.id}; }
  bool preemptive() const override { return false; }
};

// Shortest remaining time first, preemptive.
class SrtfPolicy final : public QueuePolicy {
 public:
  std::string_view Name() const override { return "srtf"; }
  QueueKey Key(const JobView& j) const override { return {j.remaining_ms, j.submit_ms, j.id}; }
  bool preemptive() const override { return true; }
};

// Tiresias-style discretised two-dimensional least-attained-service: attained service is GPUs x
// time; jobs sit in queue k when thresholds[k-1] <= service < thresholds[k]; lower queues first,
// FIFO inside a queue. Preemptive: a job crossing a threshold can be displaced by waiting jobs of
// a higher queue, and keeps its attained service when requeued.
class LasPolicy final : public QueuePolicy {
 public:
  // Thresholds in GPU-seconds, strictly increasing and positive. The default two thresholds
  // (1 and 10 GPU-hours) give three queues.
  static Result<std::unique_ptr<LasPolicy>> Create(std::vector<int64_t> thresholds_gpu_s = {3600,
                                                                                            36000});

  std::string_view Name() const override { return "las"; }
  QueueKey Key(const JobView& j) const override {
    return {QueueIndex(j.attained_gpu_ms), j.submit_ms, j.id};
  }
  bool preemptive() const override { return true; }
  std::optional<int64_t> NextKeyChangeGpuMs(const JobView& j) const override;

  int QueueIndex(int64_t attained_gpu_ms) const;
  const std::vector<int64_t>& thresholds_gpu_ms() const { return thresholds_gpu_ms_; }

 private:
  explicit LasPolicy(std::vector<int64_t> thresholds_gpu_ms)
      : thresholds_gpu_ms_(std::move(thresholds_gpu_ms)) {}
  std::vector<int64_t> thresholds_gpu_ms_;
};

// Strict priorities (larger first), FIFO among equals; preemptive, so an urgent job displaces
// running lower-priority work.
class PriorityPolicy final : public QueuePolicy {
 public:
  std::string_view Name() const override { return "priority"; }
  QueueKey Key(const JobView& j) const override {
    return {-static_cast<int64_t>(j.priority), j.submit_ms, j.id};
  }
  bool preemptive() const override { return true; }
};

// "fifo", "sjf", "srtf", "las", "priority". InvalidArgument lists the known names.
Result<std::unique_ptr<QueuePolicy>> CreateQueuePolicy(std::string_view name);
std::vector<std::string_view> QueuePolicyNames();

}  // namespace stoker::queue
