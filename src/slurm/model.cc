#include "slurm/model.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>

namespace stoker::slurm {
namespace {

using nlohmann::json;

std::string Where(std::string_view what, size_t i, std::string_view field) {
  return std::string(what) + "[" + std::to_string(i) + "]." + std::string(field);
}

const char* TypeName(const json& v) { return v.type_name(); }

// Accessors: absent or null fields take the default; a field of the wrong type is an error.
Status GetString(const json& obj, std::string_view key, const std::string& where,
                 std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) {
    return InvalidArgument(where + ": expected a string, got " + TypeName(*it));
  }
  *out = it->get<std::string>();
  return Status::Ok();
}

template <typename Int>
Status GetInt(const json& obj, std::string_view key, const std::string& where, Int* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_number_integer()) {
    return InvalidArgument(where + ": expected an integer, got " + TypeName(*it));
  }
  if (it->is_number_unsigned()) {
    const uint64_t v = it->get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<Int>::max())) {
      return InvalidArgument(where + ": " + std::to_string(v) + " out of range");
    }
    *out = static_cast<Int>(v);
    return Status::Ok();
  }
  const int64_t v = it->get<int64_t>();
  if (v < static_cast<int64_t>(std::numeric_limits<Int>::min()) ||
      (v > 0 &&
       static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<Int>::max()))) {
    return InvalidArgument(where + ": " + std::to_string(v) + " out of range");
  }
  *out = static_cast<Int>(v);
  return Status::Ok();
}

Status GetBool(const json& obj, std::string_view key, const std::string& where, bool* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_boolean()) {
    return InvalidArgument(where + ": expected a boolean, got " + TypeName(*it));
  }
  *out = it->get<bool>();
  return Status::Ok();
}

Status GetStrings(const json& obj, std::string_view key, const std::string& where,
                  std::vector<std::string>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_array()) return InvalidArgument(where + ": expected an array, got " + TypeName(*it));
  for (size_t i = 0; i < it->size(); ++i) {
    if (!(*it)[i].is_string()) {
      return InvalidArgument(where + "[" + std::to_string(i) + "]: expected a string");
    }
    out->push_back((*it)[i].get<std::string>());
  }
  return Status::Ok();
}

// Parses the document and checks the top-level shape: an object with an array `key` and an
// "errors" array that, when non-empty, is Slurm reporting a failure.
Result<json> ParseTop(std::string_view text, std::string_view command, std::string_view key) {
  if (text.size() > kMaxAnswerBytes) {
    return InvalidArgument(std::string(command) + ": answer of " + std::to_string(text.size()) +
                           " bytes exceeds the limit");
  }
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument(std::string(command) + ": answer is not JSON");
  if (!doc.is_object()) return InvalidArgument(std::string(command) + ": answer is not an object");
  auto errs = doc.find("errors");
  if (errs != doc.end() && errs->is_array() && !errs->empty()) {
    std::string msg = std::string(command) + ": Slurm reported errors: ";
    msg += errs->dump().substr(0, 500);
    return Unavailable(msg);
  }
  auto it = doc.find(key);
  if (it == doc.end() || !it->is_array()) {
    return InvalidArgument(std::string(command) + ": answer has no \"" + std::string(key) +
                           "\" array");
  }
  return doc;
}

