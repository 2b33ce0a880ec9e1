#include "sim/packing_trace.h"

#include <charconv>
#include <fstream>
#include <sstream>

namespace stoker::sim {
namespace {

using scheduler::ClusterState;
using scheduler::GpuModelTable;
using scheduler::NodeSpec;
using scheduler::Request;

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": cannot open file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string_view> SplitCsv(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      out.push_back(line.substr(start));
      return out;
    }
    out.push_back(line.substr(start, comma - start));
    start = comma + 1;
  }
}

// Parses a non-negative integer field no larger than `max`.
Status ParseField(const std::vector<std::string_view>& f, size_t i, std::string_view name,
                  int64_t max, int64_t* out) {
  if (i >= f.size() || f[i].empty()) return InvalidArgument(std::string(name) + ": missing");
  std::string_view s = f[i];
  if (s.front() == '-')
    return InvalidArgument(std::string(name) + ": negative value '" + std::string(s) + "'");
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && v > max)) {
    return InvalidArgument(std::string(name) + ": value '" + std::string(s) +
                           "' out of range (max " + std::to_string(max) + ")");
  }
  if (ec != std::errc() || ptr != s.data() + s.size()) {
    return InvalidArgument(std::string(name) + ": not an integer: '" + std::string(s) + "'");
  }
  *out = v;
  return Status::Ok();
}

// Iterates data lines (after the header), calling fn(line_no, fields). Handles CRLF and a
// missing final newline; skips empty lines.
template <typename Fn>
Status ForEachRow(std::string_view text, std::string_view source, std::string_view want_header,
                  bool skip_bad_rows, int64_t* skipped, Fn fn) {
  size_t pos = 0;
  uint64_t line_no = 0;
  bool header = true;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (header) {
      header = false;
      if (!line.starts_with(want_header)) {
        return InvalidArgument(std::string(source) + ":" + std::to_string(line_no) +
                               ": unexpected header (want '" + std::string(want_header) + ",...')");
      }
      continue;
    }
    Status s = fn(SplitCsv(line));
    if (!s.ok()) {
      if (skip_bad_rows) {
        if (skipped != nullptr) ++*skipped;
        continue;
      }
      return s.WithContext(std::string(source) + ":" + std::to_string(line_no));
    }
  }
  if (header) return InvalidArgument(std::string(source) + ": empty file (no header)");
  return Status::Ok();
}

constexpr int64_t kMaxCpuMilli = int64_t{1} << 40;
constexpr int64_t kMaxMemoryMib = int64_t{1} << 40;

}  // namespace

Result<ClusterState> ParseOpenbNodes(std::string_view text, std::string_view source,
                                     bool skip_bad_rows, int64_t* skipped) {
  ClusterState cluster;
  Status s = ForEachRow(
      text, source, "sn,cpu_milli,memory_mib,gpu,model", skip_bad_rows, skipped,
      [&](const std::vector<std::string_view>& f) -> Status {
        if (f.size() < 5)
          return InvalidArgument("expected 5 fields, got " + std::to_string(f.size()));
        if (f[0].empty()) return InvalidArgument("sn: missing");
        NodeSpec spec;
        spec.name = std::string(f[0]);
        int64_t gpus = 0;
        STOKER_RETURN_IF_ERROR(ParseField(f, 1, "cpu_milli", kMaxCpuMilli, &spec.cpu_milli));
        STOKER_RETURN_IF_ERROR(ParseField(f, 2, "memory_mib", kMaxMemoryMib, &spec.memory_mib));
        STOKER_RETURN_IF_ERROR(ParseField(f, 3, "gpu", scheduler::kMaxGpusPerNode, &gpus));
        spec.num_gpus = static_cast<int32_t>(gpus);
        if (gpus > 0) {
          if (f[4].empty()) return InvalidArgument("model: missing for a node with GPUs");
          auto id = cluster.models().Intern(f[4]);
          if (!id.ok()) return id.status().WithContext("model");
          spec.gpu_model = *id;
        }
        return cluster.AddNode(spec).status();
      });
  if (!s.ok()) return s;
  return cluster;
}

Result<ClusterState> LoadOpenbNodes(const std::string& path, bool skip_bad_rows, int64_t* skipped) {
  STOKER_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseOpenbNodes(text, path, skip_bad_rows, skipped);
}

Result<PodList> ParseOpenbPods(std::string_view text, std::string_view source,
                               const GpuModelTable& models, bool skip_bad_rows) {
  PodList list;
  list.workload = WorkloadNameFromPath(source);
  Status s = ForEachRow(
      text, source, "name,cpu_milli,memory_mib,num_gpu,gpu_milli", skip_bad_rows,
      &list.skipped_rows, [&](const std::vector<std::string_view>& f) -> Status {
        if (f.size() < 6)
          return InvalidArgument("expected at least 6 fields, got " + std::to_string(f.size()));
        Request r;
        int64_t num_gpu = 0, gpu_milli = 0;
        STOKER_RETURN_IF_ERROR(ParseField(f, 1, "cpu_milli", kMaxCpuMilli, &r.cpu_milli));
        STOKER_RETURN_IF_ERROR(ParseField(f, 2, "memory_mib", kMaxMemoryMib, &r.memory_mib));
        STOKER_RETURN_IF_ERROR(ParseField(f, 3, "num_gpu", 1 << 20, &num_gpu));
        STOKER_RETURN_IF_ERROR(ParseField(f, 4, "gpu_milli", scheduler::kMilliPerGpu, &gpu_milli));
        r.num_gpu = static_cast<int32_t>(num_gpu);
        r.gpu_milli = static_cast<int32_t>(gpu_milli);
        if (r.num_gpu == 0) r.gpu_milli = 0;  // CPU-only
        auto mask = models.ParseMask(f[5]);
        if (!mask.ok()) return mask.status().WithContext("gpu_spec");
        r.allowed_models = *mask;
        r.best_effort = f.size() > 6 && f[6] == "BE";
        STOKER_RETURN_IF_ERROR(scheduler::ValidateRequest(r));
        list.pods.push_back(std::move(r));
        return Status::Ok();
      });
  if (!s.ok()) return s;
  return list;
}

Result<PodList> LoadOpenbPods(const std::string& path, const GpuModelTable& models,
                              bool skip_bad_rows) {
  STOKER_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseOpenbPods(text, path, models, skip_bad_rows);
}

std::string WorkloadNameFromPath(std::string_view path) {
  size_t slash = path.rfind('/');
  std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  if (base.ends_with(".csv")) base.remove_suffix(4);
  constexpr std::string_view kPrefix = "openb_pod_list_";
  if (base.starts_with(kPrefix)) base.remove_prefix(kPrefix.size());
  return std::string(base);
}

}  // namespace stoker::sim
