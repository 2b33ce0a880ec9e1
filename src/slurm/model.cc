#include "slurm/model.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "core/integer.h"
#include "doc/reader.h"

namespace stoker::slurm {
namespace {

constexpr size_t kMaxErrorText = 500;
// The largest GPU index an "(IDX:...)" list may name.
constexpr int64_t kMaxGpuIndex = 4095;

// The "errors" of an answer, for the message: each error's scalar fields ("description:
// Failed ..., error_number: -1, ..."), at most kMaxErrorText bytes.
std::string ErrorsText(const doc::Value& errors) {
  std::string out;
  for (const doc::Value& e : errors.items()) {
    if (!out.empty()) out += "; ";
    if (e.is_map()) {
      bool first = true;
      for (const doc::Member& m : e.members()) {
        if (!m.value.is_scalar()) continue;
        out += (first ? "" : ", ") + m.key + ": " + m.value.text();
        first = false;
      }
    } else {
      out += e.text();
    }
    if (out.size() > kMaxErrorText) break;
  }
  if (out.size() > kMaxErrorText) out.resize(kMaxErrorText);
  return out;
}

// Parses the document and checks the top-level shape: an object with an array `key` and an
// "errors" array that, when non-empty, is Slurm reporting a failure. Errors in the records are
// then "<command>:<line>:<column>: <key>[i].<field>: what" (doc/reader.h).
Result<doc::Value> ParseTop(std::string_view text, std::string_view command, std::string_view key) {
  if (text.size() > kMaxAnswerBytes) {
    return InvalidArgument(std::string(command) + ": answer of " + std::to_string(text.size()) +
                           " bytes exceeds the limit");
  }
  STOKER_ASSIGN_OR_RETURN(doc::Value root, doc::ParseJson(text, command, 1, kMaxAnswerBytes));
  if (!root.is_map()) return InvalidArgument(std::string(command) + ": answer is not an object");
  const doc::Value* errs = root.Find("errors");
  if (errs != nullptr && errs->is_list() && !errs->items().empty()) {
    return Unavailable(std::string(command) + ": Slurm reported errors: " + ErrorsText(*errs));
  }
  const doc::Value* list = root.Find(key);
  if (list == nullptr || !list->is_list()) {
    return InvalidArgument(std::string(command) + ": answer has no \"" + std::string(key) +
                           "\" array");
  }
  return root;
}

// A field parsed by one of the text grammars below: its error names the field.
template <class T>
Status Checked(const doc::Reader& r, std::string_view field, Result<T> parsed, T* out) {
  if (!parsed.ok()) return r.FieldError(field, parsed.status().message());
  *out = std::move(parsed).value();
  return Status::Ok();
}

// Splits on commas outside parentheses and brackets.
std::vector<std::string_view> SplitTop(std::string_view s) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '(' || c == '[') ++depth;
    if ((c == ')' || c == ']') && depth > 0) --depth;
    if (c == ',' && depth == 0) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

bool SlurmNode::Usable() const {
  const std::string s = Lower(state);
  if (s == "down" || s == "unknown" || s == "future" || s == "error") return false;
  for (const std::string& f : state_flags) {
    const std::string l = Lower(f);
    if (l == "drain" || l == "draining" || l == "drained" || l == "not_responding" ||
        l == "powered_down" || l == "powering_down" || l == "fail" || l == "maintenance" ||
        l == "reboot_requested" || l == "reboot_issued") {
      return false;
    }
  }
  return true;
}

bool SlurmJob::Held() const {
  return Pending() && (priority == 0 || state_reason.starts_with("JobHeld"));
}

int32_t SlurmJob::GpusWanted() const {
  if (gpus_per_node > 0) return gpus_per_node;
  const int n = std::max<int>(1, static_cast<int>(nodes.size()));
  return gpus_per_job > 0 ? (gpus_per_job + n - 1) / n : 0;
}

Result<std::vector<int32_t>> ParseIndexList(std::string_view list) {
  std::vector<int32_t> out;
  if (list.empty() || list == "N/A") return out;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view part = list.substr(pos, comma - pos);
    const size_t dash = part.find('-');
    const auto index = [&](std::string_view s) -> Result<int64_t> {
      auto v = ParseInt(s, 0, kMaxGpuIndex);
      if (!v.ok())
        return InvalidArgument("bad index in '" + std::string(part) + "': " + v.status().message());
      return v;
    };
    STOKER_ASSIGN_OR_RETURN(const int64_t lo, index(part.substr(0, dash)));
    STOKER_ASSIGN_OR_RETURN(const int64_t hi,
                            dash == std::string_view::npos ? lo : index(part.substr(dash + 1)));
    if (hi < lo) return InvalidArgument("index range '" + std::string(part) + "' is reversed");
    for (int64_t v = lo; v <= hi; ++v) out.push_back(static_cast<int32_t>(v));
    pos = comma + 1;
  }
  return out;
}

