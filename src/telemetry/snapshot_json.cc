#include "telemetry/snapshot_json.h"

#include "json/enum_json.h"
#include "protocol/samples.h"
#include "telemetry/xid.h"

namespace stoker::telemetry {
namespace {

using nlohmann::json;
using protocol::FieldJson;
using protocol::GpuScalarFields;

double UnixSeconds(WallTime t) { return ToSeconds(t.time_since_epoch()); }

bool Fresh(const GpuState& g) { return g.have_sample && g.last_error.empty(); }

const char* HealthOf(const GpuState& g) {
  if (!g.have_sample && g.last_error.empty()) return "pending";
  return GpuHealthName(Fresh(g) ? g.sample.health : GpuHealth::kUnreachable);
}

}  // namespace

std::vector<GpuSample> ReportSamples(const TelemetrySnapshot& snap) {
  std::vector<GpuSample> out;
  out.reserve(snap.gpus.size());
  for (size_t i = 0; i < snap.gpus.size(); ++i) {
    const GpuState& g = snap.gpus[i];
    if (Fresh(g)) {
      out.push_back(g.sample);
    } else {
      GpuSample s;
      s.id = g.sample.id;
      s.health = GpuHealth::kUnreachable;
      out.push_back(std::move(s));
    }
    out.back().id.index = static_cast<uint32_t>(i);
  }
  return out;
}

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
    json j = protocol::GpuSampleToJson(g.sample, static_cast<uint32_t>(i), Fresh(g));
    j["health"] = HealthOf(g);
    j["up"] = Fresh(g) && g.sample.health == GpuHealth::kOk;
    j["last_error"] = g.last_error.empty() ? json() : json(g.last_error);
    if (!g.have_sample) j["timestamp_unix"] = json();
    json counts = json::object();
    for (const auto& [xid, count] : g.xid_counts) counts[std::to_string(xid)] = count;
    j["xid"] = {{"counts", std::move(counts)},
                {"last", g.last_xid},
                {"last_grade", g.last_xid != 0 ? json(GradeXid(g.last_xid)) : json()}};
    json field_errors = json::object();
    for (size_t f = 0; f < defs.size(); ++f) {
      if (g.field_errors_total[f] != 0)
        field_errors[std::string(defs[f].key)] = g.field_errors_total[f];
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
    gpus.push_back(
        {{"index", i}, {"uuid", g.sample.id.uuid}, {"health", h}, {"last_xid", g.last_xid}});
  }
  return {{"status", ok ? "ok" : "degraded"},
          {"nvml_available", snap.nvml_available},
          {"simulated", snap.simulated},
          {"source", snap.source_description},
          {"gpus", std::move(gpus)}};
}

}  // namespace stoker::telemetry
