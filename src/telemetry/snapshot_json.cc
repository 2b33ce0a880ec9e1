#include "telemetry/snapshot_json.h"

#include "telemetry/gpu_fields.h"
#include "telemetry/xid.h"

namespace stoker::telemetry {
namespace {

using nlohmann::json;

json FieldJson(const FieldView& v) {
  json j;
  switch (v.kind) {
    case FieldView::Kind::kUint: j["value"] = v.state == FieldState::kValue ? json(v.u) : json(); break;
    case FieldView::Kind::kDouble: j["value"] = v.state == FieldState::kValue ? json(v.d) : json(); break;
    case FieldView::Kind::kBool:
      j["value"] = v.state == FieldState::kValue ? json(v.u != 0) : json();
      break;
  }
  j["state"] = FieldStateName(v.state);
  if (v.state == FieldState::kError) j["error_code"] = v.error_code;
  return j;
}

template <typename T>
json FieldJson(const Field<T>& f) {
  return FieldJson(ViewOf(f));
}

json OptionalId(uint32_t id) { return id == UINT32_MAX ? json() : json(id); }

double UnixSeconds(WallTime t) { return ToSeconds(t.time_since_epoch()); }

bool Fresh(const GpuState& g) { return g.have_sample && g.last_error.empty(); }

const char* HealthOf(const GpuState& g) {
  if (!g.have_sample && g.last_error.empty()) return "pending";
  return GpuHealthName(Fresh(g) ? g.sample.health : GpuHealth::kUnreachable);
}

}  // namespace

json SnapshotToJson(const TelemetrySnapshot& snap, const std::string& hostname) {
  json root;
  root["hostname"] = hostname;
  root["taken_at_unix"] = UnixSeconds(snap.taken_at);
  root["nvml_available"] = snap.nvml_available;
  root["simulated"] = snap.simulated;
  root["source"] = snap.source_description;
  root["host"] = {{"load1", FieldJson(snap.host.load1)},
                  {"load5", FieldJson(snap.host.load5)},
                  {"load15", FieldJson(snap.host.load15)},
                  {"memory_total_bytes", FieldJson(snap.host.memory_total_bytes)},
                  {"memory_available_bytes", FieldJson(snap.host.memory_available_bytes)}};
  json gpus = json::array();
  const auto defs = GpuScalarFields();
  for (size_t i = 0; i < snap.gpus.size(); ++i) {
    const GpuState& g = snap.gpus[i];
    const GpuSample& s = g.sample;
    json j;
    j["index"] = i;
    j["uuid"] = s.id.uuid;
    j["pci_bus_id"] = s.id.pci_bus_id;
    j["name"] = s.id.name;
    j["minor"] = FieldJson(s.id.minor);
    j["architecture"] = FieldJson(s.id.architecture);
    j["health"] = HealthOf(g);
    j["up"] = Fresh(g) && s.health == GpuHealth::kOk;
    j["last_error"] = g.last_error.empty() ? json() : json(g.last_error);
    j["timestamp_unix"] = g.have_sample ? json(UnixSeconds(s.timestamp)) : json();
    json fields = json::object();
    for (const ScalarFieldDef& d : defs) {
      // A stale sample (latest read failed) is reported as an error, not as current values.
      fields[std::string(d.key)] = Fresh(g) ? FieldJson(d.get(s)) : FieldJson(FieldView{});
    }
    j["fields"] = std::move(fields);
    json migs = json::array();
    json procs = json::array();
    if (Fresh(g)) {
      for (const MigInstance& m : s.mig_instances) {
        migs.push_back({{"gpu_instance_id", m.gpu_instance_id},
                        {"compute_instance_id", m.compute_instance_id},
                        {"profile", m.profile},
                        {"uuid", m.uuid},
                        {"slices", m.slices},
                        {"memory_total_bytes", FieldJson(m.memory_total_bytes)},
                        {"memory_used_bytes", FieldJson(m.memory_used_bytes)},
                        {"sm_active_ratio", FieldJson(m.gpm.sm_active)},
                        {"sm_occupancy_ratio", FieldJson(m.gpm.sm_occupancy)},
                        {"tensor_active_ratio", FieldJson(m.gpm.tensor_active)},
                        {"dram_active_ratio", FieldJson(m.gpm.dram_bw_util)}});
      }
      for (const GpuProcess& p : s.processes) {
        json job;
        if (p.job.known()) {
          job = {{"kind", JobKindName(p.job.kind)}, {"id", p.job.id}, {"container", p.job.container}};
        }
        procs.push_back({{"pid", p.pid},
                         {"name", p.name},
                         {"user", p.job.user.empty() ? json() : json(p.job.user)},
                         {"job", job},
                         {"used_memory_bytes", FieldJson(p.used_memory_bytes)},
                         {"sm_util_pct", FieldJson(p.sm_util_pct)},
                         {"mem_util_pct", FieldJson(p.mem_util_pct)},
                         {"gpu_instance_id", OptionalId(p.gpu_instance_id)},
                         {"compute_instance_id", OptionalId(p.compute_instance_id)}});
      }
    }
    j["mig_instances"] = std::move(migs);
    j["processes"] = std::move(procs);
    json counts = json::object();
    for (const auto& [xid, count] : g.xid_counts) counts[std::to_string(xid)] = count;
    j["xid"] = {{"counts", std::move(counts)},
                {"last", g.last_xid},
                {"last_grade", g.last_xid != 0 ? json(XidGradeName(GradeXid(g.last_xid))) : json()}};
    json field_errors = json::object();
    for (size_t f = 0; f < defs.size(); ++f) {
      if (g.field_errors_total[f] != 0) field_errors[std::string(defs[f].key)] = g.field_errors_total[f];
    }
    j["agent"] = {{"samples_total", g.samples_total},
                  {"sample_errors_total", g.sample_errors_total},
                  {"skipped_ticks_total", g.skipped_ticks_total},
                  {"field_errors_total", std::move(field_errors)}};
    gpus.push_back(std::move(j));
  }
  root["gpus"] = std::move(gpus);
  return root;
}

json HealthToJson(const TelemetrySnapshot& snap) {
  bool ok = snap.nvml_available;
  json gpus = json::array();
  for (size_t i = 0; i < snap.gpus.size(); ++i) {
    const GpuState& g = snap.gpus[i];
    const char* h = HealthOf(g);
    if (std::string_view(h) != "ok") ok = false;
    gpus.push_back({{"index", i}, {"uuid", g.sample.id.uuid}, {"health", h}, {"last_xid", g.last_xid}});
  }
  return {{"status", ok ? "ok" : "degraded"},
          {"nvml_available", snap.nvml_available},
          {"simulated", snap.simulated},
          {"source", snap.source_description},
          {"gpus", std::move(gpus)}};
}

}  // namespace stoker::telemetry
