// `stoker zones`, `stoker alerts`, `stoker reclaim`, `stoker report`, `stoker budgets`,
// `stoker silence`: the efficiency engine of the running server (its /api/v1 routes), or, with
// --input FILE.jsonl, the same engine replayed offline over recorded samples (format in
// src/efficiency/records.h). Both paths print the same JSON shapes (efficiency/api_json.h).

#include <fmt/core.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>

#include "cli/cli.h"
#include "cli/table.h"
#include "efficiency/api_json.h"
#include "efficiency/replay.h"
#include "efficiency/report.h"
#include "integration/http_poster.h"
#include "web/site.h"
#ifdef STOKER_HAVE_EFFICIENCY_SIM
#include "efficiency/history_sizing.h"
#include "efficiency/sim_idle.h"
#include "efficiency/sizing.h"
#include "sim/traces.h"
#endif

namespace stoker::cli {
namespace {

namespace eff = stoker::efficiency;

struct CommonFlags {
  std::string input;
  std::string config;
  bool json = false;
  ServerAccess server;
};

void AddServerAccess(CLI::App* cmd, ServerAccess& a) {
  cmd->add_option("--server", a.server,
                  "Server URL (env STOKER_SERVER; default: the local `stoker up`)");
  cmd->add_option("--token", a.token, "API token (env STOKER_TOKEN)");
  cmd->add_option("--ca-file", a.ca_file, "CA certificate for an HTTPS server");
}

void AddCommon(CLI::App* cmd, CommonFlags& f) {
  cmd->add_option("--input,-i", f.input,
                  "offline: recorded samples and jobs (JSON lines) instead of the server");
  cmd->add_option("--config,-c", f.config, "offline: efficiency configuration (YAML)");
  AddServerAccess(cmd, f.server);
}

// GET from the server; prints the error and sets *rc on failure.
std::optional<std::string> Fetch(const ServerAccess& a, const std::string& path, int* rc) {
  auto r = ServerRequest(a, "GET", path);
  if (!r.ok()) {
    std::cerr << "stoker: " << r.status().message() << "\n";
    *rc = ExitCodeFor(r.status());
    return std::nullopt;
  }
  return std::move(r).value();
}

std::optional<nlohmann::json> FetchJson(const ServerAccess& a, const std::string& path, int* rc) {
  auto text = Fetch(a, path, rc);
  if (!text) return std::nullopt;
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) {
    std::cerr << "stoker: " << path << ": the server's answer is not JSON\n";
    *rc = kExitFailure;
    return std::nullopt;
  }
  return j;
}

std::string Str(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}
double Num(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

void PrintZones(const nlohmann::json& z) {
  for (const char* list : {"gpus", "jobs"}) {
    const Table t({{std::string(list) == "gpus" ? "GPU" : "JOB", 40},
                   {"ZONE", 7, Align::kLeft, "  "},
                   {"MEAN%", 6, Align::kRight},
                   {"PEAK%", 6, Align::kRight, "  "},
                   {"SAMPLES", 7, Align::kRight, "  "},
                   {"METRIC", 0, Align::kLeft, "  "}});
    fmt::print("{}", t.Header());
    for (const auto& s : z.value(list, nlohmann::json::array())) {
      fmt::print(
          "{}",
          t.Line({Str(s, "key"), Str(s, "zone"), fmt::format("{:.1f}", Num(s, "mean_pct")),
                  fmt::format("{:.1f}", Num(s, "peak_pct")),
                  fmt::format("{}", static_cast<long long>(Num(s, "samples"))), Str(s, "metric")}));
    }
    std::printf("\n");
  }
  std::printf("Consolidation plan (window %s): %lld GPU(s) freed\n", Str(z, "window").c_str(),
              static_cast<long long>(Num(z, "gpus_freed")));
  for (const auto& g : z.value("consolidation", nlohmann::json::array())) {
    std::string jobs;
    for (const auto& j : g.value("jobs", nlohmann::json::array()))
      jobs += " " + j.get<std::string>();
    const std::string layout = Str(g, "mig_layout");
    std::printf(
        "  pack%s -> %s%s, %.1f %% combined, %s: %s\n", jobs.c_str(), Str(g, "mode").c_str(),
        layout.empty() ? "" : (" " + layout).c_str(), Num(g, "combined_pct"),
        g.value("apply_now", false) ? "now (movable)" : "at next start", Str(g, "reason").c_str());
  }
}

void PrintAlertsTable(const nlohmann::json& alerts) {
  const Table t(
      {{"STATE", 9}, {"GRADE", 7}, {"RULE", 24}, {"SUBJECT", 28}, {"SINCE", 22}, {"SUMMARY"}});
  fmt::print("{}", t.Header());
  for (const auto& a : alerts) {
    std::string state = Str(a, "state");
    if (a.value("inhibited", false)) state += "(inh)";
    if (a.value("silenced", false)) state += "(sil)";
    fmt::print("{}", t.Line({state, Str(a, "grade"), Str(a, "rule"), Str(a, "subject"),
                             a.contains("starts_at") && a["starts_at"].is_string()
                                 ? Str(a, "starts_at")
                                 : Str(a, "pending_since"),
                             Str(a, "summary")}));
  }
  if (alerts.empty()) std::printf("no active alerts\n");
}

void PrintReclaimTable(const nlohmann::json& log) {
  for (const auto& r : log) {
    const auto& e = r["evidence"];
    std::printf(
        "%s  %s%s  %s  %s  %s  [%lld/%lld GPUs idle, %lld samples, max %.1f %%, since %s]\n",
        Str(r, "at").c_str(), Str(r, "action").c_str(),
        r.value("dry_run", false) ? " (dry run)" : "", Str(r, "job").c_str(),
        Str(r, "user").c_str(), Str(r, "reason").c_str(),
        static_cast<long long>(Num(e, "idle_gpus")), static_cast<long long>(Num(e, "gpus")),
        static_cast<long long>(Num(e, "samples")), Num(e, "max_activity_pct"),
        Str(e, "window_start").c_str());
  }
}

// Loads config and records; prints the error and returns the exit code on failure.
int Load(const CommonFlags& f, eff::EfficiencyConfig* cfg, eff::RecordSet* records) {
  auto c = f.config.empty() ? eff::LoadConfigYaml("") : eff::LoadConfigFile(f.config);
  if (!c.ok()) {
    std::cerr << "error: " << c.status().message() << "\n";
    return ExitCodeFor(c.status());
  }
  for (const auto& e : c->rule_errors)
    std::cerr << "warning: rule skipped: " << e.message() << "\n";
  *cfg = std::move(c).value();
  auto r = eff::ReadRecordsFile(f.input);
  if (!r.ok()) {
    std::cerr << "error: " << r.status().message() << "\n";
    return ExitCodeFor(r.status());
  }
  *records = std::move(r).value();
  return kExitOk;
}

std::string Pct(int64_t milli) {
  return fmt::format("{:.1f}", static_cast<double>(milli) / 1000.0);
}

int RunZones(const CommonFlags& f) {
  if (f.input.empty()) {
    int rc = kExitOk;
    auto z = FetchJson(f.server, "/api/v1/zones", &rc);
    if (!z) return rc;
    if (f.json)
      std::cout << z->dump(2) << "\n";
    else
      PrintZones(*z);
    return kExitOk;
  }
  eff::EfficiencyConfig cfg;
  eff::RecordSet recs;
  if (int rc = Load(f, &cfg, &recs); rc != kExitOk) return rc;
  const eff::ZoneReplay z = eff::ReplayZones(recs, cfg);
  const nlohmann::json j = eff::ZonesToJson(z.gpus, z.jobs, z.plan, cfg.zones);
  if (f.json) {
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  PrintZones(j);
  return kExitOk;
}

int RunAlerts(const CommonFlags& f, const std::string& alertmanager) {
  if (f.input.empty()) {
    if (!alertmanager.empty()) {
      std::cerr << "stoker alerts: --alertmanager replays recorded samples (--input); the server "
                   "sends its own "
                   "alerts (stoker server --alertmanager)\n";
      return kExitUsage;
    }
    int rc = kExitOk;
    auto a = FetchJson(f.server, "/api/v1/alerts", &rc);
    if (!a) return rc;
    if (f.json)
      std::cout << a->dump(2) << "\n";
    else
      PrintAlertsTable(*a);
    return kExitOk;
  }
  eff::EfficiencyConfig cfg;
  eff::RecordSet recs;
  if (int rc = Load(f, &cfg, &recs); rc != kExitOk) return rc;
  eff::LogNotifier log;
  eff::WebhookPoster poster;
  std::unique_ptr<eff::AlertmanagerNotifier> am;
  std::vector<eff::Notifier*> notifiers;
  if (!alertmanager.empty()) {
    am = std::make_unique<eff::AlertmanagerNotifier>(
        poster, alertmanager, cfg.alerting.repeat_interval + std::chrono::minutes(15));
    notifiers.push_back(am.get());
  }
  const eff::AlertReplay r = eff::ReplayAlerts(recs, cfg, notifiers);
  if (f.json) {
    nlohmann::json j;
    for (const auto* list : {&r.fired, &r.active}) {
      auto& arr = j[list == &r.fired ? "fired" : "active"] = nlohmann::json::array();
      for (const auto& a : *list) arr.push_back(eff::AlertToJson(a));
    }
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "Fired (" << r.fired.size() << ")\n";
    for (const auto& a : r.fired) {
      std::cout << "  " << eff::FormatRfc3339(a.starts_at) << "  " << eff::GradeName(a.grade)
                << "  " << a.rule << "  " << a.subject << "  "
                << (a.annotations.count("summary") ? a.annotations.at("summary") : "") << "\n";
    }
    std::cout << "Active at end (" << r.active.size() << ")\n";
    for (const auto& a : r.active) {
      std::cout << "  " << eff::AlertStateName(a.state) << "  " << eff::GradeName(a.grade) << "  "
                << a.rule << "  " << a.subject << (a.inhibited ? "  (inhibited)" : "")
                << (a.silenced ? "  (silenced)" : "") << "\n";
    }
  }
  for (const auto& e : r.errors) std::cerr << "error: " << e.ToString() << "\n";
  return r.errors.empty() ? kExitOk : ExitCodeFor(r.errors.front());
}

int RunReclaim(const CommonFlags& f) {
  if (f.input.empty()) {
    int rc = kExitOk;
    auto log = FetchJson(f.server, "/api/v1/reclaim", &rc);
    if (!log) return rc;
    if (f.json)
      std::cout << log->dump(2) << "\n";
    else if (log->empty())
      std::cout << "no idle-reclaim records\n";
    else
      PrintReclaimTable(*log);
    return kExitOk;
  }
  eff::EfficiencyConfig cfg;
  eff::RecordSet recs;
  if (int rc = Load(f, &cfg, &recs); rc != kExitOk) return rc;
  const auto log = eff::ReplayReclaim(recs, cfg);
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& r : log) {
    if (f.json) {
      arr.push_back(eff::ReclaimRecordToJson(r));
    } else {
      std::cout << eff::FormatRfc3339(r.at) << "  " << eff::ReclaimActionName(r.action)
                << " (dry run)  " << r.job << "  " << r.user << "  " << r.reason << "  ["
                << r.evidence.idle_gpus << "/" << r.evidence.gpus << " GPUs idle, "
                << r.evidence.samples << " samples, max " << Pct(r.evidence.max_activity_milli)
                << " %, since " << eff::FormatRfc3339(r.evidence.window_start) << "]\n";
    }
  }
  if (f.json)
    std::cout << arr.dump(2) << "\n";
  else if (log.empty())
    std::cout << "no job idle long enough to warn (warn_after "
              << FormatDuration(cfg.idle.warn_after) << ")\n";
  return kExitOk;
}

int RunReport(const CommonFlags& f, bool csv, const std::string& html, const std::string& bucket) {
  if (f.input.empty()) {
    const std::string format = !html.empty() ? "html" : f.json ? "json" : csv ? "csv" : "text";
    std::string path = "/api/v1/report?format=" + format;
    if (!bucket.empty()) path += "&bucket=" + bucket;
    int rc = kExitOk;
    auto body = Fetch(f.server, path, &rc);
    if (!body) return rc;
    if (html.empty()) {
      std::cout << *body;
      return kExitOk;
    }
    std::ofstream out(html);
    out << *body;
    if (!out) {
      std::cerr << "error: cannot write " << html << "\n";
      return kExitFailure;
    }
    std::cerr << "wrote " << html << "\n";
    return kExitOk;
  }
  eff::EfficiencyConfig cfg;
  eff::RecordSet recs;
  if (int rc = Load(f, &cfg, &recs); rc != kExitOk) return rc;
  eff::ReportOptions opt;
  if (!bucket.empty()) {
    auto d = ParseDuration(bucket);
    if (!d.ok()) {
      std::cerr << "error: --bucket: " << d.status().message() << "\n";
      return kExitUsage;
    }
    opt.bucket = *d;
  }
  const eff::Report r = eff::BuildReport(recs, cfg, opt);
  if (!html.empty()) {
    std::ofstream out(html);
    out << eff::RenderHtml(r, web::ReportChartScript());
    if (!out) {
      std::cerr << "error: cannot write " << html << "\n";
      return kExitFailure;
    }
    std::cerr << "wrote " << html << "\n";
    return kExitOk;
  }
  std::cout << (f.json ? eff::RenderJson(r) : csv ? eff::RenderCsv(r) : eff::RenderText(r));
  return kExitOk;
}

#ifdef STOKER_HAVE_EFFICIENCY_SIM
struct SimEffFlags {
  std::string trace, format = "philly", cluster, queue = "fifo", config;
  size_t limit = 0;
  double idle_share = 0.36;
  uint64_t seed = 42;
  bool json = false;
  std::optional<double> oversub_ratio;  // overrides the config's oversubscription.max_ratio
  std::string grace;                    // overrides oversubscription.grace
  double preemptible_share = 0.5;
  double busy_activity = 60;  // percent of its GPUs a guaranteed job keeps busy while busy
  std::string preemptible_max = "2h";
  bool interference = false;           // the published co-location slowdown
  std::optional<double> shared_speed;  // another speed instead (implies interference)
};

// The trace and the model options every proof-by-simulation command shares (sim efficiency,
// sim size).
struct SimEffSetup {
  sim::Trace trace;
  sim::JobsSimOptions opt;
  eff::EfficiencySimOptions o;
};
Result<SimEffSetup> LoadSimEff(const SimEffFlags& f) {
  SimEffSetup setup;
  STOKER_ASSIGN_OR_RETURN(
      auto cfg, f.config.empty() ? eff::LoadConfigYaml("") : eff::LoadConfigFile(f.config));
  STOKER_ASSIGN_OR_RETURN(auto format, sim::ParseTraceFormat(f.format));
  if (f.idle_share < 0 || f.idle_share > 1) {
    return InvalidArgument("--idle-share: must be in [0, 1]");
  }
  sim::TraceLoadOptions load;
  load.limit = f.limit;
  load.skip_bad_rows = true;
  STOKER_ASSIGN_OR_RETURN(setup.trace, sim::LoadTrace(f.trace, format, load));
  sim::JobsSimOptions& opt = setup.opt;
  if (!f.cluster.empty()) {
    STOKER_ASSIGN_OR_RETURN(opt.cluster, sim::ParseClusterShape(f.cluster));
  } else if (setup.trace.cluster) {
    opt.cluster = *setup.trace.cluster;
  }
  eff::EfficiencySimOptions& o = setup.o;
  o.idleness.idle_share = f.idle_share;
  o.idleness.seed = f.seed;
  o.policy = cfg.idle;
  o.queue_policy = f.queue;
  o.oversub = cfg.oversub;
  // The third variant exists to show oversubscription: with it off in the configuration (the
  // default), it simulates the largest ratio allowed.
  if (!f.oversub_ratio && o.oversub.max_ratio_milli == 1000) o.oversub.max_ratio_milli = 1500;
  if (f.oversub_ratio) {
    if (!std::isfinite(*f.oversub_ratio)) return InvalidArgument("--oversub-ratio: not a number");
    o.oversub.max_ratio_milli = std::llround(*f.oversub_ratio * 1000);
  }
  if (!f.grace.empty()) {
    auto g = ParseDuration(f.grace);
    if (!g.ok()) return g.status().WithContext("--grace");
    o.oversub.grace = *g;
  }
  STOKER_RETURN_IF_ERROR(eff::ValidateOversubscription(o.oversub));
  if (f.preemptible_share < 0 || f.preemptible_share > 1) {
    return InvalidArgument("--preemptible-share: must be in [0, 1]");
  }
  o.preemptible.share = f.preemptible_share;
  if (!(f.busy_activity > 0 && f.busy_activity <= 100)) {
    return InvalidArgument("--busy-activity: must be in (0, 100] percent");
  }
  o.idleness.busy_activity_milli = std::llround(f.busy_activity * 1000);
  auto pmax = ParseDuration(f.preemptible_max);
  if (!pmax.ok()) return pmax.status().WithContext("--preemptible-max");
  o.preemptible.max_duration_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(*pmax).count();
  if (f.shared_speed) {
    if (!(*f.shared_speed > 0 && *f.shared_speed <= 1)) {
      return InvalidArgument("--shared-speed: must be above 0 and at most 1");
    }
    o.shared_speed = *f.shared_speed;
  } else if (f.interference) {
    o.shared_speed = eff::kPublishedSharedSpeed;
  }
  return setup;
}

int RunSimEfficiency(const SimEffFlags& f) {
  auto fail = [](const Status& s) {
    std::cerr << "stoker sim efficiency: " << s.ToString() << "\n";
    return ExitCodeFor(s);
  };
  auto setup = LoadSimEff(f);
  if (!setup.ok()) return fail(setup.status());
  const sim::Trace* trace = &setup->trace;
  const sim::JobsSimOptions& opt = setup->opt;
  const eff::EfficiencySimOptions& o = setup->o;
  auto results = eff::CompareReclaim(sim::JobsFromTrace(*trace), opt, o);
  if (!results.ok()) return fail(results.status());
  auto tier_json = [](const eff::TierStats& t) {
    return nlohmann::json{{"jobs", t.jobs},
                          {"queue_delay_mean_s", t.queue_delay_s.mean},
                          {"queue_delay_p99_s", t.queue_delay_s.p99},
                          {"jct_mean_s", t.jct_s.mean},
                          {"jct_median_s", t.jct_s.median},
                          {"preemptions", t.preemptions},
                          {"lost_gpu_hours", t.lost_gpu_hours}};
  };
  nlohmann::json arr = nlohmann::json::array();
  const Table variants({{"variant", 16},
                        {"used-util%", 10, Align::kRight},
                        {"alloc%", 10, Align::kRight},
                        {"queue-mean-s", 12, Align::kRight},
                        {"queue-p99-s", 12, Align::kRight},
                        {"jct-mean-s", 12, Align::kRight},
                        {"jct-median-s", 12, Align::kRight},
                        {"reclaimed", 10, Align::kRight},
                        {"freed-GPU-h", 12, Align::kRight}});
  if (!f.json) {
    std::printf("trace %s: %zu jobs, cluster %dx%d, queue %s, idle share %.2f, warn %s, act %s\n",
                f.trace.c_str(), trace->jobs.size(), opt.cluster.nodes, opt.cluster.gpus_per_node,
                f.queue.c_str(), f.idle_share, FormatDuration(o.policy.warn_after).c_str(),
                FormatDuration(o.policy.act_after).c_str());
    std::printf(
        "oversubscription %.2f:1, grace %s; preemptible: single-GPU jobs <= %s, share %.2f (%lld "
        "jobs); shared guaranteed jobs run at %.3f of their speed\n",
        static_cast<double>(o.oversub.max_ratio_milli) / 1000.0,
        FormatDuration(o.oversub.grace).c_str(), f.preemptible_max.c_str(), o.preemptible.share,
        static_cast<long long>(results->front().preemptible.jobs), o.shared_speed);
    fmt::print("{}", variants.Header());
  }
  for (const auto& v : *results) {
    if (f.json) {
      arr.push_back({{"variant", v.name},
                     {"used_gpu_utilization_pct", v.used_gpu_utilization_pct},
                     {"mean_allocation_pct", v.report.mean_allocation_pct},
                     {"queue_delay_mean_s", v.report.queue_delay_s.mean},
                     {"queue_delay_p99_s", v.report.queue_delay_s.p99},
                     {"jct_mean_s", v.report.jct_s.mean},
                     {"jct_median_s", v.report.jct_s.median},
                     {"jct_p99_s", v.report.jct_s.p99},
                     {"makespan_s", v.report.makespan_s},
                     {"jobs_reclaimed", v.jobs_reclaimed},
                     {"gpu_hours_reclaimed", v.gpu_hours_reclaimed},
                     {"busy_gpu_hours", v.busy_gpu_hours},
                     {"jobs_completed", v.report.jobs_completed},
                     {"guaranteed", tier_json(v.guaranteed)},
                     {"preemptible", tier_json(v.preemptible)}});
    } else {
      fmt::print("{}", variants.Line({v.name, fmt::format("{:.1f}", v.used_gpu_utilization_pct),
                                      fmt::format("{:.1f}", v.report.mean_allocation_pct),
                                      fmt::format("{:.0f}", v.report.queue_delay_s.mean),
                                      fmt::format("{:.0f}", v.report.queue_delay_s.p99),
                                      fmt::format("{:.0f}", v.report.jct_s.mean),
                                      fmt::format("{:.0f}", v.report.jct_s.median),
                                      fmt::format("{}", v.jobs_reclaimed),
                                      fmt::format("{:.0f}", v.gpu_hours_reclaimed)}));
    }
  }
  if (f.json) {
    std::cout << arr.dump(2) << "\n";
    return kExitOk;
  }
  const Table tiers({{"variant", 16},
                     {"tier", 11},
                     {"jobs", 7, Align::kRight},
                     {"queue-mean-s", 12, Align::kRight},
                     {"queue-p99-s", 12, Align::kRight},
                     {"jct-mean-s", 12, Align::kRight},
                     {"jct-median-s", 12, Align::kRight},
                     {"preemptions", 11, Align::kRight},
                     {"lost-GPU-h", 9, Align::kRight}});
  fmt::print("\n{}", tiers.Header());
  for (const auto& v : *results) {
    for (const auto* t : {&v.guaranteed, &v.preemptible}) {
      fmt::print(
          "{}", tiers.Line(
                    {v.name, t == &v.guaranteed ? "guaranteed" : "preemptible",
                     fmt::format("{}", t->jobs), fmt::format("{:.0f}", t->queue_delay_s.mean),
                     fmt::format("{:.0f}", t->queue_delay_s.p99),
                     fmt::format("{:.0f}", t->jct_s.mean), fmt::format("{:.0f}", t->jct_s.median),
                     fmt::format("{}", t->preemptions), fmt::format("{:.0f}", t->lost_gpu_hours)}));
    }
  }
  return kExitOk;
}

struct SimSizeFlags : SimEffFlags {
  int gpus_per_node = 8;
  std::string max_mean_queue = "10m", max_p99_queue = "2h";
  std::vector<std::string> variants = {"static", "reclaim", "reclaim+oversub"};
  int max_nodes = 100'000;
  std::string history;  // recorded jobs and samples (JSON lines), or "server"
  ServerAccess server;
};

Result<eff::QueueTargets> ParseTargets(const SimSizeFlags& f) {
  eff::QueueTargets t;
  auto mean = ParseDuration(f.max_mean_queue);
  if (!mean.ok()) return mean.status().WithContext("--max-mean-queue");
  auto p99 = ParseDuration(f.max_p99_queue);
  if (!p99.ok()) return p99.status().WithContext("--max-p99-queue");
  t.max_mean_s = std::chrono::duration<double>(*mean).count();
  t.max_p99_s = std::chrono::duration<double>(*p99).count();
  return t;
}

// `stoker sim size --history FILE|server`: the sizing of a server's own history
// (efficiency/history_sizing.h).
int RunHistorySize(const SimSizeFlags& f) {
  auto fail = [](const Status& s) {
    std::cerr << "stoker sim size: " << s.ToString() << "\n";
    return ExitCodeFor(s);
  };
  if (!f.trace.empty()) return fail(InvalidArgument("--history: give it or --trace, not both"));
  auto cfg = f.config.empty() ? eff::LoadConfigYaml("") : eff::LoadConfigFile(f.config);
  if (!cfg.ok()) return fail(cfg.status());
  Result<eff::RecordSet> records = InvalidArgument("no history");
  if (f.history == "server") {
    auto body = ServerRequest(f.server, "GET", "/api/v1/report?format=records");
    if (!body.ok()) return fail(body.status());
    std::istringstream in(*body);
    records = eff::ReadRecordsJsonl(in, "the server's records");
  } else {
    records = eff::ReadRecordsFile(f.history);
  }
  if (!records.ok()) return fail(records.status());
  eff::HistorySizingOptions o;
  auto targets = ParseTargets(f);
  if (!targets.ok()) return fail(targets.status());
  o.targets = *targets;
  o.price_per_gpu_hour_micro = cfg->price_per_gpu_hour_micro;
  o.queue_policy = f.queue;
  o.max_gpus = f.max_nodes;
  const bool tty = isatty(STDERR_FILENO) != 0;
  o.on_probe = [&](const std::string& model, const eff::SizingProbe& p) {
    if (!tty) return;
    fmt::print(stderr, "\r\033[K[{}] {:<8} {:6} GPUs: queue mean {:8.0f} s, p99 {:8.0f} s: {}",
               p.probes_done, model, p.nodes, p.mean_s, p.p99_s,
               p.met ? "meets the targets" : "misses");
  };
  auto sized = eff::SizeFromHistory(*records, o);
  if (tty) fmt::print(stderr, "\r\033[K");
  if (!sized.ok()) return fail(sized.status());
  auto money = [](int64_t micro) { return micro < 0 ? -1.0 : static_cast<double>(micro) / 1e6; };
  if (f.json) {
    nlohmann::json classes = nlohmann::json::array(), models = nlohmann::json::array();
    for (const eff::ClassNeed& c : sized->classes) {
      nlohmann::json j = {{"class", c.job_class},
                          {"model", c.model},
                          {"jobs", c.jobs},
                          {"gpus_requested", c.gpus_requested},
                          {"gpus_busy", c.gpus_busy},
                          {"memory_peak_bytes", c.mem_peak_bytes},
                          {"memory_total_bytes", c.mem_total_bytes},
                          {"activity_p95", c.activity_p95},
                          {"need", c.need},
                          {"slices", c.slices}};
      if (c.tensor_active) j["tensor_active"] = *c.tensor_active;
      classes.push_back(j);
    }
    for (const eff::ModelSize& m : sized->models) {
      models.push_back({{"model", m.model},
                        {"jobs", m.jobs},
                        {"recorded_gpus", m.recorded_gpus},
                        {"gpus_as_requested", m.as_requested},
                        {"gpus_right_sized", m.right_sized},
                        {"queue_delay_mean_s", m.queue_mean_s},
                        {"queue_delay_p99_s", m.queue_p99_s},
                        {"price_per_gpu_hour", money(m.price_per_gpu_hour_micro)},
                        {"cost_recorded", money(m.cost_recorded_micro)},
                        {"cost_as_requested", money(m.cost_as_requested_micro)},
                        {"cost_right_sized", money(m.cost_right_sized_micro)}});
    }
    std::cout << nlohmann::json{{"from", eff::FormatRfc3339(sized->from)},
                                {"to", eff::FormatRfc3339(sized->to)},
                                {"span_hours", sized->span_hours},
                                {"jobs_used", sized->jobs_used},
                                {"jobs_skipped", sized->jobs_skipped},
                                {"max_mean_queue_s", o.targets.max_mean_s},
                                {"max_p99_queue_s", o.targets.max_p99_s},
                                {"classes", classes},
                                {"models", models}}
                     .dump(2)
              << "\n";
    return kExitOk;
  }
  std::printf(
      "history %s .. %s (%.1f h): %lld jobs (%lld without samples skipped); targets: "
      "mean queueing <= %s, p99 < %s\n\n",
      eff::FormatRfc3339(sized->from).c_str(), eff::FormatRfc3339(sized->to).c_str(),
      sized->span_hours, static_cast<long long>(sized->jobs_used),
      static_cast<long long>(sized->jobs_skipped), f.max_mean_queue.c_str(),
      f.max_p99_queue.c_str());
  // GPUs(busy): the requested count right-aligned in 6, then the busy count in brackets.
  const Table classes({{"class", 16},
                       {"model", 8},
                       {"jobs", 6, Align::kRight},
                       {"GPUs(busy)", 0},
                       {"mem-peak-GB", 12, Align::kRight},
                       {"act-p95%", 9, Align::kRight},
                       {"tensor%", 8, Align::kRight},
                       {"needs", 0, Align::kLeft, "  "}});
  fmt::print("{}", classes.Header());
  for (const eff::ClassNeed& c : sized->classes) {
    fmt::print("{}",
               classes.Line({c.job_class, c.model, fmt::format("{}", c.jobs),
                             fmt::format("{:>6}({})", c.gpus_requested, c.gpus_busy),
                             fmt::format("{:.1f}", static_cast<double>(c.mem_peak_bytes) / 1e9),
                             fmt::format("{:.1f}", c.activity_p95 * 100),
                             c.tensor_active ? fmt::format("{:.1f}", *c.tensor_active * 100) : "-",
                             c.need}));
  }
  const Table models({{"model", 8},
                      {"jobs", 6, Align::kRight},
                      {"recorded", 9, Align::kRight},
                      {"as-requested", 13, Align::kRight},
                      {"right-sized", 12, Align::kRight},
                      {"queue-mean-s", 12, Align::kRight},
                      {"queue-p99-s", 12, Align::kRight},
                      {"price/GPU-h", 10, Align::kRight},
                      {"cost recorded", 14, Align::kRight},
                      {"as requested", 14, Align::kRight},
                      {"right-sized", 14, Align::kRight}});
  fmt::print("\n{}", models.Header());
  for (const eff::ModelSize& m : sized->models) {
    fmt::print(
        "{}",
        models.Line({m.model, fmt::format("{}", m.jobs), fmt::format("{}", m.recorded_gpus),
                     fmt::format("{}", m.as_requested), fmt::format("{}", m.right_sized),
                     fmt::format("{:.0f}", m.queue_mean_s), fmt::format("{:.0f}", m.queue_p99_s),
                     fmt::format("{:.2f}", money(m.price_per_gpu_hour_micro)),
                     fmt::format("{:.2f}", money(m.cost_recorded_micro)),
                     fmt::format("{:.2f}", money(m.cost_as_requested_micro)),
                     fmt::format("{:.2f}", money(m.cost_right_sized_micro))}));
  }
  return kExitOk;
}

int RunSimSize(const SimSizeFlags& f) {
  auto fail = [](const Status& s) {
    std::cerr << "stoker sim size: " << s.ToString() << "\n";
    return ExitCodeFor(s);
  };
  if (!f.history.empty()) return RunHistorySize(f);
  if (f.trace.empty()) return fail(InvalidArgument("--trace or --history: one is required"));
  if (!f.cluster.empty())
    return fail(InvalidArgument("--cluster: the size is what sim size finds"));
  if (f.gpus_per_node <= 0 || f.gpus_per_node > 64) {
    return fail(InvalidArgument("--gpus-per-node: must be 1..64"));
  }
  auto setup = LoadSimEff(f);
  if (!setup.ok()) return fail(setup.status());
  eff::SizingOptions so;
  so.sim = setup->o;
  so.base = setup->opt;
  so.base.cluster.gpus_per_node = f.gpus_per_node;
  so.variants = f.variants;
  so.max_nodes = f.max_nodes;
  auto targets = ParseTargets(f);
  if (!targets.ok()) return fail(targets.status());
  so.targets = *targets;
  // Progress: one line on stderr, rewritten after every simulation, when it is a terminal.
  const bool tty = isatty(STDERR_FILENO) != 0;
  so.on_probe = [&](const eff::SizingProbe& p) {
    if (!tty) return;
    fmt::print(stderr, "\r\033[K[{}] {:<16} {:6} nodes: queue mean {:8.0f} s, p99 {:8.0f} s: {}",
               p.probes_done, p.variant, p.nodes, p.mean_s, p.p99_s,
               p.met ? "meets the targets" : "misses");
  };
  const std::vector<sim::SimJobSpec> jobs = sim::JobsFromTrace(setup->trace);
  auto sized = eff::SizeCluster(jobs, so);
  if (tty) fmt::print(stderr, "\r\033[K");
  if (!sized.ok()) return fail(sized.status());
  if (f.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const eff::SizedVariant& v : *sized) {
      nlohmann::json probes = nlohmann::json::array();
      for (const auto& p : v.probes) {
        probes.push_back({{"nodes", p.nodes},
                          {"met", p.met},
                          {"queue_delay_mean_s", p.mean_s},
                          {"queue_delay_p99_s", p.p99_s}});
      }
      arr.push_back({{"variant", v.name},
                     {"nodes", v.nodes},
                     {"gpus", v.nodes > 0 ? int64_t{v.nodes} * f.gpus_per_node : -1},
                     {"queue_delay_mean_s", v.result.report.queue_delay_s.mean},
                     {"queue_delay_p99_s", v.result.report.queue_delay_s.p99},
                     {"used_gpu_utilization_pct", v.result.used_gpu_utilization_pct},
                     {"mean_allocation_pct", v.result.report.mean_allocation_pct},
                     {"jct_mean_s", v.result.report.jct_s.mean},
                     {"guaranteed_jct_mean_s", v.result.guaranteed.jct_s.mean},
                     {"jobs_completed", v.result.report.jobs_completed},
                     {"probes", probes}});
    }
    nlohmann::json out = {{"trace", f.trace},
                          {"jobs", jobs.size()},
                          {"gpus_per_node", f.gpus_per_node},
                          {"max_mean_queue_s", so.targets.max_mean_s},
                          {"max_p99_queue_s", so.targets.max_p99_s},
                          {"shared_speed", so.sim.shared_speed},
                          {"variants", arr}};
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  std::printf(
      "trace %s: %zu jobs; targets: mean queueing <= %s, p99 < %s; %d-GPU nodes, queue %s; "
      "shared guaranteed jobs at %.3f of their speed\n",
      f.trace.c_str(), jobs.size(), f.max_mean_queue.c_str(), f.max_p99_queue.c_str(),
      f.gpus_per_node, f.queue.c_str(), so.sim.shared_speed);
  const Table t({{"variant", 16},
                 {"nodes", 7, Align::kRight},
                 {"GPUs", 7, Align::kRight},
                 {"queue-mean-s", 12, Align::kRight},
                 {"queue-p99-s", 12, Align::kRight},
                 {"used-util%", 11, Align::kRight},
                 {"alloc%", 8, Align::kRight},
                 {"probes", 7, Align::kRight}});
  fmt::print("{}", t.Header());
  for (const eff::SizedVariant& v : *sized) {
    const std::string mean = fmt::format("{:.0f}", v.result.report.queue_delay_s.mean);
    const std::string p99 = fmt::format("{:.0f}", v.result.report.queue_delay_s.p99);
    const std::string probes = fmt::format("{}", v.probes.size());
    if (v.nodes < 0) {
      fmt::print("{}", t.Line({v.name, "-", "-", mean, p99, "-", "-", probes},
                              fmt::format("  (no size up to {} nodes)", f.max_nodes)));
      continue;
    }
    fmt::print("{}", t.Line({v.name, fmt::format("{}", v.nodes),
                             fmt::format("{}", int64_t{v.nodes} * f.gpus_per_node), mean, p99,
                             fmt::format("{:.1f}", v.result.used_gpu_utilization_pct),
                             fmt::format("{:.1f}", v.result.report.mean_allocation_pct), probes}));
  }
  return kExitOk;
}
#endif

}  // namespace

void RegisterEfficiencyCommands(CLI::App& app, int& exit_code) {
  static CommonFlags zones_flags, alerts_flags, reclaim_flags, report_flags;
  static std::string alertmanager, html, bucket;
  static bool csv = false;

  CLI::App* zones = app.add_subcommand(
      "zones", "GPU and job zones (gold/silver/bronze/hot) and a consolidation plan");
  AddCommon(zones, zones_flags);
  zones->add_flag("--json", zones_flags.json, "JSON output");
  zones->callback([&exit_code] { exit_code = RunZones(zones_flags); });

  CLI::App* alerts = app.add_subcommand(
      "alerts", "graded alerts (yellow/orange/red) replayed over recorded samples");
  AddCommon(alerts, alerts_flags);
  alerts->add_flag("--json", alerts_flags.json, "JSON output");
  alerts->add_option("--alertmanager", alertmanager,
                     "also POST notifications to this Alertmanager (http://host:9093)");
  alerts->callback([&exit_code] { exit_code = RunAlerts(alerts_flags, alertmanager); });

  CLI::App* reclaim =
      app.add_subcommand("reclaim", "idle-reclaim decisions over recorded samples (dry run)");
  AddCommon(reclaim, reclaim_flags);
  reclaim->add_flag("--json", reclaim_flags.json, "JSON output");
  reclaim->callback([&exit_code] { exit_code = RunReclaim(reclaim_flags); });

  CLI::App* report =
      app.add_subcommand("report", "efficiency report per job, user/team and cluster");
  AddCommon(report, report_flags);
  auto* json_flag = report->add_flag("--json", report_flags.json, "JSON output");
  auto* csv_flag = report->add_flag("--csv", csv, "CSV, one row per job");
  auto* html_opt = report->add_option("--html", html, "write a self-contained HTML page to FILE");
  json_flag->excludes(csv_flag)->excludes(html_opt);
  csv_flag->excludes(html_opt);
  report->add_option("--bucket", bucket,
                     "time bucket of the cluster series (e.g. 1h; default: span/48)");
  report->callback([&exit_code] { exit_code = RunReport(report_flags, csv, html, bucket); });

  // stoker budgets / stoker ledger [--team T]: the compute market of the server.
  static ServerAccess market_access;
  static bool market_json = false;
  static std::string ledger_team;
  CLI::App* budgets = app.add_subcommand("budgets", "compute-market balance per team (server)");
  AddServerAccess(budgets, market_access);
  budgets->add_flag("--json", market_json, "JSON output");
  budgets->callback([&exit_code] {
    int rc = kExitOk;
    auto b = FetchJson(market_access, "/api/v1/budgets", &rc);
    exit_code = rc;
    if (!b) return;
    if (market_json) {
      std::cout << b->dump(2) << "\n";
      return;
    }
    const Table t({{"TEAM", 16},
                   {"BALANCE", 12, Align::kRight},
                   {"GRANTED", 12, Align::kRight},
                   {"CHARGED", 12, Align::kRight},
                   {"IDLE", 12, Align::kRight},
                   {"RECLAIMED", 12, Align::kRight},
                   {"TIER", 0, Align::kLeft, "  "}});
    fmt::print("{}", t.Header());
    for (const auto& a : *b) {
      std::vector<std::string> cells = {Str(a, "team")};
      for (const char* k : {"balance", "granted", "charged", "idle_charged", "reclaimed_charged"}) {
        cells.push_back(fmt::format("{:.2f}", Num(a, k)));
      }
      cells.push_back(Str(a, "allowed_tier"));
      fmt::print("{}", t.Line(cells));
    }
  });
  CLI::App* ledger = app.add_subcommand("ledger", "compute-market ledger entries (server)");
  AddServerAccess(ledger, market_access);
  ledger->add_flag("--json", market_json, "JSON output");
  ledger->add_option("--team", ledger_team, "only this team (admins; users see their own)");
  ledger->callback([&exit_code] {
    int rc = kExitOk;
    auto l = FetchJson(market_access,
                       "/api/v1/ledger" + (ledger_team.empty() ? "" : "?team=" + ledger_team), &rc);
    exit_code = rc;
    if (!l) return;
    if (market_json) {
      std::cout << l->dump(2) << "\n";
      return;
    }
    const Table t({{"SEQ", 5, Align::kRight},
                   {"AT", 20, Align::kLeft, "  "},
                   {"TEAM", 12},
                   {"KIND", 11},
                   {"CREDITS", 12, Align::kRight},
                   {"JOB", 8},
                   {"TIER", 11},
                   {"GPU-H", 9, Align::kRight},
                   {"NOTE"}});
    fmt::print("{}", t.Header());
    for (const auto& e : *l) {
      fmt::print("{}",
                 t.Line({fmt::format("{}", static_cast<long long>(Num(e, "seq"))), Str(e, "at"),
                         Str(e, "team"), Str(e, "kind"), fmt::format("{:.4f}", Num(e, "credits")),
                         Str(e, "job"), Str(e, "tier"), fmt::format("{:.3f}", Num(e, "gpu_hours")),
                         Str(e, "note")},
                        e.value("reclaimed", false) ? " (reclaimed capacity)" : ""));
    }
  });

  // stoker silence --match uuid=GPU-1 [--match ...] --duration 2h --comment "RMA" (admin)
  static ServerAccess silence_access;
  static std::vector<std::string> silence_match;
  static std::string silence_duration = "2h", silence_comment;
  CLI::App* silence =
      app.add_subcommand("silence", "silence matching alerts on the server (admin)");
  AddServerAccess(silence, silence_access);
  silence->add_option("--match", silence_match, "LABEL=VALUE (repeatable; all must match)")
      ->required();
  silence->add_option("--duration", silence_duration, "how long (e.g. 90m, 2h)")
      ->capture_default_str();
  silence->add_option("--comment", silence_comment, "why");
  silence->callback([&exit_code] {
    nlohmann::json body = {{"matchers", nlohmann::json::object()},
                           {"duration", silence_duration},
                           {"comment", silence_comment}};
    for (const std::string& m : silence_match) {
      const size_t eq = m.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::cerr << "stoker silence: --match: expected LABEL=VALUE, got '" << m << "'\n";
        exit_code = kExitUsage;
        return;
      }
      body["matchers"][m.substr(0, eq)] = m.substr(eq + 1);
    }
    auto r = ServerRequest(silence_access, "POST", "/api/v1/silences", body.dump());
    if (!r.ok()) {
      std::cerr << "stoker: " << r.status().message() << "\n";
      exit_code = ExitCodeFor(r.status());
      return;
    }
    std::cout << *r << "\n";
    exit_code = kExitOk;
  });

#ifdef STOKER_HAVE_EFFICIENCY_SIM
  // `stoker sim efficiency`, under the simulator's command group when it is registered.
  static SimEffFlags sim_flags;
  CLI::App* parent = &app;
  try {
    parent = app.get_subcommand("sim");
  } catch (const CLI::OptionNotFound&) {
  }
  CLI::App* simeff =
      parent->add_subcommand("efficiency",
                             "static allocation vs idle reclaim vs reclaim+oversubscription on a "
                             "job trace (idleness model from PAI "
                             "statistics)");
  simeff->add_option("--trace", sim_flags.trace, "trace CSV")->required();
  simeff->add_option("--format", sim_flags.format, "itp, philly or tiresias");
  simeff->add_option("--cluster", sim_flags.cluster, "NODESxGPUS, e.g. 64x8");
  simeff->add_option("--queue", sim_flags.queue, "queue policy (fifo, sjf, ...)");
  simeff->add_option("--limit", sim_flags.limit, "first N jobs only");
  simeff->add_option("--idle-share", sim_flags.idle_share,
                     "share of jobs with an idle phase (default 0.36)");
  simeff->add_option("--seed", sim_flags.seed, "idleness model seed");
  simeff->add_option("--config,-c", sim_flags.config,
                     "efficiency configuration (idle_reclaim and oversubscription sections)");
  simeff->add_option(
      "--oversub-ratio", sim_flags.oversub_ratio,
      "reclaim+oversub variant: GPU commitments ratio, 1.0..1.5 (default: the config's "
      "oversubscription.max_ratio, or 1.5 where the config leaves it off)");
  simeff->add_option("--grace", sim_flags.grace, "preemption grace period (default: config, 2m)");
  simeff->add_option("--preemptible-share", sim_flags.preemptible_share,
                     "share of short single-GPU jobs that are preemptible (default 0.5)");
  simeff->add_option("--preemptible-max", sim_flags.preemptible_max,
                     "longest job that may be preemptible (default 2h)");
  simeff->add_option(
      "--busy-activity", sim_flags.busy_activity,
      "percent of its GPUs a busy guaranteed job uses; co-located jobs get the rest (default 60)");
  simeff->add_flag("--interference", sim_flags.interference,
                   "reclaim+oversub: a busy guaranteed job runs at 0.937 of its speed while "
                   "preemptible work shares its GPU (Lucid, ASPLOS 2023: mean measured speed of "
                   "co-located training jobs)");
  simeff->add_option("--shared-speed", sim_flags.shared_speed,
                     "that speed instead (0..1], e.g. 0.78, Lucid's 10th percentile");
  simeff->add_flag("--json", sim_flags.json, "JSON output");
  simeff->callback([&exit_code] { exit_code = RunSimEfficiency(sim_flags); });
  static SimSizeFlags size_flags;
  CLI::App* simsize = parent->add_subcommand(
      "size",
      "the smallest cluster (nodes of --gpus-per-node GPUs, found by search) that meets the "
      "queueing targets, for static allocation, idle reclaim and reclaim+oversubscription");
  simsize->add_option("--trace", size_flags.trace, "trace CSV");
  simsize->add_option("--history", size_flags.history,
                      "instead of a trace: the jobs and samples a server recorded (JSON lines, "
                      "as GET /api/v1/report?format=records gives them), or 'server' to fetch "
                      "them from the server (--server, --token); prices from --config's "
                      "price_per_gpu_hour");
  AddServerAccess(simsize, size_flags.server);
  simsize->add_option("--format", size_flags.format, "itp, philly or tiresias");
  simsize
      ->add_option("--max-mean-queue", size_flags.max_mean_queue,
                   "mean queueing delay target (at most)")
      ->capture_default_str();
  simsize
      ->add_option("--max-p99-queue", size_flags.max_p99_queue, "p99 queueing delay target (below)")
      ->capture_default_str();
  simsize->add_option("--gpus-per-node", size_flags.gpus_per_node, "GPUs per node")
      ->capture_default_str();
  simsize
      ->add_option("--variants", size_flags.variants,
                   "variants to size (static, reclaim, reclaim+oversub)")
      ->delimiter(',');
  simsize->add_option("--max-nodes", size_flags.max_nodes, "give up beyond this many nodes")
      ->capture_default_str();
  simsize->add_option("--queue", size_flags.queue, "queue policy (fifo, sjf, ...)");
  simsize->add_option("--limit", size_flags.limit, "first N jobs only");
  simsize->add_option("--idle-share", size_flags.idle_share,
                      "share of jobs with an idle phase (default 0.36)");
  simsize->add_option("--seed", size_flags.seed, "idleness model seed");
  simsize->add_option("--config,-c", size_flags.config,
                      "efficiency configuration (idle_reclaim and oversubscription sections)");
  simsize->add_option("--oversub-ratio", size_flags.oversub_ratio,
                      "reclaim+oversub variant: GPU commitments ratio, 1.0..1.5 (default 1.5)");
  simsize->add_option("--preemptible-share", size_flags.preemptible_share,
                      "share of short single-GPU jobs that are preemptible (default 0.5)");
  simsize->add_option("--busy-activity", size_flags.busy_activity,
                      "percent of its GPUs a busy guaranteed job uses (default 60)");
  simsize->add_flag("--interference", size_flags.interference,
                    "reclaim+oversub: a busy guaranteed job runs at 0.937 of its speed while "
                    "preemptible work shares its GPU (Lucid, ASPLOS 2023: mean measured speed of "
                    "co-located training jobs)");
  simsize->add_option("--shared-speed", size_flags.shared_speed,
                      "that speed instead (0..1], e.g. 0.78, Lucid's 10th percentile");
  simsize->add_flag("--json", size_flags.json, "JSON output");
  simsize->callback([&exit_code] { exit_code = RunSimSize(size_flags); });
#endif
}

}  // namespace stoker::cli
