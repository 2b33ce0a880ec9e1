#include "nvml/nvml_gpu_source.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "nvml/nvml_gpu_source_impl.h"

namespace stoker::nvml {
namespace {

constexpr unsigned long long kValueNotAvailable = ULLONG_MAX;  // NVML_VALUE_NOT_AVAILABLE
constexpr unsigned kMaxProcessEntries = 65536;
constexpr int kSizeRetries = 4;

// Maps an NVML return code onto a Field. GPU_IS_LOST is reported through *lost so the caller
// can mark the whole sample lost instead of exporting half a sample.
template <typename T>
Field<T> ToField(nvmlReturn_t rc, T value, bool* lost) {
  switch (rc) {
    case NVML_SUCCESS:
      return Field<T>::Of(value);
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return Field<T>::Unsupported();
    case NVML_ERROR_GPU_IS_LOST:
      *lost = true;
      return Field<T>::Error(rc);
    default:
      return Field<T>::Error(rc);
  }
}

// One-value getters of the form fn(device, &value); a missing symbol means unsupported.
template <typename T, typename Raw, typename Fn>
Field<T> Read(Fn fn, nvmlDevice_t dev, bool* lost) {
  if (fn == nullptr) return Field<T>::Unsupported();
  Raw v{};
  const nvmlReturn_t rc = fn(dev, &v);
  return ToField<T>(rc, static_cast<T>(v), lost);
}

std::string ReadString(nvmlDeviceGetString_fn fn, nvmlDevice_t dev, bool* lost) {
  if (fn == nullptr) return {};
  char buf[STOKER_NVML_NAME_BUFFER_SIZE] = {};
  const nvmlReturn_t rc = fn(dev, buf, sizeof(buf));
  if (rc == NVML_ERROR_GPU_IS_LOST) *lost = true;
  if (rc != NVML_SUCCESS) return {};
  buf[sizeof(buf) - 1] = '\0';
  return buf;
}

// "NVIDIA H100 80GB HBM3 MIG 1g.10gb" -> "1g.10gb".
std::string ProfileFromMigName(const std::string& name) {
  const size_t pos = name.rfind("MIG ");
  return pos == std::string::npos ? std::string() : name.substr(pos + 4);
}

uint32_t SlicesFromProfile(const std::string& profile) {
  if (profile.size() >= 2 && profile[0] >= '1' && profile[0] <= '8' && profile[1] == 'g') {
    return static_cast<uint32_t>(profile[0] - '0');
  }
  return 0;
}

}  // namespace

NvmlGpuSource::NvmlGpuSource(std::unique_ptr<NvmlLibrary> lib, uint32_t device_count,
                             bool simulated, std::string description)
    : lib_(std::move(lib)),
      fn_(lib_->fn()),
      device_count_(device_count),
      simulated_(simulated),
      description_(std::move(description)),
      events_registered_(device_count, false),
      event_handles_(device_count, nullptr),
      uuids_(device_count) {
  devices_.reserve(device_count);
  for (uint32_t i = 0; i < device_count; ++i) devices_.push_back(std::make_unique<Device>());
}

NvmlGpuSource::~NvmlGpuSource() {
  for (auto& d : devices_) {
    std::lock_guard<std::mutex> lock(d->mu);
    FreeGpm(d->gpm);
    for (auto& [key, pair] : d->mig_gpm) FreeGpm(pair);
  }
  if (event_set_ != nullptr && fn_.event_set_free != nullptr) fn_.event_set_free(event_set_);
}

void NvmlGpuSource::FreeGpm(GpmPair& pair) const {
  for (nvmlGpmSample_t& s : pair.buf) {
    if (s != nullptr && fn_.gpm_sample_free != nullptr) fn_.gpm_sample_free(s);
    s = nullptr;
  }
  pair.have_previous = false;
}

std::string NvmlGpuSource::Describe() const {
  return description_.empty() ? lib_->Describe() : description_;
}

bool NvmlGpuSource::AcquireHandle(uint32_t index, Device& d, nvmlReturn_t* rc) const {
  *rc = NVML_SUCCESS;
  if (d.handle != nullptr) return true;
  nvmlDevice_t h = nullptr;
  // Prefer the UUID once known: indexes can move when a GPU drops off and comes back.
  if (d.identity_loaded && !d.identity.uuid.empty() && fn_.device_get_handle_by_uuid != nullptr) {
    *rc = fn_.device_get_handle_by_uuid(d.identity.uuid.c_str(), &h);
  } else {
    *rc = NVML_ERROR_NOT_FOUND;
  }
  if (*rc == NVML_ERROR_NOT_FOUND || *rc == NVML_ERROR_INVALID_ARGUMENT) {
    *rc = fn_.device_get_handle_by_index(index, &h);
  }
  if (*rc != NVML_SUCCESS) return false;
  d.handle = h;
  return true;
}

bool NvmlGpuSource::ReadIdentity(uint32_t index, Device& d) {
  if (d.identity_loaded) return true;
  bool lost = false;
  GpuIdentity id;
  id.index = index;
  id.name = ReadString(fn_.device_get_name, d.handle, &lost);
  id.uuid = ReadString(fn_.device_get_uuid, d.handle, &lost);
  if (fn_.device_get_pci_info != nullptr) {
    nvmlPciInfo_t pci{};
    const nvmlReturn_t rc = fn_.device_get_pci_info(d.handle, &pci);
    if (rc == NVML_ERROR_GPU_IS_LOST) lost = true;
    if (rc == NVML_SUCCESS) {
      pci.busId[sizeof(pci.busId) - 1] = '\0';
      id.pci_bus_id = pci.busId;
    }
  }
  id.minor = Read<uint32_t, unsigned>(fn_.device_get_minor_number, d.handle, &lost);
  id.architecture = Read<uint32_t, unsigned>(fn_.device_get_architecture, d.handle, &lost);
  if (lost) return false;
  d.identity = std::move(id);
  d.identity_loaded = !d.identity.uuid.empty();
  std::lock_guard<std::mutex> lock(uuids_mu_);
  uuids_[index] = d.identity.uuid;
  return true;
}

bool NvmlGpuSource::ReadMemory(nvmlDevice_t dev, Field<uint64_t>* total, Field<uint64_t>* reserved,
                               Field<uint64_t>* used, Field<uint64_t>* free_bytes) const {
  bool lost = false;
  if (fn_.device_get_memory_info_v2 != nullptr) {
    nvmlMemory_v2_t m{};
    m.version = STOKER_NVML_MEMORY_V2_VERSION;
    const nvmlReturn_t rc = fn_.device_get_memory_info_v2(dev, &m);
    const bool fall_back =
        (rc == NVML_ERROR_ARGUMENT_VERSION_MISMATCH || rc == NVML_ERROR_FUNCTION_NOT_FOUND) &&
        fn_.device_get_memory_info != nullptr;
    if (!fall_back) {
      *total = ToField<uint64_t>(rc, m.total, &lost);
      *reserved = ToField<uint64_t>(rc, m.reserved, &lost);
      *used = ToField<uint64_t>(rc, m.used, &lost);
      *free_bytes = ToField<uint64_t>(rc, m.free, &lost);
      return !lost;
    }
  }
  if (fn_.device_get_memory_info == nullptr) {
    *total = *reserved = *used = *free_bytes = Field<uint64_t>::Unsupported();
    return true;
  }
  // v1: `used` includes the driver's reserved memory and there is no separate figure (§2.11.2).
  nvmlMemory_t m{};
  const nvmlReturn_t rc = fn_.device_get_memory_info(dev, &m);
  *total = ToField<uint64_t>(rc, m.total, &lost);
  *used = ToField<uint64_t>(rc, m.used, &lost);
  *free_bytes = ToField<uint64_t>(rc, m.free, &lost);
  *reserved = Field<uint64_t>::Unsupported();
  return !lost;
}

bool NvmlGpuSource::ReadBasics(Device& d, GpuSample* out) {
  bool lost = false;
  const nvmlDevice_t dev = d.handle;

  if (fn_.device_get_utilization_rates != nullptr) {
    nvmlUtilization_t u{};
    const nvmlReturn_t rc = fn_.device_get_utilization_rates(dev, &u);
    out->util_gpu_pct = ToField<uint32_t>(rc, u.gpu, &lost);
    out->util_mem_pct = ToField<uint32_t>(rc, u.memory, &lost);
  } else {
    out->util_gpu_pct = out->util_mem_pct = Field<uint32_t>::Unsupported();
  }

  if (!ReadMemory(dev, &out->memory_total_bytes, &out->memory_reserved_bytes,
                  &out->memory_used_bytes, &out->memory_free_bytes)) {
    return false;
  }

  nvmlReturn_t temp_rc = NVML_ERROR_FUNCTION_NOT_FOUND;
  if (fn_.device_get_temperature_v != nullptr) {
    nvmlTemperature_v1_t t{};
    t.version = STOKER_NVML_TEMPERATURE_V1_VERSION;
    t.sensorType = NVML_TEMPERATURE_GPU;
    temp_rc = fn_.device_get_temperature_v(dev, &t);
    if (temp_rc != NVML_ERROR_ARGUMENT_VERSION_MISMATCH) {
      out->temperature_c = ToField<uint32_t>(temp_rc, static_cast<uint32_t>(t.temperature), &lost);
    }
  }
  if (temp_rc == NVML_ERROR_FUNCTION_NOT_FOUND || temp_rc == NVML_ERROR_ARGUMENT_VERSION_MISMATCH) {
    if (fn_.device_get_temperature != nullptr) {
      unsigned t = 0;
      const nvmlReturn_t rc = fn_.device_get_temperature(dev, NVML_TEMPERATURE_GPU, &t);
      out->temperature_c = ToField<uint32_t>(rc, t, &lost);
    } else {
      out->temperature_c = Field<uint32_t>::Unsupported();
    }
  }

  out->power_mw = Read<uint32_t, unsigned>(fn_.device_get_power_usage, dev, &lost);
  out->power_limit_mw = Read<uint32_t, unsigned>(fn_.device_get_enforced_power_limit != nullptr
                                                     ? fn_.device_get_enforced_power_limit
                                                     : fn_.device_get_power_management_limit,
                                                 dev, &lost);
  out->energy_mj =
      Read<uint64_t, unsigned long long>(fn_.device_get_total_energy_consumption, dev, &lost);

  auto clock = [&](nvmlDeviceGetClockInfo_fn fn, int type) {
    if (fn == nullptr) return Field<uint32_t>::Unsupported();
    unsigned mhz = 0;
    const nvmlReturn_t rc =
        fn(dev, type, &mhz);  // before reading mhz: argument order is unspecified
    return ToField<uint32_t>(rc, mhz, &lost);
  };
  out->sm_clock_mhz = clock(fn_.device_get_clock_info, NVML_CLOCK_SM);
  out->sm_clock_max_mhz = clock(fn_.device_get_max_clock_info, NVML_CLOCK_SM);
  out->mem_clock_mhz = clock(fn_.device_get_clock_info, NVML_CLOCK_MEM);
  out->mem_clock_max_mhz = clock(fn_.device_get_max_clock_info, NVML_CLOCK_MEM);
  out->clock_event_reasons =
      Read<uint64_t, unsigned long long>(fn_.device_get_clock_event_reasons, dev, &lost);

  auto ecc = [&](int type) {
    if (fn_.device_get_total_ecc_errors == nullptr) return Field<uint64_t>::Unsupported();
    unsigned long long n = 0;
    const nvmlReturn_t rc = fn_.device_get_total_ecc_errors(dev, type, NVML_AGGREGATE_ECC, &n);
    return ToField<uint64_t>(rc, n, &lost);
  };
  out->ecc_corrected_total = ecc(NVML_MEMORY_ERROR_TYPE_CORRECTED);
  out->ecc_uncorrected_total = ecc(NVML_MEMORY_ERROR_TYPE_UNCORRECTED);

  if (fn_.device_get_remapped_rows != nullptr) {
    unsigned corr = 0, unc = 0, pending = 0, failed = 0;
    const nvmlReturn_t rc = fn_.device_get_remapped_rows(dev, &corr, &unc, &pending, &failed);
    out->remapped_rows_correctable = ToField<uint32_t>(rc, corr, &lost);
    out->remapped_rows_uncorrectable = ToField<uint32_t>(rc, unc, &lost);
    out->remapping_pending = ToField<bool>(rc, pending != 0, &lost);
    out->remapping_failed = ToField<bool>(rc, failed != 0, &lost);
  } else {
    out->remapped_rows_correctable = out->remapped_rows_uncorrectable =
        Field<uint32_t>::Unsupported();
    out->remapping_pending = out->remapping_failed = Field<bool>::Unsupported();
  }

  auto pcie = [&](int counter) {
    if (fn_.device_get_pcie_throughput == nullptr) return Field<uint32_t>::Unsupported();
    unsigned kbps = 0;
    const nvmlReturn_t rc = fn_.device_get_pcie_throughput(dev, counter, &kbps);
    return ToField<uint32_t>(rc, kbps, &lost);
  };
  // nvmlDeviceGetPcieThroughput samples a 20 ms window per call (two calls: 40 ms of every
  // sample on an H200, measured). With GPM the rates come from the same GPM interval instead.
  if (d.gpm_supported != 1) {
    out->pcie_tx_kbps = pcie(NVML_PCIE_UTIL_TX_BYTES);
    out->pcie_rx_kbps = pcie(NVML_PCIE_UTIL_RX_BYTES);
  }
  return !lost;
}

bool NvmlGpuSource::ReadNvLink(Device& d, GpuSample* out) const {
  if (fn_.device_get_field_values == nullptr) {
    out->nvlink_tx_bytes_total = out->nvlink_rx_bytes_total = Field<uint64_t>::Unsupported();
    return true;
  }
  bool lost = false;
  if (d.nvlink_count < 0) {
    nvmlFieldValue_t f{};
    f.fieldId = STOKER_NVML_FI_NVLINK_LINK_COUNT;
    const nvmlReturn_t rc = fn_.device_get_field_values(d.handle, 1, &f);
    const nvmlReturn_t frc = rc != NVML_SUCCESS ? rc : f.nvmlReturn;
    if (frc == NVML_SUCCESS) {
      d.nvlink_count = static_cast<int>(std::min(f.value.uiVal, 64U));
    } else if (frc == NVML_ERROR_NOT_SUPPORTED) {
      d.nvlink_count = 0;
    } else {
      if (frc == NVML_ERROR_GPU_IS_LOST) return false;
      out->nvlink_tx_bytes_total = out->nvlink_rx_bytes_total = Field<uint64_t>::Error(frc);
      return true;
    }
  }
  if (d.nvlink_count == 0) {
    out->nvlink_tx_bytes_total = out->nvlink_rx_bytes_total = Field<uint64_t>::Unsupported();
    return true;
  }
  const unsigned links = static_cast<unsigned>(d.nvlink_count);
  std::vector<nvmlFieldValue_t> fields(size_t{2} * links);
  for (unsigned l = 0; l < links; ++l) {
    const size_t tx = size_t{2} * l;  // link l: TX here, RX next
    fields[tx].fieldId = STOKER_NVML_FI_NVLINK_THROUGHPUT_DATA_TX;
    fields[tx].scopeId = l;
    fields[tx + 1].fieldId = STOKER_NVML_FI_NVLINK_THROUGHPUT_DATA_RX;
    fields[tx + 1].scopeId = l;
  }
  const nvmlReturn_t rc =
      fn_.device_get_field_values(d.handle, static_cast<int>(fields.size()), fields.data());
  if (rc != NVML_SUCCESS) {
    out->nvlink_tx_bytes_total = ToField<uint64_t>(rc, 0, &lost);
    out->nvlink_rx_bytes_total = ToField<uint64_t>(rc, 0, &lost);
    return !lost;
  }
  uint64_t sum[2] = {0, 0};
  nvmlReturn_t first_error[2] = {NVML_SUCCESS, NVML_SUCCESS};
  for (size_t i = 0; i < fields.size(); ++i) {
    const int dir = static_cast<int>(i % 2);
    if (fields[i].nvmlReturn != NVML_SUCCESS) {
      if (first_error[dir] == NVML_SUCCESS) first_error[dir] = fields[i].nvmlReturn;
      continue;
    }
    sum[dir] += fields[i].value.ullVal * 1024ULL;  // KiB
  }
  out->nvlink_tx_bytes_total = ToField<uint64_t>(first_error[0], sum[0], &lost);
  out->nvlink_rx_bytes_total = ToField<uint64_t>(first_error[1], sum[1], &lost);
  return !lost;
}

bool NvmlGpuSource::ReadGpm(Device& d, nvmlDevice_t dev, int mig_gi, GpmPair& pair, GpmMetrics* out,
                            Field<uint32_t>* pcie_tx, Field<uint32_t>* pcie_rx) const {
  if (d.gpm_supported != 1) {
    out->sm_active = out->sm_occupancy = out->tensor_active = out->dram_bw_util =
        Field<double>::Unsupported();
    return true;
  }
  auto set_all = [&](Field<double> f) {
    out->sm_active = out->sm_occupancy = out->tensor_active = out->dram_bw_util = f;
    Field<uint32_t> pcie;
    if (f.state() == FieldState::kError) pcie = Field<uint32_t>::Error(f.error_code());
    if (f.state() == FieldState::kUnsupported) pcie = Field<uint32_t>::Unsupported();
    if (pcie_tx != nullptr) *pcie_tx = *pcie_rx = pcie;
  };
  for (nvmlGpmSample_t& s : pair.buf) {
    if (s == nullptr) {
      const nvmlReturn_t rc = fn_.gpm_sample_alloc(&s);
      if (rc != NVML_SUCCESS) {
        s = nullptr;
        set_all(Field<double>::Error(rc));
        return true;
      }
    }
  }
  nvmlGpmSample_t current = pair.buf[pair.current];
  const nvmlReturn_t rc = (mig_gi >= 0 && fn_.gpm_mig_sample_get != nullptr)
                              ? fn_.gpm_mig_sample_get(dev, static_cast<unsigned>(mig_gi), current)
                              : fn_.gpm_sample_get(dev, current);
  if (rc != NVML_SUCCESS) {
    bool lost = false;
    set_all(ToField<double>(rc, 0, &lost));
    pair.have_previous = false;
    return !lost;
  }
  if (pair.have_previous) {
    if (!d.gpm_request) d.gpm_request = std::make_unique<nvmlGpmMetricsGet_t>();
    nvmlGpmMetricsGet_t& m = *d.gpm_request;
    std::memset(&m, 0, sizeof(m));
    m.version = STOKER_NVML_GPM_METRICS_GET_VERSION;
    m.numMetrics = pcie_tx != nullptr ? 6 : 4;
    m.sample1 = pair.buf[1 - pair.current];
    m.sample2 = current;
    m.metrics[0].metricId = STOKER_NVML_GPM_METRIC_SM_UTIL;
    m.metrics[1].metricId = STOKER_NVML_GPM_METRIC_SM_OCCUPANCY;
    m.metrics[2].metricId = STOKER_NVML_GPM_METRIC_ANY_TENSOR_UTIL;
    m.metrics[3].metricId = STOKER_NVML_GPM_METRIC_DRAM_BW_UTIL;
    m.metrics[4].metricId = STOKER_NVML_GPM_METRIC_PCIE_TX_PER_SEC;
    m.metrics[5].metricId = STOKER_NVML_GPM_METRIC_PCIE_RX_PER_SEC;
    const nvmlReturn_t mrc = fn_.gpm_metrics_get(&m);
    bool lost = false;
    auto metric = [&](int i) {
      const nvmlReturn_t r = mrc != NVML_SUCCESS ? mrc : m.metrics[i].nvmlReturn;
      // NVML reports 0..100; Stoker stores ratios 0..1.
      return ToField<double>(r, m.metrics[i].value / 100.0, &lost);
    };
    out->sm_active = metric(0);
    out->sm_occupancy = metric(1);
    out->tensor_active = metric(2);
    out->dram_bw_util = metric(3);
    if (pcie_tx != nullptr) {
      // MiB/s over the whole interval; nvmlDeviceGetPcieThroughput's unit is KB/s (KiB here).
      auto rate = [&](int i) {
        const nvmlReturn_t r = mrc != NVML_SUCCESS ? mrc : m.metrics[i].nvmlReturn;
        return ToField<uint32_t>(r, static_cast<uint32_t>(m.metrics[i].value * 1024.0), &lost);
      };
      *pcie_tx = rate(4);
      *pcie_rx = rate(5);
    }
    if (lost) return false;
  }
  // else: first sample, the fields stay unset until the next call has an interval to measure.
  pair.have_previous = true;
  pair.current = 1 - pair.current;
  return true;
}

bool NvmlGpuSource::ReadMig(Device& d, GpuSample* out) {
  if (fn_.device_get_mig_mode == nullptr) {
    out->mig_enabled = Field<bool>::Unsupported();
    return true;
  }
  bool lost = false;
  unsigned current = 0;
  unsigned pending = 0;
  const nvmlReturn_t rc = fn_.device_get_mig_mode(d.handle, &current, &pending);
  out->mig_enabled = ToField<bool>(rc, current == NVML_DEVICE_MIG_ENABLE, &lost);
  if (lost) return false;
  if (!out->mig_enabled.value_or(false) || fn_.device_get_max_mig_device_count == nullptr ||
      fn_.device_get_mig_device_handle_by_index == nullptr) {
    return true;
  }
  unsigned max = 0;
  nvmlReturn_t mrc = fn_.device_get_max_mig_device_count(d.handle, &max);
  if (mrc == NVML_ERROR_GPU_IS_LOST) return false;
  if (mrc != NVML_SUCCESS) return true;
  for (unsigned i = 0; i < std::min(max, 16U); ++i) {
    nvmlDevice_t mig = nullptr;
    mrc = fn_.device_get_mig_device_handle_by_index(d.handle, i, &mig);
    if (mrc == NVML_ERROR_GPU_IS_LOST) return false;
    if (mrc != NVML_SUCCESS) continue;  // NOT_FOUND: an unused slot
    MigInstance mi;
    mi.gpu_instance_id =
        Read<uint32_t, unsigned>(fn_.device_get_gpu_instance_id, mig, &lost).value_or(0);
    mi.compute_instance_id =
        Read<uint32_t, unsigned>(fn_.device_get_compute_instance_id, mig, &lost).value_or(0);
    mi.uuid = ReadString(fn_.device_get_uuid, mig, &lost);
    mi.profile = ProfileFromMigName(ReadString(fn_.device_get_name, mig, &lost));
    mi.slices = SlicesFromProfile(mi.profile);
    Field<uint64_t> reserved;
    Field<uint64_t> free_bytes;
    if (!ReadMemory(mig, &mi.memory_total_bytes, &reserved, &mi.memory_used_bytes, &free_bytes)) {
      return false;
    }
    if (lost) return false;
    const uint64_t key = (static_cast<uint64_t>(mi.gpu_instance_id) << 32) | mi.compute_instance_id;
    GpmPair& pair = d.mig_gpm[key];
    // Per-slice GPM: through the parent and the GI id when the driver has it, else the MIG handle.
    const bool via_parent = fn_.gpm_mig_sample_get != nullptr;
    if (!ReadGpm(d, via_parent ? d.handle : mig,
                 via_parent ? static_cast<int>(mi.gpu_instance_id) : -1, pair, &mi.gpm)) {
      return false;
    }
    out->mig_instances.push_back(std::move(mi));
  }
  return true;
}

bool NvmlGpuSource::ReadProcesses(Device& d, const GpuSample& sample,
                                  std::vector<GpuProcess>* out) {
  const ProcessListApi api = fn_.process_list_api;
  if (api == ProcessListApi::kNone) return true;
  const size_t stride = ProcessEntryStride(api);
  unsigned n = 0;
  nvmlReturn_t rc = NVML_ERROR_INSUFFICIENT_SIZE;
  // The list can grow between the sizing call and the read: over-allocate and retry.
  for (int attempt = 0; attempt < kSizeRetries && rc == NVML_ERROR_INSUFFICIENT_SIZE; ++attempt) {
    d.process_buffer.resize((d.process_capacity * stride + 7) / 8 + 1);
    if (api == ProcessListApi::kDetailList) {
      nvmlProcessDetailList_v1_t list{};
      list.version = STOKER_NVML_PROCESS_DETAIL_LIST_V1_VERSION;
      list.mode = 0;
      list.numProcArrayEntries = d.process_capacity;
      list.procArray = reinterpret_cast<nvmlProcessDetail_v1_t*>(d.process_buffer.data());
      rc = fn_.device_get_running_process_detail_list(d.handle, &list);
      n = list.numProcArrayEntries;
    } else {
      n = d.process_capacity;
      rc = fn_.device_get_compute_running_processes(d.handle, &n, d.process_buffer.data());
    }
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
      d.process_capacity = std::min(kMaxProcessEntries, std::max(n, d.process_capacity) * 2 + 8);
    }
  }
  if (rc == NVML_ERROR_GPU_IS_LOST) return false;
  if (rc != NVML_SUCCESS) return true;  // no list this time; the GPU itself still answered
  n = std::min(n, d.process_capacity);
  const auto* bytes = reinterpret_cast<const unsigned char*>(d.process_buffer.data());
  const uint64_t total = sample.memory_total_bytes.value_or(UINT64_MAX);
  for (unsigned i = 0; i < n; ++i) {
    const unsigned char* e = bytes + i * stride;
    GpuProcess p;
    unsigned long long mem = 0;
    std::memcpy(&p.pid, e, sizeof(unsigned));
    std::memcpy(&mem, e + 8, sizeof(mem));
    if (stride >= sizeof(nvmlProcessInfo_v2_t)) {
      std::memcpy(&p.gpu_instance_id, e + 16, sizeof(unsigned));
      std::memcpy(&p.compute_instance_id, e + 20, sizeof(unsigned));
    }
    if (mem == kValueNotAvailable) {
      p.used_memory_bytes = Field<uint64_t>::Unsupported();
    } else if (mem > total) {
      // Implausible: the classic symptom of a wrong entry stride (§2.11.1).
      p.used_memory_bytes = Field<uint64_t>::Error(NVML_ERROR_UNKNOWN);
    } else {
      p.used_memory_bytes = Field<uint64_t>::Of(mem);
    }
    if (fn_.system_get_process_name != nullptr) {
      char name[STOKER_NVML_PROCESS_NAME_BUFFER_SIZE] = {};
      if (fn_.system_get_process_name(p.pid, name, sizeof(name)) == NVML_SUCCESS) {
        name[sizeof(name) - 1] = '\0';
        p.name = name;
      }
    }
    out->push_back(std::move(p));
  }
  return ReadProcessUtilization(d, sample.mig_enabled.value_or(false), out);
}

