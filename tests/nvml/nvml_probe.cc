// nvml_probe: dumps what NvmlGpuSource reads from a real (or fake) NVML, field by field with its
// state, plus the time each Sample() takes. Used for the real-GPU check (docs/architecture.md,
// "NVML adapter and fake NVML"): compare its output with nvidia-smi / pynvml on the same node.
//
//   nvml_probe [library_path] [rounds] [interval_ms]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "nvml/nvml_gpu_source.h"
#include "nvml/nvml_library.h"

namespace {

using stoker::Field;
using stoker::FieldState;

template <typename T>
std::string Str(const Field<T>& f) {
  switch (f.state()) {
    case FieldState::kValue:
      if constexpr (std::is_same_v<T, double>) {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%.4f", f.value());
        return buf;
      } else if constexpr (std::is_same_v<T, bool>) {
        return f.value() ? "true" : "false";
      } else {
        return std::to_string(f.value());
      }
    case FieldState::kUnset:
      return "unset";
    case FieldState::kUnsupported:
      return "unsupported";
    case FieldState::kError:
      return "error(" + std::to_string(f.error_code()) + ")";
  }
  return "?";
}

void Print(const stoker::GpuSample& s) {
  std::printf("gpu %u: health=%s name='%s' uuid=%s pci=%s minor=%s arch=%s\n", s.id.index,
              stoker::GpuHealthName(s.health), s.id.name.c_str(), s.id.uuid.c_str(),
              s.id.pci_bus_id.c_str(), Str(s.id.minor).c_str(), Str(s.id.architecture).c_str());
  std::printf(
      "  util gpu=%s mem=%s | mem total=%s reserved=%s used=%s free=%s\n"
      "  temp=%s power_mw=%s limit_mw=%s energy_mj=%s\n"
      "  sm_mhz=%s/%s mem_mhz=%s/%s reasons=%s\n"
      "  ecc corr=%s unc=%s remap corr=%s unc=%s pending=%s failed=%s\n"
      "  pcie tx=%s rx=%s nvlink tx=%s rx=%s mig=%s\n"
      "  gpm sm_active=%s sm_occupancy=%s tensor=%s dram_bw=%s\n",
      Str(s.util_gpu_pct).c_str(), Str(s.util_mem_pct).c_str(), Str(s.memory_total_bytes).c_str(),
      Str(s.memory_reserved_bytes).c_str(), Str(s.memory_used_bytes).c_str(),
      Str(s.memory_free_bytes).c_str(), Str(s.temperature_c).c_str(), Str(s.power_mw).c_str(),
      Str(s.power_limit_mw).c_str(), Str(s.energy_mj).c_str(), Str(s.sm_clock_mhz).c_str(),
      Str(s.sm_clock_max_mhz).c_str(), Str(s.mem_clock_mhz).c_str(),
      Str(s.mem_clock_max_mhz).c_str(), Str(s.clock_event_reasons).c_str(),
      Str(s.ecc_corrected_total).c_str(), Str(s.ecc_uncorrected_total).c_str(),
      Str(s.remapped_rows_correctable).c_str(), Str(s.remapped_rows_uncorrectable).c_str(),
      Str(s.remapping_pending).c_str(), Str(s.remapping_failed).c_str(),
      Str(s.pcie_tx_kbps).c_str(), Str(s.pcie_rx_kbps).c_str(),
      Str(s.nvlink_tx_bytes_total).c_str(), Str(s.nvlink_rx_bytes_total).c_str(),
      Str(s.mig_enabled).c_str(), Str(s.gpm.sm_active).c_str(), Str(s.gpm.sm_occupancy).c_str(),
      Str(s.gpm.tensor_active).c_str(), Str(s.gpm.dram_bw_util).c_str());
  for (const stoker::MigInstance& m : s.mig_instances) {
    std::printf("  mig gi=%u ci=%u profile=%s uuid=%s mem=%s/%s sm_active=%s\n", m.gpu_instance_id,
                m.compute_instance_id, m.profile.c_str(), m.uuid.c_str(),
                Str(m.memory_used_bytes).c_str(), Str(m.memory_total_bytes).c_str(),
                Str(m.gpm.sm_active).c_str());
  }
  for (const stoker::GpuProcess& p : s.processes) {
    std::printf("  process pid=%u name='%s' mem=%s sm=%s memutil=%s gi=%u ci=%u\n", p.pid,
                p.name.c_str(), Str(p.used_memory_bytes).c_str(), Str(p.sm_util_pct).c_str(),
                Str(p.mem_util_pct).c_str(), p.gpu_instance_id, p.compute_instance_id);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "libnvidia-ml.so.1";
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  const int interval_ms = argc > 3 ? std::atoi(argv[3]) : 1000;

  auto lib = stoker::nvml::NvmlLibrary::Open(path);
  if (!lib.ok()) {
    std::fprintf(stderr, "nvml_probe: %s\n", lib.status().ToString().c_str());
    return 3;
  }
  std::printf("library: %s\nresolved: %s\n", (*lib)->Describe().c_str(),
              (*lib)->resolved_summary().c_str());

  auto source = stoker::nvml::OpenNvmlGpuSource(stoker::nvml::NvmlOptions{path});
  if (!source.ok()) {
    std::fprintf(stderr, "nvml_probe: %s\n", source.status().ToString().c_str());
    return 3;
  }
  stoker::GpuSource& src = **source;
  std::printf("source: %s, %u GPUs\n", src.Describe().c_str(), src.DeviceCount());
  stoker::GpuSample sample;
  for (int r = 0; r < rounds; ++r) {
    std::printf("--- round %d\n", r);
    for (uint32_t i = 0; i < src.DeviceCount(); ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const stoker::Status st = src.Sample(i, &sample);
      const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now() - t0)
                          .count();
      if (!st.ok()) {
        std::printf("gpu %u: %s\n", i, st.ToString().c_str());
        continue;
      }
      Print(sample);
      std::printf("  sample_us=%lld\n", static_cast<long long>(us));
    }
    if (r + 1 < rounds) std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
  }
  // Steady-state cost of one Sample() (all fields, GPM, processes), averaged.
  const int n = 50;
  const auto t0 = std::chrono::steady_clock::now();
  for (int k = 0; k < n; ++k) (void)src.Sample(0, &sample);
  const double avg_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
  std::printf("steady-state Sample(0): %.1f us (mean of %d)\n", avg_us, n);

  // Per-call cost on GPU 0, to see which NVML calls dominate a sample.
  const stoker::nvml::NvmlFunctions& f = (*lib)->fn();
  nvmlDevice_t dev = nullptr;
  if (f.device_get_handle_by_index(0, &dev) == NVML_SUCCESS) {
    auto time_call = [](const char* name, auto&& call) {
      const int reps = 10;
      int rc = 0;
      const auto c0 = std::chrono::steady_clock::now();
      for (int k = 0; k < reps; ++k) rc = call();
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - c0).count() /
          reps;
      std::printf("call %-44s %10.1f us rc=%d\n", name, us, rc);
    };
    unsigned u = 0;
    unsigned long long ull = 0;
    nvmlUtilization_t util{};
    nvmlMemory_v2_t mem{};
    mem.version = STOKER_NVML_MEMORY_V2_VERSION;
    if (f.device_get_utilization_rates)
      time_call("nvmlDeviceGetUtilizationRates",
                [&] { return f.device_get_utilization_rates(dev, &util); });
    if (f.device_get_memory_info_v2)
      time_call("nvmlDeviceGetMemoryInfo_v2",
                [&] { return f.device_get_memory_info_v2(dev, &mem); });
    if (f.device_get_temperature_v)
      time_call("nvmlDeviceGetTemperatureV", [&] {
        nvmlTemperature_v1_t t{STOKER_NVML_TEMPERATURE_V1_VERSION, 0, 0};
        return f.device_get_temperature_v(dev, &t);
      });
    if (f.device_get_power_usage)
      time_call("nvmlDeviceGetPowerUsage", [&] { return f.device_get_power_usage(dev, &u); });
    if (f.device_get_total_energy_consumption)
      time_call("nvmlDeviceGetTotalEnergyConsumption",
                [&] { return f.device_get_total_energy_consumption(dev, &ull); });
    if (f.device_get_clock_info)
      time_call("nvmlDeviceGetClockInfo(SM)",
                [&] { return f.device_get_clock_info(dev, NVML_CLOCK_SM, &u); });
    if (f.device_get_clock_event_reasons)
      time_call("nvmlDeviceGetCurrentClocksEventReasons",
                [&] { return f.device_get_clock_event_reasons(dev, &ull); });
    if (f.device_get_total_ecc_errors)
      time_call("nvmlDeviceGetTotalEccErrors",
                [&] { return f.device_get_total_ecc_errors(dev, 0, 1, &ull); });
    if (f.device_get_remapped_rows)
      time_call("nvmlDeviceGetRemappedRows", [&] {
        unsigned a, b, c, d;
        return f.device_get_remapped_rows(dev, &a, &b, &c, &d);
      });
    if (f.device_get_pcie_throughput)
      time_call("nvmlDeviceGetPcieThroughput(TX)",
                [&] { return f.device_get_pcie_throughput(dev, 0, &u); });
    if (f.device_get_field_values)
      time_call("nvmlDeviceGetFieldValues(91)", [&] {
        nvmlFieldValue_t fv{};
        fv.fieldId = 91;
        return f.device_get_field_values(dev, 1, &fv);
      });
    if (f.device_get_mig_mode)
      time_call("nvmlDeviceGetMigMode", [&] {
        unsigned a, b;
        return f.device_get_mig_mode(dev, &a, &b);
      });
    if (f.device_get_running_process_detail_list)
      time_call("nvmlDeviceGetRunningProcessDetailList", [&] {
        nvmlProcessDetail_v1_t arr[64];
        nvmlProcessDetailList_v1_t l{STOKER_NVML_PROCESS_DETAIL_LIST_V1_VERSION, 0, 64, arr};
        return f.device_get_running_process_detail_list(dev, &l);
      });
    if (f.device_get_process_utilization)
      time_call("nvmlDeviceGetProcessUtilization", [&] {
        unsigned n = 0;
        return f.device_get_process_utilization(dev, nullptr, &n, 0);
      });
    if (f.system_get_process_name)
      time_call("nvmlSystemGetProcessName", [&] {
        char name[256];
        return f.system_get_process_name(1, name, sizeof(name));
      });
    if (f.gpm_sample_get) {
      nvmlGpmSample_t a = nullptr;
      f.gpm_sample_alloc(&a);
      time_call("nvmlGpmSampleGet", [&] { return f.gpm_sample_get(dev, a); });
      f.gpm_sample_free(a);
    }
  }

  auto events = src.WaitEvents(std::chrono::milliseconds(200));
  if (events.ok()) {
    std::printf("events in 200 ms: %zu\n", events->size());
  } else {
    std::printf("events: %s\n", events.status().ToString().c_str());
  }
  return 0;
}
