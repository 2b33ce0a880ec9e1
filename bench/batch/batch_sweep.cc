// The load sweep of issue 18 (docs/performance.md, "Adaptive mode against every fixed
// configuration"): does one fixed batching configuration hold a p99 objective at every load
// without losing throughput, or does only the adaptive mode?
//
// Everything runs in simulated time (batch/simulate.h: the same BatchQueue, ServiceModel and
// AdaptiveController the threaded batcher runs), so the answer is exact and does not depend on
// the machine. For each service curve t(b) = a + c*b (10 % jitter) and each load (a share of the
// curve's limit at its largest batch), it runs Poisson arrivals through:
//   - every fixed configuration of a grid: max batch 1, 2, 4, ... up to the largest; max queue
//     delay 0, 1, 2, 5, 10, 20 ms; preferred batch sizes none (Triton's default: a batch goes when
//     full or when the delay passes) or {max/4, max/2, max};
//   - the adaptive mode (largest batch, delay cap 20 ms, the objective).
// A run meets the objective when its p99 is at most the objective, no request was refused and it
// served at least 99 % of what was offered. The tables say, per load, how many fixed
// configurations meet it and which of them keeps the model least busy; which fixed
// configurations meet it at every load; and what a configuration tuned offline at one load (as a
// user of a fixed batcher would) does at the others.
//
//   batch_sweep [--requests N] [--objective-ms MS]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "batch/simulate.h"

namespace stoker::batch {
namespace {

using std::chrono::milliseconds;

struct Curve {
  const char* name;
  ServiceCurve curve;
  size_t max_batch;
};

struct Config {
  std::string name;
  Options options;
  bool adaptive = false;
};

struct Outcome {
  SimResult r;
  bool ok = false;
};

Duration Ms(double ms) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double, std::milli>(ms));
}

std::vector<Config> Grid(size_t max_batch, double objective_ms) {
  std::vector<Config> out;
  for (size_t b = 1; b <= max_batch; b *= 2) {
    for (double d : {0.0, 1.0, 2.0, 5.0, 10.0, 20.0}) {
      for (bool preferred : {false, true}) {
        if (b == 1 && (d > 0 || preferred)) continue;  // a batch of one never waits
        if (preferred && b < 4) continue;
        Config c;
        c.options.max_batch_size = b;
        c.options.max_queue_delay = Ms(d);
        c.options.max_pending = 4096;
        if (preferred) c.options.preferred_batch_sizes = {b / 4, b / 2, b};
        char name[96];
        std::snprintf(name, sizeof name, "max %zu, delay %g ms%s", b, d,
                      preferred ? ", preferred max/4,max/2,max" : "");
        c.name = name;
        out.push_back(std::move(c));
      }
    }
  }
  Config a;
  a.adaptive = true;
  a.options.max_batch_size = max_batch;
  a.options.max_pending = 4096;
  a.options.max_queue_delay = milliseconds(20);  // the delay cap: the grid's longest delay
  a.options.adaptive.enabled = true;
  a.options.adaptive.p99_objective = Ms(objective_ms);
  a.name = "adaptive";
  out.push_back(std::move(a));
  return out;
}

}  // namespace
}  // namespace stoker::batch

