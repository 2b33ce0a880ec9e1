#include "protocol/samples.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "json/enum_json.h"
#include "protocol/limits.h"

namespace stoker::protocol {
namespace {
using nlohmann::json;

json OptionalId(uint32_t id) { return id == UINT32_MAX ? json() : json(id); }

double UnixSeconds(WallTime t) { return ToSeconds(t.time_since_epoch()); }

std::optional<FieldView> ReadValue(simdjson::dom::element value);

// Where a value sits in a body ("ticks[2].gpus[5].mig[0]"), written out only when an error
// names it: reading a body that is right builds no path (building one string per tick and per
// GPU was a large share of the time spent reading a report). A path refers to its parent, which
// must outlive it.
class Path {
 public:
  // The root: `key`, or `key[index]`.
  static Path Root(std::string_view key) { return Path(nullptr, key, kNoIndex); }
  static Path Root(std::string_view key, size_t index) { return Path(nullptr, key, index); }
  // ".key" and ".key[index]" below this one; "[index]" right after it.
  Path Key(std::string_view key) const { return Path(this, key, kNoIndex); }
  Path At(std::string_view key, size_t index) const { return Path(this, key, index); }
  Path Index(size_t index) const { return Path(this, {}, index); }

  std::string str() const {
    std::string out = parent_ != nullptr ? parent_->str() : std::string();
    if (!key_.empty()) {
      if (parent_ != nullptr) out += '.';
      out += key_;
    }
    if (index_ != kNoIndex) {
      out += '[';
      out += std::to_string(index_);
      out += ']';
    }
    return out;
  }

