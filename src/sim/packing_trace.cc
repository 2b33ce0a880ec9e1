#include "sim/packing_trace.h"

#include <charconv>
#include <fstream>
#include <optional>
#include <sstream>

namespace stoker::sim {
namespace {

using scheduler::ClusterState;
using scheduler::GpuModelTable;
using scheduler::NodeSpec;
using scheduler::Request;

// Larger inputs are refused rather than read into memory (the largest published list is 0.7 MB).
constexpr int64_t kMaxFileBytes = int64_t{1} << 30;

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return NotFound(path + ": cannot open file");
  const std::streamoff size = in.tellg();
  if (size > kMaxFileBytes) {
    return InvalidArgument(path + ": file too large (" + std::to_string(size) + " bytes, max " +
                           std::to_string(kMaxFileBytes) + ")");
  }
  in.seekg(0);
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

// The columns of a list, found by name in its header. Required columns must be present; optional
// ones may be missing (their value is then empty: no constraint). Columns not named are ignored.
class Columns {
 public:
  // Reads the header; InvalidArgument names the first missing required column.
  static Result<Columns> FromHeader(std::string_view header,
                                    std::initializer_list<std::string_view> required,
                                    std::initializer_list<std::string_view> optional) {
    Columns c;
    for (std::string_view name : SplitCsv(header)) c.names_.emplace_back(name);
    for (std::string_view want : required) {
      if (c.Find(want) < 0) {
        std::string have;
        for (const std::string& n : c.names_) have += (have.empty() ? "" : ",") + n;
        return InvalidArgument("header: missing column '" + std::string(want) + "' (header is '" +
                               have + "')");
      }
    }
    for (std::string_view want : required) c.index_.emplace_back(want, c.Find(want));
    for (std::string_view want : optional) c.index_.emplace_back(want, c.Find(want));
    return c;
  }
  size_t size() const { return names_.size(); }
  // Index of a required or optional column, -1 when an optional one is absent.
  int Index(std::string_view name) const {
    for (const auto& [n, i] : index_) {
      if (n == name) return i;
    }
    return -1;
  }

 private:
  int Find(std::string_view name) const {
    for (size_t i = 0; i < names_.size(); ++i) {
      if (names_[i] == name) return static_cast<int>(i);
    }
    return -1;
  }
  std::vector<std::string> names_;
  std::vector<std::pair<std::string_view, int>> index_;
};

// One data row split into fields, with the column of each field for messages
// ("column 3 (memory_mib): ...").
class Row {
 public:
  Row(const Columns& cols, std::vector<std::string_view> fields)
      : cols_(cols), fields_(std::move(fields)) {}

  // The field of column `name`; empty when the (optional) column is absent.
  std::string_view Get(std::string_view name) const {
    const int i = cols_.Index(name);
    return i < 0 ? std::string_view() : fields_[static_cast<size_t>(i)];
  }
  // Context naming a column: "column 3 (memory_mib)".
  std::string Where(std::string_view name) const {
    return "column " + std::to_string(cols_.Index(name) + 1) + " (" + std::string(name) + ")";
  }
  Status Bad(std::string_view name, const std::string& what) const {
    return InvalidArgument(Where(name) + ": " + what);
  }
  // A non-negative integer no larger than `max`.
  Status Int(std::string_view name, int64_t max, int64_t* out) const {
    const std::string_view s = Get(name);
    if (s.empty()) return Bad(name, "missing");
    if (s.front() == '-') return Bad(name, "negative value '" + std::string(s) + "'");
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc::result_out_of_range || (ec == std::errc() && v > max)) {
      return Bad(name,
                 "value '" + std::string(s) + "' out of range (max " + std::to_string(max) + ")");
    }
    if (ec != std::errc() || ptr != s.data() + s.size()) {
      return Bad(name, "not an integer: '" + std::string(s) + "'");
    }
    *out = v;
    return Status::Ok();
  }

