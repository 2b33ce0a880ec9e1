#include "sim/packing.h"

#include <fmt/core.h>

#include <cmath>
#include <iterator>

#include "scheduler/fgd.h"
#include "scheduler/registry.h"
#include "scheduler/rng.h"

namespace stoker::sim {

using scheduler::ClusterState;
using scheduler::PlacementStatus;
using scheduler::Request;

std::vector<Request> ShuffleAndInflate(const std::vector<Request>& pods, uint64_t seed,
                                       int32_t inflate_permille, int64_t total_gpu_milli) {
  std::vector<Request> out = pods;
  scheduler::Rng rng(seed);
  for (size_t i = out.size(); i > 1; --i) {
    const size_t j = rng.Uniform(i);
    std::swap(out[i - 1], out[j]);
  }
  int64_t requested = 0;
  bool any_gpu = false;
  for (const Request& r : out) {
    requested += r.TotalGpuMilli();
    any_gpu = any_gpu || r.TotalGpuMilli() > 0;
  }
  // As the published tuneUpPods: draw a pod; stop (dropping it) when its per-GPU milli would
  // take the total past the target, else append it. (The check uses the per-GPU amount, the
  // total adds all GPUs: a published quirk kept so the arrived curve ends where theirs does.)
  const int64_t target = total_gpu_milli * inflate_permille / 1000;
  while (any_gpu && !pods.empty()) {
    const Request& r = pods[rng.Uniform(pods.size())];
    if (requested + r.gpu_milli > target) break;
    requested += r.TotalGpuMilli();
    out.push_back(r);
  }
  return out;
}

scheduler::ClusterState ShuffleNodes(const scheduler::ClusterState& cluster, uint64_t seed) {
  std::vector<int32_t> order(static_cast<size_t>(cluster.num_nodes()));
  for (int32_t n = 0; n < cluster.num_nodes(); ++n) order[static_cast<size_t>(n)] = n;
  // A stream apart from the pod shuffle's (same seed, different purpose).
  scheduler::Rng rng(seed ^ 0x6e6f64652d6f7264ULL);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.Uniform(i)]);
  scheduler::ClusterState out;
  out.models() = cluster.models();
  (void)out.SetBestEffortOversubscription(cluster.best_effort_cap_permille());
  for (int32_t n : order) (void)out.AddNode(cluster.spec(n));
  return out;
}

namespace {

// Python's round(x, 2) for the values involved (non-negative): half to even at 2 decimals is
// indistinguishable here from nearbyint(x * 100) / 100.
double Round2(double x) { return std::nearbyint(x * 100.0) / 100.0; }

struct Record {
  int bin;
  double alloc, frag, frag_ratio;
};

}  // namespace

Result<PackingCurve> RunPacking(const ClusterState& empty, const std::vector<Request>& pods,
                                const scheduler::TypicalShapes& typical, const PackingRun& run) {
  scheduler::PolicyConfig config;
  config.seed = run.seed;
  config.typical_shapes = typical;
  STOKER_ASSIGN_OR_RETURN(auto policy, scheduler::CreatePlacementPolicy(run.policy, config));
  ClusterState cluster = run.shuffle_nodes ? ShuffleNodes(empty, run.seed) : empty;
  const int64_t total = cluster.total_gpu_milli();
  if (total <= 0) return InvalidArgument("the node list has no GPUs");
  const std::vector<Request> seq = ShuffleAndInflate(pods, run.seed, run.inflate_permille, total);
  scheduler::FragModel frag_model(typical);
  std::vector<double> node_frag(cluster.num_nodes());
  double frag_sum = 0;
  for (int32_t n = 0; n < cluster.num_nodes(); ++n) {
    node_frag[n] = frag_model.NodeFrag(cluster.node(n));
    frag_sum += node_frag[n];
  }
  PackingCurve curve;
  std::vector<Record> records;
  records.reserve(seq.size());
  int64_t arrived = 0;
  const double total_d = static_cast<double>(total);
  for (const Request& r : seq) {
    arrived += r.TotalGpuMilli();
    policy->Observe(r);
    scheduler::PlacementResult res = policy->Place(r, cluster);
    if (res.status == PlacementStatus::kPlaced) {
      STOKER_RETURN_IF_ERROR(cluster.Allocate(res.placement));
      const int32_t n = res.placement.node;
      const double f = frag_model.NodeFrag(cluster.node(n));
      frag_sum += f - node_frag[n];
      node_frag[n] = f;
      ++curve.pods_scheduled;
    } else if (res.status == PlacementStatus::kInfeasible) {
      ++curve.pods_infeasible;
    } else {
      ++curve.pods_failed;
    }
    const double arrived_pct = static_cast<double>(arrived) / total_d * 100.0;
    const int bin = static_cast<int>(std::nearbyint(arrived_pct));
    const double idle = static_cast<double>(total - cluster.allocated_gpu_milli());
    records.push_back({bin,
                       Round2(static_cast<double>(cluster.allocated_gpu_milli()) / total_d * 100.0),
                       frag_sum / total_d * 100.0, idle > 0 ? frag_sum / idle * 100.0 : 0.0});
  }
  for (int step = 0; step <= kMaxArrivedPct; ++step) {
    for (int width : {0, 1}) {
      double a = 0, f = 0, fr = 0;
      int64_t k = 0;
      for (const Record& rec : records) {  // records are sorted by bin: a scan is enough
        if (rec.bin < step - width) continue;
        if (rec.bin > step + width) break;
        a += rec.alloc;
        f += rec.frag;
        fr += rec.frag_ratio;
        ++k;
      }
      if (k == 0) continue;
      curve.alloc_pct[step] = Round2(a / static_cast<double>(k));
      curve.frag_pct[step] = Round2(f / static_cast<double>(k));
      curve.frag_ratio_pct[step] = Round2(fr / static_cast<double>(k));
      curve.present[step] = true;
      break;
    }
  }
  return curve;
}

