#include "efficiency/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "efficiency/alerts.h"
#include "efficiency/idle_reclaim.h"
#include "efficiency/jobs.h"
#include "efficiency/market.h"
#include "efficiency/zones.h"
#include "support/enum_tables.h"

namespace stoker::efficiency {
namespace {

using namespace std::chrono_literals;

TEST(DurationTest, ParsesUnitsAndRejectsNegatives) {
  EXPECT_EQ(*ParseDuration("90s"), 90s);
  EXPECT_EQ(*ParseDuration("15m"), 15min);
  EXPECT_EQ(*ParseDuration("1h30m"), 90min);
  EXPECT_EQ(*ParseDuration("500ms"), 500ms);
  EXPECT_EQ(*ParseDuration("120"), 120s);
  EXPECT_FALSE(ParseDuration("-5m").ok());
  EXPECT_FALSE(ParseDuration("5 parsecs").ok());
  EXPECT_FALSE(ParseDuration("").ok());
  EXPECT_EQ(FormatDuration(90min), "1h30m");
  EXPECT_EQ(FormatDuration(0s), "0s");
}

TEST(ConfigTest, EmptyConfigHasDefaultsAndBuiltinRules) {
  auto c = LoadConfigYaml("");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->idle.warn_after, 60min);
  EXPECT_EQ(c->idle.act_after, 120min);
  EXPECT_EQ(c->zones.silver_max, 70'000);
  EXPECT_EQ(c->alerting.rules.size(), BuiltinRules().size());
}

TEST(ConfigTest, ParsesEverySection) {
  auto c = LoadConfigYaml(R"(
zones:
  metric: gpu_util
  window: 10m
  min_coverage: 1m
  bands:
    bronze: {min: 0, max: 40}
    silver: {min: 40, max: 65}
    gold: {min: 65, max: 92}
    hot: {min: 92, max: 100}
idle_reclaim:
  warn_after: 30m
  act_after: 45m
  action: cancel
  dry_run: true
  exempt_users: [root]
oversubscription: {max_ratio: 1.25, grace: 90s}
alerts:
  repeat_interval: 1h
  rules:
    - name: HotGpu
      grade: orange
      when: [{metric: temperature_c, op: ">", value: 80}]
      for: 5m
      labels: {team: infra}
market:
  guaranteed_price: {H100: 2.5}
  budgets: {ml: 1000}
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->zones.metric, ActivityMetric::kGpuUtil);
  EXPECT_EQ(c->zones.bronze_max, 40'000);
  EXPECT_EQ(c->zones.silver_max, 65'000);
  EXPECT_EQ(c->zones.gold_max, 92'000);
  EXPECT_EQ(c->idle.action, IdleReclaimPolicy::Action::kCancel);
  EXPECT_TRUE(c->idle.dry_run);
  EXPECT_EQ(c->oversub.max_ratio_milli, 1250);
  EXPECT_EQ(c->alerting.rules.size(), BuiltinRules().size() + 1);
  EXPECT_EQ(c->alerting.rules.back().labels.at("team"), "infra");
  EXPECT_EQ(c->market.guaranteed_price.at("H100"), 2'500'000);
  EXPECT_EQ(c->market.budgets.at("ml"), 1'000'000'000);
}

void ExpectError(const std::string& yaml, const std::string& fragment) {
  auto c = LoadConfigYaml(yaml, "eff.yaml");
  ASSERT_FALSE(c.ok()) << yaml;
  EXPECT_NE(c.status().message().find(fragment), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("eff.yaml"), std::string::npos) << c.status().message();
}

TEST(ConfigTest, RejectsBadZonesAndPoliciesNamingTheField) {
  ExpectError("zones: {bands: {silver: {min: 50, max: 75}, gold: {min: 70, max: 90}}}",
              "zones.bands.gold: overlaps silver");
  ExpectError("zones: {window: -5m}", "zones.window");
  ExpectError("zones: {metric: fan_speed}", "unknown metric 'fan_speed'");
  ExpectError("idle_reclaim: {warn_after: 2h, act_after: 1h}", "idle_reclaim.act_after");
  ExpectError("idle_reclaim: {action: explode}", "idle_reclaim.action");
  ExpectError("oversubscription: {max_ratio: 3}", "oversubscription.max_ratio");
  ExpectError("zones: {windw: 5m}", "zones.windw: unknown field");
  ExpectError("zones: [1, 2", "eff.yaml:");
}

TEST(ConfigTest, ErrorsNameFileLineColumnAndPathInYamlAndJson) {
  auto bad = [](const std::string& text, const std::string& origin) {
    auto c = LoadConfigYaml(text, origin);
    return c.ok() ? std::string("OK") : c.status().message();
  };
  // A value of the wrong kind or out of bounds: the value's own position.
  EXPECT_EQ(bad("zones:\n  window: 5m\n  min_coverage: [1]\n", "eff.yaml"),
            "eff.yaml:3:17: zones.min_coverage: expected a string, got a list");
  EXPECT_EQ(bad("market:\n  reclaimed_discount_pct: 120\n", "eff.yaml"),
            "eff.yaml:2:27: market.reclaimed_discount_pct: must be in 0..100");
  EXPECT_EQ(bad(R"({"zones": {"window": "2 fortnights"}})", "eff.json").substr(0, 32),
            "eff.json:1:22: zones.window: dur");
  // An unknown key: the key's position; a missing one: the mapping that lacks it.
  EXPECT_EQ(
      bad(R"({"idle_reclaim": {"enabled": true, "act_afterr": "1h"}})", "eff.json").substr(0, 52),
      "eff.json:1:36: idle_reclaim.act_afterr: unknown fiel");
  EXPECT_EQ(bad("zones:\n  bands:\n    gold: {min: 70}\n", "eff.yaml"),
            "eff.yaml:3:11: zones.bands.gold: needs min and max");
}

TEST(ConfigTest, BadRulesAreDroppedWithAMessageTheRestLoads) {
  auto c = LoadConfigYaml(R"(
alerts:
  builtin_rules: false
  rules:
    - name: Good
      when: [{metric: gpu_util, op: "<", value: 10}]
    - name: BadMetric
      when: [{metric: gpu_utl, op: "<", value: 10}]
    - name: BadFor
      for: -1m
      when: [{metric: gpu_util, op: "<", value: 10}]
    - name: BadOp
      when: [{metric: gpu_util, op: "=~", value: 10}]
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->alerting.rules.size(), 1u);
  EXPECT_EQ(c->alerting.rules[0].name, "Good");
  ASSERT_EQ(c->rule_errors.size(), 3u);
  EXPECT_NE(c->rule_errors[0].message().find("rule 'BadMetric': when[0].metric"), std::string::npos)
      << c->rule_errors[0].message();
  EXPECT_NE(c->rule_errors[1].message().find("rule 'BadFor': for"), std::string::npos)
      << c->rule_errors[1].message();
  EXPECT_NE(c->rule_errors[2].message().find("rule 'BadOp': when[0].op"), std::string::npos)
      << c->rule_errors[2].message();
}

TEST(ConfigTest, MarketTeamsAndServiceSettingsLoadAndBadOnesNameTheField) {
  auto c = LoadConfigYaml(R"(
market: {budgets: {ml: 10}, teams: {alice: ml}, charge_interval: 10m}
service: {evaluate_every: 5s, keep_samples: 1000}
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->market.enabled());
  EXPECT_EQ(c->market.TeamOf("alice"), "ml");
  EXPECT_EQ(c->market.TeamOf("bob"), "bob");
  EXPECT_EQ(c->market.charge_interval, std::chrono::minutes(10));
  EXPECT_EQ(c->service.evaluate_every, std::chrono::seconds(5));
  EXPECT_EQ(c->service.keep_samples, 1000u);
  EXPECT_FALSE(LoadConfigYaml("").value().market.enabled());
  for (const auto& [yaml, field] : std::vector<std::pair<std::string, std::string>>{
           {"market: {charge_interval: -5m}", "market.charge_interval"},
           {"market: {charge_interval: 0s}", "market.charge_interval"},
           {"market: {teams: [alice]}", "market.teams"},
           {"service: {evaluate_every: 10ms}", "service.evaluate_every"},
           {"service: {keep_samples: -1}", "service.keep_samples"},
           {"service: {interval: 5s}", "service.interval: unknown field"}}) {
    auto bad = LoadConfigYaml(yaml, "eff.yaml");
    ASSERT_FALSE(bad.ok()) << yaml;
    EXPECT_NE(bad.status().message().find(field), std::string::npos) << bad.status().message();
    EXPECT_NE(bad.status().message().find("eff.yaml"), std::string::npos) << bad.status().message();
  }
}

// Every name the engine writes (API answers, metrics labels, records) parses back to its value,
// and no two values share a name.
TEST(EnumNames, EveryEfficiencyTableRoundTrips) {
  using stoker::testing::ExpectRoundTrip;
  ExpectRoundTrip(kActivityMetricNames);
  ExpectRoundTrip(kGradeNames);
  ExpectRoundTrip(kCompareOpNames);
  ExpectRoundTrip(kRuleScopeNames);
  ExpectRoundTrip(kAlertStateNames);
  ExpectRoundTrip(kReclaimActionNames);
  ExpectRoundTrip(kTierNames);
  ExpectRoundTrip(kLedgerKindNames);
  ExpectRoundTrip(kZoneNames);
  ExpectRoundTrip(kShareModeNames);
  EXPECT_EQ(*ParseGrade("ORANGE"), Grade::kOrange);  // grades are read in any case
  EXPECT_EQ(ParseGrade("purple").status().message(),
            "unknown grade 'purple' (yellow, orange, red)");
  EXPECT_EQ(ParseCompareOp("=>").status().message(),
            "unknown operator '=>' (<, <=, >, >=, ==, !=)");
}

TEST(ConfigFileTest, AFileUpToOneMiBLoadsAndOneBytePastIsRefusedNamingIt) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("stoker_cfg_" + std::to_string(::getpid()) + ".yaml"))
                               .string();
  const size_t mib = size_t{1} << 20;
  const std::string head = "idle_reclaim: {enabled: true}\n";
  auto write = [&](size_t size) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << head << "#" << std::string(size - head.size() - 2, 'x') << "\n";
  };
  write(mib);
  ASSERT_EQ(std::filesystem::file_size(path), mib);
  auto ok = LoadConfigFile(path);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(ok->idle.enabled);
  write(mib + 1);
  auto big = LoadConfigFile(path);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().message(), path + ": larger than 1 MiB");
  std::filesystem::remove(path);
  EXPECT_EQ(LoadConfigFile(path).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace stoker::efficiency
