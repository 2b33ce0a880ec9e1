#include "efficiency/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "efficiency/config_yaml.h"

namespace stoker::efficiency {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

// Durations and times are int64 nanoseconds; bounding them keeps every conversion defined.
constexpr double kMaxUnixSeconds = 4e9;

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

bool Compare(double lhs, CompareOp op, double rhs) {
  switch (op) {
    case CompareOp::kLess:
      return lhs < rhs;
    case CompareOp::kLessEqual:
      return lhs <= rhs;
    case CompareOp::kGreater:
      return lhs > rhs;
    case CompareOp::kGreaterEqual:
      return lhs >= rhs;
    case CompareOp::kEqual:
      return lhs == rhs;
    case CompareOp::kNotEqual:
      return lhs != rhs;
  }
  return false;
}

Status ValidateOversubscription(const OversubscriptionPolicy& p) {
  if (p.max_ratio_milli < 1000 || p.max_ratio_milli > 1500) {
    return InvalidArgument("oversubscription.max_ratio: must be in [1.0, 1.5], got " +
                           std::to_string(static_cast<double>(p.max_ratio_milli) / 1000.0));
  }
  if (p.grace < Duration{0}) return InvalidArgument("oversubscription.grace: must not be negative");
  return Status::Ok();
}

Status ValidateZones(const ZoneConfig& z) {
  if (z.window <= Duration{0}) return InvalidArgument("zones.window: must be positive");
  if (z.min_coverage < Duration{0}) return InvalidArgument("zones.min_coverage: negative duration");
  if (z.min_coverage > z.window) {
    return InvalidArgument("zones.min_coverage: longer than zones.window");
  }
  if (z.bronze_max <= 0 || z.bronze_max > 100'000) {
    return InvalidArgument("zones.bands.bronze: max must be in (0, 100]");
  }
  if (z.silver_max <= z.bronze_max) {
    return InvalidArgument(
        "zones.bands.silver: overlaps bronze or is empty (silver must lie above bronze)");
  }
  if (z.gold_max <= z.silver_max) {
    return InvalidArgument(
        "zones.bands.gold: overlaps silver or is empty (gold must lie above silver)");
  }
  if (z.gold_max > 100'000) return InvalidArgument("zones.bands.gold: max above 100");
  return Status::Ok();
}

const std::vector<std::string>& KnownSignals(RuleScope scope) {
  static const std::vector<std::string> kGpu = {
      "activity",     "gpu_util",        "sm_active",     "tensor_active", "dram_bw_util",
      "mem_util",     "memory_used_pct", "temperature_c", "power_w",       "allocated",
      "memory_bound", "xid_fatal",       "gpu_lost"};
  static const std::vector<std::string> kJob = {
      "activity", "idle", "gpus", "sm_active", "tensor_active", "dram_bw_util", "memory_bound"};
  static const std::vector<std::string> kCluster = {"backlog_wait_s", "idle_gpus", "pending_jobs"};
  switch (scope) {
    case RuleScope::kGpu:
      return kGpu;
    case RuleScope::kJob:
      return kJob;
    case RuleScope::kCluster:
      return kCluster;
  }
  return kCluster;
}

Status ValidateRule(const AlertRule& rule) {
  const std::string who =
      "rule '" + (rule.name.empty() ? std::string("<unnamed>") : rule.name) + "'";
  if (rule.name.empty()) return InvalidArgument(who + ": name: missing");
  if (rule.when.empty()) return InvalidArgument(who + ": when: needs at least one condition");
  if (rule.for_duration < Duration{0}) return InvalidArgument(who + ": for: negative duration");
  const auto& known = KnownSignals(rule.scope);
  for (size_t i = 0; i < rule.when.size(); ++i) {
    const auto& c = rule.when[i];
    if (std::find(known.begin(), known.end(), c.metric) == known.end()) {
      return InvalidArgument(who + ": when[" + std::to_string(i) + "].metric: unknown metric '" +
                             c.metric + "' for scope " + RuleScopeName(rule.scope));
    }
    if (!std::isfinite(c.value)) {
      return InvalidArgument(who + ": when[" + std::to_string(i) + "].value: not a finite number");
    }
  }
  return Status::Ok();
}

std::vector<AlertRule> BuiltinRules() {
  std::vector<AlertRule> r;
  auto add = [&](std::string name, Grade g, RuleScope scope, std::vector<Condition> when,
                 Duration for_d, std::string summary) {
    AlertRule rule;
    rule.name = std::move(name);
    rule.grade = g;
    rule.scope = scope;
    rule.when = std::move(when);
    rule.for_duration = for_d;
    rule.summary = std::move(summary);
    r.push_back(std::move(rule));
  };
  using CO = CompareOp;
  add("GpuActivityDip", Grade::kYellow, RuleScope::kGpu,
      {{"allocated", CO::kEqual, 1}, {"activity", CO::kLess, 30}}, minutes(2),
      "short dip: activity below 30 % on an allocated GPU for 2 minutes");
  add("GpuSmWaste", Grade::kOrange, RuleScope::kGpu,
      {{"gpu_util", CO::kGreaterEqual, 50}, {"sm_active", CO::kLess, 60}}, minutes(15),
      "busy GPU with SM activity below 60 % for 15 minutes");
  add("GpuTensorWaste", Grade::kOrange, RuleScope::kGpu,
      {{"gpu_util", CO::kGreaterEqual, 50},
       {"tensor_active", CO::kLess, 60},
       {"tensor_active", CO::kGreater, 0}},
      minutes(15), "busy GPU using tensor cores below 60 % for 15 minutes");
  add("GpuMemoryBandwidthWaste", Grade::kOrange, RuleScope::kGpu,
      {{"memory_bound", CO::kEqual, 1}, {"dram_bw_util", CO::kLess, 70}}, minutes(15),
      "memory-bound job with DRAM bandwidth below 70 % for 15 minutes");
  add("JobGpusIdle", Grade::kOrange, RuleScope::kJob, {{"idle", CO::kEqual, 1}}, minutes(15),
      "all of the job's GPUs idle for 15 minutes");
  add("GpuFatalXid", Grade::kRed, RuleScope::kGpu, {{"xid_fatal", CO::kEqual, 1}}, Duration{0},
      "fatal XID (hardware or node action, telemetry.md 6.3)");
  add("GpuLost", Grade::kRed, RuleScope::kGpu, {{"gpu_lost", CO::kEqual, 1}}, Duration{0},
      "GPU lost (NVML GPU_IS_LOST)");
  add("GpuOverheat", Grade::kRed, RuleScope::kGpu, {{"temperature_c", CO::kGreater, 85}},
      minutes(1), "temperature above 85 C for 1 minute");
  add("ClusterBacklog", Grade::kRed, RuleScope::kCluster, {{"backlog_wait_s", CO::kGreater, 1800}},
      Duration{0}, "jobs waiting over 30 minutes while GPUs that could run them sit idle");
  return r;
}

namespace yaml {

// yaml-cpp throws; every access goes through these helpers so errors carry the field path.
Result<std::string> Scalar(const YAML::Node& n, const std::string& path) {
  if (!n.IsScalar()) return InvalidArgument(path + ": expected a scalar");
  return n.Scalar();
}

Result<double> Number(const YAML::Node& n, const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(std::string s, Scalar(n, path));
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v)) {
    return InvalidArgument(path + ": expected a number, got '" + s + "'");
  }
  return v;
}

Result<bool> Bool(const YAML::Node& n, const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(std::string s, Scalar(n, path));
  const std::string l = Lower(s);
  if (l == "true" || l == "yes" || l == "on") return true;
  if (l == "false" || l == "no" || l == "off") return false;
  return InvalidArgument(path + ": expected true or false, got '" + s + "'");
}

Result<Duration> Dur(const YAML::Node& n, const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(std::string s, Scalar(n, path));
  auto d = ParseDuration(s);
  if (!d.ok()) return d.status().WithContext(path);
  return d;
}

Result<std::vector<std::string>> StringList(const YAML::Node& n, const std::string& path) {
  if (!n.IsSequence()) return InvalidArgument(path + ": expected a list");
  std::vector<std::string> out;
  for (size_t i = 0; i < n.size(); ++i) {
    STOKER_ASSIGN_OR_RETURN(std::string s, Scalar(n[i], path + "[" + std::to_string(i) + "]"));
    out.push_back(std::move(s));
  }
  return out;
}

Status CheckKeys(const YAML::Node& n, const std::string& path, std::set<std::string> allowed) {
  if (!n.IsMap()) return InvalidArgument(path + ": expected a mapping");
  for (const auto& kv : n) {
    const std::string key = kv.first.as<std::string>();
    if (!allowed.count(key)) return InvalidArgument(path + "." + key + ": unknown field");
  }
  return Status::Ok();
}

Status LoadIdleReclaim(const YAML::Node& n, const std::string& path, IdleReclaimPolicy& p,
                       const std::set<std::string>& extra_keys) {
  std::set<std::string> keys = {"enabled",
                                "dry_run",
                                "warn_after",
                                "act_after",
                                "action",
                                "idle_threshold",
                                "min_idle_gpu_fraction",
                                "max_sample_gap",
                                "exempt_users",
                                "exempt_classes",
                                "exempt_interactive",
                                "owner_webhook"};
  keys.insert(extra_keys.begin(), extra_keys.end());
  STOKER_RETURN_IF_ERROR(CheckKeys(n, path, std::move(keys)));
  if (n["enabled"]) {
    STOKER_ASSIGN_OR_RETURN(p.enabled, Bool(n["enabled"], path + ".enabled"));
  }
  if (n["dry_run"]) {
    STOKER_ASSIGN_OR_RETURN(p.dry_run, Bool(n["dry_run"], path + ".dry_run"));
  }
  if (n["warn_after"]) {
    STOKER_ASSIGN_OR_RETURN(p.warn_after, Dur(n["warn_after"], path + ".warn_after"));
  }
  if (n["act_after"]) {
    STOKER_ASSIGN_OR_RETURN(p.act_after, Dur(n["act_after"], path + ".act_after"));
  }
  if (n["max_sample_gap"]) {
    STOKER_ASSIGN_OR_RETURN(p.max_sample_gap, Dur(n["max_sample_gap"], path + ".max_sample_gap"));
  }
  if (n["action"]) {
    STOKER_ASSIGN_OR_RETURN(std::string a, Scalar(n["action"], path + ".action"));
    if (a == "requeue")
      p.action = IdleReclaimPolicy::Action::kRequeue;
    else if (a == "cancel")
      p.action = IdleReclaimPolicy::Action::kCancel;
    else
      return InvalidArgument(path + ".action: unknown action '" + a + "' (requeue, cancel)");
  }
  if (n["idle_threshold"]) {
    STOKER_ASSIGN_OR_RETURN(double v, Number(n["idle_threshold"], path + ".idle_threshold"));
    if (v < 0 || v > 100) return InvalidArgument(path + ".idle_threshold: must be in 0..100 %");
    p.idle_threshold = std::llround(v * 1000);
  }
  if (n["min_idle_gpu_fraction"]) {
    STOKER_ASSIGN_OR_RETURN(p.min_idle_gpu_fraction,
                            Number(n["min_idle_gpu_fraction"], path + ".min_idle_gpu_fraction"));
    if (p.min_idle_gpu_fraction <= 0 || p.min_idle_gpu_fraction > 1) {
      return InvalidArgument(path + ".min_idle_gpu_fraction: must be in (0, 1]");
    }
  }
  if (n["exempt_users"]) {
    STOKER_ASSIGN_OR_RETURN(p.exempt_users, StringList(n["exempt_users"], path + ".exempt_users"));
  }
  if (n["exempt_classes"]) {
    STOKER_ASSIGN_OR_RETURN(p.exempt_classes,
                            StringList(n["exempt_classes"], path + ".exempt_classes"));
  }
  if (n["exempt_interactive"]) {
    STOKER_ASSIGN_OR_RETURN(p.exempt_interactive,
                            Bool(n["exempt_interactive"], path + ".exempt_interactive"));
  }
  if (n["owner_webhook"]) {
    STOKER_ASSIGN_OR_RETURN(p.owner_webhook, Scalar(n["owner_webhook"], path + ".owner_webhook"));
  }
  if (p.act_after < p.warn_after) {
    return InvalidArgument(path + ".act_after: must not be shorter than warn_after");
  }
  return Status::Ok();
}

}  // namespace yaml

