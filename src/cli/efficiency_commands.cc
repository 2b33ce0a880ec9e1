// `stoker zones`, `stoker alerts`, `stoker reclaim`, `stoker report`: the efficiency engine on
// recorded samples (--input FILE.jsonl, format in src/efficiency/records.h). The server does not
// expose recorded samples yet, so these commands work offline only.

#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "efficiency/http_poster.h"
#include "efficiency/replay.h"
#include "efficiency/report.h"
#ifdef STOKER_HAVE_EFFICIENCY_SIM
#include "efficiency/sim_idle.h"
#include "sim/traces.h"
#endif

namespace stoker::cli {
namespace {

namespace eff = stoker::efficiency;

struct CommonFlags {
  std::string input;
  std::string config;
  bool json = false;
};

void AddCommon(CLI::App* cmd, CommonFlags& f) {
  cmd->add_option("--input,-i", f.input, "recorded samples and jobs (JSON lines)")->required();
  cmd->add_option("--config,-c", f.config, "efficiency configuration (YAML)");
}

// Loads config and records; prints the error and returns the exit code on failure.
int Load(const CommonFlags& f, eff::EfficiencyConfig* cfg, eff::RecordSet* records) {
  auto c = f.config.empty() ? eff::LoadConfigYaml("") : eff::LoadConfigFile(f.config);
  if (!c.ok()) {
    std::cerr << "error: " << c.status().message() << "\n";
    return c.status().code() == StatusCode::kNotFound ? kExitNotFound : kExitUsage;
  }
  for (const auto& e : c->rule_errors) std::cerr << "warning: rule skipped: " << e.message() << "\n";
  *cfg = std::move(c).value();
  auto r = eff::ReadRecordsFile(f.input);
  if (!r.ok()) {
    std::cerr << "error: " << r.status().message() << "\n";
    return r.status().code() == StatusCode::kNotFound ? kExitNotFound : kExitUsage;
  }
  *records = std::move(r).value();
  return kExitOk;
}

std::string Pct(int64_t milli) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", static_cast<double>(milli) / 1000.0);
  return b;
}

int RunZones(const CommonFlags& f) {
  eff::EfficiencyConfig cfg;
  eff::RecordSet recs;
  if (int rc = Load(f, &cfg, &recs); rc != kExitOk) return rc;
  const eff::ZoneReplay z = eff::ReplayZones(recs, cfg);
  if (f.json) {
    nlohmann::json j;
    for (const auto* list : {&z.gpus, &z.jobs}) {
      auto& arr = j[list == &z.gpus ? "gpus" : "jobs"] = nlohmann::json::array();
      for (const auto& s : *list) {
        arr.push_back({{"key", s.key}, {"zone", eff::ZoneName(s.zone)}, {"mean_pct", s.mean_milli / 1000.0},
                       {"peak_pct", s.peak_milli / 1000.0}, {"samples", s.samples},
                       {"metric", eff::ActivityMetricName(s.metric)}});
      }
    }
    j["consolidation"] = nlohmann::json::array();
    for (const auto& g : z.plan.groups) {
      j["consolidation"].push_back({{"jobs", g.jobs}, {"mode", eff::ShareModeName(g.mode)},
                                    {"mig_layout", g.mig_layout}, {"combined_pct", g.combined_milli / 1000.0},
                                    {"apply_now", g.apply_now}, {"gpus_freed", g.gpus_freed}, {"reason", g.reason}});
    }
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  for (const auto* list : {&z.gpus, &z.jobs}) {
    std::cout << (list == &z.gpus ? "GPU" : "JOB") << "                                       ZONE     MEAN%   PEAK%  SAMPLES  METRIC\n";
    for (const auto& s : *list) {
      std::printf("%-40s  %-7s %6s  %6s  %7lld  %s\n", s.key.c_str(), eff::ZoneName(s.zone), Pct(s.mean_milli).c_str(),
                  Pct(s.peak_milli).c_str(), static_cast<long long>(s.samples), eff::ActivityMetricName(s.metric));
    }
    std::cout << "\n";
  }
  std::cout << "Consolidation plan (window " << eff::FormatDuration(cfg.zones.window) << "): "
            << z.plan.gpus_freed << " GPU(s) freed\n";
  for (const auto& g : z.plan.groups) {
    std::cout << "  pack";
    for (const auto& j : g.jobs) std::cout << " " << j;
    std::cout << " -> " << eff::ShareModeName(g.mode) << (g.mig_layout.empty() ? "" : " " + g.mig_layout) << ", "
              << Pct(g.combined_milli) << " % combined, " << (g.apply_now ? "now (movable)" : "at next start") << ": "
              << g.reason << "\n";
  }
  return kExitOk;
}

int RunAlerts(const CommonFlags& f, const std::string& alertmanager) {
  eff::EfficiencyConfig cfg;
  eff::RecordSet recs;
  if (int rc = Load(f, &cfg, &recs); rc != kExitOk) return rc;
  eff::LogNotifier log;
  eff::HttplibPoster poster;
  std::unique_ptr<eff::AlertmanagerNotifier> am;
  std::vector<eff::Notifier*> notifiers;
  if (!alertmanager.empty()) {
    am = std::make_unique<eff::AlertmanagerNotifier>(poster, alertmanager,
                                                     cfg.alerting.repeat_interval + std::chrono::minutes(15));
    notifiers.push_back(am.get());
  }
  const eff::AlertReplay r = eff::ReplayAlerts(recs, cfg, notifiers);
  if (f.json) {
    nlohmann::json j;
    for (const auto* list : {&r.fired, &r.active}) {
      auto& arr = j[list == &r.fired ? "fired" : "active"] = nlohmann::json::array();
      for (const auto& a : *list) {
        arr.push_back({{"rule", a.rule}, {"grade", eff::GradeName(a.grade)}, {"state", eff::AlertStateName(a.state)},
                       {"labels", a.labels}, {"starts_at", eff::FormatRfc3339(a.starts_at)},
                       {"summary", a.annotations.count("summary") ? a.annotations.at("summary") : ""},
                       {"silenced", a.silenced}, {"inhibited", a.inhibited}});
      }
    }
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "Fired (" << r.fired.size() << ")\n";
    for (const auto& a : r.fired) {
      std::cout << "  " << eff::FormatRfc3339(a.starts_at) << "  " << eff::GradeName(a.grade) << "  " << a.rule << "  "
                << a.subject << "  " << (a.annotations.count("summary") ? a.annotations.at("summary") : "") << "\n";
    }
    std::cout << "Active at end (" << r.active.size() << ")\n";
    for (const auto& a : r.active) {
      std::cout << "  " << eff::AlertStateName(a.state) << "  " << eff::GradeName(a.grade) << "  " << a.rule << "  "
                << a.subject << (a.inhibited ? "  (inhibited)" : "") << (a.silenced ? "  (silenced)" : "") << "\n";
    }
  }
  for (const auto& e : r.errors) std::cerr << "error: " << e.ToString() << "\n";
  return r.errors.empty() ? kExitOk : kExitUnavailable;
}

int RunReclaim(const CommonFlags& f) {
  eff::EfficiencyConfig cfg;
  eff::RecordSet recs;
  if (int rc = Load(f, &cfg, &recs); rc != kExitOk) return rc;
  const auto log = eff::ReplayReclaim(recs, cfg);
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& r : log) {
    if (f.json) {
      arr.push_back({{"at", eff::FormatRfc3339(r.at)}, {"job", r.job}, {"user", r.user},
                     {"action", eff::ReclaimActionName(r.action)}, {"dry_run", r.dry_run}, {"reason", r.reason},
                     {"evidence", {{"window_start", eff::FormatRfc3339(r.evidence.window_start)},
                                   {"window_end", eff::FormatRfc3339(r.evidence.window_end)},
                                   {"samples", r.evidence.samples},
                                   {"max_activity_pct", r.evidence.max_activity_milli / 1000.0},
                                   {"gpus", r.evidence.gpus}, {"idle_gpus", r.evidence.idle_gpus},
                                   {"idle_threshold_pct", r.evidence.idle_threshold_milli / 1000.0},
                                   {"warn_after", eff::FormatDuration(r.evidence.warn_after)},
                                   {"act_after", eff::FormatDuration(r.evidence.act_after)}}}});
    } else {
      std::cout << eff::FormatRfc3339(r.at) << "  " << eff::ReclaimActionName(r.action) << " (dry run)  " << r.job
                << "  " << r.user << "  " << r.reason << "  [" << r.evidence.idle_gpus << "/" << r.evidence.gpus
                << " GPUs idle, " << r.evidence.samples << " samples, max " << Pct(r.evidence.max_activity_milli)
                << " %, since " << eff::FormatRfc3339(r.evidence.window_start) << "]\n";
    }
  }
  if (f.json) std::cout << arr.dump(2) << "\n";
  else if (log.empty()) std::cout << "no job idle long enough to warn (warn_after " << eff::FormatDuration(cfg.idle.warn_after) << ")\n";
  return kExitOk;
}

int RunReport(const CommonFlags& f, bool csv, const std::string& html, const std::string& bucket) {
  eff::EfficiencyConfig cfg;
  eff::RecordSet recs;
  if (int rc = Load(f, &cfg, &recs); rc != kExitOk) return rc;
  eff::ReportOptions opt;
  if (!bucket.empty()) {
    auto d = eff::ParseDuration(bucket);
    if (!d.ok()) {
      std::cerr << "error: --bucket: " << d.status().message() << "\n";
      return kExitUsage;
    }
    opt.bucket = *d;
  }
  const eff::Report r = eff::BuildReport(recs, cfg, opt);
  if (!html.empty()) {
    std::ofstream out(html);
    out << eff::RenderHtml(r);
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
};

int RunSimEfficiency(const SimEffFlags& f) {
  auto fail = [](const Status& s, int code) {
    std::cerr << "stoker sim efficiency: " << s.ToString() << "\n";
    return code;
  };
  auto cfg = f.config.empty() ? eff::LoadConfigYaml("") : eff::LoadConfigFile(f.config);
  if (!cfg.ok()) return fail(cfg.status(), kExitUsage);
  auto format = sim::ParseTraceFormat(f.format);
  if (!format.ok()) return fail(format.status(), kExitUsage);
  if (f.idle_share < 0 || f.idle_share > 1) return fail(InvalidArgument("--idle-share: must be in [0, 1]"), kExitUsage);
  sim::TraceLoadOptions load;
  load.limit = f.limit;
  load.skip_bad_rows = true;
  auto trace = sim::LoadTrace(f.trace, *format, load);
  if (!trace.ok()) return fail(trace.status(), trace.status().code() == StatusCode::kNotFound ? kExitNotFound : kExitFailure);
  sim::JobsSimOptions opt;
  if (!f.cluster.empty()) {
    auto shape = sim::ParseClusterShape(f.cluster);
    if (!shape.ok()) return fail(shape.status(), kExitUsage);
    opt.cluster = *shape;
  } else if (trace->cluster) {
    opt.cluster = *trace->cluster;
  }
  eff::EfficiencySimOptions o;
  o.idleness.idle_share = f.idle_share;
  o.idleness.seed = f.seed;
  o.policy = cfg->idle;
  o.queue_policy = f.queue;
  auto results = eff::CompareReclaim(sim::JobsFromTrace(*trace), opt, o);
  if (!results.ok()) return fail(results.status(), kExitFailure);
  nlohmann::json arr = nlohmann::json::array();
  if (!f.json) {
    std::printf("trace %s: %zu jobs, cluster %dx%d, queue %s, idle share %.2f, warn %s, act %s\n", f.trace.c_str(),
                trace->jobs.size(), opt.cluster.nodes, opt.cluster.gpus_per_node, f.queue.c_str(), f.idle_share,
                eff::FormatDuration(o.policy.warn_after).c_str(), eff::FormatDuration(o.policy.act_after).c_str());
    std::printf("%-8s %10s %10s %12s %12s %12s %12s %10s %12s\n", "variant", "used-util%", "alloc%", "queue-mean-s",
                "queue-p99-s", "jct-mean-s", "jct-median-s", "reclaimed", "freed-GPU-h");
  }
  for (const auto& v : *results) {
    if (f.json) {
      arr.push_back({{"variant", v.name}, {"used_gpu_utilization_pct", v.used_gpu_utilization_pct},
                     {"mean_allocation_pct", v.report.mean_allocation_pct},
                     {"queue_delay_mean_s", v.report.queue_delay_s.mean}, {"queue_delay_p99_s", v.report.queue_delay_s.p99},
                     {"jct_mean_s", v.report.jct_s.mean}, {"jct_median_s", v.report.jct_s.median},
                     {"jct_p99_s", v.report.jct_s.p99}, {"makespan_s", v.report.makespan_s},
                     {"jobs_reclaimed", v.jobs_reclaimed}, {"gpu_hours_reclaimed", v.gpu_hours_reclaimed},
                     {"busy_gpu_hours", v.busy_gpu_hours}, {"jobs_completed", v.report.jobs_completed}});
    } else {
      std::printf("%-8s %10.1f %10.1f %12.0f %12.0f %12.0f %12.0f %10lld %12.0f\n", v.name.c_str(),
                  v.used_gpu_utilization_pct, v.report.mean_allocation_pct, v.report.queue_delay_s.mean,
                  v.report.queue_delay_s.p99, v.report.jct_s.mean, v.report.jct_s.median,
                  static_cast<long long>(v.jobs_reclaimed), v.gpu_hours_reclaimed);
    }
  }
  if (f.json) std::cout << arr.dump(2) << "\n";
  return kExitOk;
}
#endif

}  // namespace

void RegisterEfficiencyCommands(CLI::App& app, int& exit_code) {
  static CommonFlags zones_flags, alerts_flags, reclaim_flags, report_flags;
  static std::string alertmanager, html, bucket;
  static bool csv = false;

  CLI::App* zones = app.add_subcommand("zones", "GPU and job zones (gold/silver/bronze/hot) and a consolidation plan");
  AddCommon(zones, zones_flags);
  zones->add_flag("--json", zones_flags.json, "JSON output");
  zones->callback([&exit_code] { exit_code = RunZones(zones_flags); });

  CLI::App* alerts = app.add_subcommand("alerts", "graded alerts (yellow/orange/red) replayed over recorded samples");
  AddCommon(alerts, alerts_flags);
  alerts->add_flag("--json", alerts_flags.json, "JSON output");
  alerts->add_option("--alertmanager", alertmanager, "also POST notifications to this Alertmanager (http://host:9093)");
  alerts->callback([&exit_code] { exit_code = RunAlerts(alerts_flags, alertmanager); });

  CLI::App* reclaim = app.add_subcommand("reclaim", "idle-reclaim decisions over recorded samples (dry run)");
  AddCommon(reclaim, reclaim_flags);
  reclaim->add_flag("--json", reclaim_flags.json, "JSON output");
  reclaim->callback([&exit_code] { exit_code = RunReclaim(reclaim_flags); });

  CLI::App* report = app.add_subcommand("report", "efficiency report per job, user/team and cluster");
  AddCommon(report, report_flags);
  auto* json_flag = report->add_flag("--json", report_flags.json, "JSON output");
  auto* csv_flag = report->add_flag("--csv", csv, "CSV, one row per job");
  auto* html_opt = report->add_option("--html", html, "write a self-contained HTML page to FILE");
  json_flag->excludes(csv_flag)->excludes(html_opt);
  csv_flag->excludes(html_opt);
  report->add_option("--bucket", bucket, "time bucket of the cluster series (e.g. 1h; default: span/48)");
  report->callback([&exit_code] { exit_code = RunReport(report_flags, csv, html, bucket); });

#ifdef STOKER_HAVE_EFFICIENCY_SIM
  // `stoker sim efficiency`, under the simulator's command group when it is registered.
  static SimEffFlags sim_flags;
  CLI::App* parent = &app;
  try {
    parent = app.get_subcommand("sim");
  } catch (const CLI::OptionNotFound&) {
  }
  CLI::App* simeff = parent->add_subcommand(
      "efficiency", "static allocation vs idle reclaim on a job trace (idleness model from PAI statistics)");
  simeff->add_option("--trace", sim_flags.trace, "trace CSV")->required();
  simeff->add_option("--format", sim_flags.format, "itp, philly or tiresias");
  simeff->add_option("--cluster", sim_flags.cluster, "NODESxGPUS, e.g. 64x8");
  simeff->add_option("--queue", sim_flags.queue, "queue policy (fifo, sjf, ...)");
  simeff->add_option("--limit", sim_flags.limit, "first N jobs only");
  simeff->add_option("--idle-share", sim_flags.idle_share, "share of jobs with an idle phase (default 0.36)");
  simeff->add_option("--seed", sim_flags.seed, "idleness model seed");
  simeff->add_option("--config,-c", sim_flags.config, "efficiency configuration (idle_reclaim section)");
  simeff->add_flag("--json", sim_flags.json, "JSON output");
  simeff->callback([&exit_code] { exit_code = RunSimEfficiency(sim_flags); });
#endif
}

}  // namespace stoker::cli
