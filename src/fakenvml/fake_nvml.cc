// The fake NVML library: implements the NVML C subset Stoker uses (nvml/nvml_abi.h) over a
// scripted Scenario, so the real adapter (dlopen + dlsym + stride heuristics + error mapping) runs
// unchanged in tests and `--simulate`. One instance per dlopen; all state is behind one mutex
// (the fake is not the code under test for concurrency; the adapter's per-GPU locking is).

#include "fakenvml/fake_nvml.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "fakenvml/scenario.h"
#include "nvml/nvml_abi.h"

#ifndef STOKER_FAKE_NVML_WITH_YAML
#define STOKER_FAKE_NVML_WITH_YAML 1
#endif
#ifndef STOKER_FAKE_NVML_VARIANT
#define STOKER_FAKE_NVML_VARIANT 0
#endif
#define FAKE_FULL (STOKER_FAKE_NVML_VARIANT == 0)
#define FAKE_LEGACY (STOKER_FAKE_NVML_VARIANT == 1)
#define FAKE_R535 (STOKER_FAKE_NVML_VARIANT == 2)

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace stoker::fakenvml {
namespace {

constexpr uint32_t kHandleMagic = 0x4e564d4cU;  // "NVML"
constexpr uint32_t kGpmMagic = 0x47504d53U;     // "GPMS"
constexpr uint64_t kMiB = 1024ULL * 1024ULL;

struct FakeHandle {
  uint32_t magic = kHandleMagic;
  uint32_t gpu = 0;
  int mig = -1;        // index into GpuSpec::mig_instances, -1 for the parent device
  uint64_t epoch = 0;  // handles die when the GPU comes back from a lost window
};

struct FakeGpmSample {
  uint32_t magic = kGpmMagic;
  bool taken = false;
  uint32_t gpu = 0;
  int mig = -1;
  double t = 0;
};

struct FakeEventSet {
  std::vector<unsigned long long> registered;  // event mask per GPU
  double cursor = 0;                           // events at or before this time were queued
  std::deque<nvmlEventData_t> pending;
};

struct State {
  std::mutex mu;
  std::condition_variable cv;  // time moved (manual) or shutdown
  int init_count = 0;
  std::optional<Scenario> pending_scenario;
  std::unique_ptr<Scenario> sc;
  bool manual_time = false;
  double manual_now = 0;
  std::chrono::steady_clock::time_point start;
  std::deque<FakeHandle> handles;  // stable addresses; reused per (gpu, mig, epoch)
  std::unordered_set<const void*> valid_handles;
  std::deque<FakeGpmSample> gpm_samples;
  std::unordered_set<const void*> valid_gpm;
  std::deque<FakeEventSet> event_sets;
  std::unordered_set<const void*> valid_event_sets;
};

State& S() {
  // Destroyed at dlclose (or exit), so each load of the library frees its scenario and handles.
  static State state;
  return state;
}

double NowLocked(const State& s) {
  if (s.manual_time) return s.manual_now;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - s.start).count();
}

// Scenario time within the loop.
double LoopTime(const Scenario& sc, double t) {
  if (sc.loop_seconds <= 0) return t;
  return std::fmod(t, sc.loop_seconds);
}

// Integral of a timeline over absolute time [0, t], honouring the loop.
double LoopIntegral(const Scenario& sc, const Timeline& tl, double fallback, double t) {
  if (tl.empty()) return fallback * t;
  if (sc.loop_seconds <= 0) return tl.Integral(0, t);
  const double loops = std::floor(t / sc.loop_seconds);
  return loops * tl.Integral(0, sc.loop_seconds) + tl.Integral(0, t - loops * sc.loop_seconds);
}

bool IsLost(const Scenario& sc, const GpuSpec& g, double t) {
  const double lt = LoopTime(sc, t);
  for (const LostWindow& w : g.lost) {
    if (lt >= w.from && lt < w.to) return true;
  }
  return false;
}

// How many lost windows have ended by time t; a handle from an earlier epoch is dead.
uint64_t Epoch(const Scenario& sc, const GpuSpec& g, double t) {
  const double lt = LoopTime(sc, t);
  uint64_t n = 0;
  for (const LostWindow& w : g.lost) {
    if (w.to <= lt) ++n;
  }
  if (sc.loop_seconds > 0) {
    n += static_cast<uint64_t>(std::floor(t / sc.loop_seconds)) * g.lost.size();
  }
  return n;
}

bool Unsupported(const GpuSpec& g, const char* fn) {
  return std::find(g.unsupported.begin(), g.unsupported.end(), fn) != g.unsupported.end();
}

FakeHandle* HandleFor(State& s, uint32_t gpu, int mig, uint64_t epoch) {
  for (FakeHandle& h : s.handles) {
    if (h.gpu == gpu && h.mig == mig && h.epoch == epoch) return &h;
  }
  s.handles.push_back(FakeHandle{kHandleMagic, gpu, mig, epoch});
  s.valid_handles.insert(&s.handles.back());
  return &s.handles.back();
}

nvmlDevice_t ToDevice(FakeHandle* h) { return reinterpret_cast<nvmlDevice_t>(h); }

// Common prologue of every device call: validates the handle, the lost state and the
// per-scenario NOT_SUPPORTED list. On success *out is the handle and *t the current time.
nvmlReturn_t Enter(State& s, nvmlDevice_t device, const char* fn, FakeHandle** out, double* t) {
  if (s.init_count == 0 || !s.sc) return NVML_ERROR_UNINITIALIZED;
  if (device == nullptr || s.valid_handles.count(device) == 0) return NVML_ERROR_INVALID_ARGUMENT;
  FakeHandle* h = reinterpret_cast<FakeHandle*>(device);
  const GpuSpec& g = s.sc->gpus[h->gpu];
  *t = NowLocked(s);
  if (IsLost(*s.sc, g, *t) || h->epoch != Epoch(*s.sc, g, *t)) return NVML_ERROR_GPU_IS_LOST;
  if (fn != nullptr && Unsupported(g, fn)) return NVML_ERROR_NOT_SUPPORTED;
  *out = h;
  return NVML_SUCCESS;
}

#define ENTER(fn_name)                                                                         \
  State& s = S();                                                                              \
  std::lock_guard<std::mutex> lock(s.mu);                                                      \
  FakeHandle* h = nullptr;                                                                     \
  double now = 0;                                                                              \
  if (nvmlReturn_t rc_ = Enter(s, device, fn_name, &h, &now); rc_ != NVML_SUCCESS) return rc_; \
  const Scenario& sc = *s.sc;                                                                  \
  const GpuSpec& g = sc.gpus[h->gpu];                                                          \
  const double lt = LoopTime(sc, now);                                                         \
  (void)lt;                                                                                    \
  (void)g

nvmlReturn_t CopyString(const std::string& v, char* buf, unsigned len) {
  if (buf == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (v.size() + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buf, v.c_str(), v.size() + 1);
  return NVML_SUCCESS;
}

bool ProcessAlive(const ProcessSpec& p, double lt) { return lt >= p.start && lt < p.end; }

// Processes visible through `h` at loop time lt (parent: all; MIG handle: its instance).
std::vector<const ProcessSpec*> VisibleProcesses(const Scenario& sc, const FakeHandle& h,
                                                 double lt) {
  std::vector<const ProcessSpec*> out;
  const GpuSpec& g = sc.gpus[h.gpu];
  for (const ProcessSpec& p : sc.processes) {
    if (p.gpu != h.gpu || !ProcessAlive(p, lt)) continue;
    if (h.mig >= 0) {
      const MigInstanceSpec& mi = g.mig_instances[static_cast<size_t>(h.mig)];
      if (p.gpu_instance_id != mi.gpu_instance_id ||
          p.compute_instance_id != mi.compute_instance_id) {
        continue;
      }
    }
    out.push_back(&p);
  }
  return out;
}

double ProcessMemMiB(const std::vector<const ProcessSpec*>& procs, double lt) {
  double sum = 0;
  for (const ProcessSpec* p : procs) sum += p->used_memory_mib.AtOr(lt, 0);
  return sum;
}

double Util(const GpuSpec& g, double lt) { return g.util.AtOr(lt, 0); }

// Memory in bytes: total, reserved, used (allocated, excluding reserved).
void Memory(const Scenario& sc, const FakeHandle& h, double lt, uint64_t* total, uint64_t* reserved,
            uint64_t* used) {
  const GpuSpec& g = sc.gpus[h.gpu];
  if (h.mig >= 0) {
    const MigInstanceSpec& mi = g.mig_instances[static_cast<size_t>(h.mig)];
    *total = mi.memory_total_mib * kMiB;
    *reserved = 0;
    *used = static_cast<uint64_t>(ProcessMemMiB(VisibleProcesses(sc, h, lt), lt) * kMiB);
    return;
  }
  *total = g.memory_total_mib * kMiB;
  *reserved = g.memory_reserved_mib * kMiB;
  const double used_mib = g.mem_used_mib.empty() ? ProcessMemMiB(VisibleProcesses(sc, h, lt), lt)
                                                 : g.mem_used_mib.At(lt);
  *used = static_cast<uint64_t>(used_mib * kMiB);
}

nvmlReturn_t FillProcesses(const Scenario& sc, const FakeHandle& h, double lt, unsigned* count,
                           void* buffer, size_t stride) {
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const auto procs = VisibleProcesses(sc, h, lt);
  const unsigned n = static_cast<unsigned>(procs.size());
  if (*count < n || (n > 0 && buffer == nullptr)) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  auto* out = static_cast<unsigned char*>(buffer);
  for (unsigned i = 0; i < n; ++i) {
    const ProcessSpec& p = *procs[i];
    nvmlProcessDetail_v1_t e{};
    e.pid = p.pid;
    e.usedGpuMemory = static_cast<unsigned long long>(p.used_memory_mib.AtOr(lt, 0) * kMiB);
    e.gpuInstanceId = p.gpu_instance_id;
    e.computeInstanceId = p.compute_instance_id;
    e.usedGpuCcProtectedMemory = 0;
    if (stride == sizeof(nvmlProcessInfo_v1_t)) {
      nvmlProcessInfo_v1_t v1{e.pid, e.usedGpuMemory};
      std::memcpy(out + i * stride, &v1, sizeof(v1));
    } else if (stride == sizeof(nvmlProcessInfo_v2_t)) {
      nvmlProcessInfo_v2_t v2{e.pid, e.usedGpuMemory, e.gpuInstanceId, e.computeInstanceId};
      std::memcpy(out + i * stride, &v2, sizeof(v2));
    } else {
      std::memcpy(out + i * stride, &e, sizeof(e));
    }
  }
  *count = n;
  return NVML_SUCCESS;
}

// ---- Metric defaults: a scenario only scripts what it cares about -------------------------------

double PowerW(const Scenario& sc, const GpuSpec& g, double lt) {
  (void)sc;
  if (!g.power_w.empty()) return g.power_w.At(lt);
  return 0.1 * g.power_limit_w + Util(g, lt) / 100.0 * 0.75 * g.power_limit_w;
}

double EnergyJ(const Scenario& sc, const GpuSpec& g, double t) {
  if (!g.power_w.empty()) return LoopIntegral(sc, g.power_w, 0, t);
  return 0.1 * g.power_limit_w * t +
         0.75 * g.power_limit_w / 100.0 * LoopIntegral(sc, g.util, 0, t);
}

// GPM timeline value (percent) for the GPU or one of its MIG instances; nullopt = unknown id.
[[maybe_unused]] std::optional<double> GpmValue(const GpuSpec& g, int mig, unsigned metric,
                                                double lt) {
  if (mig >= 0) {
    const MigInstanceSpec& mi = g.mig_instances[static_cast<size_t>(mig)];
    switch (metric) {
      case STOKER_NVML_GPM_METRIC_SM_UTIL:
        return mi.sm_active.AtOr(lt, 0);
      case STOKER_NVML_GPM_METRIC_SM_OCCUPANCY:
        return mi.sm_occupancy.AtOr(lt, mi.sm_active.AtOr(lt, 0) * 0.5);
      case STOKER_NVML_GPM_METRIC_ANY_TENSOR_UTIL:
        return mi.tensor_active.AtOr(lt, 0);
      case STOKER_NVML_GPM_METRIC_DRAM_BW_UTIL:
        return mi.dram_bw.AtOr(lt, 0);
      default:
        return std::nullopt;
    }
  }
  const double util = Util(g, lt);
  const double sm_active = g.sm_active.AtOr(lt, util * 0.85);
  switch (metric) {
    case 1:
      return util;  // GRAPHICS_UTIL
    case STOKER_NVML_GPM_METRIC_SM_UTIL:
      return sm_active;
    case STOKER_NVML_GPM_METRIC_SM_OCCUPANCY:
      return g.sm_occupancy.AtOr(lt, sm_active * 0.5);
    case STOKER_NVML_GPM_METRIC_ANY_TENSOR_UTIL:
      return g.tensor_active.AtOr(lt, 0);
    case STOKER_NVML_GPM_METRIC_DRAM_BW_UTIL:
      return g.dram_bw.AtOr(lt, util * 0.3);
    // MiB/s from the scenario's KB/s (KiB) timelines, as nvmlDeviceGetPcieThroughput reports.
    case STOKER_NVML_GPM_METRIC_PCIE_TX_PER_SEC:
      return g.pcie_tx_kbps.AtOr(lt, util * 5000) / 1024;
    case STOKER_NVML_GPM_METRIC_PCIE_RX_PER_SEC:
      return g.pcie_rx_kbps.AtOr(lt, util * 8000) / 1024;
    default:
      return std::nullopt;
  }
}

// Queues the events of the set that happened in (cursor, now].
void QueueDue(State& s, FakeEventSet& es, double now) {
  const Scenario& sc = *s.sc;
  struct Due {
    double t;
    const EventSpec* e;
  };
  std::vector<Due> due;
  for (const EventSpec& e : sc.events) {
    unsigned long long bit = STOKER_NVML_EVENT_XID_CRITICAL;
    if (e.type == EventSpec::Type::kSingleBitEcc) bit = STOKER_NVML_EVENT_SINGLE_BIT_ECC;
    if (e.type == EventSpec::Type::kDoubleBitEcc) bit = STOKER_NVML_EVENT_DOUBLE_BIT_ECC;
    if ((es.registered[e.gpu] & bit) == 0) continue;
    if (sc.loop_seconds <= 0) {
      if (e.t > es.cursor && e.t <= now) due.push_back({e.t, &e});
      continue;
    }
    double k = std::max(0.0, std::floor((es.cursor - e.t) / sc.loop_seconds) + 1);
    for (int guard = 0; guard < 1000; ++guard, k += 1) {
      const double t = e.t + k * sc.loop_seconds;
      if (t > now) break;
      if (t > es.cursor) due.push_back({t, &e});
    }
  }
  std::stable_sort(due.begin(), due.end(), [](const Due& a, const Due& b) { return a.t < b.t; });
  for (const Due& d : due) {
    nvmlEventData_t data{};
    const GpuSpec& g = sc.gpus[d.e->gpu];
    data.device = ToDevice(HandleFor(s, d.e->gpu, -1, Epoch(sc, g, now)));
    switch (d.e->type) {
      case EventSpec::Type::kXid:
        data.eventType = STOKER_NVML_EVENT_XID_CRITICAL;
        data.eventData = d.e->xid;
        break;
      case EventSpec::Type::kSingleBitEcc:
        data.eventType = STOKER_NVML_EVENT_SINGLE_BIT_ECC;
        break;
      case EventSpec::Type::kDoubleBitEcc:
        data.eventType = STOKER_NVML_EVENT_DOUBLE_BIT_ECC;
        break;
    }
    data.gpuInstanceId = d.e->gpu_instance_id;
    data.computeInstanceId = d.e->compute_instance_id;
    es.pending.push_back(data);
  }
  es.cursor = std::max(es.cursor, now);
}

nvmlReturn_t InitImpl() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.init_count > 0) {
    ++s.init_count;
    return NVML_SUCCESS;
  }
  if (!s.pending_scenario) {
    const char* path = std::getenv(STOKER_FAKE_NVML_SCENARIO_ENV);
    // The notes on stderr are for whoever runs the program; the caller's answer is the return
    // code, so a note that cannot be written is no further error.
    if (path == nullptr || *path == '\0') {
      (void)std::fprintf(stderr, "stoker-fakenvml: no scenario: set %s to a scenario file\n",
                         STOKER_FAKE_NVML_SCENARIO_ENV);
      return NVML_ERROR_DRIVER_NOT_LOADED;
    }
#if STOKER_FAKE_NVML_WITH_YAML
    Result<Scenario> loaded = LoadScenarioFile(path);
    if (!loaded.ok()) {
      (void)std::fprintf(stderr, "stoker-fakenvml: %s\n", loaded.status().ToString().c_str());
      return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    s.pending_scenario = std::move(loaded).value();
#else
    (void)std::fprintf(stderr, "stoker-fakenvml: built without YAML support: %s is not read\n",
                       STOKER_FAKE_NVML_SCENARIO_ENV);
    return NVML_ERROR_DRIVER_NOT_LOADED;
#endif
  }
  s.sc = std::make_unique<Scenario>(*s.pending_scenario);
  s.manual_time = false;
  s.manual_now = 0;
  s.start = std::chrono::steady_clock::now();
  s.handles.clear();
  s.valid_handles.clear();
  s.gpm_samples.clear();
  s.valid_gpm.clear();
  s.event_sets.clear();
  s.valid_event_sets.clear();
  s.init_count = 1;
  return NVML_SUCCESS;
}

nvmlReturn_t HandleByIndexImpl(unsigned index, nvmlDevice_t* device) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (device == nullptr || index >= s.sc->gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  const double now = NowLocked(s);
  const GpuSpec& g = s.sc->gpus[index];
  if (IsLost(*s.sc, g, now)) return NVML_ERROR_GPU_IS_LOST;
  *device = ToDevice(HandleFor(s, index, -1, Epoch(*s.sc, g, now)));
  return NVML_SUCCESS;
}

nvmlReturn_t ProcessesImpl(nvmlDevice_t device, unsigned* count, void* infos, size_t stride,
                           const char* fn_name) {
  ENTER(fn_name);
  return FillProcesses(sc, *h, lt, count, infos, stride);
}

nvmlReturn_t PciInfoImpl(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  ENTER("nvmlDeviceGetPciInfo");
  if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *pci = nvmlPciInfo_t{};
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  // The scenario's bus id is free text: the numbers it does not give stay 0.
  (void)std::sscanf(g.pci_bus_id.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &fn);
  pci->domain = domain;
  pci->bus = bus;
  pci->device = dev;
  pci->pciDeviceId = 0x233010DE;
  // Cut to the ABI's fixed fields when longer (the legacy form always fits).
  (void)std::snprintf(pci->busId, sizeof(pci->busId), "%s", g.pci_bus_id.c_str());
  (void)std::snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.0",
                      domain & 0xFFFF, bus & 0xFF, dev & 0xFF);
  return NVML_SUCCESS;
}

