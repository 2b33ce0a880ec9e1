#include "slurm/engine_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/size.h"
#include "doc/document.h"
#include "doc/reader.h"
#include "efficiency/config_reader.h"
#include "scheduler/queue/queue_policy.h"
#include "scheduler/registry.h"

namespace stoker::slurm {
namespace {

// Every value is read through the document reader, so errors read
// "FILE:LINE:COLUMN: path: what" (doc/reader.h).

Result<std::string> Url(const doc::Reader& n) {
  Result<std::string> text = n.String();
  if (!text.ok()) return text.status();
  const std::string& s = *text;
  if (!s.starts_with("http://") && !s.starts_with("https://")) {
    return n.Error("'" + s.substr(0, 80) + "' is not an http(s):// URL");
  }
  if (s.size() > 512) return n.Error("longer than 512 characters");
  return text;
}

// The optional duration `key`, between `least` and `most`.
Status Between(const doc::Reader& n, const char* key, Duration least, Duration most,
               Duration* out) {
  auto f = n.Field(key);
  if (!f) return Status::Ok();
  STOKER_ASSIGN_OR_RETURN(Duration d, f->DurationValue());
  if (d < least || d > most) {
    return f->Error("must be between " + FormatDuration(least) + " and " + FormatDuration(most));
  }
  *out = d;
  return Status::Ok();
}

Status LoadAgents(const doc::Reader& n, AgentsConfig& a) {
  STOKER_RETURN_IF_ERROR(n.Keys({"url", "nodes", "timeout", "parallel"}));
  if (auto u = n.Field("url")) {
    STOKER_ASSIGN_OR_RETURN(a.url, Url(*u));
  }
  if (auto nodes = n.Field("nodes")) {
    STOKER_ASSIGN_OR_RETURN(const auto members, nodes->Members());
    for (const auto& [node, url] : members) {
      STOKER_ASSIGN_OR_RETURN(a.nodes[node], Url(url));
    }
  }
  STOKER_RETURN_IF_ERROR(
      Between(n, "timeout", std::chrono::milliseconds(100), std::chrono::minutes(1), &a.timeout));
  if (auto f = n.Field("parallel")) {
    STOKER_ASSIGN_OR_RETURN(double v, f->Double());
    if (v < 1 || v > 256 || v != std::floor(v)) {
      return f->Error("must be a whole number in 1..256");
    }
    a.parallel = static_cast<int>(v);
  }
  return Status::Ok();
}

Status LoadReclaim(const doc::Reader& n, SlurmReclaimOptions& r) {
  STOKER_RETURN_IF_ERROR(
      n.Keys({"idle", "memory_held", "exempt_partitions", "exempt_qos", "hook", "audit_log"}));
  if (auto idle = n.Field("idle")) {
    STOKER_RETURN_IF_ERROR(efficiency::LoadIdleReclaim(*idle, r.idle));
  }
  if (auto m = n.Field("memory_held")) {
    STOKER_RETURN_IF_ERROR(efficiency::LoadIdleReclaim(*m, r.memory_held, {"min_memory"}));
    if (auto f = m->Field("min_memory")) {
      STOKER_ASSIGN_OR_RETURN(std::string text, f->String());
      auto mib = ParseSizeMib(text);
      if (!mib.ok()) return f->Error(mib.status().message());
      r.held_memory_min_bytes = static_cast<uint64_t>(*mib) << 20;
    }
  }
  STOKER_RETURN_IF_ERROR(n.Get("exempt_partitions", &r.exempt_partitions));
  STOKER_RETURN_IF_ERROR(n.Get("exempt_qos", &r.exempt_qos));
  STOKER_RETURN_IF_ERROR(n.Get("hook", &r.hook));
  STOKER_RETURN_IF_ERROR(n.Get("audit_log", &r.audit_path));
  return Status::Ok();
}

Status LoadJobStats(const doc::Reader& n, bool& enabled, JobStatsOptions& j) {
  STOKER_RETURN_IF_ERROR(n.Keys({"enabled", "publish_every", "price_per_gpu_hour", "currency"}));
  STOKER_RETURN_IF_ERROR(n.Get("enabled", &enabled));
  Duration every = std::chrono::seconds(j.publish_every_s);
  STOKER_RETURN_IF_ERROR(
      Between(n, "publish_every", std::chrono::seconds(1), std::chrono::hours(24), &every));
  j.publish_every_s = std::chrono::duration_cast<std::chrono::seconds>(every).count();
  STOKER_RETURN_IF_ERROR(n.Get("price_per_gpu_hour", &j.price_per_gpu_hour, 0, 1e6));
  STOKER_RETURN_IF_ERROR(n.Get("currency", &j.currency));
  return Status::Ok();
}

Result<SlurmEngineConfig> Load(const doc::Reader& root) {
  SlurmEngineConfig c;
  if (root.value().is_null()) return c;
  STOKER_RETURN_IF_ERROR(root.Keys(
      {"slurm_conf", "bin_dir", "command_timeout", "cycle", "measure_every", "placement", "queue",
       "backfill", "manage_weights", "steer_held_jobs", "steer_marker", "keep_shards_apart",
       "submit_plan", "agents", "reclaim", "jobstats", "jobcomp_spool"}));
  STOKER_RETURN_IF_ERROR(root.Get("slurm_conf", &c.client.slurm_conf));
  STOKER_RETURN_IF_ERROR(root.Get("bin_dir", &c.client.bin_dir));
  STOKER_RETURN_IF_ERROR(Between(root, "command_timeout", std::chrono::seconds(1),
                                 std::chrono::minutes(10), &c.client.timeout));
  STOKER_RETURN_IF_ERROR(
      Between(root, "cycle", std::chrono::milliseconds(200), std::chrono::hours(1), &c.cycle));
  STOKER_RETURN_IF_ERROR(Between(root, "measure_every", std::chrono::milliseconds(200),
                                 std::chrono::hours(1), &c.measure_every));
  if (c.measure_every < c.cycle) {
    return root.FieldError("measure_every", "must not be shorter than cycle");
  }
  ControllerOptions& o = c.controller;
  STOKER_RETURN_IF_ERROR(root.Get("placement", &o.policy));
  STOKER_RETURN_IF_ERROR(root.Get("queue", &o.queue));
  STOKER_RETURN_IF_ERROR(root.Get("backfill", &o.backfill));
  STOKER_RETURN_IF_ERROR(root.Get("manage_weights", &o.manage_weights));
  STOKER_RETURN_IF_ERROR(root.Get("steer_held_jobs", &o.steer_held_jobs));
  STOKER_RETURN_IF_ERROR(root.Get("steer_marker", &o.steer_marker));
  STOKER_RETURN_IF_ERROR(root.Get("keep_shards_apart", &o.keep_shards_apart));
  STOKER_RETURN_IF_ERROR(root.Get("submit_plan", &o.submit_plan));
  // The plan's job_submit script holds only jobs carrying the marker, and the controller
  // releases only those: without a marker it would hold jobs nothing releases. The marker is
  // one line of the plan file, so it must not hold whitespace either.
  if (!o.submit_plan.empty()) {
    if (o.steer_marker.empty()) {
      return root.FieldError("steer_marker", "must not be empty when submit_plan is set");
    }
    if (std::any_of(o.steer_marker.begin(), o.steer_marker.end(),
                    [](unsigned char ch) { return std::isspace(ch) != 0; })) {
      return root.FieldError("steer_marker", "must not contain whitespace when submit_plan is set");
    }
  }
  // The job_submit script trusts a plan for a few cycles, at least 10 s: a stopped server's
  // plan stops steering (and holding) jobs soon after.
  o.submit_plan_valid_s = std::max<int64_t>(
      10, 5 * std::chrono::duration_cast<std::chrono::seconds>(c.cycle).count() + 1);
  if (auto p = scheduler::CreatePlacementPolicy(o.policy, {}); !p.ok()) {
    return root.FieldError("placement", p.status().message());
  }
  if (auto q = queue::CreateQueuePolicy(o.queue); !q.ok()) {
    return root.FieldError("queue", q.status().message());
  }
  if (auto a = root.Field("agents")) STOKER_RETURN_IF_ERROR(LoadAgents(*a, c.agents));
  if (auto r = root.Field("reclaim")) {
    c.reclaim_enabled = true;
    STOKER_RETURN_IF_ERROR(LoadReclaim(*r, c.reclaim));
  }
  if (auto j = root.Field("jobstats")) {
    STOKER_RETURN_IF_ERROR(LoadJobStats(*j, c.jobstats_enabled, c.jobstats));
  }
  STOKER_RETURN_IF_ERROR(root.Get("jobcomp_spool", &c.jobcomp_spool));
  return c;
}

}  // namespace

std::string AgentsConfig::UrlFor(const std::string& node) const {
  if (auto it = nodes.find(node); it != nodes.end()) return it->second;
  std::string out = url;
  for (size_t at = out.find("{node}"); at != std::string::npos; at = out.find("{node}", at)) {
    out.replace(at, 6, node);
    at += node.size();
  }
  while (!out.empty() && out.back() == '/') out.pop_back();
  return out;
}

Result<SlurmEngineConfig> LoadSlurmEngineConfigYaml(std::string_view text,
                                                    std::string_view origin) {
  if (text.size() > efficiency::kMaxConfigBytes) {
    return InvalidArgument(std::string(origin) + ": " + doc::SizeText(efficiency::kMaxConfigBytes));
  }
  STOKER_ASSIGN_OR_RETURN(doc::Value root, doc::ParseYaml(text, origin));
  return Load(doc::Reader(root, std::string(origin)));
}

Result<SlurmEngineConfig> LoadSlurmEngineConfigFile(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(std::string text, doc::ReadText(path, efficiency::kMaxConfigBytes));
  return LoadSlurmEngineConfigYaml(text, path);
}

}  // namespace stoker::slurm
