#include "fakenvml/scenario.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>

namespace stoker::fakenvml {

// ---- Parser --------------------------------------------------------------------------------

namespace {

// yaml-cpp does not implement merge keys (`<<: *anchor`); resolve them here so scenario files
// can share a GPU definition. Values keep their source marks (the nodes are shared, not copied).
YAML::Node ResolveMerge(const YAML::Node& n, int depth = 0) {
  if (!n.IsMap() || !n["<<"].IsDefined() || depth > 16) return n;
  YAML::Node out(YAML::NodeType::Map);
  auto merge_from = [&](const YAML::Node& base) {
    const YAML::Node b = ResolveMerge(base, depth + 1);
    if (!b.IsMap()) return;
    for (auto it = b.begin(); it != b.end(); ++it) {
      if (it->first.IsScalar()) out[it->first.Scalar()] = it->second;
    }
  };
  const YAML::Node bases = n["<<"];
  if (bases.IsSequence()) {
    for (size_t i = 0; i < bases.size(); ++i) merge_from(bases[i]);
  } else {
    merge_from(bases);
  }
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() != "<<") out[it->first.Scalar()] = it->second;
    if (!it->first.IsScalar()) out[it->first] = it->second;
  }
  return out;
}

class Parser {
 public:
  explicit Parser(std::string source) : source_(std::move(source)) {}

  Status Error(const YAML::Node& node, const std::string& field, const std::string& what) const {
    std::string where = source_;
    YAML::Mark mark = context_mark_;  // nodes built by ResolveMerge have no position
    if (node.IsDefined() && node.Mark().line >= 0) mark = node.Mark();
    if (mark.line >= 0) {
      where += ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
    }
    return InvalidArgument(where + ": " + (field.empty() ? "(top level)" : field) + ": " + what);
  }