bool NvmlGpuSource::ReadProcessUtilization(Device& d, bool mig_enabled,
                                           std::vector<GpuProcess>* procs) const {
  if (procs->empty()) return true;
  auto set_all = [&](Field<uint32_t> f) {
    for (GpuProcess& p : *procs) p.sm_util_pct = p.mem_util_pct = f;
  };
  if (fn_.device_get_process_utilization == nullptr || mig_enabled) {
    set_all(Field<uint32_t>::Unsupported());  // not available on MIG-enabled GPUs (§2.5)
    return true;
  }
  unsigned count = 0;
  nvmlReturn_t rc =
      fn_.device_get_process_utilization(d.handle, nullptr, &count, d.last_process_util_ts);
  for (int attempt = 0; attempt < kSizeRetries && rc == NVML_ERROR_INSUFFICIENT_SIZE; ++attempt) {
    count = std::min(count + 8, kMaxProcessEntries);
    d.util_samples.assign(count, nvmlProcessUtilizationSample_t{});
    rc = fn_.device_get_process_utilization(d.handle, d.util_samples.data(), &count,
                                            d.last_process_util_ts);
  }
  if (rc == NVML_ERROR_NOT_FOUND) return true;  // no sample newer than the last one: unset
  if (rc != NVML_SUCCESS) {
    bool lost = false;
    set_all(ToField<uint32_t>(rc, 0, &lost));
    return !lost;
  }
  // A process without a sample in the window did not run a kernel in it: 0 % (nvtop's rule).
  // Samples above 100 % or not newer than the last seen are bogus and skipped (§2.11.3).
  set_all(Field<uint32_t>::Of(0));
  unsigned long long newest = d.last_process_util_ts;
  for (unsigned i = 0; i < std::min<size_t>(count, d.util_samples.size()); ++i) {
    const nvmlProcessUtilizationSample_t& s = d.util_samples[i];
    if (s.smUtil > 100 || s.memUtil > 100 || s.timeStamp <= d.last_process_util_ts) continue;
    newest = std::max(newest, s.timeStamp);
    for (GpuProcess& p : *procs) {
      if (p.pid == s.pid) {
        p.sm_util_pct = Field<uint32_t>::Of(s.smUtil);
        p.mem_util_pct = Field<uint32_t>::Of(s.memUtil);
      }
    }
  }
  d.last_process_util_ts = newest;
  return true;
}