nvmlReturn_t MemoryV1Impl(nvmlDevice_t device, nvmlMemory_t* mem) {
  ENTER("nvmlDeviceGetMemoryInfo");
  if (mem == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  uint64_t total = 0, reserved = 0, used = 0;
  Memory(sc, *h, lt, &total, &reserved, &used);
  mem->total = total;
  mem->used = used + reserved;  // v1 folds reserved into used (§2.11.2)
  mem->free = total - mem->used;
  return NVML_SUCCESS;
}

nvmlReturn_t TemperatureImpl(nvmlDevice_t device, int sensor, unsigned* temp, const char* fn) {
  ENTER(fn);
  if (temp == nullptr || sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  if (h->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
  *temp = static_cast<unsigned>(std::lround(g.temperature_c.AtOr(lt, 32 + Util(g, lt) * 0.4)));
  return NVML_SUCCESS;
}

nvmlReturn_t ReasonsImpl(nvmlDevice_t device, unsigned long long* reasons, const char* fn) {
  ENTER(fn);
  if (reasons == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (h->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
  *reasons =
      static_cast<unsigned long long>(g.clock_event_reasons.AtOr(lt, Util(g, lt) < 1 ? 0x1 : 0x0));
  return NVML_SUCCESS;
}

nvmlReturn_t WaitImpl(nvmlEventSet_t set, nvmlEventData_t* data, unsigned timeout_ms) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mu);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (set == nullptr || data == nullptr || s.valid_event_sets.count(set) == 0) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  auto* es = reinterpret_cast<FakeEventSet*>(set);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (s.init_count == 0 || s.valid_event_sets.count(set) == 0) {
      return NVML_ERROR_UNINITIALIZED;
    }
    QueueDue(s, *es, NowLocked(s));
    if (!es->pending.empty()) {
      *data = es->pending.front();
      es->pending.pop_front();
      return NVML_SUCCESS;
    }
    const auto real_now = std::chrono::steady_clock::now();
    if (real_now >= deadline) return NVML_ERROR_TIMEOUT;
    // Manual time wakes us through the condition variable; live time needs a short poll.
    s.cv.wait_until(lock, std::min(deadline, real_now + std::chrono::milliseconds(20)));
  }
}

[[maybe_unused]] nvmlReturn_t GpmSampleImpl(nvmlDevice_t device, int mig_gi,
                                            nvmlGpmSample_t sample) {
  ENTER("nvmlGpmSampleGet");
  if (sample == nullptr || s.valid_gpm.count(sample) == 0) return NVML_ERROR_INVALID_ARGUMENT;
  if (g.architecture < NVML_DEVICE_ARCH_HOPPER) return NVML_ERROR_NOT_SUPPORTED;
  int mig = h->mig;
  if (mig_gi >= 0) {
    if (h->mig >= 0) return NVML_ERROR_INVALID_ARGUMENT;
    mig = -1;
    for (size_t i = 0; i < g.mig_instances.size(); ++i) {
      if (g.mig_instances[i].gpu_instance_id == static_cast<uint32_t>(mig_gi)) {
        mig = static_cast<int>(i);
        break;
      }
    }
    if (mig < 0) return NVML_ERROR_NOT_FOUND;
  }
  auto* smp = reinterpret_cast<FakeGpmSample*>(sample);
  smp->taken = true;
  smp->gpu = h->gpu;
  smp->mig = mig;
  smp->t = now;
  return NVML_SUCCESS;
}

}  // namespace
}  // namespace stoker::fakenvml