namespace {

using namespace yaml;

Result<std::map<std::string, int64_t>> IntMap(const YAML::Node& n, const std::string& path) {
  if (!n.IsMap()) return InvalidArgument(path + ": expected a mapping");
  std::map<std::string, int64_t> out;
  for (const auto& kv : n) {
    const std::string key = kv.first.as<std::string>();
    STOKER_ASSIGN_OR_RETURN(double v, Number(kv.second, path + "." + key));
    if (v < 0) return InvalidArgument(path + "." + key + ": negative value");
    if (v > 1e12) return InvalidArgument(path + "." + key + ": above 1e12");
    out[key] = static_cast<int64_t>(std::llround(v * 1e6));
  }
  return out;
}

Status LoadZones(const YAML::Node& n, ZoneConfig& z) {
  STOKER_RETURN_IF_ERROR(
      CheckKeys(n, "zones", {"metric", "window", "min_coverage", "bands", "apply_consolidation"}));
  if (n["apply_consolidation"]) {
    STOKER_ASSIGN_OR_RETURN(z.apply_consolidation,
                            Bool(n["apply_consolidation"], "zones.apply_consolidation"));
  }
  if (n["metric"]) {
    STOKER_ASSIGN_OR_RETURN(std::string m, Scalar(n["metric"], "zones.metric"));
    auto metric = ParseActivityMetric(m);
    if (!metric.ok()) return metric.status().WithContext("zones.metric");
    z.metric = *metric;
  }
  if (n["window"]) {
    STOKER_ASSIGN_OR_RETURN(z.window, Dur(n["window"], "zones.window"));
  }
  if (n["min_coverage"]) {
    STOKER_ASSIGN_OR_RETURN(z.min_coverage, Dur(n["min_coverage"], "zones.min_coverage"));
  }
  if (const YAML::Node bands = n["bands"]) {
    STOKER_RETURN_IF_ERROR(CheckKeys(bands, "zones.bands", {"bronze", "silver", "gold", "hot"}));
    // Each band is {min, max} in percent; read all, then check they tile 0..100.
    struct Band {
      std::string name;
      double lo, hi;
    };
    std::vector<Band> seen;
    for (const char* name : {"bronze", "silver", "gold", "hot"}) {
      const YAML::Node b = bands[name];
      if (!b) continue;
      const std::string p = std::string("zones.bands.") + name;
      STOKER_RETURN_IF_ERROR(CheckKeys(b, p, {"min", "max"}));
      if (!b["min"] || !b["max"]) return InvalidArgument(p + ": needs min and max");
      STOKER_ASSIGN_OR_RETURN(double lo, Number(b["min"], p + ".min"));
      STOKER_ASSIGN_OR_RETURN(double hi, Number(b["max"], p + ".max"));
      if (lo < 0 || hi > 100 || lo >= hi) {
        return InvalidArgument(p + ": min/max must satisfy 0 <= min < max <= 100");
      }
      seen.push_back({name, lo, hi});
    }
    for (size_t i = 0; i < seen.size(); ++i) {
      for (size_t j = i + 1; j < seen.size(); ++j) {
        if (seen[i].lo < seen[j].hi && seen[j].lo < seen[i].hi) {
          std::ostringstream m;
          m << "zones.bands." << seen[j].name << ": overlaps " << seen[i].name << " (" << seen[j].lo
            << "-" << seen[j].hi << " vs " << seen[i].lo << "-" << seen[i].hi << ")";
          return InvalidArgument(m.str());
        }
      }
    }
    auto find = [&](const char* name) -> const Band* {
      for (const auto& b : seen)
        if (b.name == name) return &b;
      return nullptr;
    };
    if (const Band* b = find("bronze")) z.bronze_max = std::llround(b->hi * 1000);
    if (const Band* b = find("silver")) {
      z.bronze_max = std::llround(b->lo * 1000);
      z.silver_max = std::llround(b->hi * 1000);
    }
    if (const Band* b = find("gold")) {
      z.silver_max = std::llround(b->lo * 1000);
      z.gold_max = std::llround(b->hi * 1000);
    }
    if (const Band* b = find("hot")) z.gold_max = std::llround(b->lo * 1000);
    if (const Band* b = find("bronze"); b && std::llround(b->hi * 1000) != z.bronze_max) {
      return InvalidArgument("zones.bands.bronze: leaves a gap below silver");
    }
    if (const Band* b = find("silver"); b && std::llround(b->hi * 1000) != z.silver_max) {
      return InvalidArgument("zones.bands.silver: leaves a gap below gold");
    }
    if (const Band* b = find("gold"); b && std::llround(b->hi * 1000) != z.gold_max) {
      return InvalidArgument("zones.bands.gold: leaves a gap below hot");
    }
  }
  return ValidateZones(z);
}

Status LoadOversub(const YAML::Node& n, OversubscriptionPolicy& p) {
  STOKER_RETURN_IF_ERROR(
      CheckKeys(n, "oversubscription", {"max_ratio", "grace", "use_reclaimed_capacity"}));
  if (n["max_ratio"]) {
    STOKER_ASSIGN_OR_RETURN(double r, Number(n["max_ratio"], "oversubscription.max_ratio"));
    // Rounded only when representable; anything else stays out of range for the check below.
    p.max_ratio_milli = r >= 0 && r <= 1e6 ? std::llround(r * 1000) : -1;
  }
  if (n["grace"]) {
    STOKER_ASSIGN_OR_RETURN(p.grace, Dur(n["grace"], "oversubscription.grace"));
  }
  if (n["use_reclaimed_capacity"]) {
    STOKER_ASSIGN_OR_RETURN(
        p.use_reclaimed_capacity,
        Bool(n["use_reclaimed_capacity"], "oversubscription.use_reclaimed_capacity"));
  }
  return ValidateOversubscription(p);
}

Result<AlertRule> LoadRule(const YAML::Node& n, size_t index) {
  std::string who = "alerts.rules[" + std::to_string(index) + "]";
  if (n.IsMap() && n["name"] && n["name"].IsScalar()) who = "rule '" + n["name"].Scalar() + "'";
  if (!n.IsMap()) return InvalidArgument(who + ": expected a mapping");
  for (const auto& kv : n) {
    const std::string key = kv.first.as<std::string>();
    static const std::set<std::string> kAllowed = {"name", "grade",  "scope",  "when",
                                                   "for",  "labels", "summary"};
    if (!kAllowed.count(key)) return InvalidArgument(who + ": " + key + ": unknown field");
  }
  AlertRule rule;
  if (!n["name"]) return InvalidArgument(who + ": name: missing");
  STOKER_ASSIGN_OR_RETURN(rule.name, Scalar(n["name"], who + ": name"));
  if (n["grade"]) {
    STOKER_ASSIGN_OR_RETURN(std::string g, Scalar(n["grade"], who + ": grade"));
    auto grade = ParseGrade(g);
    if (!grade.ok()) return grade.status().WithContext(who + ": grade");
    rule.grade = *grade;
  }
  if (n["scope"]) {
    STOKER_ASSIGN_OR_RETURN(std::string s, Scalar(n["scope"], who + ": scope"));
    auto scope = kRuleScopeNames.Parse(s);
    if (!scope.ok()) return scope.status().WithContext(who + ": scope");
    rule.scope = *scope;
  }
  if (n["for"]) {
    STOKER_ASSIGN_OR_RETURN(std::string f, Scalar(n["for"], who + ": for"));
    auto d = ParseDuration(f);
    if (!d.ok()) return d.status().WithContext(who + ": for");
    rule.for_duration = *d;
  }
  if (n["summary"]) {
    STOKER_ASSIGN_OR_RETURN(rule.summary, Scalar(n["summary"], who + ": summary"));
  }
  if (const YAML::Node labels = n["labels"]) {
    if (!labels.IsMap()) return InvalidArgument(who + ": labels: expected a mapping");
    for (const auto& kv : labels) {
      STOKER_ASSIGN_OR_RETURN(rule.labels[kv.first.as<std::string>()],
                              Scalar(kv.second, who + ": labels"));
    }
  }
  const YAML::Node when = n["when"];
  if (!when || !when.IsSequence())
    return InvalidArgument(who + ": when: expected a list of conditions");
  for (size_t i = 0; i < when.size(); ++i) {
    const std::string p = who + ": when[" + std::to_string(i) + "]";
    const YAML::Node c = when[i];
    if (!c.IsMap() || !c["metric"] || !c["op"] || !c["value"]) {
      return InvalidArgument(p + ": needs metric, op and value");
    }
    Condition cond;
    STOKER_ASSIGN_OR_RETURN(cond.metric, Scalar(c["metric"], p + ".metric"));
    STOKER_ASSIGN_OR_RETURN(std::string op, Scalar(c["op"], p + ".op"));
    auto parsed = ParseCompareOp(op);
    if (!parsed.ok()) return parsed.status().WithContext(p + ".op");
    cond.op = *parsed;
    STOKER_ASSIGN_OR_RETURN(cond.value, Number(c["value"], p + ".value"));
    rule.when.push_back(cond);
  }
  STOKER_RETURN_IF_ERROR(ValidateRule(rule));
  return rule;
}

Status LoadAlerts(const YAML::Node& n, AlertingConfig& a, std::vector<Status>& rule_errors) {
  STOKER_RETURN_IF_ERROR(
      CheckKeys(n, "alerts",
                {"builtin_rules", "rules", "silences", "group_by", "repeat_interval", "xid_hold"}));
  if (n["builtin_rules"]) {
    STOKER_ASSIGN_OR_RETURN(a.builtin_rules, Bool(n["builtin_rules"], "alerts.builtin_rules"));
  }
  if (n["group_by"]) {
    STOKER_ASSIGN_OR_RETURN(a.group_by, StringList(n["group_by"], "alerts.group_by"));
  }
  if (n["repeat_interval"]) {
    STOKER_ASSIGN_OR_RETURN(a.repeat_interval, Dur(n["repeat_interval"], "alerts.repeat_interval"));
  }
  if (n["xid_hold"]) {
    STOKER_ASSIGN_OR_RETURN(a.xid_hold, Dur(n["xid_hold"], "alerts.xid_hold"));
  }
  if (const YAML::Node rules = n["rules"]) {
    if (!rules.IsSequence()) return InvalidArgument("alerts.rules: expected a list");
    for (size_t i = 0; i < rules.size(); ++i) {
      auto rule = LoadRule(rules[i], i);
      if (rule.ok())
        a.rules.push_back(std::move(rule).value());
      else
        rule_errors.push_back(rule.status());  // one bad rule never stops the engine
    }
  }
  if (const YAML::Node silences = n["silences"]) {
    if (!silences.IsSequence()) return InvalidArgument("alerts.silences: expected a list");
    for (size_t i = 0; i < silences.size(); ++i) {
      const std::string p = "alerts.silences[" + std::to_string(i) + "]";
      const YAML::Node s = silences[i];
      STOKER_RETURN_IF_ERROR(CheckKeys(s, p, {"matchers", "starts_at", "ends_at", "comment"}));
      Silence silence;
      if (!s["matchers"] || !s["matchers"].IsMap() || s["matchers"].size() == 0) {
        return InvalidArgument(p + ".matchers: needs at least one label: value");
      }
      for (const auto& kv : s["matchers"]) {
        STOKER_ASSIGN_OR_RETURN(silence.matchers[kv.first.as<std::string>()],
                                Scalar(kv.second, p + ".matchers"));
      }
      // Times are Unix seconds; a silence without ends_at lasts until removed.
      silence.ends_at = WallTime::max();
      if (s["starts_at"]) {
        STOKER_ASSIGN_OR_RETURN(double t, Number(s["starts_at"], p + ".starts_at"));
        if (t < 0 || t > kMaxUnixSeconds) return InvalidArgument(p + ".starts_at: not a Unix time");
        silence.starts_at =
            WallTime(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(t)));
      }
      if (s["ends_at"]) {
        STOKER_ASSIGN_OR_RETURN(double t, Number(s["ends_at"], p + ".ends_at"));
        if (t < 0 || t > kMaxUnixSeconds) return InvalidArgument(p + ".ends_at: not a Unix time");
        silence.ends_at =
            WallTime(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(t)));
      }
      if (silence.ends_at <= silence.starts_at)
        return InvalidArgument(p + ".ends_at: not after starts_at");
      if (s["comment"]) {
        STOKER_ASSIGN_OR_RETURN(silence.comment, Scalar(s["comment"], p + ".comment"));
      }
      a.silences.push_back(std::move(silence));
    }
  }
  return Status::Ok();
}

