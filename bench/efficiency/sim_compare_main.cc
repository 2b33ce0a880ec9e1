// Standalone driver for the reclaim comparison (the same CompareReclaim as
// `stoker sim efficiency`), usable while the full CLI does not link:
//   efficiency_sim_compare TRACE FORMAT CLUSTER [LIMIT] [QUEUE]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "efficiency/sim_idle.h"
#include "sim/traces.h"

int main(int argc, char** argv) {
  using namespace stoker;
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s TRACE FORMAT NODESxGPUS [LIMIT] [QUEUE]\n", argv[0]);
    return 2;
  }
  auto format = sim::ParseTraceFormat(argv[2]);
  auto shape = sim::ParseClusterShape(argv[3]);
  if (!format.ok() || !shape.ok()) {
    std::fprintf(stderr, "bad format or cluster\n");
    return 2;
  }
  sim::TraceLoadOptions load;
  load.skip_bad_rows = true;
  load.limit = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 0;
  auto trace = sim::LoadTrace(argv[1], *format, load);
  if (!trace.ok()) {
    std::fprintf(stderr, "%s\n", trace.status().ToString().c_str());
    return 1;
  }
  sim::JobsSimOptions opt;
  opt.cluster = *shape;
  efficiency::EfficiencySimOptions o;
  if (argc > 5) o.queue_policy = argv[5];
  auto r = efficiency::CompareReclaim(sim::JobsFromTrace(*trace), opt, o);
  if (!r.ok()) {
    std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
    return 1;
  }
  std::printf("trace %s: %zu jobs, cluster %dx%d, queue %s, idle share %.2f, oversub %.2f:1\n",
              argv[1], trace->jobs.size(), shape->nodes, shape->gpus_per_node,
              o.queue_policy.c_str(), o.idleness.idle_share,
              static_cast<double>(o.oversub.max_ratio_milli) / 1000.0);
  std::printf(
      "| variant | used-GPU util %% | allocated %% | queue delay mean s | queue delay p99 s | JCT "
      "mean s | JCT median s | jobs reclaimed | GPU-h freed "
      "|\n|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& v : *r) {
    std::printf("| %s | %.1f | %.1f | %.0f | %.0f | %.0f | %.0f | %lld | %.0f |\n", v.name.c_str(),
                v.used_gpu_utilization_pct, v.report.mean_allocation_pct,
                v.report.queue_delay_s.mean, v.report.queue_delay_s.p99, v.report.jct_s.mean,
                v.report.jct_s.median, static_cast<long long>(v.jobs_reclaimed),
                v.gpu_hours_reclaimed);
  }
  std::printf(
      "\n| variant | tier | jobs | queue delay mean s | queue delay p99 s | JCT mean s | JCT "
      "median s | preemptions | lost GPU-h |\n|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& v : *r) {
    for (const auto* t : {&v.guaranteed, &v.preemptible}) {
      std::printf("| %s | %s | %lld | %.0f | %.0f | %.0f | %.0f | %lld | %.0f |\n", v.name.c_str(),
                  t == &v.guaranteed ? "guaranteed" : "preemptible",
                  static_cast<long long>(t->jobs), t->queue_delay_s.mean, t->queue_delay_s.p99,
                  t->jct_s.mean, t->jct_s.median, static_cast<long long>(t->preemptions),
                  t->lost_gpu_hours);
    }
  }
  return 0;
}
