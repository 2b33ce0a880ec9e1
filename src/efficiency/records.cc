#include "efficiency/records.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <istream>
#include <nlohmann/json.hpp>

namespace stoker::efficiency {
namespace {

using nlohmann::json;

WallTime FromUnix(double s) {
  return WallTime(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s)));
}
double ToUnix(WallTime t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); }

// Field readers: absent is fine, a wrong type or range is an error naming the field.
Status Str(const json& j, const char* key, std::string& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) return InvalidArgument(std::string(key) + ": expected a string");
  out = it->get<std::string>();
  return Status::Ok();
}

Status Bool(const json& j, const char* key, bool& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_boolean()) return InvalidArgument(std::string(key) + ": expected true or false");
  out = it->get<bool>();
  return Status::Ok();
}

Status Num(const json& j, const char* key, std::optional<double>& out, double lo, double hi) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_number()) return InvalidArgument(std::string(key) + ": expected a number");
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) {
    return InvalidArgument(std::string(key) + ": " + std::to_string(v) + " out of range [" +
                           std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  out = v;
  return Status::Ok();
}

Status U64(const json& j, const char* key, std::optional<uint64_t>& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0)) {
    return InvalidArgument(std::string(key) + ": expected a non-negative integer");
  }
  out = it->get<uint64_t>();
  return Status::Ok();
}

Status Time(const json& j, const char* key, WallTime& out, bool required) {
  std::optional<double> v;
  STOKER_RETURN_IF_ERROR(Num(j, key, v, 0, 4e9));  // nanoseconds in int64 reach year 2262
  if (!v) return required ? InvalidArgument(std::string(key) + ": missing") : Status::Ok();
  out = FromUnix(*v);
  return Status::Ok();
}

Status ParseJob(const json& j, JobRecord& r) {
  STOKER_RETURN_IF_ERROR(Str(j, "id", r.info.id));
  if (r.info.id.empty()) return InvalidArgument("id: missing");
  STOKER_RETURN_IF_ERROR(Str(j, "user", r.info.user));
  STOKER_RETURN_IF_ERROR(Str(j, "team", r.info.team));
  STOKER_RETURN_IF_ERROR(Str(j, "class", r.info.job_class));
  STOKER_RETURN_IF_ERROR(Str(j, "gpu_model", r.info.gpu_model));
  STOKER_RETURN_IF_ERROR(Bool(j, "interactive", r.info.interactive));
  STOKER_RETURN_IF_ERROR(Bool(j, "preemptible", r.info.preemptible));
  STOKER_RETURN_IF_ERROR(Bool(j, "movable", r.info.movable));
  STOKER_RETURN_IF_ERROR(Bool(j, "memory_bound", r.info.memory_bound));
  STOKER_RETURN_IF_ERROR(Time(j, "start", r.info.start, true));
  STOKER_RETURN_IF_ERROR(Time(j, "submit", r.submit, false));
  STOKER_RETURN_IF_ERROR(Time(j, "end", r.end, false));
  if (r.submit == WallTime{}) r.submit = r.info.start;
  if (r.end != WallTime{} && r.end < r.info.start) return InvalidArgument("end: before start");
  if (auto it = j.find("gpus"); it != j.end()) {
    if (!it->is_array()) return InvalidArgument("gpus: expected a list of GPU UUIDs");
    for (size_t i = 0; i < it->size(); ++i) {
      if (!(*it)[i].is_string())
        return InvalidArgument("gpus[" + std::to_string(i) + "]: expected a string");
      r.info.gpus.push_back((*it)[i].get<std::string>());
    }
  }
  if (r.info.user.empty()) r.info.user = "unknown";
  if (r.info.team.empty()) r.info.team = r.info.user;
  return Status::Ok();
}

Status ParseSample(const json& j, RecordedSample& s) {
  STOKER_RETURN_IF_ERROR(Time(j, "t", s.t, true));
  STOKER_RETURN_IF_ERROR(Str(j, "gpu", s.gpu));
  if (s.gpu.empty()) return InvalidArgument("gpu: missing");
  STOKER_RETURN_IF_ERROR(Str(j, "node", s.node));
  STOKER_RETURN_IF_ERROR(Str(j, "model", s.model));
  STOKER_RETURN_IF_ERROR(Str(j, "job", s.job));
  STOKER_RETURN_IF_ERROR(Num(j, "util", s.util_pct, 0, 100));
  STOKER_RETURN_IF_ERROR(Num(j, "sm_active", s.sm_active, 0, 1));
  STOKER_RETURN_IF_ERROR(Num(j, "tensor_active", s.tensor_active, 0, 1));
  STOKER_RETURN_IF_ERROR(Num(j, "dram_bw", s.dram_bw, 0, 1));
  STOKER_RETURN_IF_ERROR(U64(j, "mem_used", s.mem_used));
  STOKER_RETURN_IF_ERROR(U64(j, "mem_total", s.mem_total));
  STOKER_RETURN_IF_ERROR(Num(j, "power_w", s.power_w, 0, 1e5));
  STOKER_RETURN_IF_ERROR(Num(j, "temp_c", s.temp_c, -50, 200));
  return Status::Ok();
}

}  // namespace

