#pragma once
// The GPU domain model: what one sample of one GPU says. Produced by a GpuSource (NVML, or the
// fake NVML in tests and `--simulate`), consumed by the exporter, `stoker smi`, the server and
// the efficiency engine. Depends on nothing but the standard library.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/enum_table.h"
#include "core/field.h"
#include "core/status.h"

namespace stoker {

// Who a GPU process belongs to, as far as the agent could tell.
struct JobRef {
  enum class Kind : uint8_t { kNone, kStoker, kSlurm, kKubernetes };
  Kind kind = Kind::kNone;
  std::string id;         // Stoker job id, Slurm job id, or "<namespace>/<pod>"
  std::string user;       // user name where known (else uid as text)
  std::string container;  // Kubernetes container name, when known
  std::string step;       // Slurm job step ("batch", "extern", "0", ...), when known
  bool known() const { return kind != Kind::kNone; }
};

inline constexpr EnumTable<JobRef::Kind, 4> kJobKindNames{
    "job kind",
    {{{JobRef::Kind::kNone, "none"},
      {JobRef::Kind::kStoker, "stoker"},
      {JobRef::Kind::kSlurm, "slurm"},
      {JobRef::Kind::kKubernetes, "kubernetes"}}}};
constexpr const auto& NamesOf(JobRef::Kind) { return kJobKindNames; }
inline const char* JobKindName(JobRef::Kind kind) { return kJobKindNames.CName(kind); }

struct GpuProcess {
  uint32_t pid = 0;
  std::string name;                   // executable name from /proc, when readable
  Field<uint64_t> used_memory_bytes;  // NVML reports "not available" on some configurations
  Field<uint32_t> sm_util_pct;        // per-process utilization, where supported
  Field<uint32_t> mem_util_pct;
  uint32_t gpu_instance_id = UINT32_MAX;  // MIG GI id, or UINT32_MAX when not on MIG
  uint32_t compute_instance_id = UINT32_MAX;
  JobRef job;
};

// A workload that holds a GPU by allocation, whether or not it runs a process on it yet: a
// Kubernetes container that the kubelet gave the whole GPU, a share of it or one of its MIG
// instances (the agent reads kubelet's PodResources API). Processes say what a GPU does; claims
// say who it is promised to.
struct GpuClaim {
  JobRef job;             // kind kKubernetes: id "<namespace>/<pod>", container
  bool whole = false;     // the whole GPU, exclusively
  int32_t gpu_milli = 0;  // a share of the GPU in milli-GPU (whole: 1000; MIG: 0)
  std::string mig_uuid;   // the MIG instance held ("MIG-..."), when it is one
};

// GPM (Hopper and later) ratios in 0..1; unsupported on older GPUs.
struct GpmMetrics {
  Field<double> sm_active;      // NVML_GPM_METRIC_SM_UTIL / 100
  Field<double> sm_occupancy;   // NVML_GPM_METRIC_SM_OCCUPANCY / 100
  Field<double> tensor_active;  // NVML_GPM_METRIC_ANY_TENSOR_UTIL / 100
  Field<double> dram_bw_util;   // NVML_GPM_METRIC_DRAM_BW_UTIL / 100
};

struct MigInstance {
  uint32_t gpu_instance_id = 0;
  uint32_t compute_instance_id = 0;
  std::string profile;  // e.g. "1g.18gb"
  std::string uuid;     // "MIG-..."
  uint32_t slices = 0;  // GPU slice count (1..7)
  Field<uint64_t> memory_total_bytes;
  Field<uint64_t> memory_used_bytes;
  GpmMetrics gpm;
};

// Clock event (throttle) reasons as NVML's bit mask.
namespace clock_event {
inline constexpr uint64_t kGpuIdle = 0x1;
inline constexpr uint64_t kApplicationsClocksSetting = 0x2;
inline constexpr uint64_t kSwPowerCap = 0x4;
inline constexpr uint64_t kHwSlowdown = 0x8;
inline constexpr uint64_t kSyncBoost = 0x10;
inline constexpr uint64_t kSwThermalSlowdown = 0x20;
inline constexpr uint64_t kHwThermalSlowdown = 0x40;
inline constexpr uint64_t kHwPowerBrakeSlowdown = 0x80;
inline constexpr uint64_t kDisplayClockSetting = 0x100;
}  // namespace clock_event

struct GpuIdentity {
  uint32_t index = 0;            // NVML index
  std::string uuid;              // "GPU-..."
  std::string pci_bus_id;        // "00000000:18:00.0"
  std::string name;              // "NVIDIA H100 80GB HBM3"
  Field<uint32_t> minor;         // /dev/nvidiaN
  Field<uint32_t> architecture;  // nvmlDeviceArchitecture_t (9 = Hopper)
};

enum class GpuHealth : uint8_t {
  kOk,
  kLost,         // NVML_ERROR_GPU_IS_LOST: fell off the bus; collection paused until it returns
  kUnreachable,  // a read timed out or the handle failed for another reason
};

inline constexpr EnumTable<GpuHealth, 3> kGpuHealthNames{
    "GPU health",
    {{{GpuHealth::kOk, "ok"},
      {GpuHealth::kLost, "lost"},
      {GpuHealth::kUnreachable, "unreachable"}}}};
constexpr const auto& NamesOf(GpuHealth) { return kGpuHealthNames; }
inline const char* GpuHealthName(GpuHealth v) { return kGpuHealthNames.CName(v); }

struct GpuSample {
  GpuIdentity id;
  GpuHealth health = GpuHealth::kOk;
  WallTime timestamp{};

