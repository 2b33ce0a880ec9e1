#include "protocol/model.h"

#include <simdjson.h>

#include <algorithm>
#include <limits>
#include <set>

#include "json/enum_json.h"
#include "protocol/json_fields.h"
#include "protocol/limits.h"
#include "protocol/samples.h"

namespace stoker::protocol {
namespace {

using fields::CheckKnownFields;
using fields::CheckObject;
using fields::FieldError;
using fields::GetBool;
using fields::GetInt;
using fields::GetString;
using fields::PutOptional;

}  // namespace

Result<NodeInventory> ParseNodeInventory(const json& body) {
  STOKER_RETURN_IF_ERROR(CheckObject(body, "node"));
  STOKER_RETURN_IF_ERROR(CheckKnownFields(body, {"name", "simulated", "source", "cpu_milli",
                                                 "memory_mib", "gpus", "isolation", "address"}));
  NodeInventory n;
  STOKER_RETURN_IF_ERROR(GetString(body, "name", &n.name, limits::kNodeNameBytes));
  if (n.name.empty()) return FieldError("name", "required");
  for (char c : n.name) {
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) {
      return FieldError("name", "must use only [A-Za-z0-9._-]");
    }
  }
  STOKER_RETURN_IF_ERROR(GetBool(body, "simulated", &n.simulated));
  STOKER_RETURN_IF_ERROR(GetString(body, "source", &n.source, limits::kNodeTextBytes));
  STOKER_RETURN_IF_ERROR(GetString(body, "isolation", &n.isolation, limits::kNodeTextBytes));
  STOKER_RETURN_IF_ERROR(GetString(body, "address", &n.address, limits::kNodeAddressBytes));
  for (char c : n.address) {
    // A host name, an IPv4 address or an IPv6 address (it ends up in the jobs' environment).
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == ':')) {
      return FieldError("address", "must be a host name or an IP address");
    }
  }
  STOKER_RETURN_IF_ERROR(GetInt(body, "cpu_milli", &n.cpu_milli, 0, limits::kNodeCpuMilliMax));
  STOKER_RETURN_IF_ERROR(GetInt(body, "memory_mib", &n.memory_mib, 0, limits::kNodeMemoryMibMax));
  if (auto it = body.find("gpus"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) return FieldError("gpus", "must be an array");
    if (it->size() > static_cast<size_t>(limits::kGpusPerNode)) {
      return FieldError("gpus",
                        "at most " + std::to_string(limits::kGpusPerNode) + " GPUs per node");
    }
    std::set<uint32_t> indexes;
    std::set<std::string> uuids;
    for (size_t i = 0; i < it->size(); ++i) {
      const json& g = (*it)[i];
      const std::string f = "gpus[" + std::to_string(i) + "]";
      if (!g.is_object()) return FieldError(f, "must be an object");
      if (Status s = CheckKnownFields(
              g, {"index", "uuid", "model", "memory_mib", "mig_enabled", "mig", "minor"});
          !s.ok()) {
        return s.WithContext(f);
      }
      GpuInfo gi;
      int64_t minor = -1;
      Status s = GetInt(g, "index", &gi.index, 0, limits::kGpuIndexMax);
      if (s.ok()) s = GetString(g, "uuid", &gi.uuid, limits::kUuidBytes);
      if (s.ok()) s = GetString(g, "model", &gi.model, limits::kGpuModelBytes);
      if (s.ok()) s = GetInt(g, "memory_mib", &gi.memory_mib, 0, limits::kGpuMemoryMibTotalMax);
      if (s.ok()) s = GetBool(g, "mig_enabled", &gi.mig_enabled);
      if (s.ok()) s = GetInt(g, "minor", &minor, 0, limits::kGpuMinorMax);
      if (!s.ok()) return s.WithContext(f);
      if (minor >= 0) gi.minor = static_cast<uint32_t>(minor);
      if (gi.model.empty()) return FieldError(f + ".model", "required");
      if (gi.uuid.empty()) return FieldError(f + ".uuid", "required");
      if (!indexes.insert(gi.index).second) {
        return FieldError(f + ".index", std::to_string(gi.index) + " appears twice");
      }
      if (!uuids.insert(gi.uuid).second) {
        return FieldError(f + ".uuid", "'" + gi.uuid + "' appears twice");
      }
      if (auto m = g.find("mig"); m != g.end() && !m->is_null()) {
        if (!m->is_array()) return FieldError(f + ".mig", "must be an array of MIG instances");
        if (m->size() > static_cast<size_t>(limits::kMigInstancesPerGpu)) {
          return FieldError(f + ".mig", "at most " + std::to_string(limits::kMigInstancesPerGpu) +
                                            " MIG instances per GPU");
        }
        for (size_t k = 0; k < m->size(); ++k) {
          const json& mj = (*m)[k];
          const std::string mf = f + ".mig[" + std::to_string(k) + "]";
          if (!mj.is_object()) return FieldError(mf, "must be an object");
          if (Status ks = CheckKnownFields(mj, {"uuid", "profile", "slices"}); !ks.ok()) {
            return ks.WithContext(mf);
          }
          MigInfo mi;
          Status ms = GetString(mj, "uuid", &mi.uuid, limits::kUuidBytes);
          if (ms.ok()) ms = GetString(mj, "profile", &mi.profile, limits::kMigProfileBytes);
          if (ms.ok()) ms = GetInt(mj, "slices", &mi.slices, 1, limits::kMigSlicesMax);
          if (!ms.ok()) return ms.WithContext(mf);
          if (mi.uuid.empty()) return FieldError(mf + ".uuid", "required");
          if (!uuids.insert(mi.uuid).second) {
            return FieldError(mf + ".uuid", "'" + mi.uuid + "' appears twice");
          }
          gi.mig.push_back(mi);
        }
      }
      n.gpus.push_back(gi);
    }
  }
  return n;
}