Result<RecordSet> ReadRecordsJsonl(std::istream& in, const std::string& origin) {
  RecordSet out;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = origin + ":" + std::to_string(n);
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return InvalidArgument(where + ": not valid JSON");
    if (!j.is_object()) return InvalidArgument(where + ": expected a JSON object");
    std::string type;
    if (Status s = Str(j, "type", type); !s.ok()) return s.WithContext(where);
    if (type == "job") {
      JobRecord r;
      if (Status s = ParseJob(j, r); !s.ok()) return s.WithContext(where);
      out.jobs.push_back(std::move(r));
    } else if (type == "sample") {
      RecordedSample s;
      if (Status st = ParseSample(j, s); !st.ok()) return st.WithContext(where);
      out.samples.push_back(std::move(s));
    } else {
      return InvalidArgument(where + ": type: unknown record type '" + type + "' (job, sample)");
    }
  }
  std::stable_sort(out.samples.begin(), out.samples.end(),
                   [](const RecordedSample& a, const RecordedSample& b) { return a.t < b.t; });
  return out;
}

Result<RecordSet> ReadRecordsFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(path + ": cannot open");
  return ReadRecordsJsonl(in, path);
}

std::string SampleToJson(const RecordedSample& s) {
  json j;
  j["type"] = "sample";
  j["t"] = ToUnix(s.t);
  j["gpu"] = s.gpu;
  if (!s.node.empty()) j["node"] = s.node;
  if (!s.model.empty()) j["model"] = s.model;
  if (!s.job.empty()) j["job"] = s.job;
  if (s.util_pct) j["util"] = *s.util_pct;
  if (s.sm_active) j["sm_active"] = *s.sm_active;
  if (s.tensor_active) j["tensor_active"] = *s.tensor_active;
  if (s.dram_bw) j["dram_bw"] = *s.dram_bw;
  if (s.mem_used) j["mem_used"] = *s.mem_used;
  if (s.mem_total) j["mem_total"] = *s.mem_total;
  if (s.power_w) j["power_w"] = *s.power_w;
  if (s.temp_c) j["temp_c"] = *s.temp_c;
  return j.dump();
}

std::string JobToJson(const JobRecord& r) {
  json j;
  j["type"] = "job";
  j["id"] = r.info.id;
  j["user"] = r.info.user;
  j["team"] = r.info.team;
  if (!r.info.job_class.empty()) j["class"] = r.info.job_class;
  j["interactive"] = r.info.interactive;
  j["preemptible"] = r.info.preemptible;
  j["movable"] = r.info.movable;
  if (r.info.memory_bound) j["memory_bound"] = true;
  j["submit"] = ToUnix(r.submit);
  j["start"] = ToUnix(r.info.start);
  if (r.end != WallTime{}) j["end"] = ToUnix(r.end);
  j["gpus"] = r.info.gpus;
  if (!r.info.gpu_model.empty()) j["gpu_model"] = r.info.gpu_model;
  return j.dump();
}

std::string RecordsToJsonl(const RecordSet& records) {
  std::string out;
  for (const JobRecord& j : records.jobs) out += JobToJson(j) + "\n";
  for (const RecordedSample& s : records.samples) out += SampleToJson(s) + "\n";
  return out;
}

RecordedSample FromGpuSample(const GpuSample& s, const std::string& node, const std::string& job) {
  RecordedSample r;
  r.t = s.timestamp;
  r.node = node;
  r.gpu = s.id.uuid.empty() ? "gpu" + std::to_string(s.id.index) : s.id.uuid;
  r.model = s.id.name;
  r.job = job;
  if (s.util_gpu_pct.has_value()) r.util_pct = s.util_gpu_pct.value();
  if (s.gpm.sm_active.has_value()) r.sm_active = s.gpm.sm_active.value();
  if (s.gpm.tensor_active.has_value()) r.tensor_active = s.gpm.tensor_active.value();
  if (s.gpm.dram_bw_util.has_value()) r.dram_bw = s.gpm.dram_bw_util.value();
  if (s.memory_used_bytes.has_value()) r.mem_used = s.memory_used_bytes.value();
  if (s.memory_total_bytes.has_value()) r.mem_total = s.memory_total_bytes.value();
  if (s.power_mw.has_value()) r.power_w = s.power_mw.value() / 1000.0;
  if (s.temperature_c.has_value()) r.temp_c = s.temperature_c.value();
  return r;
}

}  // namespace stoker::efficiency