PackingCurve MeanCurve(const std::vector<PackingCurve>& runs) {
  PackingCurve mean;
  for (int s = 0; s <= kMaxArrivedPct; ++s) {
    int k = 0;
    for (const PackingCurve& c : runs) {
      if (!c.present[s]) continue;
      mean.alloc_pct[s] += c.alloc_pct[s];
      mean.frag_pct[s] += c.frag_pct[s];
      mean.frag_ratio_pct[s] += c.frag_ratio_pct[s];
      ++k;
    }
    if (k > 0) {
      mean.alloc_pct[s] /= k;
      mean.frag_pct[s] /= k;
      mean.frag_ratio_pct[s] /= k;
      mean.present[s] = true;
    }
  }
  for (const PackingCurve& c : runs) {
    mean.pods_scheduled += c.pods_scheduled;
    mean.pods_failed += c.pods_failed;
    mean.pods_infeasible += c.pods_infeasible;
  }
  return mean;
}

std::string PackingCsvHeader() {
  std::string h = "workload,policy,metric,n_seeds";
  for (int s = 0; s <= kMaxArrivedPct; s += 10) h += ",arr_" + std::to_string(s);
  return h + "\n";
}

std::string PackingCsvRows(const std::string& workload, const std::string& policy, int n_seeds,
                           const PackingCurve& mean) {
  std::string out;
  auto row = [&](const char* metric, const std::array<double, kMaxArrivedPct + 1>& v) {
    out += workload + "," + policy + "," + metric + "," + std::to_string(n_seeds);
    for (int s = 0; s <= kMaxArrivedPct; s += 10) {
      if (mean.present[s]) {
        fmt::format_to(std::back_inserter(out), ",{:.2f}", v[s]);
      } else {
        out += ',';
      }
    }
    out += "\n";
  };
  row("gpu_alloc_pct", mean.alloc_pct);
  row("frag_gpu_pct_of_cluster", mean.frag_pct);
  row("frag_ratio_pct_of_idle", mean.frag_ratio_pct);
  return out;
}

std::string PackingSvg(const std::string& title,
                       const std::vector<std::pair<std::string, PackingCurve>>& curves) {
  // Plot area: x = arrived 0..130 %, y = allocation 0..100 %.
  constexpr double kW = 720, kH = 440, kL = 60, kR = 160, kT = 40, kB = 50;
  const double pw = kW - kL - kR, ph = kH - kT - kB;
  auto x = [&](double a) { return kL + a / kMaxArrivedPct * pw; };
  auto y = [&](double v) { return kT + (1.0 - v / 100.0) * ph; };
  static const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                  "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  std::string svg;
  auto svg_out = std::back_inserter(svg);
  fmt::format_to(svg_out,
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
                 "font-family=\"sans-serif\" font-size=\"12\">\n",
                 kW, kH);
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  std::string esc;
  for (char ch : title) {
    if (ch == '<')
      esc += "&lt;";
    else if (ch == '&')
      esc += "&amp;";
    else if (ch == '>')
      esc += "&gt;";
    else
      esc += ch;
  }
  fmt::format_to(svg_out, "<text x=\"{:.0f}\" y=\"24\" font-size=\"15\">{}</text>\n", kL, esc);
  for (int v = 0; v <= 100; v += 20) {
    fmt::format_to(svg_out,
                   "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>"
                   "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
                   kL, y(v), kL + pw, y(v), kL - 6, y(v) + 4, v);
  }
  for (int a = 0; a <= kMaxArrivedPct; a += 10) {
    fmt::format_to(svg_out,
                   "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#eee\"/>"
                   "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                   x(a), kT, x(a), kT + ph, x(a), kT + ph + 16, a);
  }
  fmt::format_to(svg_out,
                 "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">arrived GPU demand (% of "
                 "capacity)</text>\n"
                 "<text transform=\"translate(16 {:.1f}) rotate(-90)\" text-anchor=\"middle\">GPU "
                 "allocation (%)</text>\n",
                 kL + pw / 2, kH - 12, kT + ph / 2);
  for (size_t i = 0; i < curves.size(); ++i) {
    const char* color = kColors[i % 10];
    std::string pts;
    for (int s = 0; s <= kMaxArrivedPct; ++s) {
      if (!curves[i].second.present[s]) continue;
      fmt::format_to(std::back_inserter(pts), "{:.1f},{:.1f} ", x(s),
                     y(curves[i].second.alloc_pct[s]));
    }
    svg += "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" + std::string(color) +
           "\" points=\"" + pts + "\"/>\n";
    fmt::format_to(svg_out,
                   "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
                   "stroke-width=\"3\"/>"
                   "<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
                   kL + pw + 12, kT + 10 + 18.0 * static_cast<double>(i), kL + pw + 32,
                   kT + 10 + 18.0 * static_cast<double>(i), color, kL + pw + 38,
                   kT + 14 + 18.0 * static_cast<double>(i), curves[i].first);
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace stoker::sim
