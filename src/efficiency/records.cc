#include "efficiency/records.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <istream>
#include <limits>
#include <nlohmann/json.hpp>

#include "doc/document.h"
#include "doc/reader.h"

namespace stoker::efficiency {
namespace {

using nlohmann::json;

WallTime FromUnix(double s) {
  return WallTime(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s)));
}
double ToUnix(WallTime t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); }

// Optional measurements: absent (or null) is "not reported"; a wrong type or range is an error
// naming the field with its line and column.
Status Num(const doc::Reader& r, const char* key, std::optional<double>& out, double lo,
           double hi) {
  auto f = r.Field(key);
  if (!f) return Status::Ok();
  STOKER_ASSIGN_OR_RETURN(out, f->Double(lo, hi));
  return Status::Ok();
}

Status U64(const doc::Reader& r, const char* key, std::optional<uint64_t>& out) {
  auto f = r.Field(key);
  if (!f) return Status::Ok();
  STOKER_ASSIGN_OR_RETURN(out, f->Uint());
  return Status::Ok();
}

Status Time(const doc::Reader& r, const char* key, WallTime& out, bool required) {
  std::optional<double> v;
  STOKER_RETURN_IF_ERROR(Num(r, key, v, 0, 4e9));  // nanoseconds in int64 reach year 2262
  if (!v) return required ? r.FieldError(key, "missing") : Status::Ok();
  out = FromUnix(*v);
  return Status::Ok();
}

Status ParseJob(const doc::Reader& r, JobRecord& rec) {
  JobInfo& i = rec.info;
  STOKER_RETURN_IF_ERROR(r.Get("id", &i.id));
  if (i.id.empty()) return r.FieldError("id", "missing");
  STOKER_RETURN_IF_ERROR(r.Get("user", &i.user));
  STOKER_RETURN_IF_ERROR(r.Get("team", &i.team));
  STOKER_RETURN_IF_ERROR(r.Get("class", &i.job_class));
  STOKER_RETURN_IF_ERROR(r.Get("gpu_model", &i.gpu_model));
  STOKER_RETURN_IF_ERROR(r.Get("interactive", &i.interactive));
  STOKER_RETURN_IF_ERROR(r.Get("preemptible", &i.preemptible));
  STOKER_RETURN_IF_ERROR(r.Get("movable", &i.movable));
  STOKER_RETURN_IF_ERROR(r.Get("memory_bound", &i.memory_bound));
  STOKER_RETURN_IF_ERROR(Time(r, "start", i.start, true));
  STOKER_RETURN_IF_ERROR(Time(r, "submit", rec.submit, false));
  STOKER_RETURN_IF_ERROR(Time(r, "end", rec.end, false));
  if (rec.submit == WallTime{}) rec.submit = i.start;
  if (rec.end != WallTime{} && rec.end < i.start) return r.FieldError("end", "before start");
  STOKER_RETURN_IF_ERROR(r.Get("gpus", &i.gpus));  // a list of GPU UUIDs
  if (i.user.empty()) i.user = "unknown";
  if (i.team.empty()) i.team = i.user;
  return Status::Ok();
}

Status ParseSample(const doc::Reader& r, RecordedSample& s) {
  STOKER_RETURN_IF_ERROR(Time(r, "t", s.t, true));
  STOKER_RETURN_IF_ERROR(r.Get("gpu", &s.gpu));
  if (s.gpu.empty()) return r.FieldError("gpu", "missing");
  STOKER_RETURN_IF_ERROR(r.Get("node", &s.node));
  STOKER_RETURN_IF_ERROR(r.Get("model", &s.model));
  STOKER_RETURN_IF_ERROR(r.Get("job", &s.job));
  STOKER_RETURN_IF_ERROR(Num(r, "util", s.util_pct, 0, 100));
  STOKER_RETURN_IF_ERROR(Num(r, "sm_active", s.sm_active, 0, 1));
  STOKER_RETURN_IF_ERROR(Num(r, "tensor_active", s.tensor_active, 0, 1));
  STOKER_RETURN_IF_ERROR(Num(r, "dram_bw", s.dram_bw, 0, 1));
  STOKER_RETURN_IF_ERROR(U64(r, "mem_used", s.mem_used));
  STOKER_RETURN_IF_ERROR(U64(r, "mem_total", s.mem_total));
  STOKER_RETURN_IF_ERROR(Num(r, "power_w", s.power_w, 0, 1e5));
  STOKER_RETURN_IF_ERROR(Num(r, "temp_c", s.temp_c, -50, 200));
  return Status::Ok();
}