using namespace stoker::fakenvml;  // NOLINT: the exported C functions below implement the fake

// ---- Scripting ---------------------------------------------------------------------------

FAKE_EXPORT int stokerFakeNvmlSetScenarioObject(const void* scenario, unsigned long long abi_tag) {
  if (scenario == nullptr || abi_tag != kScenarioAbiTag) return 1;
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  // Copied with this library's allocator; the host keeps its own object.
  s.pending_scenario = *static_cast<const Scenario*>(scenario);
  return 0;
}

FAKE_EXPORT int stokerFakeNvmlSetScenario(const char* text, const char* source_name, char* err,
                                          unsigned err_len) {
#if !STOKER_FAKE_NVML_WITH_YAML
  (void)text;
  (void)source_name;
  if (err != nullptr && err_len > 0) {
    // Cut to the caller's buffer; the return value says that it failed.
    (void)std::snprintf(err, err_len,
                        "this fake NVML was built without YAML support (portable build); "
                        "use stokerFakeNvmlSetScenarioObject");
  }
  return 1;
#else
  stoker::Result<Scenario> parsed =
      ParseScenario(text != nullptr ? text : "", source_name != nullptr ? source_name : "");
  if (!parsed.ok()) {
    if (err != nullptr && err_len > 0) {
      // Cut to the caller's buffer; the return value says that it failed.
      (void)std::snprintf(err, err_len, "%s", parsed.status().message().c_str());
    }
    return 1;
  }
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  s.pending_scenario = std::move(parsed).value();
  return 0;
#endif
}

