#pragma once
// NvmlLibrary: one dlopen()ed NVML (the driver's libnvidia-ml or the fake NVML), every symbol
// resolved with dlsym, newest versioned name first (telemetry.md §0 table). A missing optional
// symbol leaves its pointer null and the feature reads as unsupported; a missing required symbol
// (init, count, handle) means the library is not a usable NVML and Open() fails naming it.

#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "nvml/nvml_abi.h"

namespace stoker::nvml {

// How running-process entries are laid out by the resolved process-list symbol (§2.11.1).
enum class ProcessListApi : uint8_t {
  kNone,        // no process list symbol at all
  kDetailList,  // nvmlDeviceGetRunningProcessDetailList (versioned, safe)
  kV3Wide,      // _v3 writing 32-byte entries (535.43-535.86 / 535.104 drivers)
  kV3,          // _v3 writing 24-byte entries
  kV2,          // _v2, 24-byte entries
  kV1,          // plain, 16-byte entries
};
const char* ProcessListApiName(ProcessListApi api);
size_t ProcessEntryStride(ProcessListApi api);

struct NvmlFunctions {
  // Required.
  nvmlInit_fn init = nullptr;
  nvmlShutdown_fn shutdown = nullptr;
  nvmlDeviceGetCount_fn device_get_count = nullptr;
  nvmlDeviceGetHandleByIndex_fn device_get_handle_by_index = nullptr;
  // Optional: null when the library does not export them.
  nvmlErrorString_fn error_string = nullptr;
  nvmlSystemGetString_fn system_get_driver_version = nullptr;
  nvmlSystemGetString_fn system_get_nvml_version = nullptr;
  nvmlSystemGetProcessName_fn system_get_process_name = nullptr;
  nvmlDeviceGetHandleByUUID_fn device_get_handle_by_uuid = nullptr;
  nvmlDeviceGetUInt_fn device_get_index = nullptr;
  nvmlDeviceGetString_fn device_get_name = nullptr;
  nvmlDeviceGetString_fn device_get_uuid = nullptr;
  nvmlDeviceGetUInt_fn device_get_minor_number = nullptr;
  nvmlDeviceGetUInt_fn device_get_architecture = nullptr;
  nvmlDeviceGetPciInfo_fn device_get_pci_info = nullptr;
  nvmlDeviceGetUtilizationRates_fn device_get_utilization_rates = nullptr;
  nvmlDeviceGetMemoryInfo_v2_fn device_get_memory_info_v2 = nullptr;
  nvmlDeviceGetMemoryInfo_fn device_get_memory_info = nullptr;
  nvmlDeviceGetTemperatureV_fn device_get_temperature_v = nullptr;
  nvmlDeviceGetTemperature_fn device_get_temperature = nullptr;
  nvmlDeviceGetUInt_fn device_get_power_usage = nullptr;
  nvmlDeviceGetUInt_fn device_get_enforced_power_limit = nullptr;
  nvmlDeviceGetUInt_fn device_get_power_management_limit = nullptr;
  nvmlDeviceGetULL_fn device_get_total_energy_consumption = nullptr;
  nvmlDeviceGetClockInfo_fn device_get_clock_info = nullptr;
  nvmlDeviceGetClockInfo_fn device_get_max_clock_info = nullptr;
  nvmlDeviceGetULL_fn device_get_clock_event_reasons = nullptr;  // or the throttle-reasons name
  nvmlDeviceGetTotalEccErrors_fn device_get_total_ecc_errors = nullptr;
  nvmlDeviceGetRemappedRows_fn device_get_remapped_rows = nullptr;
  nvmlDeviceGetPcieThroughput_fn device_get_pcie_throughput = nullptr;
  nvmlDeviceGetFieldValues_fn device_get_field_values = nullptr;
  nvmlDeviceGetMigMode_fn device_get_mig_mode = nullptr;
  nvmlDeviceGetUInt_fn device_get_max_mig_device_count = nullptr;
  nvmlDeviceGetMigDeviceHandleByIndex_fn device_get_mig_device_handle_by_index = nullptr;
  nvmlDeviceGetUInt_fn device_get_gpu_instance_id = nullptr;
  nvmlDeviceGetUInt_fn device_get_compute_instance_id = nullptr;
  nvmlDeviceGetRunningProcessDetailList_fn device_get_running_process_detail_list = nullptr;
  nvmlDeviceGetRunningProcesses_fn device_get_compute_running_processes = nullptr;  // per api
  nvmlDeviceGetProcessUtilization_fn device_get_process_utilization = nullptr;
  nvmlEventSetCreate_fn event_set_create = nullptr;
  nvmlEventSetFree_fn event_set_free = nullptr;
  nvmlDeviceRegisterEvents_fn device_register_events = nullptr;
  nvmlEventSetWait_fn event_set_wait = nullptr;  // _v2 or plain
  nvmlGpmQueryDeviceSupport_fn gpm_query_device_support = nullptr;
  nvmlGpmSampleAlloc_fn gpm_sample_alloc = nullptr;
  nvmlGpmSampleFree_fn gpm_sample_free = nullptr;
  nvmlGpmSampleGet_fn gpm_sample_get = nullptr;
  nvmlGpmMigSampleGet_fn gpm_mig_sample_get = nullptr;
  nvmlGpmMetricsGet_fn gpm_metrics_get = nullptr;

  ProcessListApi process_list_api = ProcessListApi::kNone;
};

class NvmlLibrary {
 public:
  // Called with the dlopen handle after symbols are resolved and before nvmlInit; lets the
  // simulator tell the fake library which scenario to play. A non-OK status aborts Open().
  using BeforeInit = std::function<Status(void* dl_handle)>;

  // dlopen()s `path`, resolves symbols and calls nvmlInit. Errors name the path and the symbol
  // or the NVML return code.
  static Result<std::unique_ptr<NvmlLibrary>> Open(const std::string& path,
                                                   const BeforeInit& before_init = nullptr);
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  const NvmlFunctions& fn() const { return fn_; }
  const std::string& path() const { return path_; }
  void* dl_handle() const { return handle_; }
  // Keeps `fd` open until after dlclose. The simulator loads from /proc/self/fd/N: glibc matches
  // already-loaded objects by path string, so N must not be reused while this library is loaded.
  void CloseOnUnload(int fd) { keep_fd_ = fd; }
  // "NVML 12.550.54.15, driver 550.54.15 (libnvidia-ml.so.1)"; unknown parts say so.
  std::string Describe() const;
  const std::string& driver_version() const { return driver_version_; }
  const std::string& nvml_version() const { return nvml_version_; }
  // Names of the symbols actually resolved for the versioned entry points (for Describe/debug).
  const std::string& resolved_summary() const { return resolved_summary_; }

  // "NVML_ERROR_GPU_IS_LOST (15): GPU is lost" using nvmlErrorString when available.
  std::string ErrorText(nvmlReturn_t code) const;

 private:
  NvmlLibrary() = default;

  void* handle_ = nullptr;
  int keep_fd_ = -1;
  bool initialized_ = false;
  std::string path_;
  std::string driver_version_;
  std::string nvml_version_;
  std::string resolved_summary_;
  NvmlFunctions fn_;
};

// Symbolic name of an NVML return code ("NVML_ERROR_NOT_SUPPORTED"); "NVML_ERROR_<n>" if unknown.
const char* ReturnCodeName(int code);

}  // namespace stoker::nvml