void NvmlGpuSource::MarkLost(Device& d, GpuSample* out) {
  std::vector<GpuProcess> procs = std::move(out->processes);
  std::vector<MigInstance> migs = std::move(out->mig_instances);
  procs.clear();
  migs.clear();
  const GpuIdentity id = out->id;
  const WallTime ts = out->timestamp;
  *out = GpuSample{};
  out->id = id;
  out->timestamp = ts;
  out->health = GpuHealth::kLost;
  out->processes = std::move(procs);
  out->mig_instances = std::move(migs);
  // The handle dies with the GPU; it is looked up again (by UUID, then index) next time.
  d.handle = nullptr;
  d.gpm.have_previous = false;
  for (auto& [key, pair] : d.mig_gpm) pair.have_previous = false;
  d.nvlink_count = -1;
}

Status NvmlGpuSource::Sample(uint32_t index, GpuSample* out) {
  if (out == nullptr) return InvalidArgument("Sample: null output");
  if (index >= device_count_) {
    return InvalidArgument("GPU index " + std::to_string(index) + " out of range (" +
                           std::to_string(device_count_) + " GPUs)");
  }
  Device& d = *devices_[index];
  std::lock_guard<std::mutex> lock(d.mu);

  // Reset the sample but keep the vectors' capacity (sampling runs every few seconds per GPU).
  std::vector<GpuProcess> procs = std::move(out->processes);
  std::vector<MigInstance> migs = std::move(out->mig_instances);
  procs.clear();
  migs.clear();
  *out = GpuSample{};
  out->processes = std::move(procs);
  out->mig_instances = std::move(migs);
  out->timestamp = clock_.WallNow();
  if (d.identity_loaded) {
    out->id = d.identity;
  } else {
    out->id.index = index;
  }

  nvmlReturn_t rc = NVML_SUCCESS;
  if (!AcquireHandle(index, d, &rc)) {
    if (rc == NVML_ERROR_GPU_IS_LOST) {
      MarkLost(d, out);
    } else {
      out->health = GpuHealth::kUnreachable;
    }
    return Status::Ok();
  }
  if (!ReadIdentity(index, d)) {
    MarkLost(d, out);
    return Status::Ok();
  }
  out->id = d.identity;

  if (d.gpm_supported < 0) {
    if (fn_.gpm_metrics_get == nullptr || fn_.gpm_query_device_support == nullptr) {
      d.gpm_supported = 0;
    } else {
      nvmlGpmSupport_t support{};
      support.version = STOKER_NVML_GPM_SUPPORT_VERSION;
      const nvmlReturn_t grc = fn_.gpm_query_device_support(d.handle, &support);
      if (grc == NVML_ERROR_GPU_IS_LOST) {
        MarkLost(d, out);
        return Status::Ok();
      }
      if (grc == NVML_SUCCESS) {
        d.gpm_supported = support.isSupportedDevice != 0 ? 1 : 0;
      } else if (grc == NVML_ERROR_NOT_SUPPORTED || grc == NVML_ERROR_FUNCTION_NOT_FOUND) {
        d.gpm_supported = 0;
      }
    }
  }

  if (!ReadBasics(d, out) || !ReadNvLink(d, out) || !ReadMig(d, out) ||
      !ReadGpm(d, d.handle, -1, d.gpm, &out->gpm, &out->pcie_tx_kbps, &out->pcie_rx_kbps) ||
      !ReadProcesses(d, *out, &out->processes)) {
    MarkLost(d, out);
  }
  return Status::Ok();
}