Result<GresGpu> ParseGresGpu(std::string_view gres) {
  GresGpu g;
  if (gres.empty() || gres == "(null)" || gres == "N/A") return g;
  for (std::string_view whole : SplitTop(gres)) {
    // Slurm prints a missing type as "(null)": "shard:(null):4(IDX:0-3)".
    std::string cleaned(whole);
    if (const size_t at = cleaned.find(":(null)"); at != std::string::npos) cleaned.erase(at, 7);
    std::string_view item = cleaned;
    std::string_view extra;
    const size_t paren = item.find('(');
    if (paren != std::string_view::npos) {
      if (item.back() != ')')
        return InvalidArgument("gres '" + std::string(gres) + "': unclosed (");
      extra = item.substr(paren + 1, item.size() - paren - 2);
      item = item.substr(0, paren);
    }
    std::vector<std::string_view> parts;
    size_t pos = 0;
    while (pos <= item.size()) {
      size_t c = item.find(':', pos);
      if (c == std::string_view::npos) c = item.size();
      parts.push_back(item.substr(pos, c - pos));
      pos = c + 1;
    }
    const bool gpu = parts[0] == "gpu";
    if (!gpu && parts[0] != "shard") continue;
    if (parts.size() < 2 || parts.size() > 3) {
      return InvalidArgument("gres '" + std::string(gres) + "': expected " + std::string(parts[0]) +
                             "[:type]:count");
    }
    auto count = ParseInt(parts.back(), 0, gpu ? 4096 : 1 << 20);
    if (!count.ok()) {
      return InvalidArgument("gres '" + std::string(gres) + "': bad " + std::string(parts[0]) +
                             " count: " + count.status().message());
    }
    std::vector<int32_t> indices;
    if (extra.starts_with("IDX:")) {
      auto idx = ParseIndexList(extra.substr(4));
      if (!idx.ok()) return idx.status().WithContext("gres '" + std::string(gres) + "'");
      indices = std::move(idx).value();
    }
    if (gpu) {
      g.count += static_cast<int32_t>(*count);
      if (parts.size() == 3) g.type = std::string(parts[1]);
      g.indices.insert(g.indices.end(), indices.begin(), indices.end());
    } else {
      g.shards += static_cast<int32_t>(*count);
      g.shard_indices.insert(g.shard_indices.end(), indices.begin(), indices.end());
    }
  }
  return g;
}

namespace {

// The count of gres `name` in a TRES string ("gres:gpu:2", "gres/gpu=2", "gres:gpu:a100:2").
Result<int32_t> ParseTresGresCount(std::string_view tres, std::string_view name,
                                   std::string* type) {
  int32_t total = 0;
  for (std::string_view item : SplitTop(tres)) {
    for (std::string_view sep : {":", "/"}) {
      const std::string prefix = "gres" + std::string(sep) + std::string(name);
      if (!item.starts_with(prefix)) continue;
      std::string_view rest = item.substr(prefix.size());
      if (!rest.empty() && rest[0] != ':' && rest[0] != '=') continue;  // gres:gpux is not gpu
      const size_t c = rest.rfind(':');
      const size_t eq = rest.rfind('=');
      const size_t at = c == std::string_view::npos    ? eq
                        : eq == std::string_view::npos ? c
                                                       : std::max(c, eq);
      if (at == std::string_view::npos) {
        return InvalidArgument("tres '" + std::string(tres) + "': bad " + std::string(name) +
                               " count: none given");
      }
      auto n = ParseInt(rest.substr(at + 1), 0, 1 << 20);
      if (!n.ok()) {
        return InvalidArgument("tres '" + std::string(tres) + "': bad " + std::string(name) +
                               " count: " + n.status().message());
      }
      total += static_cast<int32_t>(*n);
      // "gres:gpu:a100:2": the type sits between the name and the count.
      if (type != nullptr && at > 1 && rest[0] == ':') *type = std::string(rest.substr(1, at - 1));
    }
  }
  return total;
}

}  // namespace

