#include "fakenvml/scenario.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>

#include "doc/document.h"
#include "doc/reader.h"

namespace stoker::fakenvml {

// ---- Parser --------------------------------------------------------------------------------
// On the document reader (doc/reader.h): every error reads "file:line:column: field.path: what".

namespace {

using doc::Reader;

// Scenario integers: unsigned, decimal or 0x hex (clock event reason masks).
template <typename T>
Status Integer(const Reader& map, const char* key, T* out, bool required = false,
               T min = std::numeric_limits<T>::min(), T max = std::numeric_limits<T>::max()) {
  auto f = map.Field(key);
  if (!f) return required ? map.FieldError(key, "required field is missing") : Status::Ok();
  const doc::Value& v = f->value();
  if (!v.is_scalar()) return f->Error("expected an integer");
  const std::string& s = v.text();
  T parsed{};
  const char* begin = s.data();
  const char* end = s.data() + s.size();
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    begin += 2;
    base = 16;
  }
  auto [ptr, ec] = std::from_chars(begin, end, parsed, base);
  if (ec != std::errc() || ptr != end || begin == end) {
    return f->Error("expected a non-negative integer in range, got '" + s.substr(0, 64) + "'");
  }
  if (parsed < min || parsed > max) {
    return f->Error("value " + s + " out of range [" + std::to_string(min) + ", " +
                    std::to_string(max) + "]");
  }
  *out = parsed;
  return Status::Ok();
}

Status Double(const Reader& map, const char* key, double min, double max, double* out,
              bool required = false) {
  auto f = map.Field(key);
  if (!f) return required ? map.FieldError(key, "required field is missing") : Status::Ok();
  STOKER_ASSIGN_OR_RETURN(*out, f->Double(min, max));
  return Status::Ok();
}

Status String(const Reader& map, const char* key, std::string* out, bool required) {
  auto f = map.Field(key);
  if (!f) return required ? map.FieldError(key, "required field is missing") : Status::Ok();
  STOKER_ASSIGN_OR_RETURN(*out, f->String());
  return Status::Ok();
}

// A timeline is a number (constant), a list of [t, value] pairs (linear), or a mapping
// {interp: step|linear, points: [[t, value], ...]}.
Status ParseTimeline(const Reader& map, const char* key, double min, double max, Timeline* out) {
  auto f = map.Field(key);
  if (!f) return Status::Ok();
  Timeline tl;
  if (f->value().is_scalar()) {
    STOKER_ASSIGN_OR_RETURN(double v, f->Double(min, max));
    *out = Timeline::Constant(v);
    return Status::Ok();
  }
  Reader points = *f;
  if (f->value().is_map()) {
    STOKER_RETURN_IF_ERROR(f->Keys({"interp", "points"}));
    std::string interp = "linear";
    STOKER_RETURN_IF_ERROR(String(*f, "interp", &interp, false));
    if (interp == "step") {
      tl.interp = Timeline::Interp::kStep;
    } else if (interp != "linear") {
      return f->FieldError("interp", "expected 'linear' or 'step', got '" + interp + "'");
    }
    STOKER_ASSIGN_OR_RETURN(points, f->Required("points"));
  }
  if (!points.value().is_list() || points.value().items().empty()) {
    return points.Error("expected a number or a non-empty list of [t, value] pairs");
  }
  const auto items = points.Items().value();
  for (const Reader& p : items) {
    if (!p.value().is_list() || p.value().items().size() != 2) {
      return p.Error("expected a [t, value] pair");
    }
    const auto pair = p.Items().value();
    STOKER_ASSIGN_OR_RETURN(double t, pair[0].Double(0, 1e9));
    STOKER_ASSIGN_OR_RETURN(double v, pair[1].Double(min, max));
    if (!tl.points.empty() && t < tl.points.back().first) {
      return p.Error("time " + pair[0].value().text() + " goes backwards");
    }
    tl.points.emplace_back(t, v);
  }
  *out = std::move(tl);
  return Status::Ok();
}

Status ParseMig(const Reader& n, GpuSpec* gpu) {
  STOKER_RETURN_IF_ERROR(n.Keys({"enabled", "instances"}));
  STOKER_RETURN_IF_ERROR(n.Get("enabled", &gpu->mig_enabled));
  auto insts = n.Field("instances");
  if (!insts) return Status::Ok();
  STOKER_ASSIGN_OR_RETURN(auto items, insts->Items());
  if (!gpu->mig_enabled && !items.empty()) {
    return insts->Error("MIG instances listed but mig.enabled is not true");
  }
  if (gpu->architecture < 7 && !items.empty()) {
    return insts->Error("MIG needs an Ampere or newer GPU (architecture >= 7)");
  }
  uint32_t slices = 0;
  uint64_t memory = 0;
  std::set<std::pair<uint32_t, uint32_t>> ids;
  for (const Reader& in : items) {
    STOKER_RETURN_IF_ERROR(in.Keys({"profile", "gi", "ci", "uuid", "memory_mib", "sm_active",
                                    "sm_occupancy", "tensor_active", "dram_bw"}));
    MigInstanceSpec mi;
    STOKER_RETURN_IF_ERROR(String(in, "profile", &mi.profile, true));
    auto prof = ParseMigProfile(mi.profile);
    if (!prof.ok()) return in.FieldError("profile", prof.status().message());
    mi.slices = prof->first;
    mi.memory_total_mib = static_cast<uint64_t>(prof->second) * 1024;
    STOKER_RETURN_IF_ERROR(Integer(in, "gi", &mi.gpu_instance_id, true, 0u, 14u));
    STOKER_RETURN_IF_ERROR(Integer(in, "ci", &mi.compute_instance_id, false, 0u, 7u));
    STOKER_RETURN_IF_ERROR(String(in, "uuid", &mi.uuid, true));
    if (mi.uuid.rfind("MIG-", 0) != 0) return in.FieldError("uuid", "MIG UUIDs start with 'MIG-'");
    STOKER_RETURN_IF_ERROR(
        Integer(in, "memory_mib", &mi.memory_total_mib, false, uint64_t{1}, uint64_t{1} << 24));
    STOKER_RETURN_IF_ERROR(ParseTimeline(in, "sm_active", 0, 100, &mi.sm_active));
    STOKER_RETURN_IF_ERROR(ParseTimeline(in, "sm_occupancy", 0, 100, &mi.sm_occupancy));
    STOKER_RETURN_IF_ERROR(ParseTimeline(in, "tensor_active", 0, 100, &mi.tensor_active));
    STOKER_RETURN_IF_ERROR(ParseTimeline(in, "dram_bw", 0, 100, &mi.dram_bw));
    if (!ids.insert({mi.gpu_instance_id, mi.compute_instance_id}).second) {
      return in.Error("duplicate (gi, ci) = (" + std::to_string(mi.gpu_instance_id) + ", " +
                      std::to_string(mi.compute_instance_id) + ")");
    }
    slices += mi.slices;
    memory += mi.memory_total_mib;
    if (slices > 7) return in.Error("MIG instances use more than 7 slices in total");
    if (gpu->memory_total_mib != 0 && memory > gpu->memory_total_mib) {
      return in.Error("MIG instance memory exceeds the GPU's memory_total_mib");
    }
    gpu->mig_instances.push_back(std::move(mi));
  }
  return Status::Ok();
}

Status ParseGpu(const Reader& n, GpuSpec* g) {
  STOKER_RETURN_IF_ERROR(n.Keys({"model",
                                 "uuid",
                                 "pci_bus_id",
                                 "minor",
                                 "architecture",
                                 "memory_total_mib",
                                 "memory_reserved_mib",
                                 "power_limit_w",
                                 "sm_clock_max_mhz",
                                 "mem_clock_max_mhz",
                                 "nvlink_count",
                                 "ecc_corrected",
                                 "ecc_uncorrected",
                                 "remapped_rows_correctable",
                                 "remapped_rows_uncorrectable",
                                 "remapping_pending",
                                 "remapping_failed",
                                 "energy_base_mj",
                                 "mig",
                                 "util",
                                 "mem_util",
                                 "mem_used_mib",
                                 "temperature_c",
                                 "power_w",
                                 "sm_clock_mhz",
                                 "mem_clock_mhz",
                                 "sm_active",
                                 "sm_occupancy",
                                 "tensor_active",
                                 "dram_bw",
                                 "pcie_tx_kbps",
                                 "pcie_rx_kbps",
                                 "nvlink_tx_mibps",
                                 "nvlink_rx_mibps",
                                 "clock_event_reasons",
                                 "lost",
                                 "unsupported"}));
  STOKER_RETURN_IF_ERROR(String(n, "model", &g->model, true));
  STOKER_RETURN_IF_ERROR(String(n, "uuid", &g->uuid, true));
  if (g->uuid.rfind("GPU-", 0) != 0) return n.FieldError("uuid", "GPU UUIDs start with 'GPU-'");
  STOKER_RETURN_IF_ERROR(String(n, "pci_bus_id", &g->pci_bus_id, true));
  STOKER_RETURN_IF_ERROR(Integer(n, "minor", &g->minor, false, 0u, 255u));
  STOKER_RETURN_IF_ERROR(Integer(n, "architecture", &g->architecture, false, 2u, 12u));
  STOKER_RETURN_IF_ERROR(
      Integer(n, "memory_total_mib", &g->memory_total_mib, true, uint64_t{1}, uint64_t{1} << 24));
  STOKER_RETURN_IF_ERROR(Integer(n, "memory_reserved_mib", &g->memory_reserved_mib, false,
                                 uint64_t{0}, g->memory_total_mib));
  STOKER_RETURN_IF_ERROR(Integer(n, "power_limit_w", &g->power_limit_w, false, 1u, 5000u));
  STOKER_RETURN_IF_ERROR(Integer(n, "sm_clock_max_mhz", &g->sm_clock_max_mhz, false, 1u, 10000u));
  STOKER_RETURN_IF_ERROR(Integer(n, "mem_clock_max_mhz", &g->mem_clock_max_mhz, false, 1u, 20000u));
  STOKER_RETURN_IF_ERROR(Integer(n, "nvlink_count", &g->nvlink_count, false, 0u, 18u));
  STOKER_RETURN_IF_ERROR(Integer(n, "ecc_corrected", &g->ecc_corrected));
  STOKER_RETURN_IF_ERROR(Integer(n, "ecc_uncorrected", &g->ecc_uncorrected));
  STOKER_RETURN_IF_ERROR(Integer(n, "remapped_rows_correctable", &g->remapped_correctable));
  STOKER_RETURN_IF_ERROR(Integer(n, "remapped_rows_uncorrectable", &g->remapped_uncorrectable));
  STOKER_RETURN_IF_ERROR(n.Get("remapping_pending", &g->remapping_pending));
  STOKER_RETURN_IF_ERROR(n.Get("remapping_failed", &g->remapping_failed));
  STOKER_RETURN_IF_ERROR(Integer(n, "energy_base_mj", &g->energy_base_mj));
  if (auto mig = n.Field("mig")) STOKER_RETURN_IF_ERROR(ParseMig(*mig, g));
  const double mem = static_cast<double>(g->memory_total_mib);
  STOKER_RETURN_IF_ERROR(ParseTimeline(n, "util", 0, 100, &g->util));
  STOKER_RETURN_IF_ERROR(ParseTimeline(n, "mem_util", 0, 100, &g->mem_util));
  STOKER_RETURN_IF_ERROR(ParseTimeline(n, "mem_used_mib", 0, 1e12, &g->mem_used_mib));
  if (!g->mem_used_mib.empty() &&
      g->mem_used_mib.Max() + static_cast<double>(g->memory_reserved_mib) > mem) {
    return n.FieldError("mem_used_mib", "memory used (plus reserved) exceeds memory_total_mib");
  }
  STOKER_RETURN_IF_ERROR(ParseTimeline(n, "temperature_c", 0, 150, &g->temperature_c));
  STOKER_RETURN_IF_ERROR(ParseTimeline(n, "power_w", 0, 5000, &g->power_w));
  STOKER_RETURN_IF_ERROR(ParseTimeline(n, "sm_clock_mhz", 0, 10000, &g->sm_clock_mhz));
  STOKER_RETURN_IF_ERROR(ParseTimeline(n, "mem_clock_mhz", 0, 20000, &g->mem_clock_mhz));
  STOKER_RETURN_IF_ERROR(ParseTimeline(n, "sm_active", 0, 100, &g->sm_active));
  STOKER_RETURN_IF_ERROR(ParseTimeline(n, "sm_occupancy", 0, 100, &g->sm_occupancy));
  STOKER_RETURN_IF_ERROR(ParseTimeline(n, "tensor_active", 0, 100, &g->tensor_active));
  STOKER_RETURN_IF_ERROR(ParseTimeline(n, "dram_bw", 0, 100, &g->dram_bw));
  STOKER_RETURN_IF_ERROR(ParseTimeline(n, "pcie_tx_kbps", 0, 1e9, &g->pcie_tx_kbps));
  STOKER_RETURN_IF_ERROR(ParseTimeline(n, "pcie_rx_kbps", 0, 1e9, &g->pcie_rx_kbps));
  STOKER_RETURN_IF_ERROR(ParseTimeline(n, "nvlink_tx_mibps", 0, 1e7, &g->nvlink_tx_mibps));
  STOKER_RETURN_IF_ERROR(ParseTimeline(n, "nvlink_rx_mibps", 0, 1e7, &g->nvlink_rx_mibps));
  STOKER_RETURN_IF_ERROR(
      ParseTimeline(n, "clock_event_reasons", 0, 65535, &g->clock_event_reasons));
  g->clock_event_reasons.interp = Timeline::Interp::kStep;

  if (auto lost = n.Field("lost")) {
    if (!lost->value().is_list()) return lost->Error("expected a list of {from, to}");
    const auto items = lost->Items().value();
    for (const Reader& w : items) {
      STOKER_RETURN_IF_ERROR(w.Keys({"from", "to"}));
      LostWindow window;
      window.to = kForever;
      STOKER_RETURN_IF_ERROR(Double(w, "from", 0, 1e9, &window.from, true));
      STOKER_RETURN_IF_ERROR(Double(w, "to", 0, 1e9, &window.to));
      if (window.to <= window.from) {
        return w.FieldError("to", "the GPU must come back after it is lost ('to' <= 'from')");
      }
      g->lost.push_back(window);
    }
  }
  if (auto uns = n.Field("unsupported")) {
    if (!uns->value().is_list()) return uns->Error("expected a list of NVML function names");
    const auto items = uns->Items().value();
    for (const Reader& u : items) {
      if (!u.value().is_scalar() || u.value().text().rfind("nvml", 0) != 0) {
        return u.Error("expected an NVML function name (nvml...)");
      }
      g->unsupported.push_back(u.value().text());
    }
  }
  return Status::Ok();
}

Status ParseProcess(const Reader& n, const Scenario& sc, ProcessSpec* pr) {
  STOKER_RETURN_IF_ERROR(n.Keys({"pid", "name", "gpu", "gi", "ci", "used_memory_mib", "sm_util",
                                 "cgroup", "user", "uid", "start", "end"}));
  STOKER_RETURN_IF_ERROR(Integer(n, "pid", &pr->pid, true, 1u, 4194304u));
  STOKER_RETURN_IF_ERROR(String(n, "name", &pr->name, false));
  STOKER_RETURN_IF_ERROR(Integer(n, "gpu", &pr->gpu, true));
  if (pr->gpu >= sc.gpus.size()) {
    return n.FieldError("gpu", "no GPU with index " + std::to_string(pr->gpu) +
                                   " (the scenario has " + std::to_string(sc.gpus.size()) + ")");
  }
  const GpuSpec& gpu = sc.gpus[pr->gpu];
  if (n.Field("gi")) {
    STOKER_RETURN_IF_ERROR(Integer(n, "gi", &pr->gpu_instance_id, true));
    pr->compute_instance_id = 0;
    STOKER_RETURN_IF_ERROR(Integer(n, "ci", &pr->compute_instance_id));
    const bool found = std::any_of(gpu.mig_instances.begin(), gpu.mig_instances.end(),
                                   [&](const MigInstanceSpec& m) {
                                     return m.gpu_instance_id == pr->gpu_instance_id &&
                                            m.compute_instance_id == pr->compute_instance_id;
                                   });
    if (!found) {
      return n.FieldError("gi", "GPU " + std::to_string(pr->gpu) + " has no MIG instance gi=" +
                                    std::to_string(pr->gpu_instance_id) +
                                    " ci=" + std::to_string(pr->compute_instance_id));
    }
  } else if (gpu.mig_enabled) {
    return n.FieldError(
        "gi", "GPU " + std::to_string(pr->gpu) + " is in MIG mode: processes must name their gi");
  }
  STOKER_RETURN_IF_ERROR(ParseTimeline(n, "used_memory_mib", 0, 1e12, &pr->used_memory_mib));
  if (pr->used_memory_mib.Max() > static_cast<double>(gpu.memory_total_mib)) {
    return n.FieldError("used_memory_mib", "process memory exceeds the GPU's memory_total_mib");
  }
  STOKER_RETURN_IF_ERROR(ParseTimeline(n, "sm_util", 0, 100, &pr->sm_util));
  STOKER_RETURN_IF_ERROR(String(n, "cgroup", &pr->cgroup, false));
  STOKER_RETURN_IF_ERROR(String(n, "user", &pr->user, false));
  STOKER_RETURN_IF_ERROR(Integer(n, "uid", &pr->uid));
  STOKER_RETURN_IF_ERROR(Double(n, "start", 0, 1e9, &pr->start));
  STOKER_RETURN_IF_ERROR(Double(n, "end", 0, 1e9, &pr->end));
  if (pr->end <= pr->start) return n.FieldError("end", "'end' must be after 'start'");
  return Status::Ok();
}

Status ParseEvent(const Reader& n, const Scenario& sc, EventSpec* ev) {
  STOKER_RETURN_IF_ERROR(n.Keys({"t", "gpu", "type", "xid", "gi", "ci"}));
  STOKER_RETURN_IF_ERROR(Double(n, "t", 0, 1e9, &ev->t, true));
  STOKER_RETURN_IF_ERROR(Integer(n, "gpu", &ev->gpu, true));
  if (ev->gpu >= sc.gpus.size()) {
    return n.FieldError("gpu", "no GPU with index " + std::to_string(ev->gpu));
  }
  std::string type = "xid";
  STOKER_RETURN_IF_ERROR(String(n, "type", &type, false));
  if (type == "xid") {
    ev->type = EventSpec::Type::kXid;
    STOKER_RETURN_IF_ERROR(Integer(n, "xid", &ev->xid, true, uint64_t{1}, uint64_t{999}));
  } else if (type == "sbe") {
    ev->type = EventSpec::Type::kSingleBitEcc;
  } else if (type == "dbe") {
    ev->type = EventSpec::Type::kDoubleBitEcc;
  } else {
    return n.FieldError("type", "expected xid, sbe or dbe, got '" + type + "'");
  }
  STOKER_RETURN_IF_ERROR(Integer(n, "gi", &ev->gpu_instance_id));
  STOKER_RETURN_IF_ERROR(Integer(n, "ci", &ev->compute_instance_id));
  return Status::Ok();
}

Result<Scenario> Parse(const Reader& root, const std::string& source) {
  if (!root.value().is_map()) return root.Error("a scenario is a mapping with a 'gpus' list");
  STOKER_RETURN_IF_ERROR(
      root.Keys({"name", "description", "hostname", "driver_version", "nvml_version",
                 "loop_seconds", "gpus", "processes", "events"}));
  Scenario sc;
  sc.source = source;
  STOKER_RETURN_IF_ERROR(String(root, "name", &sc.name, true));
  STOKER_RETURN_IF_ERROR(String(root, "description", &sc.description, false));
  STOKER_RETURN_IF_ERROR(String(root, "hostname", &sc.hostname, false));
  STOKER_RETURN_IF_ERROR(String(root, "driver_version", &sc.driver_version, false));
  STOKER_RETURN_IF_ERROR(String(root, "nvml_version", &sc.nvml_version, false));
  STOKER_RETURN_IF_ERROR(Double(root, "loop_seconds", 0, 1e7, &sc.loop_seconds));

  auto gpus = root.Field("gpus");
  if (!gpus || !gpus->value().is_list() || gpus->value().items().empty()) {
    return gpus ? gpus->Error("expected a non-empty list of GPUs")
                : root.FieldError("gpus", "expected a non-empty list of GPUs");
  }
  if (gpus->value().items().size() > 64) return gpus->Error("at most 64 GPUs per node");
  std::set<std::string> uuids;
  std::set<std::string> buses;
  const auto gpu_items = gpus->Items().value();
  for (size_t i = 0; i < gpu_items.size(); ++i) {
    const Reader& gn = gpu_items[i];
    GpuSpec g;
    g.minor = static_cast<uint32_t>(i);
    STOKER_RETURN_IF_ERROR(ParseGpu(gn, &g));
    if (!uuids.insert(g.uuid).second) {
      return gn.FieldError("uuid", "duplicate UUID '" + g.uuid + "'");
    }
    for (size_t m = 0; m < g.mig_instances.size(); ++m) {
      if (!uuids.insert(g.mig_instances[m].uuid).second) {
        const Reader inst = gn.Field("mig")->Field("instances")->Items().value()[m];
        return inst.FieldError("uuid", "duplicate UUID '" + g.mig_instances[m].uuid + "'");
      }
    }
    if (!buses.insert(g.pci_bus_id).second) {
      return gn.FieldError("pci_bus_id", "duplicate PCI bus id '" + g.pci_bus_id + "'");
    }
    sc.gpus.push_back(std::move(g));
  }

  if (auto procs = root.Field("processes")) {
    if (!procs->value().is_list()) return procs->Error("expected a list");
    std::vector<double> mem_per_gpu(sc.gpus.size(), 0.0);
    const auto items = procs->Items().value();
    for (const Reader& pn : items) {
      ProcessSpec pr;
      STOKER_RETURN_IF_ERROR(ParseProcess(pn, sc, &pr));
      // Conservative: peak of each process summed, as if all peaked together.
      mem_per_gpu[pr.gpu] += pr.used_memory_mib.Max();
      const GpuSpec& g = sc.gpus[pr.gpu];
      if (mem_per_gpu[pr.gpu] + static_cast<double>(g.memory_reserved_mib) >
          static_cast<double>(g.memory_total_mib)) {
        return pn.FieldError("used_memory_mib", "processes on GPU " + std::to_string(pr.gpu) +
                                                    " use more memory than memory_total_mib");
      }
      sc.processes.push_back(std::move(pr));
    }
  }
  if (auto events = root.Field("events")) {
    if (!events->value().is_list()) return events->Error("expected a list");
    const auto items = events->Items().value();
    for (const Reader& en : items) {
      EventSpec ev;
      STOKER_RETURN_IF_ERROR(ParseEvent(en, sc, &ev));
      sc.events.push_back(ev);
    }
  }
  return sc;
}

}  // namespace

Result<Scenario> ParseScenario(std::string_view text, std::string_view source_name) {
  const std::string source(source_name.empty() ? "<scenario>" : source_name);
  STOKER_ASSIGN_OR_RETURN(doc::Value root, doc::ParseYaml(text, source));
  return Parse(Reader(root, source), source);
}

Result<Scenario> LoadScenarioFile(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(std::string text, doc::ReadText(path, kMaxScenarioBytes));
  return ParseScenario(text, path);
}

}  // namespace stoker::fakenvml