json NodeInventoryToJson(const NodeInventory& n) {
  json j;
  j["name"] = n.name;
  j["simulated"] = n.simulated;
  j["source"] = n.source;
  j["cpu_milli"] = n.cpu_milli;
  j["memory_mib"] = n.memory_mib;
  json gpus = json::array();
  for (const GpuInfo& g : n.gpus) {
    json gj{{"index", g.index},
            {"uuid", g.uuid},
            {"model", g.model},
            {"memory_mib", g.memory_mib},
            {"mig_enabled", g.mig_enabled}};
    if (g.minor) gj["minor"] = *g.minor;
    json mig = json::array();
    for (const MigInfo& m : g.mig)
      mig.push_back({{"uuid", m.uuid}, {"profile", m.profile}, {"slices", m.slices}});
    gj["mig"] = mig;
    gpus.push_back(gj);
  }
  j["gpus"] = gpus;
  if (!n.isolation.empty()) j["isolation"] = n.isolation;
  if (!n.address.empty()) j["address"] = n.address;
  return j;
}

json NodeStatusToJson(const NodeStatus& n) {
  json j = NodeInventoryToJson(n.inventory);
  j["state"] = n.state;
  j["drained"] = n.drained;
  j["last_heartbeat_ms"] = n.last_heartbeat_ms;
  j["registered_ms"] = n.registered_ms;
  j["active_jobs"] = n.active_jobs;
  if (n.samples_json) {
    // Kept as the agent sent it (validated when it arrived); parsed only when someone asks.
    j["samples"] = json::parse(*n.samples_json, nullptr, false);
    if (j["samples"].is_discarded()) j["samples"] = json::array();
  } else if (n.samples) {
    json samples = json::array();
    for (const GpuSample& g : *n.samples) {
      json one = GpuSampleToJson(g, g.id.index, /*fresh=*/true);
      one["health"] = g.health;
      samples.push_back(std::move(one));
    }
    j["samples"] = std::move(samples);
  }
  return j;
}