// The next line (without its newline) into `line`; false at the end of the input. A line longer
// than `max` stops there with *too_long set, so one endless line is never held whole.
bool ReadLine(std::istream& in, std::string& line, size_t max, bool* too_long) {
  line.clear();
  std::streambuf* sb = in.rdbuf();
  for (;;) {
    const int c = sb->sbumpc();
    if (c == std::char_traits<char>::eof()) return !line.empty();
    if (c == '\n') return true;
    if (line.size() == max) {
      *too_long = true;
      return true;
    }
    line.push_back(static_cast<char>(c));
  }
}

}  // namespace

Result<RecordSet> ReadRecordsJsonl(std::istream& in, const std::string& origin) {
  RecordSet out;
  std::string line;
  int n = 0;
  bool too_long = false;
  while (ReadLine(in, line, kMaxRecordLineBytes, &too_long)) {
    if (n == std::numeric_limits<int>::max()) {
      return InvalidArgument(origin + ": more than " + std::to_string(n) + " lines");
    }
    ++n;
    if (too_long) {
      return InvalidArgument(origin + ":" + std::to_string(n) + ": line " +
                             doc::SizeText(kMaxRecordLineBytes));
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    // One document per line: its values know their line in the file and their column.
    STOKER_ASSIGN_OR_RETURN(doc::Value v, doc::ParseJson(line, origin, n));
    const doc::Reader r(v, origin);
    if (!v.is_map()) return r.Error("expected a JSON object");
    std::string type;
    STOKER_RETURN_IF_ERROR(r.Get("type", &type));
    if (type == "job") {
      JobRecord rec;
      STOKER_RETURN_IF_ERROR(ParseJob(r, rec));
      out.jobs.push_back(std::move(rec));
    } else if (type == "sample") {
      RecordedSample s;
      STOKER_RETURN_IF_ERROR(ParseSample(r, s));
      out.samples.push_back(std::move(s));
    } else {
      return r.FieldError("type", "unknown record type '" + type.substr(0, 64) + "' (job, sample)");
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

void FillRecordedSample(const GpuSample& s, const std::string& node, const std::string& job,
                        RecordedSample* out) {
  RecordedSample& r = *out;
  r.t = s.timestamp;
  r.node.assign(node);
  if (s.id.uuid.empty()) {
    r.gpu.assign("gpu");
    r.gpu.append(std::to_string(s.id.index));
  } else {
    r.gpu.assign(s.id.uuid);
  }
  r.model.assign(s.id.name);
  r.job.assign(job);
  r.util_pct.reset();
  r.sm_active.reset();
  r.tensor_active.reset();
  r.dram_bw.reset();
  r.mem_used.reset();
  r.mem_total.reset();
  r.power_w.reset();
  r.temp_c.reset();
  if (s.util_gpu_pct.has_value()) r.util_pct = s.util_gpu_pct.value();
  if (s.gpm.sm_active.has_value()) r.sm_active = s.gpm.sm_active.value();
  if (s.gpm.tensor_active.has_value()) r.tensor_active = s.gpm.tensor_active.value();
  if (s.gpm.dram_bw_util.has_value()) r.dram_bw = s.gpm.dram_bw_util.value();
  if (s.memory_used_bytes.has_value()) r.mem_used = s.memory_used_bytes.value();
  if (s.memory_total_bytes.has_value()) r.mem_total = s.memory_total_bytes.value();
  if (s.power_mw.has_value()) r.power_w = s.power_mw.value() / 1000.0;
  if (s.temperature_c.has_value()) r.temp_c = s.temperature_c.value();
}

RecordedSample FromGpuSample(const GpuSample& s, const std::string& node, const std::string& job) {
  RecordedSample r;
  FillRecordedSample(s, node, job, &r);
  return r;
}

}  // namespace stoker::efficiency
