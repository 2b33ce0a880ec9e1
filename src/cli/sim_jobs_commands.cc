// `stoker sim jobs`: replay a job trace through the production scheduler (docs/scheduling.md,
// "Dynamic experiment").

#include <fmt/core.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/cli.h"
#include "scheduler/queue/queue_policy.h"
#include "scheduler/registry.h"
#include "sim/jobs_partition.h"
#include "sim/jobs_report.h"
#include "sim/jobs_sim.h"
#include "sim/traces.h"

namespace stoker::cli {
namespace {

struct SimJobsArgs {
  std::string trace;
  std::string format = "itp";
  std::string cluster;
  std::string queue = "fifo";
  std::string backfill = "none";
  std::string policy;
  std::string csv;
  bool json = false;
  std::string plot;
  bool skip_bad_rows = false;
  size_t limit = 0;
  double preemption_overhead_s = 0;
  uint64_t seed = 42;
  bool no_progress = false;
  std::string group_clusters;
  std::string since;
  std::string until;
};

// A one-line progress bar on stderr, redrawn only when the shown percentage changes.
class ProgressBar {
 public:
  void Update(double fraction) {
    const int pct = static_cast<int>(fraction * 100);
    if (pct == last_) return;
    last_ = pct;
    constexpr int kWidth = 40;
    constexpr std::string_view kBar = "########################################";
    const int filled = pct * kWidth / 100;  // fraction is in [0, 1]: 0..kWidth
    fmt::print(stderr, "\r[{}{:{}}] {:3}%{}", kBar.substr(0, static_cast<size_t>(filled)), "",
               kWidth - filled, pct, pct >= 100 ? "\n" : "");
    (void)std::fflush(stderr);  // a progress bar: nothing to do when it cannot be shown
  }