Status LoadMarket(const YAML::Node& n, MarketConfig& m) {
  STOKER_RETURN_IF_ERROR(
      CheckKeys(n, "market",
                {"guaranteed_price", "preemptible_price", "reclaimed_discount_pct", "budgets",
                 "teams", "charge_interval"}));
  if (n["teams"]) {
    if (!n["teams"].IsMap()) return InvalidArgument("market.teams: expected a mapping user: team");
    for (const auto& kv : n["teams"]) {
      const std::string user = kv.first.as<std::string>();
      STOKER_ASSIGN_OR_RETURN(m.teams[user], Scalar(kv.second, "market.teams." + user));
    }
  }
  if (n["charge_interval"]) {
    STOKER_ASSIGN_OR_RETURN(std::string t, Scalar(n["charge_interval"], "market.charge_interval"));
    auto d = ParseDuration(t);
    if (!d.ok()) return d.status().WithContext("market.charge_interval");
    if (*d < std::chrono::seconds(1))
      return InvalidArgument("market.charge_interval: must be at least 1s");
    m.charge_interval = *d;
  }
  if (n["guaranteed_price"]) {
    STOKER_ASSIGN_OR_RETURN(m.guaranteed_price,
                            IntMap(n["guaranteed_price"], "market.guaranteed_price"));
  }
  if (n["preemptible_price"]) {
    STOKER_ASSIGN_OR_RETURN(m.preemptible_price,
                            IntMap(n["preemptible_price"], "market.preemptible_price"));
  }
  if (n["budgets"]) {
    STOKER_ASSIGN_OR_RETURN(m.budgets, IntMap(n["budgets"], "market.budgets"));
  }
  if (n["reclaimed_discount_pct"]) {
    STOKER_ASSIGN_OR_RETURN(double d,
                            Number(n["reclaimed_discount_pct"], "market.reclaimed_discount_pct"));
    if (d < 0 || d > 100)
      return InvalidArgument("market.reclaimed_discount_pct: must be in 0..100");
    m.reclaimed_discount_pct = std::llround(d);
  }
  return Status::Ok();
}