FAKE_EXPORT void stokerFakeNvmlSetTime(double seconds) {
  State& s = S();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.manual_time = true;
    s.manual_now = seconds;
  }
  s.cv.notify_all();
}

FAKE_EXPORT void stokerFakeNvmlAdvance(double seconds) {
  State& s = S();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.manual_now = NowLocked(s) + seconds;
    s.manual_time = true;
  }
  s.cv.notify_all();
}

FAKE_EXPORT double stokerFakeNvmlNow() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  return NowLocked(s);
}

// ---- Init, system ------------------------------------------------------------------------

FAKE_EXPORT nvmlReturn_t nvmlInit_v2(void) { return InitImpl(); }
FAKE_EXPORT nvmlReturn_t nvmlInit(void) { return InitImpl(); }
FAKE_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned /*flags*/) { return InitImpl(); }

FAKE_EXPORT nvmlReturn_t nvmlShutdown(void) {
  State& s = S();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
    if (--s.init_count == 0) {
      s.sc.reset();
      s.handles.clear();
      s.valid_handles.clear();
      s.gpm_samples.clear();
      s.valid_gpm.clear();
      s.event_sets.clear();
      s.valid_event_sets.clear();
    }
  }
  s.cv.notify_all();
  return NVML_SUCCESS;
}

