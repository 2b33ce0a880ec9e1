#include "efficiency/metrics.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "core/prometheus_text.h"

namespace stoker::efficiency {
namespace {

constexpr Zone kZones[] = {Zone::kUnknown, Zone::kBronze, Zone::kSilver, Zone::kGold, Zone::kHot};

}  // namespace

MetricsSnapshot TakeMetrics(const EngineState& s) {
  MetricsSnapshot m;
  if (s.zones) {
    m.zones = true;
    m.gpus = s.zones->GpusUnsorted();
    m.jobs = s.zones->Jobs();
  }
  if (s.alerts) {
    m.alerts = true;
    s.alerts->ForEachActive(
        [&m](const Alert& a) {
          ++m.alert_counts[{a.rule, GradeName(a.grade), AlertStateName(a.state)}];
        },
        /*evaluated_only=*/true);
  }
  if (s.reclaim_log) {
    m.reclaim = true;
    for (ReclaimAction a : {ReclaimAction::kWarn, ReclaimAction::kRequeue, ReclaimAction::kCancel,
                            ReclaimAction::kExempt}) {
      m.reclaim_counts[ReclaimActionName(a)] = 0;
    }
    for (const auto& r : *s.reclaim_log) ++m.reclaim_counts[ReclaimActionName(r.action)];
  }
  if (s.cluster) m.cluster = *s.cluster;
  return m;
}

void FinishMetrics(MetricsSnapshot* m) {
  ZoneTracker::SortByKey(&m->gpus);
  std::stable_sort(m->estimate_rows.begin(), m->estimate_rows.end(),
                   [](const MetricsSnapshot::EstimateRow& a,
                      const MetricsSnapshot::EstimateRow& b) { return a.key < b.key; });
  // Each key's latest; among rows as recent as each other, the last taken.
  for (size_t i = 0; i < m->estimate_rows.size();) {
    size_t best = i, j = i + 1;
    for (; j < m->estimate_rows.size() && m->estimate_rows[j].key == m->estimate_rows[i].key; ++j) {
      if (m->estimate_rows[j].at >= m->estimate_rows[best].at) best = j;
    }
    m->gpu_estimates.emplace_hint(m->gpu_estimates.end(), std::move(m->estimate_rows[best].key),
                                  m->estimate_rows[best].estimate);
    i = j;
  }
  m->estimate_rows.clear();
}

void RenderMetrics(const MetricsSnapshot& m, std::string* out) {
  prom::TextWriter w;
  if (m.zones) {
    w.Family("stoker_efficiency_gpu_zone", "1 for the GPU's current zone (window mean activity).",
             prom::Type::kGauge);
    for (const auto& g : m.gpus) {
      for (Zone z : kZones) {
        w.Sample("stoker_efficiency_gpu_zone", {{"uuid", g.key}, {"zone", ZoneName(z)}},
                 g.zone == z ? 1 : 0);
      }
    }
    w.Family("stoker_efficiency_gpu_activity_ratio", "Mean activity over the zone window (0..1).",
             prom::Type::kGauge);
    for (const auto& g : m.gpus) {
      w.Sample("stoker_efficiency_gpu_activity_ratio", {{"uuid", g.key}},
               static_cast<double>(g.mean_milli) / 100'000.0);
    }
    w.Family("stoker_efficiency_job_zone", "1 for the job's current zone.", prom::Type::kGauge);
    for (const auto& j : m.jobs) {
      w.Sample("stoker_efficiency_job_zone", {{"jobid", j.key}, {"zone", ZoneName(j.zone)}}, 1);
    }
  }
  if (m.estimates) {
    w.Family("stoker_efficiency_gpu_tflops_estimate",
             "ESTIMATE of the TFLOPS the GPU achieves (tensor activity x tensor peak + the rest of "
             "SM activity x FP32 peak), from its latest sample.",
             prom::Type::kGauge);
    for (const auto& [key, e] : m.gpu_estimates) {
      if (e.tflops) w.Sample("stoker_efficiency_gpu_tflops_estimate", {{"uuid", key}}, *e.tflops);
    }
    w.Family("stoker_efficiency_gpu_tflops_per_watt_estimate",
             "ESTIMATE of the GPU's power efficiency: estimated TFLOPS per watt drawn, from its "
             "latest sample.",
             prom::Type::kGauge);
    for (const auto& [key, e] : m.gpu_estimates) {
      if (e.tflops_per_watt)
        w.Sample("stoker_efficiency_gpu_tflops_per_watt_estimate", {{"uuid", key}},
                 *e.tflops_per_watt);
    }
  }
  if (m.alerts) {
    w.Family("stoker_efficiency_alerts", "Active graded alerts by rule and state.",
             prom::Type::kGauge);
    for (const auto& [k, n] : m.alert_counts) {
      w.Sample(
          "stoker_efficiency_alerts",
          {{"alertname", std::get<0>(k)}, {"grade", std::get<1>(k)}, {"state", std::get<2>(k)}}, n);
    }
  }
  if (m.reclaim) {
    w.Family("stoker_efficiency_reclaim_actions_total", "Idle-reclaim records by action.",
             prom::Type::kCounter);
    for (const auto& [k, n] : m.reclaim_counts) {
      w.Sample("stoker_efficiency_reclaim_actions_total", {{"action", k}}, static_cast<double>(n));
    }
  }
  if (m.cluster) {
    w.Gauge("stoker_cluster_backlog_wait_seconds",
            "Longest wait among pending jobs that idle GPUs could run now (0 when no GPU is idle).",
            m.cluster->idle_gpus > 0 ? m.cluster->backlog_wait_s : 0.0);
  }
  *out += w.text();
}

}  // namespace stoker::efficiency