Result<int32_t> ParseTresGpuCount(std::string_view tres, std::string* type) {
  return ParseTresGresCount(tres, "gpu", type);
}

Result<int32_t> ParseTresShardCount(std::string_view tres) {
  return ParseTresGresCount(tres, "shard", nullptr);
}

Result<std::vector<std::string>> ExpandHostList(std::string_view list) {
  std::vector<std::string> out;
  if (list.empty() || list == "(null)") return out;
  for (std::string_view item : SplitTop(list)) {
    const size_t open = item.find('[');
    if (open == std::string_view::npos) {
      if (item.find(']') != std::string_view::npos) {
        return InvalidArgument("host list '" + std::string(list) + "': unbalanced ]");
      }
      out.emplace_back(item);
    } else {
      const size_t close = item.find(']', open);
      if (close == std::string_view::npos) {
        return InvalidArgument("host list '" + std::string(list) + "': unclosed [");
      }
      const std::string_view prefix = item.substr(0, open);
      const std::string_view suffix = item.substr(close + 1);
      if (suffix.find('[') != std::string_view::npos) {
        return InvalidArgument("host list '" + std::string(list) +
                               "': more than one bracket group in a name is not supported");
      }
      std::string_view ranges = item.substr(open + 1, close - open - 1);
      size_t pos = 0;
      while (pos <= ranges.size()) {
        size_t comma = ranges.find(',', pos);
        if (comma == std::string_view::npos) comma = ranges.size();
        std::string_view r = ranges.substr(pos, comma - pos);
        const size_t dash = r.find('-');
        std::string_view a = dash == std::string_view::npos ? r : r.substr(0, dash);
        std::string_view b = dash == std::string_view::npos ? r : r.substr(dash + 1);
        auto lo = ParseInt(a, 0);
        auto hi = ParseInt(b, 0);
        if (!lo.ok() || !hi.ok()) {
          return InvalidArgument("host list '" + std::string(list) + "': bad range '" +
                                 std::string(r) + "': " + (lo.ok() ? hi : lo).status().message());
        }
        if (*hi < *lo) {
          return InvalidArgument("host list '" + std::string(list) + "': range '" + std::string(r) +
                                 "' is reversed");
        }
        if (static_cast<uint64_t>(*hi - *lo) + out.size() >= kMaxHostListNames) {
          return InvalidArgument("host list '" + std::string(list) + "': too many names");
        }
        for (int64_t v = *lo; v <= *hi; ++v) {
          std::string num = std::to_string(v);
          if (num.size() < a.size()) num.insert(0, a.size() - num.size(), '0');  // zero padding
          out.push_back(std::string(prefix) + num + std::string(suffix));
        }
        pos = comma + 1;
      }
    }
    if (out.size() > kMaxHostListNames) {
      return InvalidArgument("host list '" + std::string(list) + "': too many names");
    }
  }
  return out;
}