Status NvmlGpuSource::EnsureEventSet() {
  if (event_set_ != nullptr) return Status::Ok();
  if (fn_.event_set_create == nullptr || fn_.device_register_events == nullptr ||
      fn_.event_set_wait == nullptr) {
    return Unimplemented("NVML library '" + lib_->path() +
                         "' has no event API (nvmlEventSetCreate/RegisterEvents/EventSetWait)");
  }
  if (event_set_failed_) return Unavailable("NVML event set could not be created");
  const nvmlReturn_t rc = fn_.event_set_create(&event_set_);
  if (rc != NVML_SUCCESS) {
    event_set_ = nullptr;
    event_set_failed_ = rc == NVML_ERROR_NOT_SUPPORTED;
    return Unavailable("nvmlEventSetCreate failed: " + lib_->ErrorText(rc));
  }
  return Status::Ok();
}

Result<std::vector<GpuEvent>> NvmlGpuSource::WaitEvents(Duration timeout) {
  std::lock_guard<std::mutex> lock(events_mu_);
  STOKER_RETURN_IF_ERROR(EnsureEventSet());
  // (Re-)register GPUs not yet registered, e.g. those that were lost at the previous attempt.
  // A separate handle lookup keeps this thread off the per-GPU sampler locks.
  for (uint32_t i = 0; i < device_count_; ++i) {
    if (events_registered_[i]) continue;
    nvmlDevice_t h = nullptr;
    if (fn_.device_get_handle_by_index(i, &h) != NVML_SUCCESS) continue;
    event_handles_[i] = h;
    nvmlReturn_t rc = fn_.device_register_events(h,
                                                 STOKER_NVML_EVENT_XID_CRITICAL |
                                                     STOKER_NVML_EVENT_SINGLE_BIT_ECC |
                                                     STOKER_NVML_EVENT_DOUBLE_BIT_ECC,
                                                 event_set_);
    if (rc == NVML_ERROR_NOT_SUPPORTED) {
      rc = fn_.device_register_events(h, STOKER_NVML_EVENT_XID_CRITICAL, event_set_);
    }
    // NOT_SUPPORTED: this GPU sends nothing; do not retry it every call.
    if (rc == NVML_SUCCESS || rc == NVML_ERROR_NOT_SUPPORTED) events_registered_[i] = true;
  }

  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
  unsigned timeout_ms = static_cast<unsigned>(std::clamp<long long>(ms, 0, 24LL * 3600 * 1000));
  std::vector<GpuEvent> events;
  const MonoTime deadline = clock_.Now() + timeout;
  for (int i = 0; i < 256; ++i) {
    nvmlEventData_t data{};
    const nvmlReturn_t rc = fn_.event_set_wait(event_set_, &data, timeout_ms);
    if (rc == NVML_ERROR_TIMEOUT) break;
    if (rc == NVML_ERROR_GPU_IS_LOST) {
      // The samplers report the lost GPU. The wait can fail at once while a GPU is lost, so
      // block out the timeout here: callers loop on WaitEvents and must not spin.
      if (events.empty()) clock_.SleepUntil(deadline);
      break;
    }
    if (rc != NVML_SUCCESS) {
      if (!events.empty()) break;
      return Unavailable("nvmlEventSetWait failed: " + lib_->ErrorText(rc));
    }
    GpuEvent ev;
    switch (data.eventType) {
      case STOKER_NVML_EVENT_XID_CRITICAL:
        ev.type = GpuEvent::Type::kXid;
        break;
      case STOKER_NVML_EVENT_SINGLE_BIT_ECC:
        ev.type = GpuEvent::Type::kSingleBitEcc;
        break;
      case STOKER_NVML_EVENT_DOUBLE_BIT_ECC:
        ev.type = GpuEvent::Type::kDoubleBitEcc;
        break;
      case STOKER_NVML_EVENT_PSTATE:
        ev.type = GpuEvent::Type::kPState;
        break;
      case STOKER_NVML_EVENT_CLOCK:
        ev.type = GpuEvent::Type::kClock;
        break;
      case STOKER_NVML_EVENT_POWER_SOURCE:
        ev.type = GpuEvent::Type::kPowerSource;
        break;
      default:
        ev.type = GpuEvent::Type::kOther;
        break;
    }
    ev.xid = ev.type == GpuEvent::Type::kXid ? data.eventData : 0;
    ev.gpu_instance_id = data.gpuInstanceId;
    ev.compute_instance_id = data.computeInstanceId;
    ev.timestamp = clock_.WallNow();
    // The event's device is usually a registered handle. Asking the device for its index
    // would fail exactly when it matters most: XID 79 arrives for a GPU that is already lost.
    unsigned index = UINT32_MAX;
    for (uint32_t g = 0; g < device_count_; ++g) {
      if (event_handles_[g] != nullptr && event_handles_[g] == data.device) index = g;
    }
    if (index == UINT32_MAX && fn_.device_get_index != nullptr &&
        fn_.device_get_index(data.device, &index) != NVML_SUCCESS) {
      index = UINT32_MAX;
    }
    bool lost = false;
    ev.uuid = ReadString(fn_.device_get_uuid, data.device, &lost);
    {
      // Not the per-GPU locks: a hung GPU's sampler may hold its lock indefinitely.
      std::lock_guard<std::mutex> ul(uuids_mu_);
      for (uint32_t g = 0; g < device_count_ && index == UINT32_MAX; ++g) {
        if (!ev.uuid.empty() && uuids_[g] == ev.uuid) index = g;
      }
      if (ev.uuid.empty() && index < device_count_) ev.uuid = uuids_[index];
    }
    ev.gpu_index = index;
    events.push_back(std::move(ev));
    timeout_ms = 0;  // drain what is already queued, then return
  }
  return events;
}