  Field<uint32_t> util_gpu_pct;
  Field<uint32_t> util_mem_pct;

  Field<uint64_t> memory_total_bytes;
  Field<uint64_t> memory_used_bytes;
  Field<uint64_t> memory_reserved_bytes;
  Field<uint64_t> memory_free_bytes;

  Field<uint32_t> temperature_c;
  Field<uint32_t> power_mw;
  Field<uint32_t> power_limit_mw;
  Field<uint64_t> energy_mj;  // total since driver load

  Field<uint32_t> sm_clock_mhz;
  Field<uint32_t> sm_clock_max_mhz;
  Field<uint32_t> mem_clock_mhz;
  Field<uint32_t> mem_clock_max_mhz;
  Field<uint64_t> clock_event_reasons;

  Field<uint64_t> ecc_corrected_total;  // aggregate (lifetime) counts
  Field<uint64_t> ecc_uncorrected_total;
  Field<uint32_t> remapped_rows_correctable;
  Field<uint32_t> remapped_rows_uncorrectable;
  Field<bool> remapping_pending;
  Field<bool> remapping_failed;

  Field<uint32_t> pcie_tx_kbps;
  Field<uint32_t> pcie_rx_kbps;
  Field<uint64_t> nvlink_tx_bytes_total;
  Field<uint64_t> nvlink_rx_bytes_total;

  Field<bool> mig_enabled;
  std::vector<MigInstance> mig_instances;

  GpmMetrics gpm;
  std::vector<GpuProcess> processes;
  std::vector<GpuClaim> claims;
};

// A critical event from the NVML event set (XIDs and friends).
struct GpuEvent {
  enum class Type : uint8_t {
    kXid,
    kSingleBitEcc,
    kDoubleBitEcc,
    kPState,
    kClock,
    kPowerSource,
    kOther
  };
  Type type = Type::kXid;
  uint32_t gpu_index = 0;
  std::string uuid;
  uint64_t xid = 0;  // event data: the XID code for kXid
  uint32_t gpu_instance_id = UINT32_MAX;
  uint32_t compute_instance_id = UINT32_MAX;
  WallTime timestamp{};
};

// Which reading says how busy a GPU is ("activity"): the one definition the efficiency engine
// (zones, reclaim) and the server (placement by measured use) share.
enum class ActivityMetric : uint8_t {
  kAuto,      // GPM SM activity where the GPU reports it, GPU utilisation otherwise
  kSmActive,  // GPM only; GPUs without it have no activity
  kGpuUtil,   // nvmlDeviceGetUtilizationRates().gpu
};
inline constexpr EnumTable<ActivityMetric, 3> kActivityMetricNames{
    "metric",
    {{{ActivityMetric::kAuto, "auto"},
      {ActivityMetric::kSmActive, "sm_active"},
      {ActivityMetric::kGpuUtil, "gpu_util"}}}};
constexpr const auto& NamesOf(ActivityMetric) { return kActivityMetricNames; }
inline Result<ActivityMetric> ParseActivityMetric(std::string_view name) {
  return kActivityMetricNames.Parse(name);
}
inline const char* ActivityMetricName(ActivityMetric m) { return kActivityMetricNames.CName(m); }

// Activity in milli-percent (0..100000) per `metric`, or nullopt when the sample has nothing
// usable (GPU lost, field unsupported). `used` receives the metric actually used.
std::optional<int64_t> ActivityMilli(const GpuSample& s, ActivityMetric metric,
                                     ActivityMetric* used = nullptr);

}  // namespace stoker
