#include "protocol/model.h"

#include <simdjson.h>

#include <algorithm>
#include <limits>
#include <set>

#include "protocol/limits.h"
#include "protocol/samples.h"
#include "scheduler/resources.h"

namespace stoker::protocol {
namespace {

Status FieldError(const std::string& field, const std::string& what) {
  return InvalidArgument(field + ": " + what);
}

// Typed getters that name the field on error. Absent -> keep the default.
Status GetString(const json& o, const char* key, std::string* out, size_t max_len = 4096) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) return FieldError(key, "must be a string");
  const auto& s = it->get_ref<const std::string&>();
  if (s.size() > max_len)
    return FieldError(key, "longer than " + std::to_string(max_len) + " bytes");
  *out = s;
  return Status::Ok();
}

template <typename T>
Status GetInt(const json& o, const char* key, T* out, int64_t lo, int64_t hi) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return Status::Ok();
  if (!it->is_number_integer()) return FieldError(key, "must be an integer");
  // Compare as int64 after checking the unsigned range, so huge values do not wrap.
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return FieldError(key, "must be in " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) {
    return FieldError(key, "must be in " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  *out = static_cast<T>(v);
  return Status::Ok();
}

Status GetBool(const json& o, const char* key, bool* out) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return Status::Ok();
  if (!it->is_boolean()) return FieldError(key, "must be true or false");
  *out = it->get<bool>();
  return Status::Ok();
}

Status GetStringList(const json& o, const char* key, std::vector<std::string>* out,
                     size_t max_items, size_t max_len) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return Status::Ok();
  if (!it->is_array()) return FieldError(key, "must be an array of strings");
  if (it->size() > max_items)
    return FieldError(key, "more than " + std::to_string(max_items) + " items");
  out->clear();
  for (size_t i = 0; i < it->size(); ++i) {
    const auto& v = (*it)[i];
    const std::string f = std::string(key) + "[" + std::to_string(i) + "]";
    if (!v.is_string()) return FieldError(f, "must be a string");
    if (v.get_ref<const std::string&>().size() > max_len) return FieldError(f, "too long");
    out->push_back(v.get<std::string>());
  }
  return Status::Ok();
}