Result<std::unique_ptr<GpuSource>> OpenNvmlGpuSourceWith(const std::string& path,
                                                         const NvmlLibrary::BeforeInit& before_init,
                                                         bool simulated, std::string description,
                                                         int owned_fd) {
  Result<std::unique_ptr<NvmlLibrary>> opened = NvmlLibrary::Open(path, before_init);
  if (!opened.ok()) {
    if (owned_fd >= 0) close(owned_fd);
    return opened.status();
  }
  std::unique_ptr<NvmlLibrary> lib = std::move(opened).value();
  if (owned_fd >= 0) lib->CloseOnUnload(owned_fd);
  unsigned count = 0;
  const nvmlReturn_t rc = lib->fn().device_get_count(&count);
  if (rc != NVML_SUCCESS) {
    return Unavailable("NVML library '" + path +
                       "': nvmlDeviceGetCount_v2 failed: " + lib->ErrorText(rc));
  }
  std::unique_ptr<GpuSource> source =
      std::make_unique<NvmlGpuSource>(std::move(lib), count, simulated, std::move(description));
  return source;
}

Result<std::unique_ptr<GpuSource>> OpenNvmlGpuSource(const NvmlOptions& options) {
  return OpenNvmlGpuSourceWith(options.library_path, nullptr, false, "");
}

}  // namespace stoker::nvml