Result<std::vector<SlurmNode>> ParseSinfoJson(std::string_view text) {
  constexpr std::string_view kCommand = "sinfo --json";
  STOKER_ASSIGN_OR_RETURN(doc::Value root, ParseTop(text, kCommand, "nodes"));
  const doc::Reader top(root, std::string(kCommand));
  STOKER_ASSIGN_OR_RETURN(std::vector<doc::Reader> records, top.Required("nodes")->Items());
  std::vector<SlurmNode> nodes;
  nodes.reserve(records.size());
  for (const doc::Reader& r : records) {
    STOKER_RETURN_IF_ERROR(r.ExpectMap());
    SlurmNode n;
    STOKER_RETURN_IF_ERROR(r.Get("name", &n.name));
    if (n.name.empty()) return r.FieldError("name", "required field is missing or empty");
    std::string gres, gres_used;
    STOKER_RETURN_IF_ERROR(r.Get("state", &n.state));
    STOKER_RETURN_IF_ERROR(r.Get("state_flags", &n.state_flags));
    STOKER_RETURN_IF_ERROR(r.GetInt("cpus", &n.cpus));
    STOKER_RETURN_IF_ERROR(r.GetInt("alloc_cpus", &n.alloc_cpus));
    STOKER_RETURN_IF_ERROR(r.GetInt("real_memory", &n.real_memory_mib));
    STOKER_RETURN_IF_ERROR(r.GetInt("alloc_memory", &n.alloc_memory_mib));
    STOKER_RETURN_IF_ERROR(r.GetInt("weight", &n.weight));
    STOKER_RETURN_IF_ERROR(r.Get("partitions", &n.partitions));
    STOKER_RETURN_IF_ERROR(r.Get("reason", &n.reason));
    STOKER_RETURN_IF_ERROR(r.Get("gres", &gres));
    STOKER_RETURN_IF_ERROR(r.Get("gres_used", &gres_used));
    if (n.cpus < 0 || n.alloc_cpus < 0 || n.alloc_cpus > n.cpus) {
      return r.FieldError("alloc_cpus",
                          std::to_string(n.alloc_cpus) + " of " + std::to_string(n.cpus) + " CPUs");
    }
    GresGpu g, u;
    STOKER_RETURN_IF_ERROR(Checked(r, "gres", ParseGresGpu(gres), &g));
    STOKER_RETURN_IF_ERROR(Checked(r, "gres_used", ParseGresGpu(gres_used), &u));
    n.gpus = g.count;
    n.gpu_type = std::move(g.type);
    n.shards = g.shards;
    n.gpus_used = u.count;
    n.gpu_used_indices = std::move(u.indices);
    if (n.gpus_used > n.gpus) {
      return r.FieldError("gres_used",
                          std::to_string(n.gpus_used) + " GPUs used of " + std::to_string(n.gpus));
    }
    nodes.push_back(std::move(n));
  }
  return nodes;
}