bool ValidEnvName(const std::string& k) {
  if (k.empty() || k.size() > static_cast<size_t>(limits::kEnvNameBytes)) return false;
  if (!(isalpha(static_cast<unsigned char>(k[0])) || k[0] == '_')) return false;
  for (char c : k) {
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

Status CheckObject(const json& body, const char* what) {
  if (!body.is_object()) return InvalidArgument(std::string(what) + ": body must be a JSON object");
  return Status::Ok();
}

Status CheckKnownFields(const json& body, const std::set<std::string>& known) {
  for (const auto& [k, v] : body.items()) {
    if (!known.count(k)) return FieldError(k, "unknown field");
  }
  return Status::Ok();
}

template <typename T>
void PutOptional(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

}  // namespace

bool IsTerminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}
bool IsActive(JobState s) {
  return s == JobState::kAssigned || s == JobState::kRunning || s == JobState::kCancelling;
}

Result<JobSpec> ParseJobSpec(const json& body) {
  STOKER_RETURN_IF_ERROR(CheckObject(body, "job"));
  STOKER_RETURN_IF_ERROR(CheckKnownFields(
      body, {"name",       "command",     "env",        "workdir",      "gpus",
             "min_gpus",   "nodes",       "total_gpus", "gpu_milli",    "gpu_memory_mib",
             "gpu_models", "mig",         "cpu_milli",  "memory_mib",   "class",
             "priority",   "preemptible", "movable",    "on_node_loss", "user"}));
  JobSpec s;
  STOKER_RETURN_IF_ERROR(GetString(body, "name", &s.name, limits::kJobNameBytes));
  if (!body.contains("command")) return FieldError("command", "required (argv array)");
  STOKER_RETURN_IF_ERROR(
      GetStringList(body, "command", &s.command, limits::kCommandItems, limits::kArgumentBytes));
  if (s.command.empty() || s.command[0].empty()) {
    return FieldError("command", "must be a non-empty array whose first item names a program");
  }
  if (auto it = body.find("env"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return FieldError("env", "must be an object of string values");
    if (it->size() > static_cast<size_t>(limits::kEnvVariables)) {
      return FieldError("env", "more than " + std::to_string(limits::kEnvVariables) + " variables");
    }
    for (const auto& [k, v] : it->items()) {
      if (!ValidEnvName(k)) return FieldError("env." + k, "invalid variable name");
      if (!v.is_string()) return FieldError("env." + k, "must be a string");
      if (v.get_ref<const std::string&>().size() > static_cast<size_t>(limits::kEnvValueBytes))
        return FieldError("env." + k, "too long");
      s.env[k] = v.get<std::string>();
    }
  }
  STOKER_RETURN_IF_ERROR(GetString(body, "workdir", &s.workdir, limits::kPathBytes));
  if (!s.workdir.empty() && s.workdir[0] != '/')
    return FieldError("workdir", "must be an absolute path");
  STOKER_RETURN_IF_ERROR(GetInt(body, "gpus", &s.gpus, 0, limits::kGpusPerJob));
  STOKER_RETURN_IF_ERROR(GetInt(body, "min_gpus", &s.min_gpus, 0, limits::kGpusPerJob));
  STOKER_RETURN_IF_ERROR(GetInt(body, "nodes", &s.nodes, 0, limits::kGangPartsMax));
  STOKER_RETURN_IF_ERROR(GetInt(body, "total_gpus", &s.total_gpus, 0, limits::kGangGpusMax));
  STOKER_RETURN_IF_ERROR(GetInt(body, "gpu_milli", &s.gpu_milli, 0, limits::kGpuMilliMax));
  STOKER_RETURN_IF_ERROR(
      GetInt(body, "gpu_memory_mib", &s.gpu_memory_mib, 0, limits::kGpuMemoryMibMax));
  STOKER_RETURN_IF_ERROR(
      GetStringList(body, "gpu_models", &s.gpu_models, limits::kGpuModels, limits::kGpuModelBytes));
  STOKER_RETURN_IF_ERROR(GetString(body, "mig", &s.mig, limits::kMigProfileBytes));
  STOKER_RETURN_IF_ERROR(
      GetInt(body, "cpu_milli", &s.cpu_milli, limits::kCpuMilliMin, limits::kCpuMilliMax));
  STOKER_RETURN_IF_ERROR(GetInt(body, "memory_mib", &s.memory_mib, 0, limits::kJobMemoryMibMax));
  STOKER_RETURN_IF_ERROR(GetString(body, "class", &s.job_class, limits::kJobClassBytes));
  STOKER_RETURN_IF_ERROR(
      GetInt(body, "priority", &s.priority, limits::kPriorityMin, limits::kPriorityMax));
  STOKER_RETURN_IF_ERROR(GetBool(body, "preemptible", &s.preemptible));
  STOKER_RETURN_IF_ERROR(GetBool(body, "movable", &s.movable));
  STOKER_RETURN_IF_ERROR(
      GetString(body, "on_node_loss", &s.on_node_loss, limits::kOnNodeLossBytes));
  STOKER_RETURN_IF_ERROR(GetString(body, "user", &s.user, limits::kUserBytes));

  const int shapes = (s.gpus > 0 ? 1 : 0) + (s.gpu_milli > 0 ? 1 : 0) + (!s.mig.empty() ? 1 : 0);
  if (shapes > 1) {
    return FieldError(s.gpu_milli > 0 ? "gpu_milli" : "mig",
                      "use only one of gpus, gpu_milli and mig");
  }
  if (!s.mig.empty()) {
    auto p = scheduler::ParseMigProfile(s.mig);
    if (!p.ok())
      return FieldError("mig", "unknown MIG profile '" + s.mig + "' (e.g. 1g.10gb, 3g.40gb)");
  }
  if (s.total_gpus > 0) {
    if (s.nodes > 0 || s.gpus > 0 || s.gpu_milli > 0 || !s.mig.empty() || s.min_gpus > 0) {
      return FieldError("total_gpus",
                        "a gang's total GPU count: use it without gpus, min_gpus, gpu_milli, mig "
                        "and nodes (the parts follow the nodes' sizes)");
    }
  }
  if (s.nodes > 0) {
    if (s.gpu_milli > 0 || !s.mig.empty()) {
      return FieldError("nodes", "a gang's parts take whole GPUs (gpus per node) or none");
    }
    if (s.min_gpus > 0) return FieldError("min_gpus", "a gang (nodes) is not elastic");
  }
  if (s.min_gpus > 0) {
    if (s.gpus == 0) return FieldError("min_gpus", "needs gpus (the elastic maximum)");
    if (s.min_gpus > s.gpus) return FieldError("min_gpus", "must not exceed gpus");
  }
  if (s.gpu_memory_mib > 0 && shapes == 0 && s.total_gpus == 0) {
    return FieldError("gpu_memory_mib", "needs a GPU request (gpus, gpu_milli or mig)");
  }
  if (!kOnNodeLossNames.Find(s.on_node_loss)) {
    return FieldError("on_node_loss", "must be 'requeue' or 'fail'");
  }
  return s;
}

namespace {
constexpr std::string_view kGangEnvNames[] = {
    "RANK",           "NODE_RANK",        "GROUP_RANK",         "LOCAL_RANK",
    "WORLD_SIZE",     "LOCAL_WORLD_SIZE", "MASTER_ADDR",        "MASTER_PORT",
    "PET_NNODES",     "PET_NODE_RANK",    "PET_NPROC_PER_NODE", "PET_MASTER_ADDR",
    "PET_MASTER_PORT"};
}  // namespace

bool IsGangEnvName(std::string_view name) {
  return std::find(std::begin(kGangEnvNames), std::end(kGangEnvNames), name) !=
         std::end(kGangEnvNames);
}

std::map<std::string, std::string> GangEnv(int32_t rank, const std::vector<std::string>& addresses,
                                           int32_t part_gpus, int32_t master_port) {
  const std::string r = std::to_string(rank);
  const std::string size = std::to_string(addresses.size());
  const std::string master = addresses.empty() ? std::string() : addresses.front();
  const std::string port = std::to_string(master_port);
  std::string nodes;
  for (const std::string& a : addresses) nodes += (nodes.empty() ? "" : ",") + a;
  return {{"RANK", r},
          {"NODE_RANK", r},
          {"GROUP_RANK", r},
          {"LOCAL_RANK", "0"},
          {"WORLD_SIZE", size},
          {"LOCAL_WORLD_SIZE", "1"},
          {"MASTER_ADDR", master},
          {"MASTER_PORT", port},
          {"PET_NNODES", size},
          {"PET_NODE_RANK", r},
          {"PET_NPROC_PER_NODE", std::to_string(std::max(part_gpus, 1))},
          {"PET_MASTER_ADDR", master},
          {"PET_MASTER_PORT", port},
          {"STOKER_GANG_RANK", r},
          {"STOKER_GANG_SIZE", size},
          {"STOKER_GANG_NODES", nodes}};
}

bool IsReservedEnvName(std::string_view name) {
  return name == "CUDA_VISIBLE_DEVICES" || name == "NVIDIA_VISIBLE_DEVICES" ||
         name.starts_with("STOKER_") || name.starts_with("CUDA_MPS_");
}

Status CheckSubmission(const JobSpec& s) {
  auto nul = [](const std::string& v) { return v.find('\0') != std::string::npos; };
  auto bad = [](const std::string& field) {
    return FieldError(field, "must not contain NUL bytes");
  };
  if (nul(s.name)) return bad("name");
  for (size_t i = 0; i < s.command.size(); ++i) {
    if (nul(s.command[i])) return bad("command[" + std::to_string(i) + "]");
  }
  if (nul(s.workdir)) return bad("workdir");
  for (const auto& [k, v] : s.env) {
    if (IsReservedEnvName(k)) {
      return FieldError("env." + k, "set by Stoker from the job's assignment; not settable");
    }
    if (IsGang(s) && IsGangEnvName(k)) {
      return FieldError("env." + k, "set by Stoker for every part of a gang; not settable");
    }
    if (nul(v)) return bad("env." + k);
  }
  for (size_t i = 0; i < s.gpu_models.size(); ++i) {
    if (nul(s.gpu_models[i])) return bad("gpu_models[" + std::to_string(i) + "]");
  }
  if (nul(s.mig)) return bad("mig");
  if (nul(s.job_class)) return bad("class");
  if (nul(s.user)) return bad("user");
  return Status::Ok();
}

json JobSpecToJson(const JobSpec& s) {
  json j;
  j["name"] = s.name;
  j["command"] = s.command;
  j["env"] = s.env;
  j["workdir"] = s.workdir;
  j["gpus"] = s.gpus;
  j["min_gpus"] = s.min_gpus;
  if (s.nodes > 0) j["nodes"] = s.nodes;
  if (s.total_gpus > 0) j["total_gpus"] = s.total_gpus;
  j["gpu_milli"] = s.gpu_milli;
  j["gpu_memory_mib"] = s.gpu_memory_mib;
  j["gpu_models"] = s.gpu_models;
  j["mig"] = s.mig;
  j["cpu_milli"] = s.cpu_milli;
  j["memory_mib"] = s.memory_mib;
  j["class"] = s.job_class;
  j["priority"] = s.priority;
  j["preemptible"] = s.preemptible;
  if (s.movable) j["movable"] = true;
  j["on_node_loss"] = s.on_node_loss;
  if (!s.user.empty()) j["user"] = s.user;
  return j;
}

namespace {

json AssignmentToJson(const Assignment& a) {
  json aj;
  aj["node"] = a.node;
  aj["gpu_indices"] = a.gpu_indices;
  aj["gpu_milli"] = a.gpu_milli;
  aj["mig_slices"] = a.mig_slices;
  aj["mig_uuid"] = a.mig_uuid;
  aj["cuda_visible_devices"] = a.cuda_visible_devices;
  aj["env"] = a.env;
  json shares = json::array();
  for (const auto& [g, m] : a.shares) shares.push_back({g, m});
  aj["shares"] = shares;
  return aj;
}

// Throws json::exception on a malformed document (JobFromJson catches it).
Assignment AssignmentFromJson(const json& aj) {
  Assignment a;
  a.node = aj.at("node").get<std::string>();
  a.gpu_indices = aj.at("gpu_indices").get<std::vector<uint32_t>>();
  a.gpu_milli = aj.at("gpu_milli").get<int32_t>();
  a.mig_slices = aj.at("mig_slices").get<uint8_t>();
  a.mig_uuid = aj.at("mig_uuid").get<std::string>();
  a.cuda_visible_devices = aj.at("cuda_visible_devices").get<std::string>();
  a.env = aj.at("env").get<std::map<std::string, std::string>>();
  for (const auto& s : aj.at("shares"))
    a.shares.emplace_back(s.at(0).get<uint8_t>(), s.at(1).get<int16_t>());
  return a;
}

}  // namespace

std::vector<const Assignment*> Assignments(const Job& j) {
  std::vector<const Assignment*> out;
  if (j.assignment) out.push_back(&*j.assignment);
  for (const GangPart& p : j.parts) out.push_back(&p.assignment);
  return out;
}

GangPart* PartOn(Job& j, const std::string& node) {
  for (GangPart& p : j.parts) {
    if (p.assignment.node == node) return &p;
  }
  return nullptr;
}

const GangPart* PartOn(const Job& j, const std::string& node) {
  return PartOn(const_cast<Job&>(j), node);
}

json JobToJson(const Job& job) {
  json j = JobStatusToJson(job);
  j["id"] = job.id;
  j["user"] = job.user;
  j["name"] = job.spec.name;
  j["spec"] = JobSpecToJson(job.spec);
  return j;
}

json JobStatusToJson(const Job& job) {
  json j;
  j["state"] = JobStateName(job.state);
  if (job.assignment) j["assignment"] = AssignmentToJson(*job.assignment);
  if (!job.parts.empty()) {
    json parts = json::array();
    for (size_t rank = 0; rank < job.parts.size(); ++rank) {
      const GangPart& p = job.parts[rank];
      json pj = AssignmentToJson(p.assignment);
      pj["rank"] = rank;
      pj["phase"] = PartPhaseName(p.phase);
      PutOptional(pj, "exit_code", p.exit_code);
      PutOptional(pj, "signal", p.signal);
      if (!p.error.empty()) pj["error"] = p.error;
      parts.push_back(std::move(pj));
    }
    j["parts"] = std::move(parts);
  }
  PutOptional(j, "exit_code", job.exit_code);
  PutOptional(j, "signal", job.signal);
  j["reason"] = job.reason;
  j["submit_ms"] = job.submit_ms;
  j["start_ms"] = job.start_ms;
  j["end_ms"] = job.end_ms;
  j["requeues"] = job.requeues;
  j["preemptions"] = job.preemptions;
  if (job.preempted_by != 0) j["preempted_by"] = job.preempted_by;
  if (!job.stop_to_requeue.empty()) j["stop_to_requeue"] = job.stop_to_requeue;
  if (job.consolidate_milli != 0) j["consolidate_milli"] = job.consolidate_milli;
  if (!job.stop_to_fail.empty()) j["stop_to_fail"] = job.stop_to_fail;
  return j;
}

Result<Job> JobFromJson(const json& j) {
  if (!j.is_object()) return InvalidArgument("job document is not an object");
  try {
    Job job;
    job.id = j.at("id").get<int64_t>();
    job.user = j.at("user").get<std::string>();
    auto state = ParseJobState(j.at("state").get<std::string>());
    if (!state) return InvalidArgument("job " + std::to_string(job.id) + ": unknown state");
    job.state = *state;
    STOKER_ASSIGN_OR_RETURN(job.spec, ParseJobSpec(j.at("spec")));
    if (j.contains("assignment")) job.assignment = AssignmentFromJson(j["assignment"]);
    if (auto it = j.find("parts"); it != j.end()) {
      for (const json& pj : *it) {
        GangPart p;
        p.assignment = AssignmentFromJson(pj);
        auto phase = kPartPhaseNames.Find(pj.at("phase").get<std::string>());
        if (!phase)
          return InvalidArgument("job " + std::to_string(job.id) + ": unknown part phase");
        p.phase = *phase;
        if (pj.contains("exit_code")) p.exit_code = pj["exit_code"].get<int>();
        if (pj.contains("signal")) p.signal = pj["signal"].get<int>();
        p.error = pj.value("error", std::string());
        job.parts.push_back(std::move(p));
      }
    }
    if (j.contains("exit_code")) job.exit_code = j["exit_code"].get<int>();
    if (j.contains("signal")) job.signal = j["signal"].get<int>();
    job.reason = j.value("reason", "");
    job.submit_ms = j.value("submit_ms", int64_t{0});
    job.start_ms = j.value("start_ms", int64_t{0});
    job.end_ms = j.value("end_ms", int64_t{0});
    job.requeues = j.value("requeues", 0);
    job.preemptions = j.value("preemptions", 0);
    job.preempted_by = j.value("preempted_by", int64_t{0});
    job.stop_to_requeue = j.value("stop_to_requeue", std::string());
    job.consolidate_milli = j.value("consolidate_milli", int32_t{0});
    job.stop_to_fail = j.value("stop_to_fail", std::string());
    return job;
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("job document: ") + e.what());
  }
}

Result<Job> JobFromJson(const json& doc, const json& status) {
  if (status.is_null()) return JobFromJson(doc);
  if (!doc.is_object()) return InvalidArgument("job document is not an object");
  if (!status.is_object()) return InvalidArgument("job status document is not an object");
  json merged = status;
  for (const char* key : kJobFixedKeys) {
    if (auto it = doc.find(key); it != doc.end()) merged[key] = *it;
  }
  return JobFromJson(merged);
}

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
  j["state"] = NodeStateName(n.state);
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
      one["health"] = GpuHealthName(g.health);
      samples.push_back(std::move(one));
    }
    j["samples"] = std::move(samples);
  }
  return j;
}

json AllocationToJson(const Allocation& a) {
  json j{{"job", a.job},
         {"user", a.user},
         {"state", JobStateName(a.state)},
         {"node", a.node},
         {"gpu_indices", a.gpu_indices},
         {"gpu_milli", a.gpu_milli},
         {"mig_uuid", a.mig_uuid},
         {"cpu_milli", a.cpu_milli},
         {"memory_mib", a.memory_mib}};
  if (a.part) j["part"] = *a.part;
  return j;
}

json QueueEntryToJson(const QueueEntry& e) {
  return json{{"position", e.position}, {"job", e.job},           {"user", e.user},
              {"name", e.name},         {"priority", e.priority}, {"reason", e.reason}};
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
    if (s.ok()) s = r.String("phase", limits::kRunPhaseBytes, &rep.phase);
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
    if (!kRunPhaseNames.Find(rep.phase)) {
      return FieldError(f + ".phase", "must be starting, running or exited");
    }
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