int main(int argc, char** argv) {
  using namespace stoker::batch;
  uint64_t requests = 40000;
  double objective_ms = 25;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--requests") == 0) {
      requests = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (std::strcmp(argv[i], "--objective-ms") == 0) {
      objective_ms = std::strtod(argv[i + 1], nullptr);
    } else {
      std::fprintf(stderr, "usage: batch_sweep [--requests N] [--objective-ms MS]\n");
      return 2;
    }
  }
  if (requests < 1000 || objective_ms <= 0) {
    std::fprintf(stderr, "batch_sweep: --requests at least 1000, --objective-ms positive\n");
    return 2;
  }
  const std::vector<Curve> curves = {
      {"t(b) = 5 ms + 0.05 ms*b, max 256 (a large fixed cost: GPU-like)",
       {0.005, 0.00005, 0.1},
       256},
      {"t(b) = 2 ms + 0.1 ms*b, max 64 (the curve of the earlier table)", {0.002, 0.0001, 0.1}, 64},
  };
  const std::vector<int> loads = {5, 10, 20, 35, 50, 65, 80};
  const double objective = objective_ms / 1e3;
  std::printf(
      "p99 objective %.0f ms; %llu Poisson requests per run; loads as a share of the "
      "curve's limit at its largest batch\n",
      objective_ms, static_cast<unsigned long long>(requests));
  for (const Curve& cv : curves) {
    const double limit = cv.curve.Limit(cv.max_batch);
    const std::vector<Config> grid = Grid(cv.max_batch, objective_ms);
    // outcome[config][load]
    std::vector<std::vector<Outcome>> out(grid.size(), std::vector<Outcome>(loads.size()));
    for (size_t c = 0; c < grid.size(); ++c) {
      for (size_t l = 0; l < loads.size(); ++l) {
        const double rate = loads[l] / 100.0 * limit;
        Outcome& o = out[c][l];
        o.r = Simulate(grid[c].options, cv.curve, rate, requests, 42 + l);
        o.ok = o.r.p99 <= objective && o.r.rejected == 0 && o.r.throughput >= 0.99 * rate;
      }
    }
    const size_t adaptive = grid.size() - 1;
    std::printf("\n### %s: limit %.0f items/s\n\n", cv.name, limit);
    std::printf(
        "| load | adaptive: p99 ms / busy / meets | fixed configurations meeting it (of "
        "%zu) | of them, least busy: busy | static greedy (max %zu, delay 0): p99 ms / "
        "busy / meets |\n|---|---|---|---|---|\n",
        grid.size() - 1, cv.max_batch);
    size_t greedy = 0;
    for (size_t c = 0; c < adaptive; ++c) {
      if (grid[c].options.max_batch_size == cv.max_batch &&
          grid[c].options.max_queue_delay == stoker::Duration{0} &&
          grid[c].options.preferred_batch_sizes.empty()) {
        greedy = c;
      }
    }
    for (size_t l = 0; l < loads.size(); ++l) {
      size_t meeting = 0, best = adaptive;
      for (size_t c = 0; c < adaptive; ++c) {
        if (!out[c][l].ok) continue;
        ++meeting;
        if (best == adaptive || out[c][l].r.busy_fraction < out[best][l].r.busy_fraction) best = c;
      }
      const SimResult& a = out[adaptive][l].r;
      const SimResult& g = out[greedy][l].r;
      std::printf("| %d %% | %.1f / %.2f / %s | %zu | %s: %.2f | %.1f / %.2f / %s |\n", loads[l],
                  a.p99 * 1e3, a.busy_fraction, out[adaptive][l].ok ? "yes" : "**no**", meeting,
                  best == adaptive ? "none" : grid[best].name.c_str(),
                  best == adaptive ? 0.0 : out[best][l].r.busy_fraction, g.p99 * 1e3,
                  g.busy_fraction, out[greedy][l].ok ? "yes" : "**no**");
    }
    // Fixed configurations that meet the objective at every load where any fixed configuration
    // meets it, the three least busy on average, next to the adaptive mode.
    std::vector<bool> feasible(loads.size(), false);
    for (size_t l = 0; l < loads.size(); ++l) {
      for (size_t c = 0; c < adaptive; ++c) feasible[l] = feasible[l] || out[c][l].ok;
    }
    std::vector<std::pair<double, size_t>> everywhere;
    for (size_t c = 0; c < adaptive; ++c) {
      bool all = true;
      double busy = 0;
      for (size_t l = 0; l < loads.size(); ++l) {
        if (!feasible[l]) continue;
        all = all && out[c][l].ok;
        busy += out[c][l].r.busy_fraction;
      }
      if (all) everywhere.emplace_back(busy, c);
    }
    std::sort(everywhere.begin(), everywhere.end());
    std::printf("\nLoads where some fixed configuration meets the objective:");
    for (size_t l = 0; l < loads.size(); ++l) {
      if (feasible[l]) std::printf(" %d %%", loads[l]);
    }
    std::printf(". Fixed configurations meeting it at all of them: %zu", everywhere.size());
    if (!everywhere.empty()) std::printf("; the least busy:");
    std::printf("\n\n| configuration | busy at each of those loads |\n|---|---|\n");
    const auto busy_row = [&](size_t c) {
      std::string row;
      for (size_t l = 0; l < loads.size(); ++l) {
        if (!feasible[l]) continue;
        char cell[16];
        std::snprintf(cell, sizeof cell, "%s%.2f", row.empty() ? "" : " / ",
                      out[c][l].r.busy_fraction);
        row += cell;
      }
      return row;
    };
    for (size_t i = 0; i < everywhere.size() && i < 3; ++i) {
      std::printf("| %s | %s |\n", grid[everywhere[i].second].name.c_str(),
                  busy_row(everywhere[i].second).c_str());
    }
    bool adaptive_all = true;
    for (size_t l = 0; l < loads.size(); ++l) {
      if (feasible[l]) adaptive_all = adaptive_all && out[adaptive][l].ok;
    }
    std::printf("| adaptive (meets at all of them: %s) | %s |\n", adaptive_all ? "yes" : "**no**",
                busy_row(adaptive).c_str());
    // Tuned offline at one load: among the configurations that meet the objective there, a user
    // tuning for throughput takes the largest capacity (max batch / t(max batch)), then the
    // least busy; one tuning for cost takes the least busy.
    std::printf(
        "\n| tuned at | for | configuration | meets at loads (of %zu) | fails at |\n"
        "|---|---|---|---|---|\n",
        loads.size());
    for (size_t t : {size_t{2}, size_t{5}}) {
      for (int cost : {0, 1}) {
        size_t pick = adaptive;
        for (size_t c = 0; c < adaptive; ++c) {
          if (!out[c][t].ok) continue;
          if (pick == adaptive) {
            pick = c;
            continue;
          }
          const double cap_c = cv.curve.Limit(grid[c].options.max_batch_size);
          const double cap_p = cv.curve.Limit(grid[pick].options.max_batch_size);
          const double busy_c = out[c][t].r.busy_fraction, busy_p = out[pick][t].r.busy_fraction;
          const bool better =
              cost ? busy_c < busy_p : (cap_c > cap_p || (cap_c == cap_p && busy_c < busy_p));
          if (better) pick = c;
        }
        if (pick == adaptive) {
          std::printf("| %d %% | %s | none meets | | |\n", loads[t], cost ? "cost" : "throughput");
          continue;
        }
        size_t meets = 0;
        std::string fails;
        for (size_t l = 0; l < loads.size(); ++l) {
          if (out[pick][l].ok) {
            ++meets;
            continue;
          }
          const SimResult& r = out[pick][l].r;
          char why[96];
          const double rate = loads[l] / 100.0 * limit;
          if (r.rejected > 0 || r.throughput < 0.99 * rate) {
            std::snprintf(why, sizeof why, "%d %% (serves %.0f %% of offered, p99 %.0f ms)",
                          loads[l], 100 * r.throughput / rate, r.p99 * 1e3);
          } else {
            std::snprintf(why, sizeof why, "%d %% (p99 %.1f ms)", loads[l], r.p99 * 1e3);
          }
          fails += (fails.empty() ? "" : ", ") + std::string(why);
        }
        std::printf("| %d %% | %s | %s | %zu | %s |\n", loads[t], cost ? "cost" : "throughput",
                    grid[pick].name.c_str(), meets, fails.empty() ? "–" : fails.c_str());
      }
    }
  }
  return 0;
}