 private:
  int last_ = -1;
};

int RunSimJobs(const SimJobsArgs& a) {
  auto fail = [](const Status& s) {
    std::cerr << "stoker sim jobs: " << s.ToString() << "\n";
    return ExitCodeFor(s);
  };
  auto format = sim::ParseTraceFormat(a.format);
  if (!format.ok()) return fail(format.status());
  auto queue_policy = queue::CreateQueuePolicy(a.queue);
  if (!queue_policy.ok()) return fail(queue_policy.status());
  auto backfill = sim::ParseBackfillMode(a.backfill);
  if (!backfill.ok()) return fail(backfill.status());
  if (a.json && a.csv == "-") {
    return fail(InvalidArgument("--json and --csv - both write to stdout; give --csv a file"));
  }
  if (a.preemption_overhead_s < 0) return fail(InvalidArgument("--preemption-overhead: negative"));

  sim::TraceLoadOptions load;
  load.skip_bad_rows = a.skip_bad_rows;
  load.limit = a.limit;
  auto trace = sim::LoadTrace(a.trace, *format, load);
  if (!trace.ok()) {
    return fail(trace.status());
  }
  if (trace->skipped_rows > 0) {
    std::cerr << "stoker sim jobs: skipped " << trace->skipped_rows << " bad rows in " << a.trace
              << "\n";
  }
  std::optional<int64_t> since, until;
  if (!a.since.empty()) {
    auto t = sim::ParseUtcDateTime(a.since);
    if (!t.ok()) return fail(t.status().WithContext("--since"));
    since = *t;
  }
  if (!a.until.empty()) {
    auto t = sim::ParseUtcDateTime(a.until);
    if (!t.ok()) return fail(t.status().WithContext("--until"));
    until = *t;
  }
  auto dropped = sim::FilterTraceWindow(*trace, since, until);
  if (!dropped.ok()) return fail(dropped.status());
  if (*dropped > 0)
    std::cerr << "stoker sim jobs: " << *dropped << " jobs outside the time window\n";

  sim::JobsSimOptions opt;
  if (!a.cluster.empty()) {
    auto shape = sim::ParseClusterShape(a.cluster);
    if (!shape.ok()) return fail(shape.status());
    opt.cluster = *shape;
  } else if (trace->cluster) {
    opt.cluster = *trace->cluster;
  }
  opt.placement_policy = a.policy.empty() ? std::string(scheduler::kDefaultPolicyName) : a.policy;
  opt.placement_config.seed = a.seed;
  opt.backfill = *backfill;
  opt.preemption_overhead_ms = static_cast<sim::SimMs>(a.preemption_overhead_s * 1000.0);
  ProgressBar bar;
  if (!a.no_progress && isatty(STDERR_FILENO)) opt.progress = [&bar](double f) { bar.Update(f); };

  std::vector<std::unique_ptr<sim::JobsSim>> owned;
  if (!a.group_clusters.empty()) {
    // One cluster per trace group (Philly VC), as the Helios simulator runs Philly.
    auto groups = sim::LoadGroupClusters(a.group_clusters);
    if (!groups.ok()) return fail(groups.status());
    opt.progress = nullptr;
    auto run = sim::RunPerGroup(*trace, *groups, opt.cluster.gpus_per_node, a.queue, opt);
    if (!run.ok()) return fail(run.status());
    if (run->dropped_jobs > 0) {
      std::cerr << "stoker sim jobs: " << run->dropped_jobs << " jobs of groups not in "
                << a.group_clusters << " dropped\n";
    }
    owned = std::move(run->sims);
  } else {
    auto simulator =
        sim::JobsSim::Create(sim::JobsFromTrace(*trace), std::move(queue_policy).value(), opt);
    if (!simulator.ok()) {
      return fail(simulator.status());
    }
    auto ran = (*simulator)->Run();
    if (!ran.ok()) return fail(ran.status());
    owned.push_back(std::move(simulator).value());
  }
  std::vector<const sim::JobsSim*> sims;
  sims.reserve(owned.size());
  for (const auto& s : owned) sims.push_back(s.get());
  auto report = sim::SummariseRuns(sims);
  if (!report.ok()) return fail(report.status());

  if (!a.csv.empty()) {
    if (a.csv == "-") {
      sim::WriteJobsCsv(sims, std::cout);
    } else {
      std::ofstream f(a.csv);
      if (!f) return fail(Internal(a.csv + ": cannot open for writing"));
      sim::WriteJobsCsv(sims, f);
      if (!f) return fail(Internal(a.csv + ": write failed"));
    }
  }
  if (!a.plot.empty()) {
    std::ofstream f(a.plot);
    if (!f) return fail(Internal(a.plot + ": cannot open for writing"));
    sim::WriteSvgPlot(sims, *report, f);
    if (!f) return fail(Internal(a.plot + ": write failed"));
  }
  if (a.json) {
    sim::WriteReportJson(*report, std::cout);
  } else if (a.csv != "-") {
    sim::WriteReportText(*report, std::cout);
  } else {
    sim::WriteReportText(*report, std::cerr);
  }
  return kExitOk;
}

}  // namespace

void RegisterSimJobsCommand(CLI::App& sim, int& exit_code) {
  auto args = std::make_shared<SimJobsArgs>();
  CLI::App* cmd = sim.add_subcommand(
      "jobs",
      "Dynamic experiment: replay a job trace (arrivals, queueing, preemption) and report JCT");
  cmd->add_option("--trace", args->trace, "Trace CSV file")->required();
  cmd->add_option("--format", args->format, "Trace format: itp, philly or tiresias")
      ->capture_default_str();
  cmd->add_option("--cluster", args->cluster,
                  "Homogeneous cluster NODESxGPUS, e.g. 64x8 (default: the trace's "
                  "cluster_spec.csv, else 64x8)");
  cmd->add_option("--queue", args->queue, "Queue policy: fifo, sjf, srtf, las or priority")
      ->capture_default_str();
  cmd->add_option("--backfill", args->backfill, "Backfill: none or easy")->capture_default_str();
  cmd->add_option("--policy", args->policy,
                  "Placement policy (default: " + std::string(scheduler::kDefaultPolicyName) + ")");
  cmd->add_option("--csv", args->csv, "Write per-job rows to FILE ('-' for stdout)");
  cmd->add_flag("--json", args->json, "Print the summary as JSON");
  cmd->add_option("--plot", args->plot, "Write an SVG (allocation over time, JCT CDF) to FILE");
  cmd->add_flag("--skip-bad-rows", args->skip_bad_rows,
                "Drop malformed rows (counted) instead of failing");
  cmd->add_option("--limit", args->limit, "Use only the first N jobs by submission time");
  cmd->add_option("--preemption-overhead", args->preemption_overhead_s,
                  "Seconds added to a preempted job's remaining time");
  cmd->add_option("--seed", args->seed, "Seed for randomised placement policies")
      ->capture_default_str();
  cmd->add_flag("--no-progress", args->no_progress, "Never draw the progress bar");
  cmd->add_option("--group-clusters", args->group_clusters,
                  "CSV 'group,nodes': one cluster of NODESxGPUS per trace group (Philly VC); "
                  "jobs of other groups are dropped");
  cmd->add_option("--since", args->since,
                  "Only jobs submitted at or after this UTC time (YYYY-MM-DD[ HH:MM:SS])");
  cmd->add_option("--until", args->until, "Only jobs submitted at or before this UTC time");
  cmd->callback([args, &exit_code] { exit_code = RunSimJobs(*args); });
}

}  // namespace stoker::cli