FAKE_EXPORT const char* nvmlErrorString(nvmlReturn_t rc) {
  switch (rc) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded (fake: no scenario)";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
      return "Argument version mismatch";
    default:
      return "Unknown Error";
  }
}

FAKE_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned len) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.sc) return NVML_ERROR_UNINITIALIZED;
  return CopyString(s.sc->driver_version, version, len);
}

FAKE_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned len) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.sc) return NVML_ERROR_UNINITIALIZED;
  return CopyString(s.sc->nvml_version, version, len);
}

FAKE_EXPORT nvmlReturn_t nvmlSystemGetProcessName(unsigned pid, char* name, unsigned len) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.sc) return NVML_ERROR_UNINITIALIZED;
  for (const ProcessSpec& p : s.sc->processes) {
    if (p.pid == pid) return CopyString(p.name, name, len);
  }
  return NVML_ERROR_NOT_FOUND;
}

// ---- Enumeration, identity -------------------------------------------------------------------

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* count) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned>(s.sc->gpus.size());
  return NVML_SUCCESS;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned* count) {
  return nvmlDeviceGetCount_v2(count);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t* device) {
  return HandleByIndexImpl(index, device);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned index, nvmlDevice_t* device) {
  return HandleByIndexImpl(index, device);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const double now = NowLocked(s);
  for (uint32_t i = 0; i < s.sc->gpus.size(); ++i) {
    const GpuSpec& g = s.sc->gpus[i];
    int mig = -2;
    if (g.uuid == uuid) mig = -1;
    for (size_t m = 0; m < g.mig_instances.size(); ++m) {
      if (g.mig_instances[m].uuid == uuid) mig = static_cast<int>(m);
    }
    if (mig == -2) continue;
    if (IsLost(*s.sc, g, now)) return NVML_ERROR_GPU_IS_LOST;
    *device = ToDevice(HandleFor(s, i, mig, Epoch(*s.sc, g, now)));
    return NVML_SUCCESS;
  }
  return NVML_ERROR_NOT_FOUND;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned* index) {
  ENTER(nullptr);
  if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *index = h->gpu;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned len) {
  ENTER("nvmlDeviceGetName");
  if (h->mig >= 0) {
    return CopyString(g.model + " MIG " + g.mig_instances[static_cast<size_t>(h->mig)].profile,
                      name, len);
  }
  return CopyString(g.model, name, len);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned len) {
  ENTER("nvmlDeviceGetUUID");
  if (h->mig >= 0) return CopyString(g.mig_instances[static_cast<size_t>(h->mig)].uuid, uuid, len);
  return CopyString(g.uuid, uuid, len);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned* minor) {
  ENTER("nvmlDeviceGetMinorNumber");
  if (minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *minor = g.minor;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, unsigned* arch) {
  ENTER("nvmlDeviceGetArchitecture");
  if (arch == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *arch = g.architecture;
  return NVML_SUCCESS;
}

#if !FAKE_LEGACY
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return PciInfoImpl(device, pci);
}
#endif
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return PciInfoImpl(device, pci);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return PciInfoImpl(device, pci);
}

