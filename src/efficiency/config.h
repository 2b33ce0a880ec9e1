#pragma once
// Configuration of the efficiency engine: zone bands and windows, idle-reclaim policy,
// oversubscription, alert rules and the compute market. Loaded from YAML (docs/efficiency.md)
// and validated up front: every error names the section, rule and field it is about.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/duration.h"  // ParseDuration / FormatDuration: the one duration grammar
#include "core/enum_table.h"
#include "core/gpu.h"
#include "core/status.h"

namespace stoker::efficiency {

// Which activity signal drives the zones (core/gpu.h).
using stoker::ActivityMetric;
using stoker::ActivityMetricName;
using stoker::kActivityMetricNames;
using stoker::ParseActivityMetric;

// Bands in milli-percent (0..100000). Defaults follow the issue: gold 70-90 %, silver 50-70 %,
// bronze < 50 %, hot > 90 %. Bands must tile 0..100 % without overlap.
struct ZoneConfig {
  ActivityMetric metric = ActivityMetric::kAuto;
  Duration window = std::chrono::minutes(15);
  // A zone is only assigned once the window holds this much history; before that it is "unknown".
  Duration min_coverage = std::chrono::minutes(5);
  int64_t bronze_max = 50'000;  // bronze: [0, bronze_max)
  int64_t silver_max = 70'000;  // silver: [bronze_max, silver_max)
  int64_t gold_max = 90'000;    // gold: [silver_max, gold_max]; hot: above
  // The server applies the consolidation plan: planned one-GPU jobs run as shares from their
  // next start (movable ones are restarted at once). false: the plan is only shown.
  bool apply_consolidation = true;
};

struct IdleReclaimPolicy {
  bool enabled = true;
  bool dry_run = false;
  Duration warn_after = std::chrono::minutes(60);
  Duration act_after = std::chrono::minutes(120);
  enum class Action : uint8_t { kRequeue, kCancel } action = Action::kRequeue;
  // A GPU is idle in a sample when activity <= this (milli-percent); 0 = "every sample 0 %".
  int64_t idle_threshold = 0;
  // Fraction (0..1] of the job's GPUs that must be idle: 1.0 = all of them.
  double min_idle_gpu_fraction = 1.0;
  // A hole longer than this in a job's samples restarts its idle clock: no data is no evidence.
  Duration max_sample_gap = std::chrono::minutes(5);
  std::vector<std::string> exempt_users;
  std::vector<std::string> exempt_classes;
  bool exempt_interactive = true;
  std::string owner_webhook;  // optional URL; the caller's Notifier posts to it
};

struct OversubscriptionPolicy {
  // Total commitments on one GPU, in milli-GPU per GPU; 1000 = no oversubscription (the
  // default: co-located processes share GPU memory, so an operator turns it on). Max 1500.
  int64_t max_ratio_milli = 1000;
  Duration grace = std::chrono::minutes(2);
  bool use_reclaimed_capacity = true;
};

enum class Grade : uint8_t { kYellow, kOrange, kRed };
inline constexpr EnumTable<Grade, 3> kGradeNames{
    "grade",
    {{{Grade::kYellow, "yellow"}, {Grade::kOrange, "orange"}, {Grade::kRed, "red"}}},
    EnumCase::kInsensitive};
constexpr const auto& NamesOf(Grade) { return kGradeNames; }
inline const char* GradeName(Grade g) { return kGradeNames.CName(g); }
inline Result<Grade> ParseGrade(std::string_view name) { return kGradeNames.Parse(name); }

enum class CompareOp : uint8_t { kLess, kLessEqual, kGreater, kGreaterEqual, kEqual, kNotEqual };
inline constexpr EnumTable<CompareOp, 6> kCompareOpNames{"operator",
                                                         {{{CompareOp::kLess, "<"},
                                                           {CompareOp::kLessEqual, "<="},
                                                           {CompareOp::kGreater, ">"},
                                                           {CompareOp::kGreaterEqual, ">="},
                                                           {CompareOp::kEqual, "=="},
                                                           {CompareOp::kNotEqual, "!="}}}};
constexpr const auto& NamesOf(CompareOp) { return kCompareOpNames; }
inline Result<CompareOp> ParseCompareOp(std::string_view op) { return kCompareOpNames.Parse(op); }
inline const char* CompareOpName(CompareOp op) { return kCompareOpNames.CName(op); }
bool Compare(double lhs, CompareOp op, double rhs);

// What a rule is evaluated for: each GPU, each job, or the whole cluster.
enum class RuleScope : uint8_t { kGpu, kJob, kCluster };
inline constexpr EnumTable<RuleScope, 3> kRuleScopeNames{
    "scope",
    {{{RuleScope::kGpu, "gpu"}, {RuleScope::kJob, "job"}, {RuleScope::kCluster, "cluster"}}}};
constexpr const auto& NamesOf(RuleScope) { return kRuleScopeNames; }
inline const char* RuleScopeName(RuleScope s) { return kRuleScopeNames.CName(s); }

struct Condition {
  std::string metric;  // one of KnownSignals(scope)
  CompareOp op = CompareOp::kLess;
  double value = 0;
};

struct AlertRule {
  std::string name;
  Grade grade = Grade::kYellow;
  RuleScope scope = RuleScope::kGpu;
  std::vector<Condition> when;  // all must hold
  Duration for_duration{0};
  std::map<std::string, std::string> labels;
  std::string summary;
};

struct Silence {
  std::string id;                               // set by AlertEngine::AddSilence when empty
  std::map<std::string, std::string> matchers;  // label -> exact value
  WallTime starts_at{};
  WallTime ends_at{};
  std::string comment;
};

struct AlertingConfig {
  std::vector<AlertRule> rules;
  std::vector<Silence> silences;
  std::vector<std::string> group_by = {"alertname"};
  Duration repeat_interval = std::chrono::hours(4);
  Duration xid_hold = std::chrono::minutes(10);  // a fatal XID keeps its GPU red this long
  bool builtin_rules = true;
};

struct MarketConfig {
  // micro-credits per GPU-hour, by GPU model ("H100", "A100", "*" = any) and tier.
  std::map<std::string, int64_t> guaranteed_price;
  std::map<std::string, int64_t> preemptible_price;
  int64_t reclaimed_discount_pct = 50;       // reclaimed capacity sold at this % off preemptible
  std::map<std::string, int64_t> budgets;    // team -> initial micro-credits
  std::map<std::string, std::string> teams;  // user -> team (default: the user's own name)
  // Running jobs are charged at least this often (and when they end).
  Duration charge_interval = std::chrono::hours(1);
  bool enabled() const { return !budgets.empty(); }
  std::string TeamOf(const std::string& user) const {
    auto it = teams.find(user);
    return it == teams.end() ? user : it->second;
  }
};

// The engine inside the server (efficiency/server_bridge.h).
struct ServiceConfig {
  Duration evaluate_every = std::chrono::seconds(15);  // alerts, reclaim, charges
  size_t keep_samples = 200'000;  // recorded samples kept in memory for `stoker report`
};

struct EfficiencyConfig {
  ZoneConfig zones;
  IdleReclaimPolicy idle;
  OversubscriptionPolicy oversub;
  AlertingConfig alerting;
  MarketConfig market;
  ServiceConfig service;
  // Per-GPU-hour cost for reports (currency units x 1e6, by model; "*" = default).
  std::map<std::string, int64_t> price_per_gpu_hour_micro;
  // Invalid alert rules found at load: they are dropped, the rest of the engine runs.
  std::vector<Status> rule_errors;
};

Status ValidateZones(const ZoneConfig& z);
// max_ratio within [1.0, 1.5], grace not negative; the message names the field. Used by the
// loader and by callers that set the policy from flags.
Status ValidateOversubscription(const OversubscriptionPolicy& p);

// Signals a rule condition may name, per scope (the list the loader checks against).
const std::vector<std::string>& KnownSignals(RuleScope scope);
// Checks one rule; the message names the rule and the field.
Status ValidateRule(const AlertRule& rule);
// The built-in rules of the issue (yellow dip, orange waste, red hardware/heat/backlog).
std::vector<AlertRule> BuiltinRules();

// Loads YAML text; `origin` (a file name) prefixes error messages. Bad alert rules do not fail
// the load: they land in rule_errors. Anything else that is wrong fails it.
Result<EfficiencyConfig> LoadConfigYaml(std::string_view text, std::string_view origin = "config");
Result<EfficiencyConfig> LoadConfigFile(const std::string& path);

}  // namespace stoker::efficiency
