#include "protocol/job.h"

#include <algorithm>
#include <cctype>
#include <iterator>

#include "core/gpu_shapes.h"
#include "json/enum_json.h"
#include "protocol/json_fields.h"
#include "protocol/limits.h"

namespace stoker::protocol {
namespace {

using fields::CheckKnownFields;
using fields::CheckObject;
using fields::FieldError;
using fields::GetBool;
using fields::GetInt;
using fields::GetString;
using fields::GetStringList;
using fields::PutOptional;

bool ValidEnvName(const std::string& k) {
  if (k.empty() || k.size() > static_cast<size_t>(limits::kEnvNameBytes)) return false;
  if (!(isalpha(static_cast<unsigned char>(k[0])) || k[0] == '_')) return false;
  for (char c : k) {
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

}  // namespace

bool IsTerminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}
bool IsActive(JobState s) {
  return s == JobState::kAssigned || s == JobState::kRunning || s == JobState::kCancelling;
}

Result<JobSpec> ParseJobSpec(const json& body, UnknownFields unknown) {
  STOKER_RETURN_IF_ERROR(CheckObject(body, "job"));
  if (unknown == UnknownFields::kRefuse) {
    STOKER_RETURN_IF_ERROR(CheckKnownFields(
        body, {"name",       "command",     "env",        "workdir",      "gpus",
               "min_gpus",   "nodes",       "total_gpus", "gpu_milli",    "gpu_memory_mib",
               "gpu_models", "mig",         "cpu_milli",  "memory_mib",   "class",
               "priority",   "preemptible", "movable",    "on_node_loss", "user"}));
  }
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
  std::string on_node_loss(kOnNodeLossNames.Name(s.on_node_loss));
  STOKER_RETURN_IF_ERROR(GetString(body, "on_node_loss", &on_node_loss, limits::kOnNodeLossBytes));
  STOKER_RETURN_IF_ERROR(GetString(body, "user", &s.user, limits::kUserBytes));

  const int shapes = (s.gpus > 0 ? 1 : 0) + (s.gpu_milli > 0 ? 1 : 0) + (!s.mig.empty() ? 1 : 0);
  if (shapes > 1) {
    return FieldError(s.gpu_milli > 0 ? "gpu_milli" : "mig",
                      "use only one of gpus, gpu_milli and mig");
  }
  if (!s.mig.empty()) {
    auto p = ParseMigProfile(s.mig);
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
  auto loss = kOnNodeLossNames.Find(on_node_loss);
  if (!loss) return FieldError("on_node_loss", "must be 'requeue' or 'fail'");
  s.on_node_loss = *loss;
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

namespace {

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
  j["state"] = job.state;
  if (job.assignment) j["assignment"] = AssignmentToJson(*job.assignment);
  if (!job.parts.empty()) {
    json parts = json::array();
    for (size_t rank = 0; rank < job.parts.size(); ++rank) {
      const GangPart& p = job.parts[rank];
      json pj = AssignmentToJson(p.assignment);
      pj["rank"] = rank;
      pj["phase"] = p.phase;
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

Result<Job> JobFromJson(const json& j, UnknownFields unknown) {
  if (!j.is_object()) return InvalidArgument("job document is not an object");
  Job job;
  try {
    job.id = j.at("id").get<int64_t>();
    job.user = j.at("user").get<std::string>();
    job.state = j.at("state").get<JobState>();
    STOKER_ASSIGN_OR_RETURN(job.spec, ParseJobSpec(j.at("spec"), unknown));
    if (j.contains("assignment")) job.assignment = AssignmentFromJson(j["assignment"]);
    if (auto it = j.find("parts"); it != j.end()) {
      for (const json& pj : *it) {
        GangPart p;
        p.assignment = AssignmentFromJson(pj);
        p.phase = pj.at("phase").get<PartPhase>();
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
    // nlohmann's what() starts with "[json.exception.<kind>.<n>] "; the rest says what is wrong.
    std::string_view what = e.what();
    if (const size_t end = what.find("] "); !what.empty() && what[0] == '[' && end != what.npos) {
      what.remove_prefix(end + 2);
    }
    const std::string whose =
        job.id != 0 ? "job " + std::to_string(job.id) : std::string("job document");
    return InvalidArgument(whose + ": " + std::string(what));
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

json QueueEntryToJson(const QueueEntry& e) {
  return json{{"position", e.position}, {"job", e.job},           {"user", e.user},
              {"name", e.name},         {"priority", e.priority}, {"reason", e.reason}};
}

Result<QueueEntry> QueueEntryFromJson(const json& j) {
  STOKER_RETURN_IF_ERROR(CheckObject(j, "queue entry"));
  for (const char* key : {"position", "job"}) {
    if (!j.contains(key) || j[key].is_null()) return FieldError(key, "missing");
  }
  QueueEntry e;
  STOKER_RETURN_IF_ERROR(GetInt(j, "position", &e.position, 1, INT64_MAX));
  STOKER_RETURN_IF_ERROR(GetInt(j, "job", &e.job, 1, INT64_MAX));
  // Bounds of the type, not of today's server: a client must read what a newer server may send.
  STOKER_RETURN_IF_ERROR(GetString(j, "user", &e.user));
  STOKER_RETURN_IF_ERROR(GetString(j, "name", &e.name));
  STOKER_RETURN_IF_ERROR(GetInt(j, "priority", &e.priority, INT32_MIN, INT32_MAX));
  STOKER_RETURN_IF_ERROR(GetString(j, "reason", &e.reason));
  return e;
}

}  // namespace stoker::protocol
