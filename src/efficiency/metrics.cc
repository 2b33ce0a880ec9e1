#include "efficiency/metrics.h"

#include <map>
#include <string>
#include <tuple>

#include "core/prometheus_text.h"

namespace stoker::efficiency {
namespace {

constexpr Zone kZones[] = {Zone::kUnknown, Zone::kBronze, Zone::kSilver, Zone::kGold, Zone::kHot};

}  // namespace

void RenderMetrics(const EngineState& s, std::string* out) {
  prom::TextWriter w;
  if (s.zones) {
    w.Family("stoker_efficiency_gpu_zone", "1 for the GPU's current zone (window mean activity).",
             prom::Type::kGauge);
    const auto gpus = s.zones->Gpus();
    for (const auto& g : gpus) {
      for (Zone z : kZones) {
        w.Sample("stoker_efficiency_gpu_zone", {{"uuid", g.key}, {"zone", ZoneName(z)}},
                 g.zone == z ? 1 : 0);
      }
    }
    w.Family("stoker_efficiency_gpu_activity_ratio", "Mean activity over the zone window (0..1).",
             prom::Type::kGauge);
    for (const auto& g : gpus) {
      w.Sample("stoker_efficiency_gpu_activity_ratio", {{"uuid", g.key}},
               static_cast<double>(g.mean_milli) / 100'000.0);
    }
    w.Family("stoker_efficiency_job_zone", "1 for the job's current zone.", prom::Type::kGauge);
    for (const auto& j : s.zones->Jobs()) {
      w.Sample("stoker_efficiency_job_zone", {{"jobid", j.key}, {"zone", ZoneName(j.zone)}}, 1);
    }
  }
  if (s.gpu_estimates) {
    w.Family("stoker_efficiency_gpu_tflops_estimate",
             "ESTIMATE of the TFLOPS the GPU achieves (tensor activity x tensor peak + the rest of "
             "SM activity x FP32 peak), from its latest sample.",
             prom::Type::kGauge);
    for (const auto& [key, e] : *s.gpu_estimates) {
      if (e.tflops) w.Sample("stoker_efficiency_gpu_tflops_estimate", {{"uuid", key}}, *e.tflops);
    }
    w.Family("stoker_efficiency_gpu_tflops_per_watt_estimate",
             "ESTIMATE of the GPU's power efficiency: estimated TFLOPS per watt drawn, from its "
             "latest sample.",
             prom::Type::kGauge);
    for (const auto& [key, e] : *s.gpu_estimates) {
      if (e.tflops_per_watt)
        w.Sample("stoker_efficiency_gpu_tflops_per_watt_estimate", {{"uuid", key}},
                 *e.tflops_per_watt);
    }
  }
  if (s.alerts) {
    w.Family("stoker_efficiency_alerts", "Active graded alerts by rule and state.",
             prom::Type::kGauge);
    std::map<std::tuple<std::string, std::string, std::string>, int> counts;
    s.alerts->ForEachActive(
        [&counts](const Alert& a) {
          ++counts[{a.rule, GradeName(a.grade), AlertStateName(a.state)}];
        },
        /*evaluated_only=*/true);
    for (const auto& [k, n] : counts) {
      w.Sample(
          "stoker_efficiency_alerts",
          {{"alertname", std::get<0>(k)}, {"grade", std::get<1>(k)}, {"state", std::get<2>(k)}}, n);
    }
  }
  if (s.reclaim_log) {
    w.Family("stoker_efficiency_reclaim_actions_total", "Idle-reclaim records by action.",
             prom::Type::kCounter);
    std::map<std::string, int64_t> counts;
    for (ReclaimAction a : {ReclaimAction::kWarn, ReclaimAction::kRequeue, ReclaimAction::kCancel,
                            ReclaimAction::kExempt}) {
      counts[ReclaimActionName(a)] = 0;
    }
    for (const auto& r : *s.reclaim_log) ++counts[ReclaimActionName(r.action)];
    for (const auto& [k, n] : counts) {
      w.Sample("stoker_efficiency_reclaim_actions_total", {{"action", k}}, static_cast<double>(n));
    }
  }
  if (s.cluster) {
    w.Gauge("stoker_cluster_backlog_wait_seconds",
            "Longest wait among pending jobs that idle GPUs could run now (0 when no GPU is idle).",
            s.cluster->idle_gpus > 0 ? s.cluster->backlog_wait_s : 0.0);
  }
  *out += w.text();
}

}  // namespace stoker::efficiency