Result<EfficiencyConfig> LoadFromNode(const YAML::Node& root) {
  EfficiencyConfig cfg;
  if (root.IsNull()) {
    cfg.alerting.rules = BuiltinRules();
    return cfg;
  }
  STOKER_RETURN_IF_ERROR(CheckKeys(root, "<root>",
                                   {"zones", "idle_reclaim", "oversubscription", "alerts", "market",
                                    "price_per_gpu_hour", "service"}));
  if (root["zones"]) STOKER_RETURN_IF_ERROR(LoadZones(root["zones"], cfg.zones));
  if (root["idle_reclaim"])
    STOKER_RETURN_IF_ERROR(LoadIdleReclaim(root["idle_reclaim"], "idle_reclaim", cfg.idle));
  if (root["oversubscription"])
    STOKER_RETURN_IF_ERROR(LoadOversub(root["oversubscription"], cfg.oversub));
  std::vector<AlertRule> user_rules;
  if (root["alerts"])
    STOKER_RETURN_IF_ERROR(LoadAlerts(root["alerts"], cfg.alerting, cfg.rule_errors));
  if (cfg.alerting.builtin_rules) {
    std::vector<AlertRule> all = BuiltinRules();
    // A user rule with a built-in's name replaces it.
    for (auto& r : cfg.alerting.rules) {
      auto it = std::find_if(all.begin(), all.end(),
                             [&](const AlertRule& b) { return b.name == r.name; });
      if (it != all.end())
        *it = r;
      else
        all.push_back(r);
    }
    cfg.alerting.rules = std::move(all);
  }
  if (root["market"]) STOKER_RETURN_IF_ERROR(LoadMarket(root["market"], cfg.market));
  if (const YAML::Node sv = root["service"]) {
    STOKER_RETURN_IF_ERROR(CheckKeys(sv, "service", {"evaluate_every", "keep_samples"}));
    if (sv["evaluate_every"]) {
      STOKER_ASSIGN_OR_RETURN(std::string t,
                              Scalar(sv["evaluate_every"], "service.evaluate_every"));
      auto d = ParseDuration(t);
      if (!d.ok()) return d.status().WithContext("service.evaluate_every");
      if (*d < std::chrono::milliseconds(100))
        return InvalidArgument("service.evaluate_every: must be at least 100ms");
      cfg.service.evaluate_every = *d;
    }
    if (sv["keep_samples"]) {
      STOKER_ASSIGN_OR_RETURN(double v, Number(sv["keep_samples"], "service.keep_samples"));
      if (v < 0 || v > 1e8) return InvalidArgument("service.keep_samples: must be in 0..1e8");
      cfg.service.keep_samples = static_cast<size_t>(v);
    }
  }
  if (root["price_per_gpu_hour"]) {
    STOKER_ASSIGN_OR_RETURN(cfg.price_per_gpu_hour_micro,
                            IntMap(root["price_per_gpu_hour"], "price_per_gpu_hour"));
  }
  return cfg;
}

}  // namespace

Result<EfficiencyConfig> LoadConfigYaml(std::string_view text, std::string_view origin) {
  try {
    const YAML::Node root = YAML::Load(std::string(text));
    auto cfg = LoadFromNode(root);
    if (!cfg.ok()) return cfg.status().WithContext(origin);
    return cfg;
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string(origin) + ":" + std::to_string(e.mark.line + 1) + ": " +
                           e.msg);
  }
}

namespace yaml {

Result<std::string> ReadConfigFile(const std::string& path) {
  constexpr size_t kMaxBytes = size_t{1} << 20;
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": cannot open");
  // Read at most one byte past the bound: a huge file (or /dev/zero) is refused, not loaded.
  std::string text(kMaxBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxBytes) return InvalidArgument(path + ": larger than 1 MiB");
  return text;
}

}  // namespace yaml

Result<EfficiencyConfig> LoadConfigFile(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(std::string text, yaml::ReadConfigFile(path));
  return LoadConfigYaml(text, path);
}

}  // namespace stoker::efficiency
