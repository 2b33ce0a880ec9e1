#pragma once
// Internal: the NvmlGpuSource class, shared by nvml_gpu_source.cc and simulated.cc. Other modules
// use the factories in nvml_gpu_source.h / simulated.h.

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/clock.h"
#include "core/gpu_source.h"
#include "nvml/nvml_library.h"

namespace stoker::nvml {

class NvmlGpuSource final : public GpuSource {
 public:
  // `description` replaces the library's Describe() when non-empty (the simulator's text).
  NvmlGpuSource(std::unique_ptr<NvmlLibrary> lib, uint32_t device_count, bool simulated,
                std::string description);
  ~NvmlGpuSource() override;

  std::string Describe() const override;
  bool simulated() const override { return simulated_; }
  uint32_t DeviceCount() const override { return device_count_; }
  Status Sample(uint32_t index, GpuSample* out) override;
  Result<std::vector<GpuEvent>> WaitEvents(Duration timeout) override;

 private:
  // Two GPM sample buffers used alternately, so each Sample() needs one SampleGet and no sleep.
  struct GpmPair {
    nvmlGpmSample_t buf[2] = {nullptr, nullptr};
    int current = 0;
    bool have_previous = false;
  };

  // Everything about one GPU; guarded by its own mutex so a hung GPU blocks only its sampler.
  struct Device {
    std::mutex mu;
    nvmlDevice_t handle = nullptr;
    bool identity_loaded = false;
    GpuIdentity identity;
    int gpm_supported = -1;  // -1 unknown, 0 no, 1 yes
    GpmPair gpm;
    std::map<uint64_t, GpmPair> mig_gpm;  // key: gi << 32 | ci
    int nvlink_count = -1;                // -1 unknown, 0 unsupported
    unsigned long long last_process_util_ts = 0;
    std::vector<uint64_t> process_buffer;  // uint64_t: 8-byte aligned entries
    unsigned process_capacity = 32;        // entries; grows on INSUFFICIENT_SIZE
    std::vector<nvmlProcessUtilizationSample_t> util_samples;
    std::unique_ptr<nvmlGpmMetricsGet_t> gpm_request;  // 13 KiB, allocated on first use
  };

  // Sampling steps; each returns false when the GPU turned out to be lost.
  bool AcquireHandle(uint32_t index, Device& d, nvmlReturn_t* rc) const;
  bool ReadIdentity(uint32_t index, Device& d);
  bool ReadBasics(Device& d, GpuSample* out);
  bool ReadMemory(nvmlDevice_t dev, Field<uint64_t>* total, Field<uint64_t>* reserved,
                  Field<uint64_t>* used, Field<uint64_t>* free_bytes) const;
  bool ReadNvLink(Device& d, GpuSample* out) const;
  bool ReadMig(Device& d, GpuSample* out);
  // `pcie_tx`/`pcie_rx` (device level only, may be null) receive GPM's PCIe rates.
  bool ReadGpm(Device& d, nvmlDevice_t dev, int mig_gi, GpmPair& pair, GpmMetrics* out,
               Field<uint32_t>* pcie_tx = nullptr, Field<uint32_t>* pcie_rx = nullptr) const;
  bool ReadProcesses(Device& d, const GpuSample& sample, std::vector<GpuProcess>* out);
  bool ReadProcessUtilization(Device& d, bool mig_enabled, std::vector<GpuProcess>* procs) const;
  void MarkLost(Device& d, GpuSample* out);
  void FreeGpm(GpmPair& pair) const;

  Status EnsureEventSet();

  std::unique_ptr<NvmlLibrary> lib_;
  const NvmlFunctions& fn_;
  const uint32_t device_count_;
  const bool simulated_;
  const std::string description_;
  SystemClock clock_;
  std::vector<std::unique_ptr<Device>> devices_;

  // Events: only the event thread touches these (GpuSource contract: WaitEvents from one thread).
  std::mutex events_mu_;
  nvmlEventSet_t event_set_ = nullptr;
  bool event_set_failed_ = false;
  std::vector<bool> events_registered_;
  std::vector<nvmlDevice_t> event_handles_;  // handle each GPU was registered with
  // UUID per index, for events whose index the driver cannot give; written by samplers.
  std::mutex uuids_mu_;
  std::vector<std::string> uuids_;
};

// Opens `path` (calling `before_init` first), counts GPUs and builds the source. `owned_fd` (if
// >= 0) is closed when the library is unloaded, or on failure.
Result<std::unique_ptr<GpuSource>> OpenNvmlGpuSourceWith(const std::string& path,
                                                         const NvmlLibrary::BeforeInit& before_init,
                                                         bool simulated, std::string description,
                                                         int owned_fd = -1);

}  // namespace stoker::nvml