Result<std::vector<SlurmJob>> ParseSqueueJson(std::string_view text) {
  constexpr std::string_view kCommand = "squeue --json";
  STOKER_ASSIGN_OR_RETURN(doc::Value root, ParseTop(text, kCommand, "jobs"));
  const doc::Reader top(root, std::string(kCommand));
  STOKER_ASSIGN_OR_RETURN(std::vector<doc::Reader> records, top.Required("jobs")->Items());
  std::vector<SlurmJob> jobs;
  jobs.reserve(records.size());
  for (const doc::Reader& r : records) {
    STOKER_RETURN_IF_ERROR(r.ExpectMap());
    SlurmJob j;
    STOKER_ASSIGN_OR_RETURN(doc::Reader id, r.Required("job_id"));
    STOKER_ASSIGN_OR_RETURN(int64_t id_value, id.Int(0, std::numeric_limits<uint32_t>::max()));
    if (id_value == 0) return id.Error("0 is not a job id");
    j.id = static_cast<uint32_t>(id_value);
    STOKER_RETURN_IF_ERROR(r.Get("name", &j.name));
    STOKER_RETURN_IF_ERROR(r.Get("user_name", &j.user));
    STOKER_RETURN_IF_ERROR(r.GetInt("user_id", &j.user_id));
    STOKER_RETURN_IF_ERROR(r.Get("partition", &j.partition));
    STOKER_RETURN_IF_ERROR(r.Get("qos", &j.qos));
    STOKER_RETURN_IF_ERROR(r.Get("job_state", &j.state));
    STOKER_RETURN_IF_ERROR(r.Get("state_reason", &j.state_reason));
    STOKER_RETURN_IF_ERROR(r.GetInt("cpus", &j.cpus));
    STOKER_RETURN_IF_ERROR(r.GetInt("submit_time", &j.submit_time));
    STOKER_RETURN_IF_ERROR(r.GetInt("start_time", &j.start_time));
    STOKER_RETURN_IF_ERROR(r.GetInt("end_time", &j.end_time));
    if (auto priority = r.Field("priority")) {
      STOKER_ASSIGN_OR_RETURN(j.priority, priority->Uint());
    }
    STOKER_RETURN_IF_ERROR(r.Get("requeue", &j.requeue));
    STOKER_RETURN_IF_ERROR(r.Get("batch_flag", &j.batch));
    STOKER_RETURN_IF_ERROR(r.Get("comment", &j.comment));
    STOKER_RETURN_IF_ERROR(r.Get("admin_comment", &j.admin_comment));
    if (j.state.empty()) return r.FieldError("job_state", "required field is missing or empty");
    std::string nodes, required, excluded, per_node, per_job;
    STOKER_RETURN_IF_ERROR(r.Get("nodes", &nodes));
    STOKER_RETURN_IF_ERROR(r.Get("required_nodes", &required));
    STOKER_RETURN_IF_ERROR(r.Get("excluded_nodes", &excluded));
    STOKER_RETURN_IF_ERROR(r.Get("tres_per_node", &per_node));
    STOKER_RETURN_IF_ERROR(r.Get("tres_per_job", &per_job));
    STOKER_RETURN_IF_ERROR(Checked(r, "nodes", ExpandHostList(nodes), &j.nodes));
    STOKER_RETURN_IF_ERROR(
        Checked(r, "required_nodes", ExpandHostList(required), &j.required_nodes));
    STOKER_RETURN_IF_ERROR(
        Checked(r, "excluded_nodes", ExpandHostList(excluded), &j.excluded_nodes));
    STOKER_RETURN_IF_ERROR(
        Checked(r, "tres_per_node", ParseTresGpuCount(per_node, &j.gpu_type), &j.gpus_per_node));
    STOKER_RETURN_IF_ERROR(
        Checked(r, "tres_per_node", ParseTresShardCount(per_node), &j.shards_per_node));
    STOKER_RETURN_IF_ERROR(Checked(r, "tres_per_job", ParseTresGpuCount(per_job), &j.gpus_per_job));
    if (auto detail = r.Field("gres_detail")) {
      STOKER_ASSIGN_OR_RETURN(std::vector<doc::Reader> items, detail->Items());
      for (const doc::Reader& item : items) {
        STOKER_ASSIGN_OR_RETURN(std::string text, item.String());
        auto g = ParseGresGpu(text);
        if (!g.ok()) return item.Error(g.status().message());
        j.gpu_indices.push_back(std::move(g->indices));
        j.shard_counts.push_back(g->shards);
        j.shard_gpus.push_back(std::move(g->shard_indices));
      }
    }
    jobs.push_back(std::move(j));
  }
  return jobs;
}

Result<std::vector<SlurmPartition>> ParsePartitionsText(std::string_view text) {
  if (text.size() > kMaxAnswerBytes) return InvalidArgument("scontrol show partition: too large");
  std::vector<SlurmPartition> out;
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.remove_suffix(1);
    if (line.empty()) continue;
    const std::string where = "scontrol -o show partition: line " + std::to_string(line_no);
    if (line == "No partitions in the system") continue;
    SlurmPartition p;
    size_t f = 0;
    while (f < line.size()) {
      size_t sp = line.find(' ', f);
      if (sp == std::string_view::npos) sp = line.size();
      std::string_view kv = line.substr(f, sp - f);
      f = sp + 1;
      if (kv.empty()) continue;
      const size_t eq = kv.find('=');
      if (eq == std::string_view::npos || eq == 0) {
        return InvalidArgument(where + ": '" + std::string(kv.substr(0, 80)) +
                               "' is not Key=Value");
      }
      std::string_view key = kv.substr(0, eq), value = kv.substr(eq + 1);
      if (key == "PartitionName") p.name = std::string(value);
      if (key == "State") p.state = std::string(value);
      if (key == "Default") p.is_default = value == "YES";
      if (key == "Nodes") {
        auto hosts = ExpandHostList(value);
        if (!hosts.ok()) return hosts.status().WithContext(where + ": Nodes");
        p.nodes = std::move(hosts).value();
      }
    }
    if (p.name.empty()) return InvalidArgument(where + ": no PartitionName");
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace stoker::slurm