json AllocationToJson(const Allocation& a) {
  json j{{"job", a.job},
         {"user", a.user},
         {"state", a.state},
         {"node", a.node},
         {"gpu_indices", a.gpu_indices},
         {"gpu_milli", a.gpu_milli},
         {"mig_uuid", a.mig_uuid},
         {"cpu_milli", a.cpu_milli},
         {"memory_mib", a.memory_mib}};
  if (a.part) j["part"] = *a.part;
  return j;
}

json PolicySettingsToJson(const PolicySettings& p) {
  return json{{"placement", p.placement}, {"queue", p.queue}, {"backfill", p.backfill}};
}

namespace {

// The run reports of a heartbeat, read straight from simdjson's DOM (the samples beside them
// never become a JSON tree, and neither do these). Every known key is checked as the other API
// objects are (type, range, length); keys a newer agent may add are ignored, so nodes can be
// upgraded before the server.
class ReportReader {
 public:
  ReportReader(simdjson::dom::object o, std::string where) : o_(o), where_(std::move(where)) {}

  Status Int(std::string_view key, int64_t lo, int64_t hi, int64_t* out, bool* present = nullptr) {
    simdjson::dom::element e;
    if (o_[key].get(e) || e.is_null()) return Status::Ok();
    int64_t v = 0;
    if (e.get_int64().get(v) || v < lo || v > hi) {
      return FieldError(where_ + "." + std::string(key),
                        "must be an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
    }
    *out = v;
    if (present != nullptr) *present = true;
    return Status::Ok();
  }
  Status String(std::string_view key, size_t max_len, std::string* out) {
    simdjson::dom::element e;
    if (o_[key].get(e) || e.is_null()) return Status::Ok();
    std::string_view v;
    if (e.get_string().get(v))
      return FieldError(where_ + "." + std::string(key), "must be a string");
    if (v.size() > max_len) {
      return FieldError(where_ + "." + std::string(key),
                        "longer than " + std::to_string(max_len) + " bytes");
    }
    *out = std::string(v);
    return Status::Ok();
  }
  Status Bool(std::string_view key, bool* out) {
    simdjson::dom::element e;
    if (o_[key].get(e) || e.is_null()) return Status::Ok();
    if (e.get_bool().get(*out)) {
      return FieldError(where_ + "." + std::string(key), "must be true or false");
    }
    return Status::Ok();
  }

 private:
  simdjson::dom::object o_;
  std::string where_;
};

Result<std::vector<RunReport>> ParseRunReports(simdjson::dom::array jobs) {
  std::vector<RunReport> out;
  size_t i = 0;
  for (simdjson::dom::element e : jobs) {
    const std::string f = "jobs[" + std::to_string(i++) + "]";
    simdjson::dom::object o;
    if (e.get_object().get(o)) return FieldError(f, "must be an object");
    ReportReader r(o, f);
    RunReport rep;
    int64_t code = 0, sig = 0;
    bool has_code = false, has_sig = false;
    Status s = r.Int("id", 1, INT64_MAX, &rep.id);
    if (s.ok()) s = r.Int("attempt", 0, limits::kAttemptMax, &rep.attempt);
    std::string phase;
    if (s.ok()) s = r.String("phase", limits::kRunPhaseBytes, &phase);
    if (s.ok()) s = r.String("error", limits::kRunErrorBytes, &rep.error);
    if (s.ok())
      s = r.Int("exit_code", limits::kExitCodeMin, limits::kExitCodeMax, &code, &has_code);
    if (s.ok()) s = r.Int("signal", limits::kSignalMin, limits::kSignalMax, &sig, &has_sig);
    if (s.ok()) s = r.Int("stdout_offset", 0, INT64_MAX, &rep.stdout_offset);
    if (s.ok()) s = r.String("stdout_data", limits::kLogChunkBytes, &rep.stdout_data);
    if (s.ok()) s = r.Int("stderr_offset", 0, INT64_MAX, &rep.stderr_offset);
    if (s.ok()) s = r.String("stderr_data", limits::kLogChunkBytes, &rep.stderr_data);
    if (s.ok()) s = r.Bool("logs_complete", &rep.logs_complete);
    if (!s.ok()) return s;
    if (rep.id == 0) return FieldError(f + ".id", "required");
    auto run_phase = kRunPhaseNames.Find(phase);
    if (!run_phase) return FieldError(f + ".phase", "must be starting, running or exited");
    rep.phase = *run_phase;
    if (has_code) rep.exit_code = static_cast<int>(code);
    if (has_sig) rep.signal = static_cast<int>(sig);
    out.push_back(std::move(rep));
  }
  return out;
}

}  // namespace

Result<Heartbeat> ParseHeartbeat(std::string_view body) {
  Heartbeat h;
  if (body.empty()) return h;
  // One parser per thread: it keeps its buffers between heartbeats.
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(body.data(), body.size()).get(doc)) {
    return InvalidArgument(std::string("body: not valid JSON (") + simdjson::error_message(err) +
                           ")");
  }
  simdjson::dom::object root;
  if (doc.get_object().get(root)) return InvalidArgument("heartbeat: body must be a JSON object");
  simdjson::dom::element jobs;
  if (!root["jobs"].get(jobs) && !jobs.is_null()) {
    simdjson::dom::array reports;
    if (jobs.get_array().get(reports)) return FieldError("jobs", "must be an array");
    STOKER_ASSIGN_OR_RETURN(h.jobs, ParseRunReports(reports));
  }
  simdjson::dom::element ticks;
  if (!root["ticks"].get(ticks) && !ticks.is_null()) {
    simdjson::dom::array keys;
    simdjson::dom::array all;
    if (root["keys"].get_array().get(keys)) return FieldError("keys", "must be an array");
    if (ticks.get_array().get(all)) return FieldError("ticks", "must be an array");
    STOKER_ASSIGN_OR_RETURN(h.ticks, ParseCompactTicks(keys, all));
    h.compact = true;
    h.samples_json.clear();
    return h;
  }
  simdjson::dom::element samples;
  if (!root["samples"].get(samples) && !samples.is_null()) {
    simdjson::dom::array gpus;
    if (samples.get_array().get(gpus)) return FieldError("samples", "must be an array");
    STOKER_ASSIGN_OR_RETURN(h.gpus, ParseGpuSamples(gpus));
    h.samples_json = simdjson::minify(samples);
  }
  return h;
}

