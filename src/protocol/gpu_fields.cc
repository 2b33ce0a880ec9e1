#include "protocol/gpu_fields.h"

#include <array>

namespace stoker::protocol {
namespace {

#define STOKER_FIELD(key, metric, help, counter, scale, member)                             \
  ScalarFieldDef {                                                                          \
    key, metric, help, counter, scale, [](const GpuSample& s) { return ViewOf(s.member); }, \
        [](GpuSample& s, const FieldView& v) { return AssignFrom(v, &s.member); }           \
  }

constexpr double kPct = 0.01;
constexpr double kMilli = 0.001;
constexpr double kMega = 1e6;
// NVML reports PCIe throughput in KB/s (KiB in practice, like nvidia-smi's "KB/s").
constexpr double kKiB = 1024.0;

constexpr std::array kFields = {
    STOKER_FIELD("util_gpu_pct", "stoker_gpu_utilization_ratio",
                 "Fraction of the last sample period in which a kernel ran (NVML utilization.gpu).",
                 false, kPct, util_gpu_pct),
    STOKER_FIELD("util_mem_pct", "stoker_gpu_memory_controller_utilization_ratio",
                 "Fraction of the last sample period in which device memory was read or written.",
                 false, kPct, util_mem_pct),
    STOKER_FIELD("memory_total_bytes", "stoker_gpu_memory_total_bytes", "Total framebuffer memory.",
                 false, 1.0, memory_total_bytes),
    STOKER_FIELD("memory_used_bytes", "stoker_gpu_memory_used_bytes",
                 "Framebuffer memory allocated by processes (excluding driver reserve).", false,
                 1.0, memory_used_bytes),
    STOKER_FIELD("memory_reserved_bytes", "stoker_gpu_memory_reserved_bytes",
                 "Framebuffer memory reserved by the driver.", false, 1.0, memory_reserved_bytes),
    STOKER_FIELD("memory_free_bytes", "stoker_gpu_memory_free_bytes", "Free framebuffer memory.",
                 false, 1.0, memory_free_bytes),
    STOKER_FIELD("temperature_c", "stoker_gpu_temperature_celsius", "GPU die temperature.", false,
                 1.0, temperature_c),
    STOKER_FIELD("power_mw", "stoker_gpu_power_watts", "Power draw.", false, kMilli, power_mw),
    STOKER_FIELD("power_limit_mw", "stoker_gpu_power_limit_watts", "Enforced power limit.", false,
                 kMilli, power_limit_mw),
    STOKER_FIELD("energy_mj", "stoker_gpu_energy_joules_total",
                 "Energy consumed since the driver was loaded.", true, kMilli, energy_mj),
    STOKER_FIELD("sm_clock_mhz", "stoker_gpu_sm_clock_hertz", "Current SM clock.", false, kMega,
                 sm_clock_mhz),
    STOKER_FIELD("sm_clock_max_mhz", "stoker_gpu_sm_clock_max_hertz", "Maximum SM clock.", false,
                 kMega, sm_clock_max_mhz),
    STOKER_FIELD("mem_clock_mhz", "stoker_gpu_memory_clock_hertz", "Current memory clock.", false,
                 kMega, mem_clock_mhz),
    STOKER_FIELD("mem_clock_max_mhz", "stoker_gpu_memory_clock_max_hertz", "Maximum memory clock.",
                 false, kMega, mem_clock_max_mhz),
    STOKER_FIELD("clock_event_reasons", "", "", false, 1.0, clock_event_reasons),
    STOKER_FIELD("ecc_corrected_total", "stoker_gpu_ecc_corrected_errors_total",
                 "Corrected ECC errors over the GPU's lifetime (aggregate).", true, 1.0,
                 ecc_corrected_total),
    STOKER_FIELD("ecc_uncorrected_total", "stoker_gpu_ecc_uncorrected_errors_total",
                 "Uncorrected ECC errors over the GPU's lifetime (aggregate).", true, 1.0,
                 ecc_uncorrected_total),
    STOKER_FIELD("remapped_rows_correctable", "stoker_gpu_remapped_rows_correctable_total",
                 "Memory rows remapped after correctable errors.", true, 1.0,
                 remapped_rows_correctable),
    STOKER_FIELD("remapped_rows_uncorrectable", "stoker_gpu_remapped_rows_uncorrectable_total",
                 "Memory rows remapped after uncorrectable errors.", true, 1.0,
                 remapped_rows_uncorrectable),
    STOKER_FIELD("remapping_pending", "stoker_gpu_row_remap_pending",
                 "1 when a row remap is pending (needs a GPU reset).", false, 1.0,
                 remapping_pending),
    STOKER_FIELD("remapping_failed", "stoker_gpu_row_remap_failed",
                 "1 when a row remap failed (replace the GPU).", false, 1.0, remapping_failed),
    STOKER_FIELD("pcie_tx_kbps", "stoker_gpu_pcie_transmit_bytes_per_second",
                 "PCIe transmit throughput (NVML 20 ms window).", false, kKiB, pcie_tx_kbps),
    STOKER_FIELD("pcie_rx_kbps", "stoker_gpu_pcie_receive_bytes_per_second",
                 "PCIe receive throughput (NVML 20 ms window).", false, kKiB, pcie_rx_kbps),
    STOKER_FIELD("nvlink_tx_bytes_total", "stoker_gpu_nvlink_transmit_bytes_total",
                 "NVLink bytes transmitted, all links.", true, 1.0, nvlink_tx_bytes_total),
    STOKER_FIELD("nvlink_rx_bytes_total", "stoker_gpu_nvlink_receive_bytes_total",
                 "NVLink bytes received, all links.", true, 1.0, nvlink_rx_bytes_total),
    STOKER_FIELD("mig_enabled", "stoker_gpu_mig_enabled", "1 when MIG mode is enabled.", false, 1.0,
                 mig_enabled),
    STOKER_FIELD("sm_active_ratio", "stoker_gpu_sm_active_ratio",
                 "GPM: fraction of SM cycles with at least one warp resident.", false, 1.0,
                 gpm.sm_active),
    STOKER_FIELD("sm_occupancy_ratio", "stoker_gpu_sm_occupancy_ratio",
                 "GPM: resident warps as a fraction of the SM maximum.", false, 1.0,
                 gpm.sm_occupancy),
    STOKER_FIELD("tensor_active_ratio", "stoker_gpu_tensor_active_ratio",
                 "GPM: fraction of cycles any tensor pipe was active.", false, 1.0,
                 gpm.tensor_active),
    STOKER_FIELD("dram_active_ratio", "stoker_gpu_dram_active_ratio",
                 "GPM: DRAM bandwidth utilisation.", false, 1.0, gpm.dram_bw_util),
};
static_assert(kFields.size() <= kMaxScalarFields);

#undef STOKER_FIELD

}  // namespace

std::span<const ScalarFieldDef> GpuScalarFields() { return kFields; }

}  // namespace stoker::protocol
