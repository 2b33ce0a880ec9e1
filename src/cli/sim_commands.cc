#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli.h"
#include "core/integer.h"
#include "scheduler/registry.h"
#include "sim/packing.h"
#include "sim/packing_trace.h"
#include "sim/packing_workload.h"

namespace stoker::cli {

// `stoker sim packing` (static packing experiment) lives here; `stoker sim jobs` (dynamic
// experiment) is registered by sim_jobs_commands.cc.
void RegisterSimJobsCommand(CLI::App& sim, int& exit_code);

namespace {

// "42-51" or "42,45,50" or "7".
Result<std::vector<uint64_t>> ParseSeeds(const std::string& text) {
  std::vector<uint64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) return InvalidArgument("--seeds: empty item in '" + text + "'");
    auto parse = [&](std::string_view s, uint64_t* v) {
      auto parsed = ParseUint(s);
      if (parsed.ok()) *v = *parsed;
      return parsed.ok();
    };
    size_t dash = item.find('-');
    uint64_t a = 0, b = 0;
    if (dash == std::string::npos) {
      if (!parse(item, &a)) return InvalidArgument("--seeds: not a number: '" + item + "'");
      b = a;
    } else if (!parse(std::string_view(item).substr(0, dash), &a) ||
               !parse(std::string_view(item).substr(dash + 1), &b) || b < a || b - a > 10000) {
      return InvalidArgument("--seeds: bad range '" + item + "' (want e.g. 42-51)");
    }
    for (uint64_t s = a; s <= b; ++s) out.push_back(s);
    if (comma == text.size()) break;
  }
  return out;
}

struct PackingFlags {
  std::string nodes, pods, policy = std::string(scheduler::kDefaultPolicyName), seeds = "42-51";
  double inflate = 1.3;
  std::string csv, plot;
  bool skip_bad_rows = false;
  int threads = 0;
  sim::WorkloadVariant variant;
  int64_t variant_seed = -1;  // -1: each run draws its variant with its own seed
};

int RunPackingCommand(const PackingFlags& f) {
  if (f.inflate < 0.1 || f.inflate > 10) {
    std::cerr << "error: --inflate must be within 0.1..10\n";
    return kExitUsage;
  }
  if (Status v = sim::ValidateWorkloadVariant(f.variant); !v.ok()) {
    std::cerr << "error: " << v.message() << "\n";
    return kExitUsage;
  }
  auto seeds = ParseSeeds(f.seeds);
  if (!seeds.ok()) {
    std::cerr << "error: " << seeds.status().message() << "\n";
    return kExitUsage;
  }
  std::vector<std::string> policies;
  if (f.policy == "all") {
    policies = scheduler::PlacementPolicyNames();
  } else {
    for (size_t pos = 0; pos <= f.policy.size();) {
      const size_t comma = std::min(f.policy.find(',', pos), f.policy.size());
      policies.push_back(f.policy.substr(pos, comma - pos));
      pos = comma + 1;
    }
  }
  for (const std::string& p : policies) {
    auto made = scheduler::CreatePlacementPolicy(p, {});
    if (!made.ok()) {
      std::cerr << "error: " << made.status().message() << "\n";
      return kExitUsage;
    }
  }
  int64_t skipped_nodes = 0;
  auto cluster = sim::LoadOpenbNodes(f.nodes, f.skip_bad_rows, &skipped_nodes);
  if (!cluster.ok()) {
    std::cerr << "error: " << cluster.status().message() << "\n";
    return ExitCodeFor(cluster.status());
  }
  auto pods = sim::LoadOpenbPods(f.pods, cluster->models(), f.skip_bad_rows);
  if (!pods.ok()) {
    std::cerr << "error: " << pods.status().message() << "\n";
    return ExitCodeFor(pods.status());
  }
  if (f.skip_bad_rows) {
    std::cerr << "skipped bad rows: " << skipped_nodes << " in " << f.nodes << ", "
              << pods->skipped_rows << " in " << f.pods << "\n";
  }
  const std::string workload = f.variant.Name(pods->workload);
  std::optional<uint64_t> variant_seed;
  if (f.variant_seed >= 0) variant_seed = static_cast<uint64_t>(f.variant_seed);
  const auto inflate_permille = static_cast<int32_t>(std::lround(f.inflate * 1000.0));

  // One job per (policy, seed); workers take the next job index.
  const size_t n_seeds = seeds->size();
  const size_t n_jobs = policies.size() * n_seeds;
  std::vector<Result<sim::PackingCurve>> results(n_jobs,
                                                 Result<sim::PackingCurve>(Internal("not run")));
  std::atomic<size_t> next{0}, done{0};
  std::mutex progress_mu;
  const bool tty = isatty(STDERR_FILENO) != 0;
  auto worker = [&] {
    for (size_t j = next++; j < n_jobs; j = next++) {
      sim::PackingRun run{policies[j / n_seeds], (*seeds)[j % n_seeds], inflate_permille};
      results[j] = sim::RunPackingVariant(*cluster, pods->pods, f.variant, variant_seed, run);
      const size_t d = ++done;
      if (tty) {
        std::lock_guard<std::mutex> lock(progress_mu);
        const int width = 30;
        const int filled = static_cast<int>(d * width / n_jobs);
        fmt::print(stderr, "\r[{}{}] {}/{} runs", std::string(filled, '#'),
                   std::string(width - filled, '.'), d, n_jobs);
        if (d == n_jobs) fmt::print(stderr, "\n");
      }
    }
  };
  int threads = f.threads > 0 ? f.threads
                              : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads =
      static_cast<int>(std::min<size_t>(static_cast<size_t>(threads), std::max<size_t>(1, n_jobs)));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();

  std::string csv = sim::PackingCsvHeader();
  std::vector<std::pair<std::string, sim::PackingCurve>> curves;
  for (size_t p = 0; p < policies.size(); ++p) {
    std::vector<sim::PackingCurve> runs;
    for (size_t s = 0; s < n_seeds; ++s) {
      auto& r = results[p * n_seeds + s];
      if (!r.ok()) {
        std::cerr << "error: policy " << policies[p] << " seed " << (*seeds)[s] << ": "
                  << r.status().message() << "\n";
        return ExitCodeFor(r.status());
      }
      runs.push_back(*r);
    }
    sim::PackingCurve mean = sim::MeanCurve(runs);
    csv += sim::PackingCsvRows(workload, policies[p], static_cast<int>(n_seeds), mean);
    fmt::print(stderr,
               "{:<12} alloc@100%={:6.2f} alloc@130%={:6.2f} (pods: {} placed, {} no room, {} "
               "infeasible over {} seeds)\n",
               policies[p], mean.alloc_pct[100], mean.alloc_pct[130], mean.pods_scheduled,
               mean.pods_failed, mean.pods_infeasible, n_seeds);
    curves.emplace_back(policies[p], mean);
  }
  if (f.csv.empty() || f.csv == "-") {
    std::cout << csv;
  } else {
    std::ofstream out(f.csv);
    out << csv;
    if (!out) {
      std::cerr << "error: cannot write " << f.csv << "\n";
      return kExitFailure;
    }
  }
  if (!f.plot.empty()) {
    std::ofstream out(f.plot);
    out << sim::PackingSvg(
        "GPU allocation, workload " + workload + " (mean of " + std::to_string(n_seeds) + " seeds)",
        curves);
    if (!out) {
      std::cerr << "error: cannot write " << f.plot << "\n";
      return kExitFailure;
    }
  }
  return kExitOk;
}

