#pragma once
// The agent's collector: one thread per GPU, each ticking on an absolute schedule
// (start + k * interval, so reads never accumulate drift), plus one events thread for XIDs.
// Each GPU's latest sample lives in its own slot behind its own mutex; the sampler reads NVML
// into a private scratch sample and only swaps it in under the lock, so a scrape (Snapshot())
// never waits on NVML and a hung GPU stalls only its own thread.
//
// Ticks that pass while a read is still running are counted in skipped_ticks_total and not
// queued: after an overrun the thread resumes at the next future tick.
//
// Last-XID gauge: the most recent XID is reported for `xid_hold` (default 5 min) after it
// arrived and then clears to 0; the per-code counters never reset.

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/gpu_source.h"
#include "core/status.h"
#include "telemetry/attribution.h"
#include "telemetry/snapshot.h"

namespace stoker::telemetry {

inline constexpr Duration kMinSampleInterval = std::chrono::milliseconds(100);

struct SamplerOptions {
  Duration interval = std::chrono::seconds(1);
  Duration xid_hold = std::chrono::minutes(5);
  // How long one WaitEvents call may block (bounds shutdown latency of the events thread).
  Duration event_wait = std::chrono::milliseconds(500);
  // Whether to run the events thread at all.
  bool watch_events = true;
};

class Sampler {
 public:
  // `source` may be null: the agent then serves host metrics only (no NVML on this node).
  // `attributor` may be null (no job attribution). Neither is owned; both must outlive this.
  Sampler(GpuSource* source, Clock* clock, Attributor* attributor, SamplerOptions options);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // InvalidArgument for an interval below kMinSampleInterval. Starts the threads.
  Status Start();
  // Stops and joins all threads. Idempotent. A thread stuck inside a GPU read is joined when
  // that read returns.
  void Stop();

  // One tick for GPU `index`, synchronously on the caller's thread (tests, benchmarks and
  // `stoker smi` use it without starting threads).
  void SampleOnce(uint32_t index);
  // Records one event as the events thread does.
  void RecordEvent(const GpuEvent& event);

  // Copies the cache into *out, reusing its storage. Never blocks on NVML.
  void Snapshot(TelemetrySnapshot* out) const;

  uint32_t gpu_count() const { return static_cast<uint32_t>(slots_.size()); }
  bool nvml_available() const { return source_ != nullptr; }
  const SamplerOptions& options() const { return options_; }

  // Sets the text shown as the source description when there is no source (why NVML failed).
  void set_unavailable_reason(std::string reason) { unavailable_reason_ = std::move(reason); }

 private:
  struct Slot {
    mutable std::mutex mu;
    GpuState state;     // guarded by mu
    GpuSample scratch;  // only touched by the slot's sampler (outside mu)
  };

  void RunGpu(uint32_t index);
  void RunEvents();

  GpuSource* source_;
  Clock* clock_;
  Attributor* attributor_;
  SamplerOptions options_;
  std::string unavailable_reason_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::atomic<bool> stop_{false};
  std::atomic<int> running_{0};
  std::vector<std::thread> threads_;
  std::atomic<uint64_t> event_errors_{0};
};

}  // namespace stoker::telemetry