bool ParseInt(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
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
    int64_t lo = 0, hi = 0;
    if (dash == std::string_view::npos) {
      if (!ParseInt(part, &lo)) return InvalidArgument("bad index '" + std::string(part) + "'");
      hi = lo;
    } else if (!ParseInt(part.substr(0, dash), &lo) || !ParseInt(part.substr(dash + 1), &hi)) {
      return InvalidArgument("bad index range '" + std::string(part) + "'");
    }
    if (lo < 0 || hi < lo || hi > 4095) {
      return InvalidArgument("index range '" + std::string(part) + "' out of bounds");
    }
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
    int64_t count = 0;
    if (!ParseInt(parts.back(), &count) || count < 0 || count > (gpu ? 4096 : 1 << 20)) {
      return InvalidArgument("gres '" + std::string(gres) + "': bad " + std::string(parts[0]) +
                             " count '" + std::string(parts.back()) + "'");
    }
    std::vector<int32_t> indices;
    if (extra.starts_with("IDX:")) {
      auto idx = ParseIndexList(extra.substr(4));
      if (!idx.ok()) return idx.status().WithContext("gres '" + std::string(gres) + "'");
      indices = std::move(idx).value();
    }
    if (gpu) {
      g.count += static_cast<int32_t>(count);
      if (parts.size() == 3) g.type = std::string(parts[1]);
      g.indices.insert(g.indices.end(), indices.begin(), indices.end());
    } else {
      g.shards += static_cast<int32_t>(count);
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
      int64_t n = 0;
      if (at == std::string_view::npos || !ParseInt(rest.substr(at + 1), &n) || n < 0 ||
          n > (1 << 20)) {
        return InvalidArgument("tres '" + std::string(tres) + "': bad " + std::string(name) +
                               " count");
      }
      total += static_cast<int32_t>(n);
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
        int64_t lo = 0, hi = 0;
        if (!ParseInt(a, &lo) || !ParseInt(b, &hi) || lo < 0 || hi < lo) {
          return InvalidArgument("host list '" + std::string(list) + "': bad range '" +
                                 std::string(r) + "'");
        }
        if (static_cast<uint64_t>(hi - lo) + out.size() >= kMaxHostListNames) {
          return InvalidArgument("host list '" + std::string(list) + "': too many names");
        }
        for (int64_t v = lo; v <= hi; ++v) {
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
  STOKER_ASSIGN_OR_RETURN(json doc, ParseTop(text, "sinfo --json", "nodes"));
  std::vector<SlurmNode> nodes;
  const json& arr = doc["nodes"];
  nodes.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    const json& o = arr[i];
    auto w = [&](std::string_view f) { return Where("sinfo --json: nodes", i, f); };
    if (!o.is_object()) return InvalidArgument(w("") + " is not an object");
    SlurmNode n;
    STOKER_RETURN_IF_ERROR(GetString(o, "name", w("name"), &n.name));
    if (n.name.empty()) return InvalidArgument(w("name") + ": missing");
    std::string gres, gres_used;
    STOKER_RETURN_IF_ERROR(GetString(o, "state", w("state"), &n.state));
    STOKER_RETURN_IF_ERROR(GetStrings(o, "state_flags", w("state_flags"), &n.state_flags));
    STOKER_RETURN_IF_ERROR(GetInt(o, "cpus", w("cpus"), &n.cpus));
    STOKER_RETURN_IF_ERROR(GetInt(o, "alloc_cpus", w("alloc_cpus"), &n.alloc_cpus));
    STOKER_RETURN_IF_ERROR(GetInt(o, "real_memory", w("real_memory"), &n.real_memory_mib));
    STOKER_RETURN_IF_ERROR(GetInt(o, "alloc_memory", w("alloc_memory"), &n.alloc_memory_mib));
    STOKER_RETURN_IF_ERROR(GetInt(o, "weight", w("weight"), &n.weight));
    STOKER_RETURN_IF_ERROR(GetStrings(o, "partitions", w("partitions"), &n.partitions));
    STOKER_RETURN_IF_ERROR(GetString(o, "reason", w("reason"), &n.reason));
    STOKER_RETURN_IF_ERROR(GetString(o, "gres", w("gres"), &gres));
    STOKER_RETURN_IF_ERROR(GetString(o, "gres_used", w("gres_used"), &gres_used));
    if (n.cpus < 0 || n.alloc_cpus < 0 || n.alloc_cpus > n.cpus) {
      return InvalidArgument(w("alloc_cpus") + ": " + std::to_string(n.alloc_cpus) + " of " +
                             std::to_string(n.cpus) + " CPUs");
    }
    auto g = ParseGresGpu(gres);
    if (!g.ok()) return g.status().WithContext(w("gres"));
    auto u = ParseGresGpu(gres_used);
    if (!u.ok()) return u.status().WithContext(w("gres_used"));
    n.gpus = g->count;
    n.gpu_type = g->type;
    n.shards = g->shards;
    n.gpus_used = u->count;
    n.gpu_used_indices = u->indices;
    if (n.gpus_used > n.gpus) {
      return InvalidArgument(w("gres_used") + ": " + std::to_string(n.gpus_used) +
                             " GPUs used of " + std::to_string(n.gpus));
    }
    nodes.push_back(std::move(n));
  }
  return nodes;
}

Result<std::vector<SlurmJob>> ParseSqueueJson(std::string_view text) {
  STOKER_ASSIGN_OR_RETURN(json doc, ParseTop(text, "squeue --json", "jobs"));
  std::vector<SlurmJob> jobs;
  const json& arr = doc["jobs"];
  jobs.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    const json& o = arr[i];
    auto w = [&](std::string_view f) { return Where("squeue --json: jobs", i, f); };
    if (!o.is_object()) return InvalidArgument(w("") + " is not an object");
    SlurmJob j;
    if (!o.contains("job_id")) return InvalidArgument(w("job_id") + ": missing");
    STOKER_RETURN_IF_ERROR(GetInt(o, "job_id", w("job_id"), &j.id));
    if (j.id == 0) return InvalidArgument(w("job_id") + ": 0 is not a job id");
    STOKER_RETURN_IF_ERROR(GetString(o, "name", w("name"), &j.name));
    STOKER_RETURN_IF_ERROR(GetString(o, "user_name", w("user_name"), &j.user));
    STOKER_RETURN_IF_ERROR(GetInt(o, "user_id", w("user_id"), &j.user_id));
    STOKER_RETURN_IF_ERROR(GetString(o, "partition", w("partition"), &j.partition));
    STOKER_RETURN_IF_ERROR(GetString(o, "qos", w("qos"), &j.qos));
    STOKER_RETURN_IF_ERROR(GetString(o, "job_state", w("job_state"), &j.state));
    STOKER_RETURN_IF_ERROR(GetString(o, "state_reason", w("state_reason"), &j.state_reason));
    STOKER_RETURN_IF_ERROR(GetInt(o, "cpus", w("cpus"), &j.cpus));
    STOKER_RETURN_IF_ERROR(GetInt(o, "submit_time", w("submit_time"), &j.submit_time));
    STOKER_RETURN_IF_ERROR(GetInt(o, "start_time", w("start_time"), &j.start_time));
    STOKER_RETURN_IF_ERROR(GetInt(o, "end_time", w("end_time"), &j.end_time));
    STOKER_RETURN_IF_ERROR(GetInt(o, "priority", w("priority"), &j.priority));
    STOKER_RETURN_IF_ERROR(GetBool(o, "requeue", w("requeue"), &j.requeue));
    STOKER_RETURN_IF_ERROR(GetBool(o, "batch_flag", w("batch_flag"), &j.batch));
    STOKER_RETURN_IF_ERROR(GetString(o, "comment", w("comment"), &j.comment));
    STOKER_RETURN_IF_ERROR(GetString(o, "admin_comment", w("admin_comment"), &j.admin_comment));
    if (j.state.empty()) return InvalidArgument(w("job_state") + ": missing");
    std::string nodes, per_node, per_job;
    STOKER_RETURN_IF_ERROR(GetString(o, "nodes", w("nodes"), &nodes));
    STOKER_RETURN_IF_ERROR(GetString(o, "tres_per_node", w("tres_per_node"), &per_node));
    STOKER_RETURN_IF_ERROR(GetString(o, "tres_per_job", w("tres_per_job"), &per_job));
    auto hosts = ExpandHostList(nodes);
    if (!hosts.ok()) return hosts.status().WithContext(w("nodes"));
    j.nodes = std::move(hosts).value();
    std::string required;
    STOKER_RETURN_IF_ERROR(GetString(o, "required_nodes", w("required_nodes"), &required));
    auto req = ExpandHostList(required);
    if (!req.ok()) return req.status().WithContext(w("required_nodes"));
    j.required_nodes = std::move(req).value();
    std::string excluded;
    STOKER_RETURN_IF_ERROR(GetString(o, "excluded_nodes", w("excluded_nodes"), &excluded));
    auto exc = ExpandHostList(excluded);
    if (!exc.ok()) return exc.status().WithContext(w("excluded_nodes"));
    j.excluded_nodes = std::move(exc).value();
    auto pn = ParseTresGpuCount(per_node, &j.gpu_type);
    if (!pn.ok()) return pn.status().WithContext(w("tres_per_node"));
    auto ps = ParseTresShardCount(per_node);
    if (!ps.ok()) return ps.status().WithContext(w("tres_per_node"));
    j.shards_per_node = *ps;
    auto pj = ParseTresGpuCount(per_job);
    if (!pj.ok()) return pj.status().WithContext(w("tres_per_job"));
    j.gpus_per_node = *pn;
    j.gpus_per_job = *pj;
    std::vector<std::string> detail;
    STOKER_RETURN_IF_ERROR(GetStrings(o, "gres_detail", w("gres_detail"), &detail));
    for (size_t d = 0; d < detail.size(); ++d) {
      auto g = ParseGresGpu(detail[d]);
      if (!g.ok()) return g.status().WithContext(w("gres_detail[" + std::to_string(d) + "]"));
      j.gpu_indices.push_back(g->indices);
      j.shard_counts.push_back(g->shards);
      j.shard_gpus.push_back(g->shard_indices);
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