  // Rejects keys outside `allowed`, so typos do not silently fall back to defaults.
  Status CheckKeys(const YAML::Node& map, const std::string& path,
                   std::initializer_list<std::string_view> allowed) const {
    if (!map.IsMap()) return Error(map, path, "expected a mapping");
    for (auto it = map.begin(); it != map.end(); ++it) {
      if (!it->first.IsScalar()) return Error(it->first, path, "keys must be plain names");
      const std::string& key = it->first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        std::string list;
        for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        return Error(it->first, Join(path, key), "unknown field (allowed: " + list + ")");
      }
    }
    return Status::Ok();
  }

  static std::string Join(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  }
  static std::string Index(const std::string& path, size_t i) {
    return path + "[" + std::to_string(i) + "]";
  }

  Status String(const YAML::Node& map, const std::string& path, const char* key, std::string* out,
                bool required) const {
    const YAML::Node n = map[key];
    if (!n.IsDefined() || n.IsNull()) {
      return required ? Error(map, Join(path, key), "required field is missing") : Status::Ok();
    }
    if (!n.IsScalar()) return Error(n, Join(path, key), "expected a string");
    *out = n.Scalar();
    return Status::Ok();
  }

  Status Number(const YAML::Node& n, const std::string& field, double min, double max,
                double* out) const {
    if (!n.IsScalar()) return Error(n, field, "expected a number");
    const std::string& s = n.Scalar();
    double v = 0;
    const char* end = s.data() + s.size();
    auto [ptr, ec] = std::from_chars(s.data(), end, v);
    if (ec != std::errc() || ptr != end || !std::isfinite(v)) {
      return Error(n, field, "expected a number, got '" + s + "'");
    }
    if (v < min || v > max) {
      std::ostringstream msg;
      msg << "value " << s << " out of range [" << min << ", " << max << "]";
      return Error(n, field, msg.str());
    }
    *out = v;
    return Status::Ok();
  }

  Status Double(const YAML::Node& map, const std::string& path, const char* key, double min,
                double max, double* out, bool required = false) const {
    const YAML::Node n = map[key];
    if (!n.IsDefined() || n.IsNull()) {
      return required ? Error(map, Join(path, key), "required field is missing") : Status::Ok();
    }
    return Number(n, Join(path, key), min, max, out);
  }

  template <typename T>
  Status Integer(const YAML::Node& map, const std::string& path, const char* key, T* out,
                 bool required = false, T min = std::numeric_limits<T>::min(),
                 T max = std::numeric_limits<T>::max()) const {
    const YAML::Node n = map[key];
    const std::string field = Join(path, key);
    if (!n.IsDefined() || n.IsNull()) {
      return required ? Error(map, field, "required field is missing") : Status::Ok();
    }
    if (!n.IsScalar()) return Error(n, field, "expected an integer");
    const std::string& s = n.Scalar();
    T v{};
    const char* begin = s.data();
    const char* end = s.data() + s.size();
    int base = 10;
    if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
      begin += 2;
      base = 16;
    }
    auto [ptr, ec] = std::from_chars(begin, end, v, base);
    if (ec != std::errc() || ptr != end || begin == end) {
      return Error(n, field, "expected a non-negative integer in range, got '" + s + "'");
    }
    if (v < min || v > max) {
      return Error(n, field,
                   "value " + s + " out of range [" + std::to_string(min) + ", " +
                       std::to_string(max) + "]");
    }
    *out = v;
    return Status::Ok();
  }

  Status Bool(const YAML::Node& map, const std::string& path, const char* key, bool* out) const {
    const YAML::Node n = map[key];
    if (!n.IsDefined() || n.IsNull()) return Status::Ok();
    const std::string field = Join(path, key);
    if (!n.IsScalar()) return Error(n, field, "expected true or false");
    const std::string& s = n.Scalar();
    if (s == "true" || s == "yes" || s == "on") {
      *out = true;
    } else if (s == "false" || s == "no" || s == "off") {
      *out = false;
    } else {
      return Error(n, field, "expected true or false, got '" + s + "'");
    }
    return Status::Ok();
  }

  // A timeline is a number (constant), a list of [t, value] pairs (linear), or a mapping
  // {interp: step|linear, points: [[t, value], ...]}.
  Status ParseTimeline(const YAML::Node& map, const std::string& path, const char* key, double min,
                       double max, Timeline* out) const {
    const YAML::Node n = map[key];
    if (!n.IsDefined() || n.IsNull()) return Status::Ok();
    const std::string field = Join(path, key);
    Timeline tl;
    if (n.IsScalar()) {
      double v = 0;
      STOKER_RETURN_IF_ERROR(Number(n, field, min, max, &v));
      *out = Timeline::Constant(v);
      return Status::Ok();
    }
    YAML::Node points = n;
    if (n.IsMap()) {
      STOKER_RETURN_IF_ERROR(CheckKeys(n, field, {"interp", "points"}));
      std::string interp = "linear";
      STOKER_RETURN_IF_ERROR(String(n, field, "interp", &interp, false));
      if (interp == "step") {
        tl.interp = Timeline::Interp::kStep;
      } else if (interp != "linear") {
        return Error(n["interp"], Join(field, "interp"),
                     "expected 'linear' or 'step', got '" + interp + "'");
      }
      points = n["points"];
      if (!points.IsDefined()) return Error(n, Join(field, "points"), "required field is missing");
    }
    if (!points.IsSequence() || points.size() == 0) {
      return Error(points, field, "expected a number or a non-empty list of [t, value] pairs");
    }
    for (size_t i = 0; i < points.size(); ++i) {
      const YAML::Node p = points[i];
      const std::string pf = Index(field, i);
      if (!p.IsSequence() || p.size() != 2) return Error(p, pf, "expected a [t, value] pair");
      double t = 0;
      double v = 0;
      STOKER_RETURN_IF_ERROR(Number(p[0], pf, 0, 1e9, &t));
      STOKER_RETURN_IF_ERROR(Number(p[1], pf, min, max, &v));
      if (!tl.points.empty() && t < tl.points.back().first) {
        return Error(p, pf, "time " + p[0].Scalar() + " goes backwards");
      }
      tl.points.emplace_back(t, v);
    }
    *out = std::move(tl);
    return Status::Ok();
  }

  Status ParseMig(const YAML::Node& n, const std::string& path, GpuSpec* gpu) const {
    STOKER_RETURN_IF_ERROR(CheckKeys(n, path, {"enabled", "instances"}));
    STOKER_RETURN_IF_ERROR(Bool(n, path, "enabled", &gpu->mig_enabled));
    const YAML::Node insts = n["instances"];
    if (!insts.IsDefined() || insts.IsNull()) return Status::Ok();
    const std::string ipath = Join(path, "instances");
    if (!insts.IsSequence()) return Error(insts, ipath, "expected a list");
    if (!gpu->mig_enabled && insts.size() > 0) {
      return Error(insts, ipath, "MIG instances listed but mig.enabled is not true");
    }
    if (gpu->architecture < 7 && insts.size() > 0) {
      return Error(insts, ipath, "MIG needs an Ampere or newer GPU (architecture >= 7)");
    }
    uint32_t slices = 0;
    uint64_t memory = 0;
    std::set<std::pair<uint32_t, uint32_t>> ids;
    for (size_t i = 0; i < insts.size(); ++i) {
      const YAML::Node in = ResolveMerge(insts[i]);
      const std::string p = Index(ipath, i);
      STOKER_RETURN_IF_ERROR(CheckKeys(in, p,
                                       {"profile", "gi", "ci", "uuid", "memory_mib", "sm_active",
                                        "sm_occupancy", "tensor_active", "dram_bw"}));
      MigInstanceSpec mi;
      STOKER_RETURN_IF_ERROR(String(in, p, "profile", &mi.profile, true));
      auto prof = ParseMigProfile(mi.profile);
      if (!prof.ok()) return Error(in["profile"], Join(p, "profile"), prof.status().message());
      mi.slices = prof->first;
      mi.memory_total_mib = static_cast<uint64_t>(prof->second) * 1024;
      STOKER_RETURN_IF_ERROR(Integer(in, p, "gi", &mi.gpu_instance_id, true, 0u, 14u));
      STOKER_RETURN_IF_ERROR(Integer(in, p, "ci", &mi.compute_instance_id, false, 0u, 7u));
      STOKER_RETURN_IF_ERROR(String(in, p, "uuid", &mi.uuid, true));
      if (mi.uuid.rfind("MIG-", 0) != 0) {
        return Error(in["uuid"], Join(p, "uuid"), "MIG UUIDs start with 'MIG-'");
      }
      STOKER_RETURN_IF_ERROR(Integer(in, p, "memory_mib", &mi.memory_total_mib, false, uint64_t{1},
                                     uint64_t{1} << 24));
      STOKER_RETURN_IF_ERROR(ParseTimeline(in, p, "sm_active", 0, 100, &mi.sm_active));
      STOKER_RETURN_IF_ERROR(ParseTimeline(in, p, "sm_occupancy", 0, 100, &mi.sm_occupancy));
      STOKER_RETURN_IF_ERROR(ParseTimeline(in, p, "tensor_active", 0, 100, &mi.tensor_active));
      STOKER_RETURN_IF_ERROR(ParseTimeline(in, p, "dram_bw", 0, 100, &mi.dram_bw));
      if (!ids.insert({mi.gpu_instance_id, mi.compute_instance_id}).second) {
        return Error(in, p,
                     "duplicate (gi, ci) = (" + std::to_string(mi.gpu_instance_id) + ", " +
                         std::to_string(mi.compute_instance_id) + ")");
      }
      slices += mi.slices;
      memory += mi.memory_total_mib;
      if (slices > 7) return Error(in, p, "MIG instances use more than 7 slices in total");
      if (gpu->memory_total_mib != 0 && memory > gpu->memory_total_mib) {
        return Error(in, p, "MIG instance memory exceeds the GPU's memory_total_mib");
      }
      gpu->mig_instances.push_back(std::move(mi));
    }
    return Status::Ok();
  }

  Status ParseGpu(const YAML::Node& n, const std::string& p, GpuSpec* g) const {
    STOKER_RETURN_IF_ERROR(CheckKeys(n, p,
                                     {"model",
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
    STOKER_RETURN_IF_ERROR(String(n, p, "model", &g->model, true));
    STOKER_RETURN_IF_ERROR(String(n, p, "uuid", &g->uuid, true));
    if (g->uuid.rfind("GPU-", 0) != 0) {
      return Error(n["uuid"], Join(p, "uuid"), "GPU UUIDs start with 'GPU-'");
    }
    STOKER_RETURN_IF_ERROR(String(n, p, "pci_bus_id", &g->pci_bus_id, true));
    STOKER_RETURN_IF_ERROR(Integer(n, p, "minor", &g->minor, false, 0u, 255u));
    STOKER_RETURN_IF_ERROR(Integer(n, p, "architecture", &g->architecture, false, 2u, 12u));
    STOKER_RETURN_IF_ERROR(Integer(n, p, "memory_total_mib", &g->memory_total_mib, true,
                                   uint64_t{1}, uint64_t{1} << 24));
    STOKER_RETURN_IF_ERROR(Integer(n, p, "memory_reserved_mib", &g->memory_reserved_mib, false,
                                   uint64_t{0}, g->memory_total_mib));
    STOKER_RETURN_IF_ERROR(Integer(n, p, "power_limit_w", &g->power_limit_w, false, 1u, 5000u));
    STOKER_RETURN_IF_ERROR(
        Integer(n, p, "sm_clock_max_mhz", &g->sm_clock_max_mhz, false, 1u, 10000u));
    STOKER_RETURN_IF_ERROR(
        Integer(n, p, "mem_clock_max_mhz", &g->mem_clock_max_mhz, false, 1u, 20000u));
    STOKER_RETURN_IF_ERROR(Integer(n, p, "nvlink_count", &g->nvlink_count, false, 0u, 18u));
    STOKER_RETURN_IF_ERROR(Integer(n, p, "ecc_corrected", &g->ecc_corrected));
    STOKER_RETURN_IF_ERROR(Integer(n, p, "ecc_uncorrected", &g->ecc_uncorrected));
    STOKER_RETURN_IF_ERROR(Integer(n, p, "remapped_rows_correctable", &g->remapped_correctable));
    STOKER_RETURN_IF_ERROR(
        Integer(n, p, "remapped_rows_uncorrectable", &g->remapped_uncorrectable));
    STOKER_RETURN_IF_ERROR(Bool(n, p, "remapping_pending", &g->remapping_pending));
    STOKER_RETURN_IF_ERROR(Bool(n, p, "remapping_failed", &g->remapping_failed));
    STOKER_RETURN_IF_ERROR(Integer(n, p, "energy_base_mj", &g->energy_base_mj));
    if (n["mig"].IsDefined()) {
      STOKER_RETURN_IF_ERROR(ParseMig(n["mig"], Join(p, "mig"), g));
    }
    const double mem = static_cast<double>(g->memory_total_mib);
    STOKER_RETURN_IF_ERROR(ParseTimeline(n, p, "util", 0, 100, &g->util));
    STOKER_RETURN_IF_ERROR(ParseTimeline(n, p, "mem_util", 0, 100, &g->mem_util));
    STOKER_RETURN_IF_ERROR(ParseTimeline(n, p, "mem_used_mib", 0, 1e12, &g->mem_used_mib));
    if (!g->mem_used_mib.empty() &&
        g->mem_used_mib.Max() + static_cast<double>(g->memory_reserved_mib) > mem) {
      return Error(n["mem_used_mib"], Join(p, "mem_used_mib"),
                   "memory used (plus reserved) exceeds memory_total_mib");
    }
    STOKER_RETURN_IF_ERROR(ParseTimeline(n, p, "temperature_c", 0, 150, &g->temperature_c));
    STOKER_RETURN_IF_ERROR(ParseTimeline(n, p, "power_w", 0, 5000, &g->power_w));
    STOKER_RETURN_IF_ERROR(ParseTimeline(n, p, "sm_clock_mhz", 0, 10000, &g->sm_clock_mhz));
    STOKER_RETURN_IF_ERROR(ParseTimeline(n, p, "mem_clock_mhz", 0, 20000, &g->mem_clock_mhz));
    STOKER_RETURN_IF_ERROR(ParseTimeline(n, p, "sm_active", 0, 100, &g->sm_active));
    STOKER_RETURN_IF_ERROR(ParseTimeline(n, p, "sm_occupancy", 0, 100, &g->sm_occupancy));
    STOKER_RETURN_IF_ERROR(ParseTimeline(n, p, "tensor_active", 0, 100, &g->tensor_active));
    STOKER_RETURN_IF_ERROR(ParseTimeline(n, p, "dram_bw", 0, 100, &g->dram_bw));
    STOKER_RETURN_IF_ERROR(ParseTimeline(n, p, "pcie_tx_kbps", 0, 1e9, &g->pcie_tx_kbps));
    STOKER_RETURN_IF_ERROR(ParseTimeline(n, p, "pcie_rx_kbps", 0, 1e9, &g->pcie_rx_kbps));
    STOKER_RETURN_IF_ERROR(ParseTimeline(n, p, "nvlink_tx_mibps", 0, 1e7, &g->nvlink_tx_mibps));
    STOKER_RETURN_IF_ERROR(ParseTimeline(n, p, "nvlink_rx_mibps", 0, 1e7, &g->nvlink_rx_mibps));
    STOKER_RETURN_IF_ERROR(
        ParseTimeline(n, p, "clock_event_reasons", 0, 65535, &g->clock_event_reasons));
    g->clock_event_reasons.interp = Timeline::Interp::kStep;

    const YAML::Node lost = n["lost"];
    if (lost.IsDefined() && !lost.IsNull()) {
      const std::string lp = Join(p, "lost");
      if (!lost.IsSequence()) return Error(lost, lp, "expected a list of {from, to}");
      for (size_t i = 0; i < lost.size(); ++i) {
        const std::string wp = Index(lp, i);
        STOKER_RETURN_IF_ERROR(CheckKeys(lost[i], wp, {"from", "to"}));
        LostWindow w;
        w.to = kForever;
        STOKER_RETURN_IF_ERROR(Double(lost[i], wp, "from", 0, 1e9, &w.from, true));
        STOKER_RETURN_IF_ERROR(Double(lost[i], wp, "to", 0, 1e9, &w.to));
        if (w.to <= w.from) {
          return Error(lost[i]["to"].IsDefined() ? lost[i]["to"] : lost[i], Join(wp, "to"),
                       "the GPU must come back after it is lost ('to' <= 'from')");
        }
        g->lost.push_back(w);
      }
    }
    const YAML::Node uns = n["unsupported"];
    if (uns.IsDefined() && !uns.IsNull()) {
      const std::string up = Join(p, "unsupported");
      if (!uns.IsSequence()) return Error(uns, up, "expected a list of NVML function names");
      for (size_t i = 0; i < uns.size(); ++i) {
        if (!uns[i].IsScalar() || uns[i].Scalar().rfind("nvml", 0) != 0) {
          return Error(uns[i], Index(up, i), "expected an NVML function name (nvml...)");
        }
        g->unsupported.push_back(uns[i].Scalar());
      }
    }
    return Status::Ok();
  }

  Status ParseProcess(const YAML::Node& n, const std::string& p, const Scenario& sc,
                      ProcessSpec* pr) const {
    STOKER_RETURN_IF_ERROR(CheckKeys(n, p,
                                     {"pid", "name", "gpu", "gi", "ci", "used_memory_mib",
                                      "sm_util", "cgroup", "user", "uid", "start", "end"}));
    STOKER_RETURN_IF_ERROR(Integer(n, p, "pid", &pr->pid, true, 1u, 4194304u));
    STOKER_RETURN_IF_ERROR(String(n, p, "name", &pr->name, false));
    STOKER_RETURN_IF_ERROR(Integer(n, p, "gpu", &pr->gpu, true));
    if (pr->gpu >= sc.gpus.size()) {
      return Error(n["gpu"], Join(p, "gpu"),
                   "no GPU with index " + std::to_string(pr->gpu) + " (the scenario has " +
                       std::to_string(sc.gpus.size()) + ")");
    }
    const GpuSpec& gpu = sc.gpus[pr->gpu];
    if (n["gi"].IsDefined()) {
      STOKER_RETURN_IF_ERROR(Integer(n, p, "gi", &pr->gpu_instance_id, true));
      pr->compute_instance_id = 0;
      STOKER_RETURN_IF_ERROR(Integer(n, p, "ci", &pr->compute_instance_id));
      const bool found = std::any_of(gpu.mig_instances.begin(), gpu.mig_instances.end(),
                                     [&](const MigInstanceSpec& m) {
                                       return m.gpu_instance_id == pr->gpu_instance_id &&
                                              m.compute_instance_id == pr->compute_instance_id;
                                     });
      if (!found) {
        return Error(n["gi"], Join(p, "gi"),
                     "GPU " + std::to_string(pr->gpu) +
                         " has no MIG instance gi=" + std::to_string(pr->gpu_instance_id) +
                         " ci=" + std::to_string(pr->compute_instance_id));
      }
    } else if (gpu.mig_enabled) {
      return Error(
          n, Join(p, "gi"),
          "GPU " + std::to_string(pr->gpu) + " is in MIG mode: processes must name their gi");
    }
    STOKER_RETURN_IF_ERROR(ParseTimeline(n, p, "used_memory_mib", 0, 1e12, &pr->used_memory_mib));
    if (pr->used_memory_mib.Max() > static_cast<double>(gpu.memory_total_mib)) {
      return Error(n["used_memory_mib"], Join(p, "used_memory_mib"),
                   "process memory exceeds the GPU's memory_total_mib");
    }
    STOKER_RETURN_IF_ERROR(ParseTimeline(n, p, "sm_util", 0, 100, &pr->sm_util));
    STOKER_RETURN_IF_ERROR(String(n, p, "cgroup", &pr->cgroup, false));
    STOKER_RETURN_IF_ERROR(String(n, p, "user", &pr->user, false));
    STOKER_RETURN_IF_ERROR(Integer(n, p, "uid", &pr->uid));
    STOKER_RETURN_IF_ERROR(Double(n, p, "start", 0, 1e9, &pr->start));
    STOKER_RETURN_IF_ERROR(Double(n, p, "end", 0, 1e9, &pr->end));
    if (pr->end <= pr->start) return Error(n["end"], Join(p, "end"), "'end' must be after 'start'");
    return Status::Ok();
  }

  Status ParseEvent(const YAML::Node& n, const std::string& p, const Scenario& sc,
                    EventSpec* ev) const {
    STOKER_RETURN_IF_ERROR(CheckKeys(n, p, {"t", "gpu", "type", "xid", "gi", "ci"}));
    STOKER_RETURN_IF_ERROR(Double(n, p, "t", 0, 1e9, &ev->t, true));
    STOKER_RETURN_IF_ERROR(Integer(n, p, "gpu", &ev->gpu, true));
    if (ev->gpu >= sc.gpus.size()) {
      return Error(n["gpu"], Join(p, "gpu"), "no GPU with index " + std::to_string(ev->gpu));
    }
    std::string type = "xid";
    STOKER_RETURN_IF_ERROR(String(n, p, "type", &type, false));
    if (type == "xid") {
      ev->type = EventSpec::Type::kXid;
      STOKER_RETURN_IF_ERROR(Integer(n, p, "xid", &ev->xid, true, uint64_t{1}, uint64_t{999}));
    } else if (type == "sbe") {
      ev->type = EventSpec::Type::kSingleBitEcc;
    } else if (type == "dbe") {
      ev->type = EventSpec::Type::kDoubleBitEcc;
    } else {
      return Error(n["type"], Join(p, "type"), "expected xid, sbe or dbe, got '" + type + "'");
    }
    STOKER_RETURN_IF_ERROR(Integer(n, p, "gi", &ev->gpu_instance_id));
    STOKER_RETURN_IF_ERROR(Integer(n, p, "ci", &ev->compute_instance_id));
    return Status::Ok();
  }

  Result<Scenario> Parse(std::string_view text) const {
    const YAML::Node root = YAML::Load(std::string(text));
    if (!root.IsMap()) return Error(root, "", "a scenario is a mapping with a 'gpus' list");
    STOKER_RETURN_IF_ERROR(
        CheckKeys(root, "",
                  {"name", "description", "hostname", "driver_version", "nvml_version",
                   "loop_seconds", "gpus", "processes", "events"}));
    Scenario sc;
    sc.source = source_;
    STOKER_RETURN_IF_ERROR(String(root, "", "name", &sc.name, true));
    STOKER_RETURN_IF_ERROR(String(root, "", "description", &sc.description, false));
    STOKER_RETURN_IF_ERROR(String(root, "", "hostname", &sc.hostname, false));
    STOKER_RETURN_IF_ERROR(String(root, "", "driver_version", &sc.driver_version, false));
    STOKER_RETURN_IF_ERROR(String(root, "", "nvml_version", &sc.nvml_version, false));
    STOKER_RETURN_IF_ERROR(Double(root, "", "loop_seconds", 0, 1e7, &sc.loop_seconds));

    const YAML::Node gpus = root["gpus"];
    if (!gpus.IsDefined() || !gpus.IsSequence() || gpus.size() == 0) {
      return Error(gpus.IsDefined() ? gpus : root, "gpus", "expected a non-empty list of GPUs");
    }
    if (gpus.size() > 64) return Error(gpus, "gpus", "at most 64 GPUs per node");
    std::set<std::string> uuids;
    std::set<std::string> buses;
    for (size_t i = 0; i < gpus.size(); ++i) {
      GpuSpec g;
      g.minor = static_cast<uint32_t>(i);
      const std::string p = Index("gpus", i);
      context_mark_ = gpus[i].Mark();
      const YAML::Node gn = ResolveMerge(gpus[i]);
      STOKER_RETURN_IF_ERROR(ParseGpu(gn.IsMap() ? gn : gpus[i], p, &g));
      if (!uuids.insert(g.uuid).second) {
        return Error(gn["uuid"], Join(p, "uuid"), "duplicate UUID '" + g.uuid + "'");
      }
      for (size_t m = 0; m < g.mig_instances.size(); ++m) {
        if (!uuids.insert(g.mig_instances[m].uuid).second) {
          return Error(gn["mig"]["instances"][m]["uuid"],
                       Index(Join(p, "mig.instances"), m) + ".uuid",
                       "duplicate UUID '" + g.mig_instances[m].uuid + "'");
        }
      }
      if (!buses.insert(g.pci_bus_id).second) {
        return Error(gn["pci_bus_id"], Join(p, "pci_bus_id"),
                     "duplicate PCI bus id '" + g.pci_bus_id + "'");
      }
      sc.gpus.push_back(std::move(g));
    }

    const YAML::Node procs = root["processes"];
    if (procs.IsDefined() && !procs.IsNull()) {
      if (!procs.IsSequence()) return Error(procs, "processes", "expected a list");
      std::vector<double> mem_per_gpu(sc.gpus.size(), 0.0);
      for (size_t i = 0; i < procs.size(); ++i) {
        ProcessSpec pr;
        const std::string p = Index("processes", i);
        context_mark_ = procs[i].Mark();
        STOKER_RETURN_IF_ERROR(ParseProcess(ResolveMerge(procs[i]), p, sc, &pr));
        // Conservative: peak of each process summed, as if all peaked together.
        mem_per_gpu[pr.gpu] += pr.used_memory_mib.Max();
        const GpuSpec& g = sc.gpus[pr.gpu];
        if (mem_per_gpu[pr.gpu] + static_cast<double>(g.memory_reserved_mib) >
            static_cast<double>(g.memory_total_mib)) {
          return Error(procs[i], Join(p, "used_memory_mib"),
                       "processes on GPU " + std::to_string(pr.gpu) +
                           " use more memory than memory_total_mib");
        }
        sc.processes.push_back(std::move(pr));
      }
    }
    const YAML::Node events = root["events"];
    if (events.IsDefined() && !events.IsNull()) {
      if (!events.IsSequence()) return Error(events, "events", "expected a list");
      for (size_t i = 0; i < events.size(); ++i) {
        EventSpec ev;
        STOKER_RETURN_IF_ERROR(ParseEvent(events[i], Index("events", i), sc, &ev));
        sc.events.push_back(ev);
      }
    }
    return sc;
  }

 private:
  std::string source_;
  mutable YAML::Mark context_mark_ = YAML::Mark::null_mark();  // the list item being parsed
};

}  // namespace

Result<Scenario> ParseScenario(std::string_view text, std::string_view source_name) {
  const std::string source(source_name.empty() ? "<scenario>" : source_name);
  Parser parser(source);
  // yaml-cpp reports syntax errors by throwing; convert them here, at the edge.
  try {
    return parser.Parse(text);
  } catch (const YAML::Exception& e) {
    std::string where = source;
    if (e.mark.line >= 0) {
      where += ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1);
    }
    return InvalidArgument(where + ": (syntax): " + e.msg);
  } catch (const std::exception& e) {
    return InvalidArgument(source + ": " + e.what());
  }
}

Result<Scenario> LoadScenarioFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open scenario file '" + path + "'");
  std::ostringstream buf;
  buf << in.rdbuf();
  if (buf.str().size() > (16u << 20)) return InvalidArgument(path + ": scenario file over 16 MiB");
  return ParseScenario(buf.str(), path);
}

}  // namespace stoker::fakenvml
