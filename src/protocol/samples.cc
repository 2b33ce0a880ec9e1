#include "protocol/samples.h"

#include <limits>
#include <optional>
#include <string>

namespace stoker::protocol {
namespace {
using nlohmann::json;

json OptionalId(uint32_t id) { return id == UINT32_MAX ? json() : json(id); }

double UnixSeconds(WallTime t) { return ToSeconds(t.time_since_epoch()); }

// One field object back into a view: {"state": ..., "value": ..., "error_code": ...}. Anything
// else reads as "unset", as a missing field would, and so does a null value (a NaN reading is
// written as null); a value that is no number or boolean is nullopt.
std::optional<FieldView> ReadField(simdjson::dom::element e) {
  FieldView v;
  simdjson::dom::object f;
  if (e.get_object().get(f)) return v;
  std::string_view state;
  if (f["state"].get_string().get(state)) return v;
  if (state == "unsupported") {
    v.state = FieldState::kUnsupported;
    return v;
  }
  if (state == "error") {
    int64_t code = 0;
    if (!f["error_code"].get_int64().get(code) && code >= INT32_MIN && code <= INT32_MAX) {
      v.error_code = static_cast<int32_t>(code);
    }
    v.state = FieldState::kError;
    return v;
  }
  if (state != "value") return v;
  simdjson::dom::element value;
  if (f["value"].get(value) || value.is_null()) return v;
  bool b = false;
  uint64_t u = 0;
  double d = 0;
  if (!value.get_bool().get(b)) {
    v.kind = FieldView::Kind::kBool;
    v.u = b ? 1 : 0;
  } else if (!value.get_uint64().get(u)) {
    v.kind = FieldView::Kind::kUint;
    v.u = u;
  } else if (!value.get_double().get(d)) {
    v.kind = FieldView::Kind::kDouble;
    v.d = d;
  } else {
    return std::nullopt;
  }
  v.state = FieldState::kValue;
  return v;
}

// Reads the field `key` of `o` through `assign` (a field's AssignFrom); a value that does not
// fit it is an error naming where it is: "<where>.<key>.value: must be ...".
template <typename Assign>
Status ReadChecked(simdjson::dom::object o, std::string_view key, const std::string& where,
                   Assign assign) {
  simdjson::dom::element e;
  if (o[key].get(e)) return Status::Ok();
  std::optional<FieldView> view = ReadField(e);
  if (!view) {
    // No number or boolean (a string, an array): a view no field takes (a boolean of 2) gets
    // the field's own rule back.
    view = FieldView{.state = FieldState::kValue, .kind = FieldView::Kind::kBool, .u = 2};
  }
  const std::string_view rule = assign(*view);
  if (rule.empty()) return Status::Ok();
  return InvalidArgument(where + "." + std::string(key) + ".value: " + std::string(rule));
}

template <typename T>
Status ReadTyped(simdjson::dom::object o, std::string_view key, const std::string& where,
                 Field<T>* out) {
  return ReadChecked(o, key, where, [out](const FieldView& v) { return AssignFrom(v, out); });
}

std::optional<JobRef::Kind> ParseJobKind(std::string_view s) {
  for (JobRef::Kind k : {JobRef::Kind::kNone, JobRef::Kind::kStoker, JobRef::Kind::kSlurm,
                         JobRef::Kind::kKubernetes}) {
    if (s == JobKindName(k)) return k;
  }
  return std::nullopt;
}

}  // namespace

json FieldJson(const FieldView& v) {
  json j;
  switch (v.kind) {
    case FieldView::Kind::kUint:
      j["value"] = v.state == FieldState::kValue ? json(v.u) : json();
      break;
    case FieldView::Kind::kDouble:
      j["value"] = v.state == FieldState::kValue ? json(v.d) : json();
      break;
    case FieldView::Kind::kBool:
      j["value"] = v.state == FieldState::kValue ? json(v.u != 0) : json();
      break;
  }
  j["state"] = FieldStateName(v.state);
  if (v.state == FieldState::kError) j["error_code"] = v.error_code;
  return j;
}

json GpuSampleToJson(const GpuSample& s, uint32_t index, bool fresh) {
  json j;
  j["index"] = index;
  j["uuid"] = s.id.uuid;
  j["pci_bus_id"] = s.id.pci_bus_id;
  j["name"] = s.id.name;
  j["minor"] = FieldJson(s.id.minor);
  j["architecture"] = FieldJson(s.id.architecture);
  j["timestamp_unix"] = s.timestamp == WallTime{} ? json() : json(UnixSeconds(s.timestamp));
  json fields = json::object();
  for (const ScalarFieldDef& d : GpuScalarFields()) {
    fields[std::string(d.key)] = fresh ? FieldJson(d.get(s)) : FieldJson(FieldView{});
  }
  j["fields"] = std::move(fields);
  json migs = json::array();
  json procs = json::array();
  if (fresh) {
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
        if (!p.job.step.empty()) job["step"] = p.job.step;
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
  if (!s.claims.empty()) {
    json claims = json::array();
    for (const GpuClaim& c : s.claims) {
      json job{{"kind", JobKindName(c.job.kind)}, {"id", c.job.id}, {"container", c.job.container}};
      claims.push_back({{"job", std::move(job)},
                        {"whole", c.whole},
                        {"gpu_milli", c.gpu_milli},
                        {"mig_uuid", c.mig_uuid.empty() ? json() : json(c.mig_uuid)}});
    }
    j["claims"] = std::move(claims);
  }
  return j;
}

Result<std::vector<GpuSample>> ParseGpuSamples(simdjson::dom::array gpus) {
  std::vector<GpuSample> out;
  const auto defs = GpuScalarFields();
  size_t i = 0;
  for (simdjson::dom::element e : gpus) {
    const std::string where = "samples[" + std::to_string(i++) + "]";
    simdjson::dom::object g;
    if (e.get_object().get(g)) return InvalidArgument(where + ": must be an object");
    GpuSample s;
    uint64_t index = 0;
    if (!g["index"].get_uint64().get(index)) {
      if (index > UINT32_MAX) return InvalidArgument(where + ".index: out of range");
      s.id.index = static_cast<uint32_t>(index);
    }
    std::string_view text;
    if (!g["uuid"].get_string().get(text)) s.id.uuid = text;
    if (!g["pci_bus_id"].get_string().get(text)) s.id.pci_bus_id = text;
    if (!g["name"].get_string().get(text)) s.id.name = text;
    STOKER_RETURN_IF_ERROR(ReadTyped(g, "minor", where, &s.id.minor));
    STOKER_RETURN_IF_ERROR(ReadTyped(g, "architecture", where, &s.id.architecture));
    if (!g["health"].get_string().get(text)) {
      s.health = text == "lost" ? GpuHealth::kLost
                 : text == "ok" ? GpuHealth::kOk
                                : GpuHealth::kUnreachable;
    }
    double secs = 0;
    if (!g["timestamp_unix"].get_double().get(secs)) {
      if (secs < 0 || secs > 4e9)
        return InvalidArgument(where + ".timestamp_unix: not a Unix time");
      s.timestamp =
          WallTime(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(secs)));
    }
    simdjson::dom::object fields;
    if (!g["fields"].get_object().get(fields)) {
      const std::string at = where + ".fields";
      for (const ScalarFieldDef& d : defs) {
        STOKER_RETURN_IF_ERROR(
            ReadChecked(fields, d.key, at, [&](const FieldView& v) { return d.set(s, v); }));
      }
    }
    simdjson::dom::array migs;
    if (!g["mig_instances"].get_array().get(migs)) {
      size_t k = 0;
      for (simdjson::dom::element me : migs) {
        const std::string at = where + ".mig_instances[" + std::to_string(k++) + "]";
        simdjson::dom::object m;
        if (me.get_object().get(m)) continue;
        MigInstance mi;
        if (!m["uuid"].get_string().get(text)) mi.uuid = text;
        if (!m["profile"].get_string().get(text)) mi.profile = text;
        uint64_t v = 0;
        if (!m["slices"].get_uint64().get(v) && v <= 7) mi.slices = static_cast<uint32_t>(v);
        STOKER_RETURN_IF_ERROR(ReadTyped(m, "memory_total_bytes", at, &mi.memory_total_bytes));
        STOKER_RETURN_IF_ERROR(ReadTyped(m, "memory_used_bytes", at, &mi.memory_used_bytes));
        STOKER_RETURN_IF_ERROR(ReadTyped(m, "sm_active_ratio", at, &mi.gpm.sm_active));
        STOKER_RETURN_IF_ERROR(ReadTyped(m, "tensor_active_ratio", at, &mi.gpm.tensor_active));
        s.mig_instances.push_back(std::move(mi));
      }
    }
    simdjson::dom::array procs;
    if (!g["processes"].get_array().get(procs)) {
      size_t k = 0;
      for (simdjson::dom::element pe : procs) {
        const std::string at = where + ".processes[" + std::to_string(k++) + "]";
        simdjson::dom::object p;
        if (pe.get_object().get(p)) continue;
        GpuProcess proc;
        uint64_t pid = 0;
        if (!p["pid"].get_uint64().get(pid) && pid <= UINT32_MAX) {
          proc.pid = static_cast<uint32_t>(pid);
        }
        STOKER_RETURN_IF_ERROR(ReadTyped(p, "used_memory_bytes", at, &proc.used_memory_bytes));
        if (!p["job"]["id"].get_string().get(text)) {
          proc.job.id = text;
          std::string_view kind;
          proc.job.kind = !p["job"]["kind"].get_string().get(kind)
                              ? ParseJobKind(kind).value_or(JobRef::Kind::kStoker)
                              : JobRef::Kind::kStoker;
          if (!p["job"]["container"].get_string().get(text)) proc.job.container = text;
          if (!p["job"]["step"].get_string().get(text)) proc.job.step = text;
        }
        if (!p["user"].get_string().get(text)) proc.job.user = text;
        s.processes.push_back(std::move(proc));
      }
    }
    simdjson::dom::array claims;
    if (!g["claims"].get_array().get(claims)) {
      size_t k = 0;
      for (simdjson::dom::element ce : claims) {
        const std::string at = where + ".claims[" + std::to_string(k++) + "]";
        simdjson::dom::object c;
        if (ce.get_object().get(c)) return InvalidArgument(at + ": must be an object");
        GpuClaim claim;
        std::string_view kind;
        if (c["job"]["id"].get_string().get(text) || c["job"]["kind"].get_string().get(kind)) {
          return InvalidArgument(at + ".job: needs kind and id");
        }
        claim.job.id = text;
        auto parsed = ParseJobKind(kind);
        if (!parsed) return InvalidArgument(at + ".job.kind: unknown '" + std::string(kind) + "'");
        claim.job.kind = *parsed;
        if (!c["job"]["container"].get_string().get(text)) claim.job.container = text;
        bool whole = false;
        if (!c["whole"].get_bool().get(whole)) claim.whole = whole;
        int64_t milli = 0;
        if (!c["gpu_milli"].get_int64().get(milli)) {
          if (milli < 0 || milli > 1000) return InvalidArgument(at + ".gpu_milli: not in 0..1000");
          claim.gpu_milli = static_cast<int32_t>(milli);
        }
        if (!c["mig_uuid"].get_string().get(text)) claim.mig_uuid = text;
        s.claims.push_back(std::move(claim));
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

Result<AgentSnapshot> ParseAgentSnapshot(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(body.data(), body.size()).get(doc)) {
    return InvalidArgument(std::string("snapshot: not valid JSON (") +
                           simdjson::error_message(err) + ")");
  }
  simdjson::dom::object root;
  if (doc.get_object().get(root)) return InvalidArgument("snapshot: not a JSON object");
  AgentSnapshot out;
  std::string_view host;
  if (!root["hostname"].get_string().get(host)) out.hostname = std::string(host);
  simdjson::dom::array gpus;
  if (root["gpus"].get_array().get(gpus)) return InvalidArgument("snapshot: no \"gpus\" array");
  auto parsed = ParseGpuSamples(gpus);
  if (!parsed.ok()) return parsed.status().WithContext("snapshot");
  out.gpus = std::move(parsed).value();
  return out;
}

}  // namespace stoker::protocol