void RegisterSimPackingCommand(CLI::App& sim, int& exit_code) {
  auto flags = std::make_shared<PackingFlags>();
  CLI::App* cmd = sim.add_subcommand(
      "packing", "Static packing experiment of the FGD paper (allocation vs arrived GPU demand)");
  cmd->add_option("--nodes", flags->nodes, "Node list CSV (openb_node_list_gpu_node.csv)")
      ->required();
  cmd->add_option("--pods", flags->pods, "Pod list CSV (openb_pod_list_*.csv)")->required();
  cmd->add_option("--policy", flags->policy,
                  "Placement policy name, several separated by commas, or 'all'")
      ->capture_default_str();
  cmd->add_option("--seeds", flags->seeds, "Seeds: a range 42-51 or a list 42,43")
      ->capture_default_str();
  cmd->add_option("--inflate", flags->inflate,
                  "Inflate total GPU demand to this multiple of capacity")
      ->capture_default_str();
  cmd->add_option("--csv", flags->csv, "Write result rows here ('-' = stdout, the default)");
  cmd->add_option("--plot", flags->plot, "Write an SVG chart of allocation vs arrived demand");
  cmd->add_flag("--skip-bad-rows", flags->skip_bad_rows,
                "Drop and count malformed rows instead of failing");
  cmd->add_option("--threads", flags->threads, "Parallel runs (default: all cores)");
  cmd->add_option("--constrain", flags->variant.constrain_pct,
                  "Generated variant: pin this percentage of the GPU pods to one GPU model each, "
                  "drawn in proportion to the models' GPUs in the node list (FGD's GPU-type "
                  "experiments)");
  cmd->add_option("--multi-gpu", flags->variant.multi_gpu_pct,
                  "Generated variant: append copies of the multi-GPU pods until they ask for this "
                  "percentage of the GPU request (FGD's multi-GPU workloads)");
  cmd->add_option("--variant-seed", flags->variant_seed,
                  "Seed of the generated variant (default: each run's own seed)");
  cmd->callback([flags, &exit_code] { exit_code = RunPackingCommand(*flags); });
}

}  // namespace

void RegisterSimCommands(CLI::App& app, int& exit_code) {
  CLI::App* sim =
      app.add_subcommand("sim", "Replay cluster traces through the production scheduler");
  sim->require_subcommand(1);
  RegisterSimPackingCommand(*sim, exit_code);
  RegisterSimJobsCommand(*sim, exit_code);
}

}  // namespace stoker::cli