std::string SelectSamples(std::string_view samples_json, const std::vector<bool>& keep) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array all;
  if (parser.parse(samples_json.data(), samples_json.size()).get(doc) || doc.get_array().get(all)) {
    return "[]";
  }
  std::string out = "[";
  size_t i = 0;
  for (simdjson::dom::element e : all) {
    if (i < keep.size() && keep[i]) {
      if (out.size() > 1) out += ',';
      out += simdjson::minify(e);
    }
    ++i;
  }
  out += ']';
  return out;
}

std::string HeartbeatBody(const Heartbeat& h) {
  json jobs = json::array();
  for (const RunReport& r : h.jobs) {
    json j{{"id", r.id}, {"attempt", r.attempt}, {"phase", r.phase}};
    PutOptional(j, "exit_code", r.exit_code);
    PutOptional(j, "signal", r.signal);
    if (!r.error.empty()) j["error"] = r.error;
    if (!r.stdout_data.empty()) {
      j["stdout_offset"] = r.stdout_offset;
      j["stdout_data"] = r.stdout_data;
    }
    if (!r.stderr_data.empty()) {
      j["stderr_offset"] = r.stderr_offset;
      j["stderr_data"] = r.stderr_data;
    }
    j["logs_complete"] = r.logs_complete;
    jobs.push_back(std::move(j));
  }
  // The samples are already JSON text: spliced in, not re-serialized.
  if (!h.ticks_json.empty()) {
    return "{\"format\":2,\"jobs\":" + jobs.dump() + ",\"keys\":" + CompactKeysJson() +
           ",\"ticks\":" + h.ticks_json + "}";
  }
  return "{\"jobs\":" + jobs.dump() +
         ",\"samples\":" + (h.samples_json.empty() ? "[]" : h.samples_json) + "}";
}

