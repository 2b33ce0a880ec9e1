#include "slurm/engine_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/size.h"
#include "efficiency/config_yaml.h"
#include "scheduler/queue/queue_policy.h"
#include "scheduler/registry.h"

namespace stoker::slurm {
namespace {

using efficiency::yaml::Bool;
using efficiency::yaml::CheckKeys;
using efficiency::yaml::Dur;
using efficiency::yaml::Number;
using efficiency::yaml::Scalar;
using efficiency::yaml::StringList;

constexpr size_t kMaxConfigBytes = size_t{1} << 20;

// Reads the optional field `key` of `n` with `read` into `out`.
template <typename T, typename F>
Status Opt(const YAML::Node& n, const char* key, const std::string& path, F read, T* out) {
  if (!n[key]) return Status::Ok();
  auto v = read(n[key], path.empty() ? std::string(key) : path + "." + key);
  if (!v.ok()) return v.status();
  *out = std::move(v).value();
  return Status::Ok();
}

Result<std::string> Url(const YAML::Node& n, const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(std::string s, Scalar(n, path));
  if (!s.starts_with("http://") && !s.starts_with("https://")) {
    return InvalidArgument(path + ": '" + s.substr(0, 80) + "' is not an http(s):// URL");
  }
  if (s.size() > 512) return InvalidArgument(path + ": longer than 512 characters");
  return s;
}

Result<Duration> Positive(const YAML::Node& n, const std::string& path, Duration least,
                          Duration most) {
  STOKER_ASSIGN_OR_RETURN(Duration d, Dur(n, path));
  if (d < least || d > most) {
    return InvalidArgument(path + ": must be between " + FormatDuration(least) + " and " +
                           FormatDuration(most));
  }
  return d;
}

Status LoadAgents(const YAML::Node& n, AgentsConfig& a) {
  const std::string p = "agents";
  STOKER_RETURN_IF_ERROR(CheckKeys(n, p, {"url", "nodes", "timeout", "parallel"}));
  STOKER_RETURN_IF_ERROR(Opt(n, "url", p, Url, &a.url));
  if (n["nodes"]) {
    if (!n["nodes"].IsMap()) return InvalidArgument(p + ".nodes: expected a mapping");
    for (const auto& kv : n["nodes"]) {
      const std::string node = kv.first.as<std::string>();
      STOKER_ASSIGN_OR_RETURN(a.nodes[node], Url(kv.second, p + ".nodes." + node));
    }
  }
  if (n["timeout"]) {
    STOKER_ASSIGN_OR_RETURN(a.timeout,
                            Positive(n["timeout"], p + ".timeout", std::chrono::milliseconds(100),
                                     std::chrono::minutes(1)));
  }
  if (n["parallel"]) {
    STOKER_ASSIGN_OR_RETURN(double v, Number(n["parallel"], p + ".parallel"));
    if (v < 1 || v > 256 || v != std::floor(v)) {
      return InvalidArgument(p + ".parallel: must be a whole number in 1..256");
    }
    a.parallel = static_cast<int>(v);
  }
  return Status::Ok();
}

Status LoadReclaim(const YAML::Node& n, SlurmReclaimOptions& r) {
  const std::string p = "reclaim";
  STOKER_RETURN_IF_ERROR(CheckKeys(
      n, p, {"idle", "memory_held", "exempt_partitions", "exempt_qos", "hook", "audit_log"}));
  if (n["idle"]) {
    STOKER_RETURN_IF_ERROR(efficiency::yaml::LoadIdleReclaim(n["idle"], p + ".idle", r.idle));
  }
  if (const YAML::Node m = n["memory_held"]) {
    STOKER_RETURN_IF_ERROR(
        efficiency::yaml::LoadIdleReclaim(m, p + ".memory_held", r.memory_held, {"min_memory"}));
    if (m["min_memory"]) {
      STOKER_ASSIGN_OR_RETURN(std::string text,
                              Scalar(m["min_memory"], p + ".memory_held.min_memory"));
      auto mib = ParseSizeMib(text);
      if (!mib.ok()) return mib.status().WithContext(p + ".memory_held.min_memory");
      r.held_memory_min_bytes = static_cast<uint64_t>(*mib) << 20;
    }
  }
  STOKER_RETURN_IF_ERROR(Opt(n, "exempt_partitions", p, StringList, &r.exempt_partitions));
  STOKER_RETURN_IF_ERROR(Opt(n, "exempt_qos", p, StringList, &r.exempt_qos));
  STOKER_RETURN_IF_ERROR(Opt(n, "hook", p, StringList, &r.hook));
  STOKER_RETURN_IF_ERROR(Opt(n, "audit_log", p, Scalar, &r.audit_path));
  return Status::Ok();
}

Status LoadJobStats(const YAML::Node& n, bool& enabled, JobStatsOptions& j) {
  const std::string p = "jobstats";
  STOKER_RETURN_IF_ERROR(
      CheckKeys(n, p, {"enabled", "publish_every", "price_per_gpu_hour", "currency"}));
  STOKER_RETURN_IF_ERROR(Opt(n, "enabled", p, Bool, &enabled));
  if (n["publish_every"]) {
    STOKER_ASSIGN_OR_RETURN(Duration d, Positive(n["publish_every"], p + ".publish_every",
                                                 std::chrono::seconds(1), std::chrono::hours(24)));
    j.publish_every_s = std::chrono::duration_cast<std::chrono::seconds>(d).count();
  }
  if (n["price_per_gpu_hour"]) {
    STOKER_ASSIGN_OR_RETURN(j.price_per_gpu_hour,
                            Number(n["price_per_gpu_hour"], p + ".price_per_gpu_hour"));
    if (j.price_per_gpu_hour < 0 || j.price_per_gpu_hour > 1e6) {
      return InvalidArgument(p + ".price_per_gpu_hour: must be in 0..1e6");
    }
  }
  STOKER_RETURN_IF_ERROR(Opt(n, "currency", p, Scalar, &j.currency));
  return Status::Ok();
}

Result<SlurmEngineConfig> Load(const YAML::Node& root) {
  SlurmEngineConfig c;
  if (!root || root.IsNull()) return c;
  STOKER_RETURN_IF_ERROR(CheckKeys(
      root, "<root>",
      {"slurm_conf", "bin_dir", "command_timeout", "cycle", "measure_every", "placement", "queue",
       "backfill", "manage_weights", "steer_held_jobs", "steer_marker", "keep_shards_apart",
       "submit_plan", "agents", "reclaim", "jobstats", "jobcomp_spool"}));
  STOKER_RETURN_IF_ERROR(Opt(root, "slurm_conf", "", Scalar, &c.client.slurm_conf));
  STOKER_RETURN_IF_ERROR(Opt(root, "bin_dir", "", Scalar, &c.client.bin_dir));
  if (root["command_timeout"]) {
    STOKER_ASSIGN_OR_RETURN(c.client.timeout,
                            Positive(root["command_timeout"], "command_timeout",
                                     std::chrono::seconds(1), std::chrono::minutes(10)));
  }
  if (root["cycle"]) {
    STOKER_ASSIGN_OR_RETURN(
        c.cycle,
        Positive(root["cycle"], "cycle", std::chrono::milliseconds(200), std::chrono::hours(1)));
  }
  if (root["measure_every"]) {
    STOKER_ASSIGN_OR_RETURN(c.measure_every,
                            Positive(root["measure_every"], "measure_every",
                                     std::chrono::milliseconds(200), std::chrono::hours(1)));
  }
  if (c.measure_every < c.cycle) {
    return InvalidArgument("measure_every: must not be shorter than cycle");
  }
  ControllerOptions& o = c.controller;
  STOKER_RETURN_IF_ERROR(Opt(root, "placement", "", Scalar, &o.policy));
  STOKER_RETURN_IF_ERROR(Opt(root, "queue", "", Scalar, &o.queue));
  STOKER_RETURN_IF_ERROR(Opt(root, "backfill", "", Bool, &o.backfill));
  STOKER_RETURN_IF_ERROR(Opt(root, "manage_weights", "", Bool, &o.manage_weights));
  STOKER_RETURN_IF_ERROR(Opt(root, "steer_held_jobs", "", Bool, &o.steer_held_jobs));
  STOKER_RETURN_IF_ERROR(Opt(root, "steer_marker", "", Scalar, &o.steer_marker));
  STOKER_RETURN_IF_ERROR(Opt(root, "keep_shards_apart", "", Bool, &o.keep_shards_apart));
  STOKER_RETURN_IF_ERROR(Opt(root, "submit_plan", "", Scalar, &o.submit_plan));
  // The plan's job_submit script holds only jobs carrying the marker, and the controller
  // releases only those: without a marker it would hold jobs nothing releases. The marker is
  // one line of the plan file, so it must not hold whitespace either.
  if (!o.submit_plan.empty()) {
    if (o.steer_marker.empty()) {
      return InvalidArgument("steer_marker: must not be empty when submit_plan is set");
    }
    if (std::any_of(o.steer_marker.begin(), o.steer_marker.end(),
                    [](unsigned char ch) { return std::isspace(ch) != 0; })) {
      return InvalidArgument("steer_marker: must not contain whitespace when submit_plan is set");
    }
  }
  // The job_submit script trusts a plan for a few cycles, at least 10 s: a stopped server's
  // plan stops steering (and holding) jobs soon after.
  o.submit_plan_valid_s = std::max<int64_t>(
      10, 5 * std::chrono::duration_cast<std::chrono::seconds>(c.cycle).count() + 1);
  if (auto p = scheduler::CreatePlacementPolicy(o.policy, {}); !p.ok()) {
    return InvalidArgument("placement: " + p.status().message());
  }
  if (auto q = queue::CreateQueuePolicy(o.queue); !q.ok()) {
    return InvalidArgument("queue: " + q.status().message());
  }
  if (root["agents"]) STOKER_RETURN_IF_ERROR(LoadAgents(root["agents"], c.agents));
  if (root["reclaim"]) {
    c.reclaim_enabled = true;
    STOKER_RETURN_IF_ERROR(LoadReclaim(root["reclaim"], c.reclaim));
  }
  if (root["jobstats"]) {
    STOKER_RETURN_IF_ERROR(LoadJobStats(root["jobstats"], c.jobstats_enabled, c.jobstats));
  }
  STOKER_RETURN_IF_ERROR(Opt(root, "jobcomp_spool", "", Scalar, &c.jobcomp_spool));
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
  if (text.size() > kMaxConfigBytes) {
    return InvalidArgument(std::string(origin) + ": larger than 1 MiB");
  }
  try {
    auto c = Load(YAML::Load(std::string(text)));
    if (!c.ok()) return c.status().WithContext(std::string(origin));
    return c;
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string(origin) + ":" + std::to_string(e.mark.line + 1) + ":" +
                           std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
}

Result<SlurmEngineConfig> LoadSlurmEngineConfigFile(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(std::string text, efficiency::yaml::ReadConfigFile(path));
  return LoadSlurmEngineConfigYaml(text, path);
}

}  // namespace stoker::slurm
