#include "nvml/nvml_library.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstring>
#include <initializer_list>
#include <string_view>

namespace stoker::nvml {
namespace {

// dlsym returns an object pointer; copying its bits into a function pointer is the portable way
// to cross that boundary without -Wpedantic complaints (POSIX guarantees the sizes match).
template <typename Fn>
bool Resolve(void* handle, std::initializer_list<const char*> names, Fn* out,
             std::string* resolved_name = nullptr) {
  static_assert(sizeof(Fn) == sizeof(void*));
  for (const char* name : names) {
    void* sym = dlsym(handle, name);
    if (sym != nullptr) {
      std::memcpy(out, &sym, sizeof(sym));
      if (resolved_name != nullptr) *resolved_name = name;
      return true;
    }
  }
  *out = nullptr;
  return false;
}

bool HasSymbol(void* handle, const char* name) { return dlsym(handle, name) != nullptr; }

std::string CallString(nvmlSystemGetString_fn fn) {
  if (fn == nullptr) return {};
  char buf[STOKER_NVML_DRIVER_VERSION_BUFFER_SIZE] = {};
  if (fn(buf, sizeof(buf)) != NVML_SUCCESS) return {};
  buf[sizeof(buf) - 1] = '\0';
  return buf;
}

}  // namespace

const char* ReturnCodeName(int code) {
  switch (code) {
    case NVML_SUCCESS:
      return "NVML_SUCCESS";
    case NVML_ERROR_UNINITIALIZED:
      return "NVML_ERROR_UNINITIALIZED";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "NVML_ERROR_INVALID_ARGUMENT";
    case NVML_ERROR_NOT_SUPPORTED:
      return "NVML_ERROR_NOT_SUPPORTED";
    case NVML_ERROR_NO_PERMISSION:
      return "NVML_ERROR_NO_PERMISSION";
    case NVML_ERROR_ALREADY_INITIALIZED:
      return "NVML_ERROR_ALREADY_INITIALIZED";
    case NVML_ERROR_NOT_FOUND:
      return "NVML_ERROR_NOT_FOUND";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "NVML_ERROR_INSUFFICIENT_SIZE";
    case NVML_ERROR_INSUFFICIENT_POWER:
      return "NVML_ERROR_INSUFFICIENT_POWER";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "NVML_ERROR_DRIVER_NOT_LOADED";
    case NVML_ERROR_TIMEOUT:
      return "NVML_ERROR_TIMEOUT";
    case NVML_ERROR_IRQ_ISSUE:
      return "NVML_ERROR_IRQ_ISSUE";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
      return "NVML_ERROR_LIBRARY_NOT_FOUND";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return "NVML_ERROR_FUNCTION_NOT_FOUND";
    case NVML_ERROR_CORRUPTED_INFOROM:
      return "NVML_ERROR_CORRUPTED_INFOROM";
    case NVML_ERROR_GPU_IS_LOST:
      return "NVML_ERROR_GPU_IS_LOST";
    case NVML_ERROR_RESET_REQUIRED:
      return "NVML_ERROR_RESET_REQUIRED";
    case NVML_ERROR_OPERATING_SYSTEM:
      return "NVML_ERROR_OPERATING_SYSTEM";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
      return "NVML_ERROR_LIB_RM_VERSION_MISMATCH";
    case NVML_ERROR_IN_USE:
      return "NVML_ERROR_IN_USE";
    case NVML_ERROR_MEMORY:
      return "NVML_ERROR_MEMORY";
    case NVML_ERROR_NO_DATA:
      return "NVML_ERROR_NO_DATA";
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED:
      return "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED";
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
      return "NVML_ERROR_INSUFFICIENT_RESOURCES";
    case NVML_ERROR_FREQ_NOT_SUPPORTED:
      return "NVML_ERROR_FREQ_NOT_SUPPORTED";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
      return "NVML_ERROR_ARGUMENT_VERSION_MISMATCH";
    case NVML_ERROR_DEPRECATED:
      return "NVML_ERROR_DEPRECATED";
    case NVML_ERROR_NOT_READY:
      return "NVML_ERROR_NOT_READY";
    case NVML_ERROR_GPU_NOT_FOUND:
      return "NVML_ERROR_GPU_NOT_FOUND";
    case NVML_ERROR_INVALID_STATE:
      return "NVML_ERROR_INVALID_STATE";
    case NVML_ERROR_RESET_TYPE_NOT_SUPPORTED:
      return "NVML_ERROR_RESET_TYPE_NOT_SUPPORTED";
    case NVML_ERROR_UNKNOWN:
      return "NVML_ERROR_UNKNOWN";
    default:
      return "NVML_ERROR_(unrecognised code)";
  }
}

const char* ProcessListApiName(ProcessListApi api) {
  switch (api) {
    case ProcessListApi::kNone:
      return "none";
    case ProcessListApi::kDetailList:
      return "nvmlDeviceGetRunningProcessDetailList";
    case ProcessListApi::kV3Wide:
      return "nvmlDeviceGetComputeRunningProcesses_v3 (32-byte)";
    case ProcessListApi::kV3:
      return "nvmlDeviceGetComputeRunningProcesses_v3";
    case ProcessListApi::kV2:
      return "nvmlDeviceGetComputeRunningProcesses_v2";
    case ProcessListApi::kV1:
      return "nvmlDeviceGetComputeRunningProcesses";
  }
  return "?";
}

size_t ProcessEntryStride(ProcessListApi api) {
  switch (api) {
    case ProcessListApi::kDetailList:
    case ProcessListApi::kV3Wide:
      return sizeof(nvmlProcessDetail_v1_t);
    case ProcessListApi::kV3:
    case ProcessListApi::kV2:
      return sizeof(nvmlProcessInfo_v2_t);
    case ProcessListApi::kV1:
      return sizeof(nvmlProcessInfo_v1_t);
    case ProcessListApi::kNone:
      return 0;
  }
  return 0;
}

Result<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Open(const std::string& path,
                                                       const BeforeInit& before_init) {
  // RTLD_LOCAL keeps NVML's symbols out of the global namespace, so two libraries (the driver's
  // and the fake) can be loaded side by side in tests.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return Unavailable("cannot load NVML library '" + path +
                       "': " + (err != nullptr ? err : "unknown dlopen error") +
                       " (is the NVIDIA driver installed? use --nvml-lib to point at it)");
  }
  std::unique_ptr<NvmlLibrary> lib(new NvmlLibrary());
  lib->handle_ = handle;
  lib->path_ = path;
  NvmlFunctions& f = lib->fn_;

  std::string init_name;
  std::string count_name;
  std::string handle_name;
  struct Required {
    bool found;
    const char* name;
  };
  const Required required[] = {
      {Resolve(handle, {"nvmlInit_v2", "nvmlInit"}, &f.init, &init_name), "nvmlInit_v2"},
      {Resolve(handle, {"nvmlShutdown"}, &f.shutdown), "nvmlShutdown"},
      {Resolve(handle, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"}, &f.device_get_count,
               &count_name),
       "nvmlDeviceGetCount_v2"},
      {Resolve(handle, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"},
               &f.device_get_handle_by_index, &handle_name),
       "nvmlDeviceGetHandleByIndex_v2"},
  };
  for (const Required& r : required) {
    if (!r.found) {
      return FailedPrecondition("'" + path + "' is not a usable NVML library: required symbol " +
                                r.name + " not found");
    }
  }

  Resolve(handle, {"nvmlErrorString"}, &f.error_string);
  Resolve(handle, {"nvmlSystemGetDriverVersion"}, &f.system_get_driver_version);
  Resolve(handle, {"nvmlSystemGetNVMLVersion"}, &f.system_get_nvml_version);
  Resolve(handle, {"nvmlSystemGetProcessName"}, &f.system_get_process_name);
  Resolve(handle, {"nvmlDeviceGetHandleByUUID"}, &f.device_get_handle_by_uuid);
  Resolve(handle, {"nvmlDeviceGetIndex"}, &f.device_get_index);
  Resolve(handle, {"nvmlDeviceGetName"}, &f.device_get_name);
  Resolve(handle, {"nvmlDeviceGetUUID"}, &f.device_get_uuid);
  Resolve(handle, {"nvmlDeviceGetMinorNumber"}, &f.device_get_minor_number);
  Resolve(handle, {"nvmlDeviceGetArchitecture"}, &f.device_get_architecture);
  std::string pci_name;
  Resolve(handle, {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo"},
          &f.device_get_pci_info, &pci_name);
  Resolve(handle, {"nvmlDeviceGetUtilizationRates"}, &f.device_get_utilization_rates);
  Resolve(handle, {"nvmlDeviceGetMemoryInfo_v2"}, &f.device_get_memory_info_v2);
  Resolve(handle, {"nvmlDeviceGetMemoryInfo"}, &f.device_get_memory_info);
  Resolve(handle, {"nvmlDeviceGetTemperatureV"}, &f.device_get_temperature_v);
  Resolve(handle, {"nvmlDeviceGetTemperature"}, &f.device_get_temperature);
  Resolve(handle, {"nvmlDeviceGetPowerUsage"}, &f.device_get_power_usage);
  Resolve(handle, {"nvmlDeviceGetEnforcedPowerLimit"}, &f.device_get_enforced_power_limit);
  Resolve(handle, {"nvmlDeviceGetPowerManagementLimit"}, &f.device_get_power_management_limit);
  Resolve(handle, {"nvmlDeviceGetTotalEnergyConsumption"}, &f.device_get_total_energy_consumption);
  Resolve(handle, {"nvmlDeviceGetClockInfo"}, &f.device_get_clock_info);
  Resolve(handle, {"nvmlDeviceGetMaxClockInfo"}, &f.device_get_max_clock_info);
  std::string reasons_name;
  Resolve(handle,
          {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"},
          &f.device_get_clock_event_reasons, &reasons_name);
  Resolve(handle, {"nvmlDeviceGetTotalEccErrors"}, &f.device_get_total_ecc_errors);
  Resolve(handle, {"nvmlDeviceGetRemappedRows"}, &f.device_get_remapped_rows);
  Resolve(handle, {"nvmlDeviceGetPcieThroughput"}, &f.device_get_pcie_throughput);
  Resolve(handle, {"nvmlDeviceGetFieldValues"}, &f.device_get_field_values);
  Resolve(handle, {"nvmlDeviceGetMigMode"}, &f.device_get_mig_mode);
  Resolve(handle, {"nvmlDeviceGetMaxMigDeviceCount"}, &f.device_get_max_mig_device_count);
  Resolve(handle, {"nvmlDeviceGetMigDeviceHandleByIndex"},
          &f.device_get_mig_device_handle_by_index);
  Resolve(handle, {"nvmlDeviceGetGpuInstanceId"}, &f.device_get_gpu_instance_id);
  Resolve(handle, {"nvmlDeviceGetComputeInstanceId"}, &f.device_get_compute_instance_id);
  Resolve(handle, {"nvmlDeviceGetProcessUtilization"}, &f.device_get_process_utilization);
  Resolve(handle, {"nvmlEventSetCreate"}, &f.event_set_create);
  Resolve(handle, {"nvmlEventSetFree"}, &f.event_set_free);
  Resolve(handle, {"nvmlDeviceRegisterEvents"}, &f.device_register_events);
  std::string wait_name;
  Resolve(handle, {"nvmlEventSetWait_v2", "nvmlEventSetWait"}, &f.event_set_wait, &wait_name);
  Resolve(handle, {"nvmlGpmQueryDeviceSupport"}, &f.gpm_query_device_support);
  Resolve(handle, {"nvmlGpmSampleAlloc"}, &f.gpm_sample_alloc);
  Resolve(handle, {"nvmlGpmSampleFree"}, &f.gpm_sample_free);
  Resolve(handle, {"nvmlGpmSampleGet"}, &f.gpm_sample_get);
  Resolve(handle, {"nvmlGpmMigSampleGet"}, &f.gpm_mig_sample_get);
  Resolve(handle, {"nvmlGpmMetricsGet"}, &f.gpm_metrics_get);

  // Running processes: prefer the versioned detail list; otherwise nvitop's stride heuristic
  // (§2.11.1), since `_v3` changed its entry size without a version bump on some 535 drivers.
  if (Resolve(handle, {"nvmlDeviceGetRunningProcessDetailList"},
              &f.device_get_running_process_detail_list)) {
    f.process_list_api = ProcessListApi::kDetailList;
  } else if (Resolve(handle, {"nvmlDeviceGetComputeRunningProcesses_v3"},
                     &f.device_get_compute_running_processes)) {
    f.process_list_api = HasSymbol(handle, "nvmlDeviceGetConfComputeMemSizeInfo")
                             ? ProcessListApi::kV3Wide
                             : ProcessListApi::kV3;
  } else if (Resolve(handle, {"nvmlDeviceGetComputeRunningProcesses_v2"},
                     &f.device_get_compute_running_processes)) {
    f.process_list_api = ProcessListApi::kV2;
  } else if (Resolve(handle, {"nvmlDeviceGetComputeRunningProcesses"},
                     &f.device_get_compute_running_processes)) {
    f.process_list_api = ProcessListApi::kV1;
  }

  // GPM is all-or-nothing: without the whole set it is unsupported.
  if (f.gpm_sample_alloc == nullptr || f.gpm_sample_free == nullptr ||
      f.gpm_sample_get == nullptr || f.gpm_metrics_get == nullptr) {
    f.gpm_sample_alloc = nullptr;
    f.gpm_sample_get = nullptr;
    f.gpm_mig_sample_get = nullptr;
    f.gpm_metrics_get = nullptr;
  }

  if (before_init) {
    Status s = before_init(handle);
    if (!s.ok()) return s;
  }

  const nvmlReturn_t rc = f.init();
  if (rc != NVML_SUCCESS) {
    return Unavailable("NVML library '" + path + "': " + init_name +
                       " failed: " + lib->ErrorText(rc));
  }
  lib->initialized_ = true;
  lib->driver_version_ = CallString(f.system_get_driver_version);
  lib->nvml_version_ = CallString(f.system_get_nvml_version);
  lib->resolved_summary_ = init_name + ", " + count_name + ", " + handle_name +
                           (pci_name.empty() ? "" : ", " + pci_name) +
                           (f.device_get_memory_info_v2 != nullptr ? ", nvmlDeviceGetMemoryInfo_v2"
                                                                   : ", nvmlDeviceGetMemoryInfo") +
                           (reasons_name.empty() ? "" : ", " + reasons_name) +
                           (wait_name.empty() ? "" : ", " + wait_name) + ", processes via " +
                           ProcessListApiName(f.process_list_api) +
                           (f.gpm_metrics_get != nullptr ? ", GPM" : ", no GPM");
  return lib;
}

NvmlLibrary::~NvmlLibrary() {
  if (initialized_ && fn_.shutdown != nullptr) fn_.shutdown();
  if (handle_ != nullptr) dlclose(handle_);
  if (keep_fd_ >= 0) close(keep_fd_);
}

std::string NvmlLibrary::Describe() const {
  return "NVML " + (nvml_version_.empty() ? std::string("(version unknown)") : nvml_version_) +
         ", driver " +
         (driver_version_.empty() ? std::string("(version unknown)") : driver_version_) + " (" +
         path_ + ")";
}

std::string NvmlLibrary::ErrorText(nvmlReturn_t code) const {
  std::string text = std::string(ReturnCodeName(code)) + " (" + std::to_string(code) + ")";
  if (fn_.error_string != nullptr) {
    const char* s = fn_.error_string(code);
    if (s != nullptr && *s != '\0') text += std::string(": ") + s;
  }
  return text;
}

}  // namespace stoker::nvml