json HeartbeatReplyToJson(const HeartbeatReply& r) {
  json start = json::array();
  for (const LaunchOrder& o : r.start) {
    start.push_back({{"id", o.id},
                     {"attempt", o.attempt},
                     {"user", o.user},
                     {"command", o.command},
                     {"env", o.env},
                     {"workdir", o.workdir},
                     {"cuda_visible_devices", o.cuda_visible_devices},
                     {"has_gpu", o.has_gpu},
                     {"gpu_indices", o.gpu_indices},
                     {"cpu_milli", o.cpu_milli},
                     {"memory_mib", o.memory_mib}});
  }
  json offsets = json::object();
  for (const auto& [id, off] : r.log_offsets) {
    offsets[std::to_string(id)] = {off.first, off.second};
  }
  json out{{"start", start}, {"cancel", r.cancel}, {"forget", r.forget}, {"log_offsets", offsets}};
  if (r.report_interval_ms > 0) out["report_interval_ms"] = r.report_interval_ms;
  if (!r.cancel_grace_ms.empty()) {
    json grace = json::object();
    for (const auto& [id, ms] : r.cancel_grace_ms) grace[std::to_string(id)] = ms;
    out["cancel_grace_ms"] = std::move(grace);
  }
  return out;
}

Result<HeartbeatReply> ParseHeartbeatReply(const json& j) {
  try {
    HeartbeatReply r;
    for (const json& o : j.at("start")) {
      LaunchOrder lo;
      lo.id = o.at("id").get<int64_t>();
      lo.user = o.at("user").get<std::string>();
      lo.command = o.at("command").get<std::vector<std::string>>();
      lo.env = o.at("env").get<std::map<std::string, std::string>>();
      lo.workdir = o.at("workdir").get<std::string>();
      lo.cuda_visible_devices = o.at("cuda_visible_devices").get<std::string>();
      lo.has_gpu = o.at("has_gpu").get<bool>();
      lo.attempt = o.value("attempt", int64_t{0});
      lo.gpu_indices = o.value("gpu_indices", std::vector<uint32_t>{});
      lo.cpu_milli = o.value("cpu_milli", int64_t{0});
      lo.memory_mib = o.value("memory_mib", int64_t{0});
      r.start.push_back(std::move(lo));
    }
    r.cancel = j.at("cancel").get<std::vector<int64_t>>();
    r.forget = j.at("forget").get<std::vector<int64_t>>();
    if (auto g = j.find("cancel_grace_ms"); g != j.end()) {  // absent from older servers
      for (const auto& [k, v] : g->items()) {
        const int64_t ms = v.get<int64_t>();
        if (ms < 0) return InvalidArgument("heartbeat reply: cancel_grace_ms." + k + ": negative");
        r.cancel_grace_ms[std::stoll(k)] = ms;
      }
    }
    if (auto i = j.find("report_interval_ms"); i != j.end()) {  // absent from older servers
      const int64_t ms = i->get<int64_t>();
      if (ms < limits::kReportIntervalMsMin || ms > limits::kReportIntervalMsMax) {
        return InvalidArgument("heartbeat reply: report_interval_ms: not in " +
                               std::to_string(limits::kReportIntervalMsMin) + ".." +
                               std::to_string(limits::kReportIntervalMsMax));
      }
      r.report_interval_ms = ms;
    }
    for (const auto& [k, v] : j.at("log_offsets").items()) {
      r.log_offsets[std::stoll(k)] = {v.at(0).get<int64_t>(), v.at(1).get<int64_t>()};
    }
    return r;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("heartbeat reply: ") + e.what());
  }
}

}  // namespace stoker::protocol
