#include "efficiency/metrics.h"

#include <map>
#include <string>
#include <tuple>

namespace stoker::efficiency {
namespace {

// Label values: escape backslash, quote and newline as the exposition format requires.
std::string Esc(const std::string& v) {
  std::string o;
  for (char c : v) {
    if (c == '\\')
      o += "\\\\";
    else if (c == '"')
      o += "\\\"";
    else if (c == '\n')
      o += "\\n";
    else
      o += c;
  }
  return o;
}

void Header(std::string* out, const char* name, const char* help, const char* type) {
  *out += "# HELP ";
  *out += name;
  *out += ' ';
  *out += help;
  *out += "\n# TYPE ";
  *out += name;
  *out += ' ';
  *out += type;
  *out += '\n';
}

constexpr Zone kZones[] = {Zone::kUnknown, Zone::kBronze, Zone::kSilver, Zone::kGold, Zone::kHot};

}  // namespace

void RenderMetrics(const EngineState& s, std::string* out) {
  if (s.zones) {
    Header(out, "stoker_efficiency_gpu_zone",
           "1 for the GPU's current zone (window mean activity).", "gauge");
    const auto gpus = s.zones->Gpus();
    for (const auto& g : gpus) {
      for (Zone z : kZones) {
        *out += "stoker_efficiency_gpu_zone{uuid=\"" + Esc(g.key) + "\",zone=\"" + ZoneName(z) +
                "\"} " + (g.zone == z ? "1\n" : "0\n");
      }
    }
    Header(out, "stoker_efficiency_gpu_activity_ratio",
           "Mean activity over the zone window (0..1).", "gauge");
    for (const auto& g : gpus) {
      *out += "stoker_efficiency_gpu_activity_ratio{uuid=\"" + Esc(g.key) + "\"} " +
              std::to_string(static_cast<double>(g.mean_milli) / 100'000.0) + "\n";
    }
    Header(out, "stoker_efficiency_job_zone", "1 for the job's current zone.", "gauge");
    for (const auto& j : s.zones->Jobs()) {
      *out += "stoker_efficiency_job_zone{jobid=\"" + Esc(j.key) + "\",zone=\"" + ZoneName(j.zone) +
              "\"} 1\n";
    }
  }
  if (s.active_alerts) {
    Header(out, "stoker_efficiency_alerts", "Active graded alerts by rule and state.", "gauge");
    std::map<std::tuple<std::string, std::string, std::string>, int> counts;
    for (const auto& a : *s.active_alerts)
      ++counts[{a.rule, GradeName(a.grade), AlertStateName(a.state)}];
    for (const auto& [k, n] : counts) {
      *out += "stoker_efficiency_alerts{alertname=\"" + Esc(std::get<0>(k)) + "\",grade=\"" +
              std::get<1>(k) + "\",state=\"" + std::get<2>(k) + "\"} " + std::to_string(n) + "\n";
    }
  }
  if (s.reclaim_log) {
    Header(out, "stoker_efficiency_reclaim_actions_total", "Idle-reclaim records by action.",
           "counter");
    std::map<std::string, int64_t> counts;
    for (ReclaimAction a : {ReclaimAction::kWarn, ReclaimAction::kRequeue, ReclaimAction::kCancel,
                            ReclaimAction::kExempt}) {
      counts[ReclaimActionName(a)] = 0;
    }
    for (const auto& r : *s.reclaim_log) ++counts[ReclaimActionName(r.action)];
    for (const auto& [k, n] : counts) {
      *out += "stoker_efficiency_reclaim_actions_total{action=\"" + k + "\"} " + std::to_string(n) +
              "\n";
    }
  }
  if (s.cluster) {
    Header(out, "stoker_cluster_backlog_wait_seconds",
           "Longest wait among pending jobs that idle GPUs could run now (0 when no GPU is idle).",
           "gauge");
    *out += "stoker_cluster_backlog_wait_seconds " +
            std::to_string(s.cluster->idle_gpus > 0 ? s.cluster->backlog_wait_s : 0.0) + "\n";
  }
}

}  // namespace stoker::efficiency
