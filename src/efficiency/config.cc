#include "efficiency/config.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "doc/document.h"
#include "efficiency/config_reader.h"

namespace stoker::efficiency {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

// Durations and times are int64 nanoseconds; bounding them keeps every conversion defined.
constexpr double kMaxUnixSeconds = 4e9;

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

Status LoadIdleReclaim(const doc::Reader& n, IdleReclaimPolicy& p,
                       std::initializer_list<std::string_view> extra_keys) {
  std::vector<std::string_view> keys = {"enabled",
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
  keys.insert(keys.end(), extra_keys.begin(), extra_keys.end());
  STOKER_RETURN_IF_ERROR(n.Keys(keys));
  STOKER_RETURN_IF_ERROR(n.Get("enabled", &p.enabled));
  STOKER_RETURN_IF_ERROR(n.Get("dry_run", &p.dry_run));
  STOKER_RETURN_IF_ERROR(n.Get("warn_after", &p.warn_after));
  STOKER_RETURN_IF_ERROR(n.Get("act_after", &p.act_after));
  STOKER_RETURN_IF_ERROR(n.Get("max_sample_gap", &p.max_sample_gap));
  if (auto a = n.Field("action")) {
    STOKER_ASSIGN_OR_RETURN(std::string action, a->String());
    if (action == "requeue") {
      p.action = IdleReclaimPolicy::Action::kRequeue;
    } else if (action == "cancel") {
      p.action = IdleReclaimPolicy::Action::kCancel;
    } else {
      return a->Error("unknown action '" + action.substr(0, 64) + "' (requeue, cancel)");
    }
  }
  if (auto t = n.Field("idle_threshold")) {
    STOKER_ASSIGN_OR_RETURN(double v, t->Double());
    if (v < 0 || v > 100) return t->Error("must be in 0..100 %");
    p.idle_threshold = std::llround(v * 1000);
  }
  if (auto f = n.Field("min_idle_gpu_fraction")) {
    STOKER_ASSIGN_OR_RETURN(p.min_idle_gpu_fraction, f->Double());
    if (p.min_idle_gpu_fraction <= 0 || p.min_idle_gpu_fraction > 1) {
      return f->Error("must be in (0, 1]");
    }
  }
  STOKER_RETURN_IF_ERROR(n.Get("exempt_users", &p.exempt_users));
  STOKER_RETURN_IF_ERROR(n.Get("exempt_classes", &p.exempt_classes));
  STOKER_RETURN_IF_ERROR(n.Get("exempt_interactive", &p.exempt_interactive));
  STOKER_RETURN_IF_ERROR(n.Get("owner_webhook", &p.owner_webhook));
  if (p.act_after < p.warn_after) {
    return n.FieldError("act_after", "must not be shorter than warn_after");
  }
  return Status::Ok();
}

namespace {

// Every value is read through the document reader: errors carry the file, line, column and
// field path ("eff.yaml:4:13: zones.window: duration ..."); checks across fields name theirs.

// A map of name -> amount (prices per GPU hour, budgets) in micro-units.
Status GetIntMap(const doc::Reader& r, std::string_view key, std::map<std::string, int64_t>* out) {
  auto f = r.Field(key);
  if (!f) return Status::Ok();
  STOKER_ASSIGN_OR_RETURN(auto members, f->Members());
  out->clear();
  for (const auto& [name, v] : members) {
    STOKER_ASSIGN_OR_RETURN(double d, v.Double());
    if (d < 0) return v.Error("negative value");
    if (d > 1e12) return v.Error("above 1e12");
    (*out)[name] = static_cast<int64_t>(std::llround(d * 1e6));
  }
  return Status::Ok();
}

Status LoadZones(const doc::Reader& n, ZoneConfig& z) {
  STOKER_RETURN_IF_ERROR(
      n.Keys({"metric", "window", "min_coverage", "bands", "apply_consolidation"}));
  STOKER_RETURN_IF_ERROR(n.Get("apply_consolidation", &z.apply_consolidation));
  if (auto m = n.Field("metric")) {
    STOKER_ASSIGN_OR_RETURN(std::string name, m->String());
    auto metric = ParseActivityMetric(name);
    if (!metric.ok()) return m->Error(metric.status().message());
    z.metric = *metric;
  }
  STOKER_RETURN_IF_ERROR(n.Get("window", &z.window));
  STOKER_RETURN_IF_ERROR(n.Get("min_coverage", &z.min_coverage));
  if (auto bands = n.Field("bands")) {
    STOKER_RETURN_IF_ERROR(bands->Keys({"bronze", "silver", "gold", "hot"}));
    // Each band is {min, max} in percent; read all, then check they tile 0..100.
    struct Band {
      std::string name;
      double lo, hi;
    };
    std::vector<Band> seen;
    for (const char* name : {"bronze", "silver", "gold", "hot"}) {
      auto b = bands->Field(name);
      if (!b) continue;
      STOKER_RETURN_IF_ERROR(b->Keys({"min", "max"}));
      if (!b->Field("min") || !b->Field("max")) return b->Error("needs min and max");
      Band band{name, 0, 0};
      STOKER_RETURN_IF_ERROR(b->Get("min", &band.lo));
      STOKER_RETURN_IF_ERROR(b->Get("max", &band.hi));
      if (band.lo < 0 || band.hi > 100 || band.lo >= band.hi) {
        return b->Error("min/max must satisfy 0 <= min < max <= 100");
      }
      seen.push_back(band);
    }
    for (size_t i = 0; i < seen.size(); ++i) {
      for (size_t j = i + 1; j < seen.size(); ++j) {
        if (seen[i].lo < seen[j].hi && seen[j].lo < seen[i].hi) {
          std::ostringstream m;
          m << "overlaps " << seen[i].name << " (" << seen[j].lo << "-" << seen[j].hi << " vs "
            << seen[i].lo << "-" << seen[i].hi << ")";
          return bands->FieldError(seen[j].name, m.str());
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
      return bands->FieldError("bronze", "leaves a gap below silver");
    }
    if (const Band* b = find("silver"); b && std::llround(b->hi * 1000) != z.silver_max) {
      return bands->FieldError("silver", "leaves a gap below gold");
    }
    if (const Band* b = find("gold"); b && std::llround(b->hi * 1000) != z.gold_max) {
      return bands->FieldError("gold", "leaves a gap below hot");
    }
  }
  return n.Annotate(ValidateZones(z));
}

Status LoadOversub(const doc::Reader& n, OversubscriptionPolicy& p) {
  STOKER_RETURN_IF_ERROR(n.Keys({"max_ratio", "grace", "use_reclaimed_capacity"}));
  if (auto m = n.Field("max_ratio")) {
    STOKER_ASSIGN_OR_RETURN(double r, m->Double());
    // Rounded only when representable; anything else stays out of range for the check below.
    p.max_ratio_milli = r >= 0 && r <= 1e6 ? std::llround(r * 1000) : -1;
  }
  STOKER_RETURN_IF_ERROR(n.Get("grace", &p.grace));
  STOKER_RETURN_IF_ERROR(n.Get("use_reclaimed_capacity", &p.use_reclaimed_capacity));
  return n.Annotate(ValidateOversubscription(p));
}

// A rule's errors name it by name where it has one ("rule 'BadFor': for: ..."), after the
// position of the value at fault.
Result<AlertRule> LoadRule(const doc::Reader& n) {
  std::string who = n.path();
  if (n.value().is_map()) {
    std::string name;
    if (n.Get("name", &name).ok() && !name.empty()) who = "rule '" + name.substr(0, 64) + "'";
  }
  auto fail = [&who](const doc::Reader& at, const std::string& field, const std::string& what) {
    const std::string pos = at.Position();
    return InvalidArgument((pos.empty() ? "" : pos + ": ") + who + ": " + field + ": " + what);
  };
  if (!n.value().is_map()) return fail(n, "(rule)", "expected a mapping");
  for (const doc::Member& m : n.value().members()) {
    static const std::set<std::string> kAllowed = {"name", "grade",  "scope",  "when",
                                                   "for",  "labels", "summary"};
    if (!kAllowed.count(m.key)) return fail(n, m.key.substr(0, 64), "unknown field");
  }
  // A string field, or an error naming the rule.
  auto text = [&](const char* key, std::string* out) -> Status {
    auto f = n.Field(key);
    if (!f) return Status::Ok();
    auto s = f->String();
    if (!s.ok()) return fail(*f, key, "expected a string");
    *out = *s;
    return Status::Ok();
  };
  AlertRule rule;
  if (!n.Field("name")) return fail(n, "name", "missing");
  STOKER_RETURN_IF_ERROR(text("name", &rule.name));
  std::string s;
  if (auto f = n.Field("grade")) {
    STOKER_RETURN_IF_ERROR(text("grade", &s));
    auto grade = ParseGrade(s);
    if (!grade.ok()) return fail(*f, "grade", grade.status().message());
    rule.grade = *grade;
  }
  if (auto f = n.Field("scope")) {
    STOKER_RETURN_IF_ERROR(text("scope", &s));
    auto scope = kRuleScopeNames.Parse(s);
    if (!scope.ok()) return fail(*f, "scope", scope.status().message());
    rule.scope = *scope;
  }
  if (auto f = n.Field("for")) {
    STOKER_RETURN_IF_ERROR(text("for", &s));
    auto d = ParseDuration(s);
    if (!d.ok()) return fail(*f, "for", d.status().message());
    rule.for_duration = *d;
  }
  STOKER_RETURN_IF_ERROR(text("summary", &rule.summary));
  if (auto labels = n.Field("labels")) {
    auto members = labels->Members();
    if (!members.ok()) return fail(*labels, "labels", "expected a mapping");
    for (const auto& [k, v] : *members) {
      auto value = v.String();
      if (!value.ok()) return fail(v, "labels", "expected a string");
      rule.labels[k] = *value;
    }
  }
  auto when = n.Field("when");
  if (!when || !when->value().is_list()) {
    return fail(when ? *when : n, "when", "expected a list of conditions");
  }
  STOKER_ASSIGN_OR_RETURN(const std::vector<doc::Reader> conditions, when->Items());
  for (size_t i = 0; i < conditions.size(); ++i) {
    const doc::Reader& c = conditions[i];
    const std::string p = "when[" + std::to_string(i) + "]";
    if (!c.value().is_map() || !c.Field("metric") || !c.Field("op") || !c.Field("value")) {
      return fail(c, p, "needs metric, op and value");
    }
    Condition cond;
    auto metric = c.Field("metric")->String();
    if (!metric.ok()) return fail(*c.Field("metric"), p + ".metric", "expected a string");
    cond.metric = *metric;
    auto op = c.Field("op")->String();
    if (!op.ok()) return fail(*c.Field("op"), p + ".op", "expected a string");
    auto parsed = ParseCompareOp(*op);
    if (!parsed.ok()) return fail(*c.Field("op"), p + ".op", parsed.status().message());
    cond.op = *parsed;
    auto value = c.Field("value")->Double();
    if (!value.ok()) return fail(*c.Field("value"), p + ".value", "expected a finite number");
    cond.value = *value;
    rule.when.push_back(cond);
  }
  STOKER_RETURN_IF_ERROR(n.Annotate(ValidateRule(rule)));
  return rule;
}

// Unix seconds of a silence.
Status UnixTime(const doc::Reader& s, const char* key, WallTime* out) {
  auto f = s.Field(key);
  if (!f) return Status::Ok();
  STOKER_ASSIGN_OR_RETURN(double t, f->Double());
  if (t < 0 || t > kMaxUnixSeconds) return f->Error("not a Unix time");
  *out = WallTime(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(t)));
  return Status::Ok();
}

Status LoadAlerts(const doc::Reader& n, AlertingConfig& a, std::vector<Status>& rule_errors) {
  STOKER_RETURN_IF_ERROR(
      n.Keys({"builtin_rules", "rules", "silences", "group_by", "repeat_interval", "xid_hold"}));
  STOKER_RETURN_IF_ERROR(n.Get("builtin_rules", &a.builtin_rules));
  STOKER_RETURN_IF_ERROR(n.Get("group_by", &a.group_by));
  STOKER_RETURN_IF_ERROR(n.Get("repeat_interval", &a.repeat_interval));
  STOKER_RETURN_IF_ERROR(n.Get("xid_hold", &a.xid_hold));
  if (auto rules = n.Field("rules")) {
    STOKER_ASSIGN_OR_RETURN(const std::vector<doc::Reader> items, rules->Items());
    for (const doc::Reader& r : items) {
      auto rule = LoadRule(r);
      if (rule.ok()) {
        a.rules.push_back(std::move(rule).value());
      } else {
        rule_errors.push_back(rule.status());  // one bad rule never stops the engine
      }
    }
  }
  if (auto silences = n.Field("silences")) {
    STOKER_ASSIGN_OR_RETURN(const std::vector<doc::Reader> items, silences->Items());
    for (const doc::Reader& s : items) {
      STOKER_RETURN_IF_ERROR(s.Keys({"matchers", "starts_at", "ends_at", "comment"}));
      Silence silence;
      auto matchers = s.Field("matchers");
      if (!matchers || !matchers->value().is_map() || matchers->value().members().empty()) {
        return s.FieldError("matchers", "needs at least one label: value");
      }
      STOKER_ASSIGN_OR_RETURN(const auto members, matchers->Members());
      for (const auto& [k, v] : members) {
        STOKER_ASSIGN_OR_RETURN(silence.matchers[k], v.String());
      }
      // Times are Unix seconds; a silence without ends_at lasts until removed.
      silence.ends_at = WallTime::max();
      STOKER_RETURN_IF_ERROR(UnixTime(s, "starts_at", &silence.starts_at));
      STOKER_RETURN_IF_ERROR(UnixTime(s, "ends_at", &silence.ends_at));
      if (silence.ends_at <= silence.starts_at) {
        return s.FieldError("ends_at", "not after starts_at");
      }
      STOKER_RETURN_IF_ERROR(s.Get("comment", &silence.comment));
      a.silences.push_back(std::move(silence));
    }
  }
  return Status::Ok();
}

Status LoadMarket(const doc::Reader& n, MarketConfig& m) {
  STOKER_RETURN_IF_ERROR(n.Keys({"guaranteed_price", "preemptible_price", "reclaimed_discount_pct",
                                 "budgets", "teams", "charge_interval"}));
  if (auto teams = n.Field("teams")) {
    if (!teams->value().is_map()) return teams->Error("expected a mapping user: team");
    STOKER_ASSIGN_OR_RETURN(const auto members, teams->Members());
    for (const auto& [user, team] : members) {
      STOKER_ASSIGN_OR_RETURN(m.teams[user], team.String());
    }
  }
  if (auto f = n.Field("charge_interval")) {
    STOKER_ASSIGN_OR_RETURN(Duration d, f->DurationValue());
    if (d < std::chrono::seconds(1)) return f->Error("must be at least 1s");
    m.charge_interval = d;
  }
  STOKER_RETURN_IF_ERROR(GetIntMap(n, "guaranteed_price", &m.guaranteed_price));
  STOKER_RETURN_IF_ERROR(GetIntMap(n, "preemptible_price", &m.preemptible_price));
  STOKER_RETURN_IF_ERROR(GetIntMap(n, "budgets", &m.budgets));
  if (auto f = n.Field("reclaimed_discount_pct")) {
    STOKER_ASSIGN_OR_RETURN(double d, f->Double());
    if (d < 0 || d > 100) return f->Error("must be in 0..100");
    m.reclaimed_discount_pct = std::llround(d);
  }
  return Status::Ok();
}

Result<EfficiencyConfig> LoadFromDocument(const doc::Reader& root) {
  EfficiencyConfig cfg;
  if (root.value().is_null()) {
    cfg.alerting.rules = BuiltinRules();
    return cfg;
  }
  STOKER_RETURN_IF_ERROR(root.Keys({"zones", "idle_reclaim", "oversubscription", "alerts", "market",
                                    "price_per_gpu_hour", "service"}));
  if (auto z = root.Field("zones")) STOKER_RETURN_IF_ERROR(LoadZones(*z, cfg.zones));
  if (auto i = root.Field("idle_reclaim")) STOKER_RETURN_IF_ERROR(LoadIdleReclaim(*i, cfg.idle));
  if (auto o = root.Field("oversubscription")) STOKER_RETURN_IF_ERROR(LoadOversub(*o, cfg.oversub));
  if (auto a = root.Field("alerts")) {
    STOKER_RETURN_IF_ERROR(LoadAlerts(*a, cfg.alerting, cfg.rule_errors));
  }
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
  if (auto m = root.Field("market")) STOKER_RETURN_IF_ERROR(LoadMarket(*m, cfg.market));
  if (auto sv = root.Field("service")) {
    STOKER_RETURN_IF_ERROR(sv->Keys({"evaluate_every", "keep_samples"}));
    if (auto f = sv->Field("evaluate_every")) {
      STOKER_ASSIGN_OR_RETURN(Duration d, f->DurationValue());
      if (d < std::chrono::milliseconds(100)) return f->Error("must be at least 100ms");
      cfg.service.evaluate_every = d;
    }
    if (auto f = sv->Field("keep_samples")) {
      STOKER_ASSIGN_OR_RETURN(double v, f->Double());
      if (v < 0 || v > 1e8) return f->Error("must be in 0..1e8");
      cfg.service.keep_samples = static_cast<size_t>(v);
    }
  }
  STOKER_RETURN_IF_ERROR(GetIntMap(root, "price_per_gpu_hour", &cfg.price_per_gpu_hour_micro));
  return cfg;
}

}  // namespace

Result<EfficiencyConfig> LoadConfigYaml(std::string_view text, std::string_view origin) {
  STOKER_ASSIGN_OR_RETURN(doc::Value root, doc::ParseYaml(text, origin));
  return LoadFromDocument(doc::Reader(root, std::string(origin)));
}

Result<EfficiencyConfig> LoadConfigFile(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(std::string text, doc::ReadText(path, kMaxConfigBytes));
  return LoadConfigYaml(text, path);
}

}  // namespace stoker::efficiency