// ---- Utilisation, memory, thermals, power, clocks ---------------------------------------------

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                       nvmlUtilization_t* util) {
  ENTER("nvmlDeviceGetUtilizationRates");
  if (util == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  // Not supported on MIG-enabled GPUs (§2.5).
  if (h->mig >= 0 || g.mig_enabled) return NVML_ERROR_NOT_SUPPORTED;
  util->gpu = static_cast<unsigned>(std::lround(Util(g, lt)));
  util->memory = static_cast<unsigned>(std::lround(g.mem_util.AtOr(lt, Util(g, lt) * 0.4)));
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* mem) {
  return MemoryV1Impl(device, mem);
}

#if !FAKE_LEGACY
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* mem) {
  ENTER("nvmlDeviceGetMemoryInfo_v2");
  if (mem == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (mem->version != STOKER_NVML_MEMORY_V2_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  uint64_t total = 0, reserved = 0, used = 0;
  Memory(sc, *h, lt, &total, &reserved, &used);
  mem->total = total;
  mem->reserved = reserved;
  mem->used = used;
  mem->free = total - reserved - used;
  return NVML_SUCCESS;
}
#endif

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned* temp) {
  return TemperatureImpl(device, sensor, temp, "nvmlDeviceGetTemperature");
}

#if FAKE_FULL
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device,
                                                   nvmlTemperature_v1_t* temp) {
  if (temp == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (temp->version != STOKER_NVML_TEMPERATURE_V1_VERSION) {
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  }
  unsigned v = 0;
  const nvmlReturn_t rc =
      TemperatureImpl(device, temp->sensorType, &v, "nvmlDeviceGetTemperatureV");
  if (rc == NVML_SUCCESS) temp->temperature = static_cast<int>(v);
  return rc;
}
#endif

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned* mw) {
  ENTER("nvmlDeviceGetPowerUsage");
  if (mw == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (h->mig >= 0 || g.power_limit_w == 0) return NVML_ERROR_NOT_SUPPORTED;
  *mw = static_cast<unsigned>(std::lround(PowerW(sc, g, lt) * 1000.0));
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned* mw) {
  ENTER("nvmlDeviceGetEnforcedPowerLimit");
  if (mw == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (h->mig >= 0 || g.power_limit_w == 0) return NVML_ERROR_NOT_SUPPORTED;
  *mw = g.power_limit_w * 1000;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned* mw) {
  ENTER("nvmlDeviceGetPowerManagementLimit");
  if (mw == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (h->mig >= 0 || g.power_limit_w == 0) return NVML_ERROR_NOT_SUPPORTED;
  *mw = g.power_limit_w * 1000;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device,
                                                             unsigned long long* mj) {
  ENTER("nvmlDeviceGetTotalEnergyConsumption");
  if (mj == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  // Volta+ only.
  if (h->mig >= 0 || g.power_limit_w == 0 || g.architecture < NVML_DEVICE_ARCH_VOLTA) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  *mj = g.energy_base_mj + static_cast<unsigned long long>(EnergyJ(sc, g, now) * 1000.0);
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned* mhz) {
  ENTER("nvmlDeviceGetClockInfo");
  if (mhz == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (h->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
  if (type == NVML_CLOCK_SM || type == NVML_CLOCK_GRAPHICS) {
    if (g.sm_clock_max_mhz == 0) return NVML_ERROR_NOT_SUPPORTED;
    const double idle = std::min(345.0, static_cast<double>(g.sm_clock_max_mhz));
    *mhz = static_cast<unsigned>(
        std::lround(g.sm_clock_mhz.AtOr(lt, Util(g, lt) > 0 ? g.sm_clock_max_mhz : idle)));
    return NVML_SUCCESS;
  }
  if (type == NVML_CLOCK_MEM) {
    if (g.mem_clock_max_mhz == 0) return NVML_ERROR_NOT_SUPPORTED;
    *mhz = static_cast<unsigned>(std::lround(g.mem_clock_mhz.AtOr(lt, g.mem_clock_max_mhz)));
    return NVML_SUCCESS;
  }
  return NVML_ERROR_NOT_SUPPORTED;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, int type, unsigned* mhz) {
  ENTER("nvmlDeviceGetMaxClockInfo");
  if (mhz == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (h->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
  const unsigned v = (type == NVML_CLOCK_SM || type == NVML_CLOCK_GRAPHICS) ? g.sm_clock_max_mhz
                     : type == NVML_CLOCK_MEM                               ? g.mem_clock_max_mhz
                                                                            : 0;
  if (v == 0) return NVML_ERROR_NOT_SUPPORTED;
  *mhz = v;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                                   unsigned long long* reasons) {
  return ReasonsImpl(device, reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
}
#if !FAKE_LEGACY
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                                unsigned long long* reasons) {
  return ReasonsImpl(device, reasons, "nvmlDeviceGetCurrentClocksEventReasons");
}
#endif

// ---- ECC, remapping, PCIe, NVLink fields --------------------------------------------------------

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int error_type,
                                                     int counter_type, unsigned long long* count) {
  ENTER("nvmlDeviceGetTotalEccErrors");
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (h->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
  const uint64_t v =
      error_type == NVML_MEMORY_ERROR_TYPE_CORRECTED ? g.ecc_corrected : g.ecc_uncorrected;
  *count = counter_type == NVML_VOLATILE_ECC ? 0 : v;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned* corr,
                                                   unsigned* unc, unsigned* pending,
                                                   unsigned* failed) {
  ENTER("nvmlDeviceGetRemappedRows");
  if (corr == nullptr || unc == nullptr || pending == nullptr || failed == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  // Ampere+, and unsupported while MIG instances are active (§2.4).
  if (h->mig >= 0 || g.architecture < NVML_DEVICE_ARCH_AMPERE || g.mig_enabled) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  *corr = g.remapped_correctable;
  *unc = g.remapped_uncorrectable;
  *pending = g.remapping_pending ? 1 : 0;
  *failed = g.remapping_failed ? 1 : 0;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, int counter,
                                                     unsigned* kbps) {
  ENTER("nvmlDeviceGetPcieThroughput");
  if (kbps == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (h->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
  const double util = Util(g, lt);
  const double v = counter == NVML_PCIE_UTIL_TX_BYTES ? g.pcie_tx_kbps.AtOr(lt, util * 5000)
                                                      : g.pcie_rx_kbps.AtOr(lt, util * 8000);
  *kbps = static_cast<unsigned>(std::lround(v));
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count,
                                                  nvmlFieldValue_t* values) {
  ENTER("nvmlDeviceGetFieldValues");
  if (values == nullptr || count < 0) return NVML_ERROR_INVALID_ARGUMENT;
  for (int i = 0; i < count; ++i) {
    nvmlFieldValue_t& v = values[i];
    v.timestamp = static_cast<long long>(now * 1e6);
    v.latencyUsec = 0;
    v.nvmlReturn = NVML_SUCCESS;
    if (h->mig >= 0 || g.nvlink_count == 0) {
      v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
      continue;
    }
    if (v.fieldId == STOKER_NVML_FI_NVLINK_LINK_COUNT) {
      v.valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
      v.value.uiVal = g.nvlink_count;
    } else if (v.fieldId == STOKER_NVML_FI_NVLINK_THROUGHPUT_DATA_TX ||
               v.fieldId == STOKER_NVML_FI_NVLINK_THROUGHPUT_DATA_RX) {
      if (v.scopeId >= g.nvlink_count) {
        v.nvmlReturn = NVML_ERROR_INVALID_ARGUMENT;
        continue;
      }
      const Timeline& rate = v.fieldId == STOKER_NVML_FI_NVLINK_THROUGHPUT_DATA_TX
                                 ? g.nvlink_tx_mibps
                                 : g.nvlink_rx_mibps;
      // KiB per link since scenario start: the rate's integral spread over the links.
      const double kib = LoopIntegral(sc, rate, 0, now) * 1024.0 / g.nvlink_count;
      v.valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
      v.value.ullVal = static_cast<unsigned long long>(kib);
    } else {
      v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    }
  }
  return NVML_SUCCESS;
}

// ---- MIG ------------------------------------------------------------------------------------

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned* current,
                                              unsigned* pending) {
  ENTER("nvmlDeviceGetMigMode");
  if (current == nullptr || pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (h->mig >= 0 || g.architecture < NVML_DEVICE_ARCH_AMPERE) return NVML_ERROR_NOT_SUPPORTED;
  *current = *pending = g.mig_enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned* count) {
  ENTER("nvmlDeviceGetMaxMigDeviceCount");
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (h->mig >= 0 || g.architecture < NVML_DEVICE_ARCH_AMPERE) return NVML_ERROR_NOT_SUPPORTED;
  *count = 7;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned index,
                                                             nvmlDevice_t* mig) {
  ENTER("nvmlDeviceGetMigDeviceHandleByIndex");
  if (mig == nullptr || h->mig >= 0 || !g.mig_enabled) return NVML_ERROR_INVALID_ARGUMENT;
  if (index >= g.mig_instances.size()) return NVML_ERROR_NOT_FOUND;
  *mig = ToDevice(HandleFor(s, h->gpu, static_cast<int>(index), h->epoch));
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned* is_mig) {
  ENTER(nullptr);
  if (is_mig == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *is_mig = h->mig >= 0 ? 1 : 0;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned* id) {
  ENTER("nvmlDeviceGetGpuInstanceId");
  if (id == nullptr || h->mig < 0) return NVML_ERROR_INVALID_ARGUMENT;
  *id = g.mig_instances[static_cast<size_t>(h->mig)].gpu_instance_id;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned* id) {
  ENTER("nvmlDeviceGetComputeInstanceId");
  if (id == nullptr || h->mig < 0) return NVML_ERROR_INVALID_ARGUMENT;
  *id = g.mig_instances[static_cast<size_t>(h->mig)].compute_instance_id;
  return NVML_SUCCESS;
}

// ---- Processes -------------------------------------------------------------------------------

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned* count,
                                                              void* infos) {
  return ProcessesImpl(device, count, infos, sizeof(nvmlProcessInfo_v1_t),
                       "nvmlDeviceGetComputeRunningProcesses");
}

#if !FAKE_LEGACY
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device,
                                                                 unsigned* count, void* infos) {
  return ProcessesImpl(device, count, infos, sizeof(nvmlProcessInfo_v2_t),
                       "nvmlDeviceGetComputeRunningProcesses_v2");
}

// The r535 variant reproduces the driver that widened `_v3` entries without a version bump.
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                 unsigned* count, void* infos) {
  return ProcessesImpl(device, count, infos,
                       FAKE_R535 ? sizeof(nvmlProcessDetail_v1_t) : sizeof(nvmlProcessInfo_v2_t),
                       "nvmlDeviceGetComputeRunningProcesses_v3");
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetConfComputeMemSizeInfo(nvmlDevice_t /*device*/,
                                                             void* /*info*/) {
  return NVML_ERROR_NOT_SUPPORTED;
}
#endif

#if FAKE_FULL
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t device,
                                                               nvmlProcessDetailList_v1_t* list) {
  if (list == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (list->version != STOKER_NVML_PROCESS_DETAIL_LIST_V1_VERSION) {
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  }
  if (list->mode != 0) {  // graphics / MPS: none in scenarios
    ENTER("nvmlDeviceGetRunningProcessDetailList");
    list->numProcArrayEntries = 0;
    return NVML_SUCCESS;
  }
  unsigned count = list->procArray == nullptr ? 0 : list->numProcArrayEntries;
  const nvmlReturn_t rc =
      ProcessesImpl(device, &count, list->procArray, sizeof(nvmlProcessDetail_v1_t),
                    "nvmlDeviceGetRunningProcessDetailList");
  list->numProcArrayEntries = count;
  return rc;
}
#endif

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                         nvmlProcessUtilizationSample_t* samples,
                                                         unsigned* count,
                                                         unsigned long long last_seen) {
  ENTER("nvmlDeviceGetProcessUtilization");
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (h->mig >= 0 || g.mig_enabled) return NVML_ERROR_NOT_SUPPORTED;  // not on MIG (§2.4)
  const unsigned long long ts = static_cast<unsigned long long>(now * 1e6) + 1;
  if (last_seen >= ts) return NVML_ERROR_NOT_FOUND;
  std::vector<const ProcessSpec*> with_samples;
  for (const ProcessSpec* p : VisibleProcesses(sc, *h, lt)) {
    if (!p->sm_util.empty()) with_samples.push_back(p);
  }
  if (with_samples.empty()) return NVML_ERROR_NOT_FOUND;
  const unsigned n = static_cast<unsigned>(with_samples.size());
  if (samples == nullptr || *count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned i = 0; i < n; ++i) {
    samples[i] = nvmlProcessUtilizationSample_t{};
    samples[i].pid = with_samples[i]->pid;
    samples[i].timeStamp = ts;
    samples[i].smUtil = static_cast<unsigned>(std::lround(with_samples[i]->sm_util.At(lt)));
    samples[i].memUtil = samples[i].smUtil / 3;
  }
  *count = n;
  return NVML_SUCCESS;
}

// ---- Events -----------------------------------------------------------------------------------

FAKE_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  s.event_sets.emplace_back();
  FakeEventSet& es = s.event_sets.back();
  es.registered.assign(s.sc->gpus.size(), 0);
  es.cursor = NowLocked(s);
  s.valid_event_sets.insert(&es);
  *set = reinterpret_cast<nvmlEventSet_t>(&es);
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  State& s = S();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.valid_event_sets.erase(set) == 0) return NVML_ERROR_INVALID_ARGUMENT;
  }
  s.cv.notify_all();
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device,
                                                          unsigned long long* types) {
  ENTER("nvmlDeviceGetSupportedEventTypes");
  if (types == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *types = STOKER_NVML_EVENT_XID_CRITICAL | STOKER_NVML_EVENT_SINGLE_BIT_ECC |
           STOKER_NVML_EVENT_DOUBLE_BIT_ECC;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,
                                                  nvmlEventSet_t set) {
  ENTER("nvmlDeviceRegisterEvents");
  if (set == nullptr || s.valid_event_sets.count(set) == 0 || h->mig >= 0) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  const unsigned long long supported = STOKER_NVML_EVENT_XID_CRITICAL |
                                       STOKER_NVML_EVENT_SINGLE_BIT_ECC |
                                       STOKER_NVML_EVENT_DOUBLE_BIT_ECC;
  if ((types & supported) == 0) return NVML_ERROR_NOT_SUPPORTED;
  auto* es = reinterpret_cast<FakeEventSet*>(set);
  es->registered[h->gpu] |= types & supported;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t* data,
                                          unsigned timeout_ms) {
  return WaitImpl(set, data, timeout_ms);
}
#if !FAKE_LEGACY
FAKE_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                             unsigned timeout_ms) {
  return WaitImpl(set, data, timeout_ms);
}
#endif

// ---- GPM (Hopper+) ------------------------------------------------------------------------------

#if !FAKE_LEGACY
FAKE_EXPORT nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t* sup) {
  ENTER("nvmlGpmQueryDeviceSupport");
  if (sup == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (sup->version != STOKER_NVML_GPM_SUPPORT_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  sup->isSupportedDevice = g.architecture >= NVML_DEVICE_ARCH_HOPPER ? 1 : 0;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* sample) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (sample == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  s.gpm_samples.emplace_back();
  s.valid_gpm.insert(&s.gpm_samples.back());
  *sample = reinterpret_cast<nvmlGpmSample_t>(&s.gpm_samples.back());
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.valid_gpm.erase(sample) == 0) return NVML_ERROR_INVALID_ARGUMENT;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t sample) {
  return GpmSampleImpl(device, -1, sample);
}

FAKE_EXPORT nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned gpu_instance_id,
                                             nvmlGpmSample_t sample) {
  return GpmSampleImpl(device, static_cast<int>(gpu_instance_id), sample);
}

FAKE_EXPORT nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* m) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (m == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (m->version != STOKER_NVML_GPM_METRICS_GET_VERSION) {
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  }
  if (m->numMetrics > STOKER_NVML_GPM_METRIC_MAX || s.valid_gpm.count(m->sample1) == 0 ||
      s.valid_gpm.count(m->sample2) == 0) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  const auto* a = reinterpret_cast<const FakeGpmSample*>(m->sample1);
  const auto* b = reinterpret_cast<const FakeGpmSample*>(m->sample2);
  // The driver needs two samples of the same device, the second one later.
  if (!a->taken || !b->taken || a->gpu != b->gpu || a->mig != b->mig || b->t <= a->t) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  const GpuSpec& g = s.sc->gpus[a->gpu];
  const double mid = LoopTime(*s.sc, 0.5 * (a->t + b->t));
  for (unsigned i = 0; i < m->numMetrics; ++i) {
    nvmlGpmMetric_t& metric = m->metrics[i];
    const std::optional<double> v = GpmValue(g, a->mig, metric.metricId, mid);
    metric.nvmlReturn = v ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
    metric.value = v.value_or(0);
    metric.metricInfo = {nullptr, nullptr, nullptr};
  }
  return NVML_SUCCESS;
}
#endif