 private:
  static constexpr size_t kNoIndex = std::numeric_limits<size_t>::max();
  Path(const Path* parent, std::string_view key, size_t index)
      : parent_(parent), key_(key), index_(index) {}
  const Path* parent_;
  std::string_view key_;
  size_t index_;
};

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
  if (f["value"].get(value)) return v;
  return ReadValue(value);
}

// A plain reading (the compact form, and a field object's "value"): a number or a boolean is a
// value, null is no reading (unset), anything else is nullopt.
std::optional<FieldView> ReadValue(simdjson::dom::element value) {
  // The value's type is read once: trying each getter in turn until one took it was about a
  // fifth of the time spent reading a report. simdjson keeps an integer that fits as int64
  // (uint64 only above INT64_MAX); a negative one reads as a double, as through get_double.
  FieldView v;
  switch (value.type()) {
    case simdjson::dom::element_type::NULL_VALUE:
      return v;
    case simdjson::dom::element_type::BOOL:
      v.kind = FieldView::Kind::kBool;
      v.u = value.get_bool().value_unsafe() ? 1 : 0;
      break;
    case simdjson::dom::element_type::UINT64:
      v.kind = FieldView::Kind::kUint;
      v.u = value.get_uint64().value_unsafe();
      break;
    case simdjson::dom::element_type::INT64: {
      const int64_t i = value.get_int64().value_unsafe();
      if (i >= 0) {
        v.kind = FieldView::Kind::kUint;
        v.u = static_cast<uint64_t>(i);
      } else {
        v.kind = FieldView::Kind::kDouble;
        v.d = static_cast<double>(i);
      }
      break;
    }
    case simdjson::dom::element_type::DOUBLE:
      v.kind = FieldView::Kind::kDouble;
      v.d = value.get_double().value_unsafe();
      break;
    default:
      return std::nullopt;
  }
  v.state = FieldState::kValue;
  return v;
}

// Reads the field `key` of `o` through `assign` (a field's AssignFrom); a value that does not
// fit it is an error naming where it is: "<where>.<key>.value: must be ..." (a field object),
// "<where>.<key>: must be ..." (`plain`: the compact form's bare reading).
template <typename Assign>
Status ReadChecked(simdjson::dom::object o, std::string_view key, const Path& where, Assign assign,
                   bool plain = false) {
  simdjson::dom::element e;
  if (o[key].get(e)) return Status::Ok();
  std::optional<FieldView> view = plain ? ReadValue(e) : ReadField(e);
  if (!view) {
    // No number or boolean (a string, an array): a view no field takes (a boolean of 2) gets
    // the field's own rule back.
    view = FieldView{.state = FieldState::kValue, .kind = FieldView::Kind::kBool, .u = 2};
  }
  const std::string_view rule = assign(*view);
  if (rule.empty()) return Status::Ok();
  return InvalidArgument(where.str() + "." + std::string(key) + (plain ? ": " : ".value: ") +
                         std::string(rule));
}

template <typename T>
Status ReadTyped(simdjson::dom::object o, std::string_view key, const Path& where, Field<T>* out,
                 bool plain = false) {
  return ReadChecked(
      o, key, where, [out](const FieldView& v) { return AssignFrom(v, out); }, plain);
}

std::optional<JobRef::Kind> ParseJobKind(std::string_view s) { return kJobKindNames.Find(s); }

// The parts of a GPU's object beyond its scalar fields: MIG instances ("mig_instances", or
// "mig" in the compact form), processes and claims. `plain`: readings are bare numbers.
Status ReadParts(simdjson::dom::object g, const Path& where, bool plain, GpuSample* out) {
  GpuSample& s = *out;
  std::string_view text;
  const std::string_view mig_key = plain ? "mig" : "mig_instances";
  simdjson::dom::array migs;
  if (!g[mig_key].get_array().get(migs)) {
    s.mig_instances.reserve(
        std::min(migs.size(), static_cast<size_t>(limits::kMigInstancesPerGpu)));
    size_t k = 0;
    for (simdjson::dom::element me : migs) {
      const Path at = where.At(mig_key, k++);
      simdjson::dom::object m;
      if (me.get_object().get(m)) continue;
      if (s.mig_instances.size() >= static_cast<size_t>(limits::kMigInstancesPerGpu)) {
        return InvalidArgument(at.str() + ": more than " +
                               std::to_string(limits::kMigInstancesPerGpu) + " MIG instances");
      }
      MigInstance mi;
      if (!m["uuid"].get_string().get(text)) mi.uuid = text;
      if (!m["profile"].get_string().get(text)) mi.profile = text;
      uint64_t v = 0;
      if (!m["slices"].get_uint64().get(v) && v <= 7) mi.slices = static_cast<uint32_t>(v);
      STOKER_RETURN_IF_ERROR(ReadTyped(m, "memory_total_bytes", at, &mi.memory_total_bytes, plain));
      STOKER_RETURN_IF_ERROR(ReadTyped(m, "memory_used_bytes", at, &mi.memory_used_bytes, plain));
      STOKER_RETURN_IF_ERROR(ReadTyped(m, "sm_active_ratio", at, &mi.gpm.sm_active, plain));
      STOKER_RETURN_IF_ERROR(ReadTyped(m, "tensor_active_ratio", at, &mi.gpm.tensor_active, plain));
      s.mig_instances.push_back(std::move(mi));
    }
  }
  simdjson::dom::array procs;
  if (!g["processes"].get_array().get(procs)) {
    size_t k = 0;
    for (simdjson::dom::element pe : procs) {
      const Path at = where.At("processes", k++);
      simdjson::dom::object p;
      if (pe.get_object().get(p)) continue;
      GpuProcess proc;
      uint64_t pid = 0;
      if (!p["pid"].get_uint64().get(pid) && pid <= UINT32_MAX) {
        proc.pid = static_cast<uint32_t>(pid);
      }
      STOKER_RETURN_IF_ERROR(ReadTyped(p, "used_memory_bytes", at, &proc.used_memory_bytes, plain));
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
      const Path at = where.At("claims", k++);
      simdjson::dom::object c;
      if (ce.get_object().get(c)) return InvalidArgument(at.str() + ": must be an object");
      GpuClaim claim;
      std::string_view kind;
      if (c["job"]["id"].get_string().get(text) || c["job"]["kind"].get_string().get(kind)) {
        return InvalidArgument(at.str() + ".job: needs kind and id");
      }
      claim.job.id = text;
      auto parsed = kJobKindNames.Parse(kind);
      if (!parsed.ok()) return parsed.status().WithContext(at.str() + ".job.kind");
      claim.job.kind = *parsed;
      if (!c["job"]["container"].get_string().get(text)) claim.job.container = text;
      bool whole = false;
      if (!c["whole"].get_bool().get(whole)) claim.whole = whole;
      int64_t milli = 0;
      if (!c["gpu_milli"].get_int64().get(milli)) {
        if (milli < 0 || milli > 1000) {
          return InvalidArgument(at.str() + ".gpu_milli: not in 0..1000");
        }
        claim.gpu_milli = static_cast<int32_t>(milli);
      }
      if (!c["mig_uuid"].get_string().get(text)) claim.mig_uuid = text;
      s.claims.push_back(std::move(claim));
    }
  }
  return Status::Ok();
}

json JobJson(const JobRef& job) {
  json j{{"kind", job.kind}, {"id", job.id}, {"container", job.container}};
  if (!job.step.empty()) j["step"] = job.step;
  return j;
}

json ClaimsJson(const std::vector<GpuClaim>& claims) {
  json out = json::array();
  for (const GpuClaim& c : claims) {
    json job{{"kind", c.job.kind}, {"id", c.job.id}, {"container", c.job.container}};
    out.push_back({{"job", std::move(job)},
                   {"whole", c.whole},
                   {"gpu_milli", c.gpu_milli},
                   {"mig_uuid", c.mig_uuid.empty() ? json() : json(c.mig_uuid)}});
  }
  return out;
}

// A reading as the compact form writes it: the bare value, or null.
json PlainJson(const FieldView& v) {
  if (v.state != FieldState::kValue) return json();
  switch (v.kind) {
    case FieldView::Kind::kUint:
      return json(v.u);
    case FieldView::Kind::kDouble:
      return std::isfinite(v.d) ? json(v.d) : json();
    case FieldView::Kind::kBool:
      return json(v.u != 0);
  }
  return json();
}
template <typename T>
json PlainJson(const Field<T>& f) {
  return PlainJson(ViewOf(f));
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
  j["state"] = v.state;
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
      if (p.job.known()) job = JobJson(p.job);
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
  if (!s.claims.empty()) j["claims"] = ClaimsJson(s.claims);
  return j;
}

Result<std::vector<GpuSample>> ParseGpuSamples(simdjson::dom::array gpus) {
  std::vector<GpuSample> out;
  const auto defs = GpuScalarFields();
  size_t i = 0;
  for (simdjson::dom::element e : gpus) {
    const Path where = Path::Root("samples", i++);
    simdjson::dom::object g;
    if (e.get_object().get(g)) return InvalidArgument(where.str() + ": must be an object");
    GpuSample s;
    uint64_t index = 0;
    if (!g["index"].get_uint64().get(index)) {
      if (index > UINT32_MAX) return InvalidArgument(where.str() + ".index: out of range");
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
        return InvalidArgument(where.str() + ".timestamp_unix: not a Unix time");
      s.timestamp =
          WallTime(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(secs)));
    }
    simdjson::dom::object fields;
    if (!g["fields"].get_object().get(fields)) {
      const Path at = where.Key("fields");
      for (const ScalarFieldDef& d : defs) {
        STOKER_RETURN_IF_ERROR(
            ReadChecked(fields, d.key, at, [&](const FieldView& v) { return d.set(s, v); }));
      }
    }
    STOKER_RETURN_IF_ERROR(ReadParts(g, where, /*plain=*/false, &s));
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

const std::string& CompactKeysJson() {
  static const std::string keys = [] {
    json a = json::array();
    for (const ScalarFieldDef& d : GpuScalarFields()) a.push_back(std::string(d.key));
    return a.dump();
  }();
  return keys;
}

std::string CompactGpusJson(const std::vector<GpuSample>& gpus, bool identity) {
  const auto defs = GpuScalarFields();
  json out = json::array();
  for (const GpuSample& s : gpus) {
    json g;
    g["i"] = s.id.index;
    if (identity) {
      g["uuid"] = s.id.uuid;
      g["pci_bus_id"] = s.id.pci_bus_id;
      g["name"] = s.id.name;
      g["minor"] = PlainJson(s.id.minor);
      g["architecture"] = PlainJson(s.id.architecture);
    }
    json values = json::array();
    json unsupported = json::array();
    json errors = json::array();
    for (size_t k = 0; k < defs.size(); ++k) {
      const FieldView v = defs[k].get(s);
      values.push_back(PlainJson(v));
      if (v.state == FieldState::kUnsupported) unsupported.push_back(k);
      if (v.state == FieldState::kError) errors.push_back({k, v.error_code});
    }
    g["v"] = std::move(values);
    if (!unsupported.empty()) g["unsupported"] = std::move(unsupported);
    if (!errors.empty()) g["errors"] = std::move(errors);
    if (s.health != GpuHealth::kOk) g["health"] = s.health;
    if (!s.mig_instances.empty()) {
      json migs = json::array();
      for (const MigInstance& m : s.mig_instances) {
        migs.push_back({{"uuid", m.uuid},
                        {"profile", m.profile},
                        {"slices", m.slices},
                        {"memory_total_bytes", PlainJson(m.memory_total_bytes)},
                        {"memory_used_bytes", PlainJson(m.memory_used_bytes)},
                        {"sm_active_ratio", PlainJson(m.gpm.sm_active)},
                        {"tensor_active_ratio", PlainJson(m.gpm.tensor_active)}});
      }
      g["mig"] = std::move(migs);
    }
    if (!s.processes.empty()) {
      json procs = json::array();
      for (const GpuProcess& p : s.processes) {
        json proc{{"pid", p.pid}, {"used_memory_bytes", PlainJson(p.used_memory_bytes)}};
        if (!p.job.user.empty()) proc["user"] = p.job.user;
        if (p.job.known()) proc["job"] = JobJson(p.job);
        procs.push_back(std::move(proc));
      }
      g["processes"] = std::move(procs);
    }
    if (!s.claims.empty()) g["claims"] = ClaimsJson(s.claims);
    out.push_back(std::move(g));
  }
  return out.dump();
}

std::string CompactTickJson(WallTime at, std::string_view gpus_json) {
  std::string out = "{\"t\":";
  out += json(UnixSeconds(at)).dump();
  out += ",\"gpus\":";
  out += gpus_json;
  out += '}';
  return out;
}

std::string CompactTicksJson(const std::vector<SampleTick>& ticks, bool identity) {
  std::string out = "[";
  for (const SampleTick& t : ticks) {
    if (out.size() > 1) out += ',';
    out += CompactTickJson(t.at, CompactGpusJson(t.gpus, identity));
  }
  out += ']';
  return out;
}

Result<std::vector<SampleTick>> ParseCompactTicks(simdjson::dom::array keys,
                                                  simdjson::dom::array ticks) {
  // Each key's field, by its position in "keys"; a key this build does not know is skipped.
  const auto defs = GpuScalarFields();
  std::vector<const ScalarFieldDef*> field;
  if (keys.size() > static_cast<size_t>(limits::kReportKeysMax)) {
    return InvalidArgument("keys: more than " + std::to_string(limits::kReportKeysMax) + " keys");
  }
  size_t pos = 0;
  for (simdjson::dom::element k : keys) {
    std::string_view key;
    if (k.get_string().get(key)) {
      return InvalidArgument("keys[" + std::to_string(pos) + "]: must be a string");
    }
    const ScalarFieldDef* def = nullptr;
    for (const ScalarFieldDef& d : defs) {
      if (d.key == key) def = &d;
    }
    field.push_back(def);
    ++pos;
  }
  if (ticks.size() > static_cast<size_t>(limits::kReportTicksMax)) {
    return InvalidArgument("ticks: more than " + std::to_string(limits::kReportTicksMax) +
                           " ticks");
  }
  std::vector<SampleTick> out;
  out.reserve(ticks.size());
  size_t t = 0;
  for (simdjson::dom::element te : ticks) {
    const Path where = Path::Root("ticks", t++);
    simdjson::dom::object tick;
    if (te.get_object().get(tick)) return InvalidArgument(where.str() + ": must be an object");
    SampleTick st;
    double secs = 0;
    if (tick["t"].get_double().get(secs) || !(secs >= 0 && secs <= 4e9)) {
      return InvalidArgument(where.str() + ".t: must be a Unix time in seconds");
    }
    st.at = WallTime(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(secs)));
    simdjson::dom::array gpus;
    if (tick["gpus"].get_array().get(gpus))
      return InvalidArgument(where.str() + ".gpus: must be an array");
    if (gpus.size() > static_cast<size_t>(limits::kGpusPerNode)) {
      return InvalidArgument(where.str() + ".gpus: more than " +
                             std::to_string(limits::kGpusPerNode) + " GPUs");
    }
    st.gpus.reserve(gpus.size());  // a GpuSample is large: no moves as the vector grows
    size_t i = 0;
    for (simdjson::dom::element ge : gpus) {
      const Path at = where.At("gpus", i++);
      simdjson::dom::object g;
      if (ge.get_object().get(g)) return InvalidArgument(at.str() + ": must be an object");
      GpuSample s;
      s.timestamp = st.at;
      uint64_t index = 0;
      if (g["i"].get_uint64().get(index) || index > static_cast<uint64_t>(limits::kGpuIndexMax)) {
        return InvalidArgument(at.str() + ".i: must be a GPU index in 0.." +
                               std::to_string(limits::kGpuIndexMax));
      }
      s.id.index = static_cast<uint32_t>(index);
      std::string_view text;
      if (!g["uuid"].get_string().get(text)) s.id.uuid = text;
      if (!g["pci_bus_id"].get_string().get(text)) s.id.pci_bus_id = text;
      if (!g["name"].get_string().get(text)) s.id.name = text;
      STOKER_RETURN_IF_ERROR(ReadTyped(g, "minor", at, &s.id.minor, /*plain=*/true));
      STOKER_RETURN_IF_ERROR(ReadTyped(g, "architecture", at, &s.id.architecture, true));
      if (!g["health"].get_string().get(text)) {
        s.health = text == "lost" ? GpuHealth::kLost
                   : text == "ok" ? GpuHealth::kOk
                                  : GpuHealth::kUnreachable;
      }
      simdjson::dom::array values;
      if (!g["v"].get_array().get(values)) {
        if (values.size() > field.size()) {
          return InvalidArgument(at.str() + ".v: " + std::to_string(values.size()) +
                                 " readings for " + std::to_string(field.size()) + " keys");
        }
        size_t k = 0;
        for (simdjson::dom::element ve : values) {
          const ScalarFieldDef* def = field[k];
          if (def != nullptr) {
            std::optional<FieldView> view = ReadValue(ve);
            if (!view) {
              view = FieldView{.state = FieldState::kValue, .kind = FieldView::Kind::kBool, .u = 2};
            }
            const std::string_view rule = def->set(s, *view);
            if (!rule.empty()) {
              return InvalidArgument(at.str() + ".v[" + std::to_string(k) + "] (" +
                                     std::string(def->key) + "): " + std::string(rule));
            }
          }
          ++k;
        }
      }
      // Readings that are not a value: by their key's position.
      auto position = [&](simdjson::dom::element e, const Path& in) -> Result<size_t> {
        uint64_t k = 0;
        if (e.get_uint64().get(k) || k >= field.size()) {
          return InvalidArgument(in.str() + ": must be a position in keys (0.." +
                                 std::to_string(field.size()) + ")");
        }
        return static_cast<size_t>(k);
      };
      simdjson::dom::array unsupported;
      if (!g["unsupported"].get_array().get(unsupported)) {
        size_t n = 0;
        for (simdjson::dom::element ue : unsupported) {
          STOKER_ASSIGN_OR_RETURN(size_t k, position(ue, at.At("unsupported", n++)));
          if (field[k] != nullptr) field[k]->set(s, FieldView{.state = FieldState::kUnsupported});
        }
      }
      simdjson::dom::array errors;
      if (!g["errors"].get_array().get(errors)) {
        size_t n = 0;
        for (simdjson::dom::element ee : errors) {
          const Path in = at.At("errors", n++);
          simdjson::dom::array pair;
          int64_t code = 0;
          if (ee.get_array().get(pair) || pair.size() != 2 || pair.at(1).get_int64().get(code) ||
              code < INT32_MIN || code > INT32_MAX) {
            return InvalidArgument(in.str() + ": must be [key position, NVML error code]");
          }
          STOKER_ASSIGN_OR_RETURN(size_t k, position(pair.at(0).value_unsafe(), in.Index(0)));
          if (field[k] != nullptr) {
            field[k]->set(s, FieldView{.state = FieldState::kError,
                                       .error_code = static_cast<int32_t>(code)});
          }
        }
      }
      STOKER_RETURN_IF_ERROR(ReadParts(g, at, /*plain=*/true, &s));
      st.gpus.push_back(std::move(s));
    }
    out.push_back(std::move(st));
  }
  return out;
}

}  // namespace stoker::protocol