 private:
  const Columns& cols_;
  std::vector<std::string_view> fields_;
};

// Index of the first field holding a quote, -1 when none does. The published lists are plain
// comma-separated values without quoting, so a split on ',' is exact and a quote means another
// format.
int QuotedField(const std::vector<std::string_view>& fields) {
  for (size_t i = 0; i < fields.size(); ++i) {
    if (fields[i].find('"') != std::string_view::npos) return static_cast<int>(i);
  }
  return -1;
}

// Iterates the data lines after the header, calling fn(row). Handles CRLF and a missing final
// newline; skips empty lines. Every error is "source:line: column N (name): what".
template <typename Fn>
Status ForEachRow(std::string_view text, std::string_view source,
                  std::initializer_list<std::string_view> required,
                  std::initializer_list<std::string_view> optional, bool skip_bad_rows,
                  int64_t* skipped, Fn fn) {
  size_t pos = 0;
  uint64_t line_no = 0;
  std::optional<Columns> cols;
  auto where = [&] { return std::string(source) + ":" + std::to_string(line_no); };
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (!cols) {
      auto c = Columns::FromHeader(line, required, optional);
      if (!c.ok()) return c.status().WithContext(where());
      cols = std::move(c).value();
      continue;
    }
    std::vector<std::string_view> fields = SplitCsv(line);
    Status s;
    if (fields.size() != cols->size()) {
      s = InvalidArgument("expected " + std::to_string(cols->size()) +
                          " fields as in the header, got " + std::to_string(fields.size()));
    } else if (const int quoted = QuotedField(fields); quoted >= 0) {
      s = InvalidArgument("column " + std::to_string(quoted + 1) +
                          ": quoted fields are not supported");
    } else {
      s = fn(Row(*cols, std::move(fields)));
    }
    if (!s.ok()) {
      if (skip_bad_rows) {
        if (skipped != nullptr) ++*skipped;
        continue;
      }
      return s.WithContext(where());
    }
  }
  if (!cols) return InvalidArgument(std::string(source) + ": empty file (no header)");
  return Status::Ok();
}

constexpr int64_t kMaxCpuMilli = int64_t{1} << 40;
constexpr int64_t kMaxMemoryMib = int64_t{1} << 40;

}  // namespace

Result<ClusterState> ParseOpenbNodes(std::string_view text, std::string_view source,
                                     bool skip_bad_rows, int64_t* skipped) {
  ClusterState cluster;
  Status s =
      ForEachRow(text, source, {"sn", "cpu_milli", "memory_mib", "gpu"}, {"model"}, skip_bad_rows,
                 skipped, [&](const Row& row) -> Status {
                   if (row.Get("sn").empty()) return row.Bad("sn", "missing");
                   NodeSpec spec;
                   spec.name = std::string(row.Get("sn"));
                   int64_t gpus = 0;
                   STOKER_RETURN_IF_ERROR(row.Int("cpu_milli", kMaxCpuMilli, &spec.cpu_milli));
                   STOKER_RETURN_IF_ERROR(row.Int("memory_mib", kMaxMemoryMib, &spec.memory_mib));
                   STOKER_RETURN_IF_ERROR(row.Int("gpu", scheduler::kMaxGpusPerNode, &gpus));
                   spec.num_gpus = static_cast<int32_t>(gpus);
                   if (gpus > 0) {
                     if (row.Get("model").empty())
                       return row.Bad("model", "missing for a node with GPUs");
                     auto id = cluster.models().Intern(row.Get("model"));
                     if (!id.ok()) return id.status().WithContext(row.Where("model"));
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
      text, source, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"},
      {"gpu_spec", "qos"}, skip_bad_rows, &list.skipped_rows, [&](const Row& row) -> Status {
        Request r;
        int64_t num_gpu = 0, gpu_milli = 0;
        STOKER_RETURN_IF_ERROR(row.Int("cpu_milli", kMaxCpuMilli, &r.cpu_milli));
        STOKER_RETURN_IF_ERROR(row.Int("memory_mib", kMaxMemoryMib, &r.memory_mib));
        STOKER_RETURN_IF_ERROR(row.Int("num_gpu", 1 << 20, &num_gpu));
        STOKER_RETURN_IF_ERROR(row.Int("gpu_milli", scheduler::kMilliPerGpu, &gpu_milli));
        r.num_gpu = static_cast<int32_t>(num_gpu);
        r.gpu_milli = static_cast<int32_t>(gpu_milli);
        if (r.num_gpu == 0) r.gpu_milli = 0;  // CPU-only
        auto mask = models.ParseMask(row.Get("gpu_spec"));
        if (!mask.ok()) return mask.status().WithContext(row.Where("gpu_spec"));
        r.allowed_models = *mask;
        r.best_effort = row.Get("qos") == "BE";
        if (Status v = scheduler::ValidateRequest(r); !v.ok()) {
          // The validator's message starts with the field it refuses: name its column.
          const bool milli = v.message().starts_with("gpu_milli");
          return InvalidArgument(row.Where(milli ? "gpu_milli" : "num_gpu") + ": " +
                                 std::string(v.message()));
        }
        list.names.emplace_back(row.Get("name"));
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
