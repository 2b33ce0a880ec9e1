#pragma once
// A scripted GPU node for the fake NVML library: GPUs, MIG instances, processes (with the cgroup
// paths that attribute them to jobs), metric timelines, XID events and faults. Parsed from YAML
// (JSON is valid YAML). Used by the fake library itself and by the agent to attribute simulated
// processes. The format is documented in scenarios/README.md.

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace stoker::fakenvml {

inline constexpr uint32_t kNoInstance = UINT32_MAX;
inline constexpr double kForever = std::numeric_limits<double>::infinity();

// A value over scenario time (seconds since the start of one loop). Before the first point the
// first value holds; after the last point the last value holds.
struct Timeline {
  enum class Interp : uint8_t { kLinear, kStep };
  Interp interp = Interp::kLinear;
  std::vector<std::pair<double, double>> points;  // (t, value), t non-decreasing

  bool empty() const { return points.empty(); }
  double At(double t) const;
  // At(t) or `fallback` when the timeline is empty.
  double AtOr(double t, double fallback) const { return empty() ? fallback : At(t); }
  double Max() const;
  // Integral of the value over [a, b] (a <= b), in value·seconds.
  double Integral(double a, double b) const;
  static Timeline Constant(double v) { return Timeline{Interp::kStep, {{0.0, v}}}; }
};

struct MigInstanceSpec {
  std::string profile;  // "3g.40gb"
  uint32_t slices = 0;  // from the profile
  uint32_t gpu_instance_id = 0;
  uint32_t compute_instance_id = 0;
  std::string uuid;  // "MIG-..."
  uint64_t memory_total_mib = 0;
  // Percent 0..100 (GPM metrics for this slice).
  Timeline sm_active, sm_occupancy, tensor_active, dram_bw;
};

struct LostWindow {
  double from = 0;
  double to = 0;  // the GPU answers again from `to` on (a fresh handle is needed)
};

struct GpuSpec {
  std::string model;       // "NVIDIA H100 80GB HBM3"
  std::string uuid;        // "GPU-..."
  std::string pci_bus_id;  // "00000000:18:00.0"
  uint32_t minor = 0;
  uint32_t architecture = 9;  // nvmlDeviceArchitecture_t
  uint64_t memory_total_mib = 0;
  uint64_t memory_reserved_mib = 0;
  uint32_t power_limit_w = 0;
  uint32_t sm_clock_max_mhz = 0;
  uint32_t mem_clock_max_mhz = 0;
  uint32_t nvlink_count = 0;
  uint64_t ecc_corrected = 0;
  uint64_t ecc_uncorrected = 0;
  uint32_t remapped_correctable = 0;
  uint32_t remapped_uncorrectable = 0;
  bool remapping_pending = false;
  bool remapping_failed = false;
  uint64_t energy_base_mj = 0;  // energy counter at scenario start (since "driver load")

  bool mig_enabled = false;
  std::vector<MigInstanceSpec> mig_instances;

  // Metric timelines. Percentages 0..100; empty means "derived" (see fake_nvml.cc defaults).
  Timeline util, mem_util, mem_used_mib, temperature_c, power_w, sm_clock_mhz, mem_clock_mhz;
  Timeline sm_active, sm_occupancy, tensor_active, dram_bw;
  Timeline pcie_tx_kbps, pcie_rx_kbps, nvlink_tx_mibps, nvlink_rx_mibps;
  Timeline clock_event_reasons;  // step timeline of the bit mask

  std::vector<LostWindow> lost;
  std::vector<std::string> unsupported;  // NVML function names answering NOT_SUPPORTED
};

struct ProcessSpec {
  uint32_t pid = 0;
  std::string name;
  uint32_t gpu = 0;  // GPU index
  uint32_t gpu_instance_id = kNoInstance;
  uint32_t compute_instance_id = kNoInstance;
  Timeline used_memory_mib;
  Timeline sm_util;  // per-process SM utilisation; empty = no samples
  std::string
      cgroup;  // "/system.slice/stoker-job-42.scope", "/slurm/uid_1000/job_1234/step_0", ...
  std::string user;
  uint32_t uid = 0;
  double start = 0;
  double end = kForever;
};

struct EventSpec {
  enum class Type : uint8_t { kXid, kSingleBitEcc, kDoubleBitEcc };
  double t = 0;
  uint32_t gpu = 0;
  Type type = Type::kXid;
  uint64_t xid = 0;
  uint32_t gpu_instance_id = kNoInstance;
  uint32_t compute_instance_id = kNoInstance;
};

struct Scenario {
  std::string name;
  std::string description;
  std::string source;  // file name or "<builtin:name>"
  std::string hostname = "sim-node";
  std::string driver_version = "550.54.15";
  std::string nvml_version = "12.550.54.15";
  double loop_seconds = 0;  // > 0: timelines, events and faults repeat with this period
  std::vector<GpuSpec> gpus;
  std::vector<ProcessSpec> processes;
  std::vector<EventSpec> events;
};

// Identifies the in-memory layout of Scenario, for handing a parsed scenario to a fake library
// built from the same tree (stokerFakeNvmlSetScenarioObject) without re-parsing YAML there.
inline constexpr uint64_t kScenarioAbiTag =
    (uint64_t{sizeof(Scenario)} << 48) ^ (uint64_t{sizeof(GpuSpec)} << 32) ^
    (uint64_t{sizeof(ProcessSpec)} << 16) ^ (uint64_t{sizeof(MigInstanceSpec)} << 8) ^
    uint64_t { sizeof(EventSpec) } ^ (uint64_t{sizeof(Timeline)} << 56);

// A scenario file is at most this large.
inline constexpr size_t kMaxScenarioBytes = size_t{16} << 20;

// Parses and validates a scenario (YAML, or JSON, which is YAML too) through the document reader
// (doc/reader.h). Errors read "<source>:<line>:<column>: <field>: <what>".
Result<Scenario> ParseScenario(std::string_view text, std::string_view source_name);
// NotFound "PATH: cannot open", or InvalidArgument "PATH: larger than 16 MiB" and ParseScenario's.
Result<Scenario> LoadScenarioFile(const std::string& path);

// Slice count and memory (GiB) encoded in a MIG profile name, or an error for unknown profiles.
Result<std::pair<uint32_t, uint32_t>> ParseMigProfile(std::string_view profile);

}  // namespace stoker::fakenvml
