#pragma once
// In-memory GpuSource for consumer tests and benchmarks: serves prepared samples, with hooks to
// make a read slow (advance a ManualClock), block (a lost GPU), fail, or deliver events.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "core/gpu_source.h"

namespace stoker::testing {

// A plausible H100 sample: every field set, `processes` processes with pids from 1000.
inline GpuSample MakeH100Sample(uint32_t index, size_t processes) {
  GpuSample s;
  s.id.index = index;
  s.id.uuid = "GPU-00000000-0000-0000-0000-00000000000" + std::to_string(index);
  s.id.pci_bus_id = "00000000:" + std::to_string(0x18 + index) + ":00.0";
  s.id.name = "NVIDIA H100 80GB HBM3";
  s.id.minor = Field<uint32_t>::Of(index);
  s.id.architecture = Field<uint32_t>::Of(9);
  s.util_gpu_pct = Field<uint32_t>::Of(45);
  s.util_mem_pct = Field<uint32_t>::Of(30);
  s.memory_total_bytes = Field<uint64_t>::Of(85899345920ULL);
  s.memory_used_bytes = Field<uint64_t>::Of(42949672960ULL);
  s.memory_reserved_bytes = Field<uint64_t>::Of(536870912ULL);
  s.memory_free_bytes = Field<uint64_t>::Of(42412802048ULL);
  s.temperature_c = Field<uint32_t>::Of(61);
  s.power_mw = Field<uint32_t>::Of(250000);
  s.power_limit_mw = Field<uint32_t>::Of(700000);
  s.energy_mj = Field<uint64_t>::Of(123456789ULL);
  s.sm_clock_mhz = Field<uint32_t>::Of(1755);
  s.sm_clock_max_mhz = Field<uint32_t>::Of(1980);
  s.mem_clock_mhz = Field<uint32_t>::Of(2619);
  s.mem_clock_max_mhz = Field<uint32_t>::Of(2619);
  s.clock_event_reasons = Field<uint64_t>::Of(clock_event::kSwPowerCap);
  s.ecc_corrected_total = Field<uint64_t>::Of(3);
  s.ecc_uncorrected_total = Field<uint64_t>::Of(0);
  s.remapped_rows_correctable = Field<uint32_t>::Of(1);
  s.remapped_rows_uncorrectable = Field<uint32_t>::Of(0);
  s.remapping_pending = Field<bool>::Of(false);
  s.remapping_failed = Field<bool>::Of(false);
  s.pcie_tx_kbps = Field<uint32_t>::Of(1000);
  s.pcie_rx_kbps = Field<uint32_t>::Of(2000);
  s.nvlink_tx_bytes_total = Field<uint64_t>::Of(1ULL << 40);
  s.nvlink_rx_bytes_total = Field<uint64_t>::Of(1ULL << 41);
  s.mig_enabled = Field<bool>::Of(false);
  s.gpm.sm_active = Field<double>::Of(0.5);
  s.gpm.sm_occupancy = Field<double>::Of(0.25);
  s.gpm.tensor_active = Field<double>::Of(0.125);
  s.gpm.dram_bw_util = Field<double>::Of(0.375);
  for (size_t p = 0; p < processes; ++p) {
    GpuProcess proc;
    proc.pid = static_cast<uint32_t>(1000 + index * 1000 + p);
    proc.used_memory_bytes = Field<uint64_t>::Of(1ULL << 30);
    proc.sm_util_pct = Field<uint32_t>::Unsupported();
    proc.mem_util_pct = Field<uint32_t>::Unsupported();
    s.processes.push_back(proc);
  }
  return s;
}

class FakeGpuSource : public GpuSource {
 public:
  explicit FakeGpuSource(std::vector<GpuSample> samples) : samples_(std::move(samples)) {}

  std::string Describe() const override { return "in-memory test source"; }
  bool simulated() const override { return simulated_; }
  uint32_t DeviceCount() const override { return static_cast<uint32_t>(samples_.size()); }

  Status Sample(uint32_t index, GpuSample* out) override {
    if (before_read) {
      Status s = before_read(index);
      if (!s.ok()) {
        CountRead(index);
        return s;
      }
    }
    {
      std::lock_guard lock(mu_);
      *out = samples_[index];  // copy-assign: reuses out's capacity
    }
    CountRead(index);
    return Status::Ok();
  }

  Result<std::vector<GpuEvent>> WaitEvents(Duration timeout) override {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::min<Duration>(timeout, std::chrono::milliseconds(5)),
                 [&] { return !events_.empty(); });
    std::vector<GpuEvent> out(events_.begin(), events_.end());
    events_.clear();
    return out;
  }

  void PushEvent(GpuEvent e) {
    {
      std::lock_guard lock(mu_);
      events_.push_back(std::move(e));
    }
    cv_.notify_all();
  }
  void SetSample(uint32_t index, GpuSample s) {
    std::lock_guard lock(mu_);
    samples_[index] = std::move(s);
  }
  uint64_t reads(uint32_t index) const {
    std::lock_guard lock(mu_);
    return index < reads_.size() ? reads_[index] : 0;
  }
  // Waits (real time, bounded) until GPU `index` has been read at least `n` times.
  bool WaitForReads(uint32_t index, uint64_t n,
                    std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return index < reads_.size() && reads_[index] >= n; });
  }

  // Called at the start of every Sample(); a non-OK result is returned as the read's status.
  std::function<Status(uint32_t)> before_read;
  bool simulated_ = false;

 private:
  void CountRead(uint32_t index) {
    {
      std::lock_guard lock(mu_);
      if (reads_.size() <= index) reads_.resize(index + 1);
      ++reads_[index];
    }
    cv_.notify_all();
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<GpuSample> samples_;
  std::vector<uint64_t> reads_;
  std::deque<GpuEvent> events_;
};

}  // namespace stoker::testing
