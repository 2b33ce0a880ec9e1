#include "sim/jobs_report.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

namespace stoker::sim {
namespace {

std::string Fmt(double v, int decimals = 1) { return fmt::format("{:.{}f}", v, decimals); }

nlohmann::json PercentilesJson(const Percentiles& p) {
  return {{"mean", p.mean}, {"median", p.median}, {"p99", p.p99}, {"max", p.max}};
}

std::string SvgEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

void WriteReportText(const JobsSimReport& r, std::ostream& out) {
  auto line = [&](const char* name, const Percentiles& p) {
    out << name << ": mean " << Fmt(p.mean) << " s, median " << Fmt(p.median) << " s, p99 "
        << Fmt(p.p99) << " s\n";
  };
  out << "queue " << r.queue_policy << ", backfill " << r.backfill << ", placement "
      << r.placement_policy << ", cluster " << r.cluster.nodes << "x" << r.cluster.gpus_per_node
      << " (" << r.total_gpus << " GPUs)\n";
  out << "jobs: " << r.jobs_total << " total, " << r.jobs_completed << " completed, "
      << r.jobs_infeasible << " infeasible, " << r.preemptions << " preemptions\n";
  line("JCT", r.jct_s);
  line("queueing delay", r.queue_delay_s);
  line("total waiting", r.waiting_s);
  out << "makespan: " << Fmt(r.makespan_s) << " s (" << Fmt(r.makespan_s / 86400.0, 2)
      << " days)\n";
  out << "GPU allocation: mean " << Fmt(r.mean_allocation_pct, 2) << " %, " << Fmt(r.gpu_hours_used)
      << " GPU-hours used, " << Fmt(r.idle_gpu_hours) << " idle GPU-hours\n";
}

void WriteReportJson(const JobsSimReport& r, std::ostream& out) {
  nlohmann::json alloc = nlohmann::json::array();
  for (const auto& p : r.allocation)
    alloc.push_back({static_cast<double>(p.t_ms) / 1000.0, p.allocated_gpus});
  nlohmann::json j = {
      {"queue", r.queue_policy},
      {"backfill", r.backfill},
      {"placement", r.placement_policy},
      {"cluster",
       {{"nodes", r.cluster.nodes},
        {"gpus_per_node", r.cluster.gpus_per_node},
        {"gpus", r.total_gpus}}},
      {"jobs",
       {{"total", r.jobs_total},
        {"completed", r.jobs_completed},
        {"infeasible", r.jobs_infeasible}}},
      {"preemptions", r.preemptions},
      {"jct_s", PercentilesJson(r.jct_s)},
      {"queue_delay_s", PercentilesJson(r.queue_delay_s)},
      {"waiting_s", PercentilesJson(r.waiting_s)},
      {"makespan_s", r.makespan_s},
      {"gpu_hours_used", r.gpu_hours_used},
      {"idle_gpu_hours", r.idle_gpu_hours},
      {"mean_allocation_pct", r.mean_allocation_pct},
      {"allocation_series", {{"columns", {"t_s", "allocated_gpus"}}, {"points", alloc}}},
      {"events", r.events},
      {"scheduling_rounds", r.scheduling_rounds},
  };
  out << j.dump(2) << "\n";
}

void WriteJobsCsv(const std::vector<const JobsSim*>& sims, std::ostream& out) {
  out << "name,submit_s,gpus,duration_s,state,start_s,finish_s,jct_s,queue_delay_s,waiting_s,"
         "preemptions\n";
  for (const JobsSim* sim : sims) {
    for (const SimJob& j : sim->jobs()) {
      const double submit = static_cast<double>(j.spec.submit_ms) / 1000.0;
      out << j.spec.name << ',' << Fmt(submit, 3) << ',' << j.spec.gpus << ','
          << Fmt(static_cast<double>(j.spec.duration_ms) / 1000.0, 3) << ',';
      if (j.state == JobState::kDone) {
        const double start = static_cast<double>(j.first_start_ms) / 1000.0;
        const double finish = static_cast<double>(j.finish_ms) / 1000.0;
        out << "done," << Fmt(start, 3) << ',' << Fmt(finish, 3) << ',' << Fmt(finish - submit, 3)
            << ',' << Fmt(start - submit, 3) << ','
            << Fmt(static_cast<double>(j.waiting_ms) / 1000.0, 3) << ',' << j.preemptions << '\n';
      } else {
        out << (j.state == JobState::kInfeasible ? "infeasible" : "unfinished") << ",,,,,,"
            << j.preemptions << '\n';
      }
    }
  }
}

void WriteSvgPlot(const std::vector<const JobsSim*>& sims, const JobsSimReport& r,
                  std::ostream& out) {
  constexpr double kW = 900, kPanelH = 300, kLeft = 70, kRight = 20, kTop = 40, kGap = 80;
  const double plot_w = kW - kLeft - kRight;
  const double total_h = kTop + kPanelH + kGap + kPanelH + 50;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kW << "\" height=\"" << total_h
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  out << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out << "<text x=\"" << kLeft << "\" y=\"20\" font-size=\"14\">"
      << SvgEscape("stoker sim jobs: queue " + r.queue_policy + ", backfill " + r.backfill +
                   ", placement " + r.placement_policy + ", " + std::to_string(r.cluster.nodes) +
                   "x" + std::to_string(r.cluster.gpus_per_node))
      << "</text>\n";

  auto axes = [&](double y0, const std::string& xlabel, const std::string& ylabel) {
    out << "<rect x=\"" << kLeft << "\" y=\"" << y0 << "\" width=\"" << plot_w << "\" height=\""
        << kPanelH << "\" fill=\"none\" stroke=\"black\"/>\n";
    out << "<text x=\"" << kLeft + plot_w / 2 << "\" y=\"" << y0 + kPanelH + 35
        << "\" text-anchor=\"middle\">" << SvgEscape(xlabel) << "</text>\n";
    out << "<text x=\"15\" y=\"" << y0 + kPanelH / 2 << "\" transform=\"rotate(-90 15 "
        << y0 + kPanelH / 2 << ")\" text-anchor=\"middle\">" << SvgEscape(ylabel) << "</text>\n";
  };

  // Panel 1: allocation over time (days).
  const double y1 = kTop;
  const double total = static_cast<double>(r.total_gpus);
  const double span_days = std::max(r.makespan_s / 86400.0, 1e-9);
  axes(y1, "time (days)", "allocated GPUs");
  for (int i = 0; i <= 4; ++i) {
    const double frac = i / 4.0;
    const double y = y1 + kPanelH * (1 - frac);
    out << "<text x=\"" << kLeft - 5 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">"
        << Fmt(total * frac, 0) << "</text>\n";
    const double x = kLeft + plot_w * frac;
    out << "<text x=\"" << x << "\" y=\"" << y1 + kPanelH + 15 << "\" text-anchor=\"middle\">"
        << Fmt(span_days * frac, 1) << "</text>\n";
  }
  out << "<polyline fill=\"none\" stroke=\"steelblue\" stroke-width=\"1\" points=\"";
  for (const auto& p : r.allocation) {
    const double x = kLeft + plot_w * (static_cast<double>(p.t_ms) / 86400000.0) / span_days;
    const double y = y1 + kPanelH * (1 - p.allocated_gpus / std::max(total, 1.0));
    out << Fmt(x, 1) << ',' << Fmt(y, 1) << ' ';
  }
  out << "\"/>\n";

  // Panel 2: JCT CDF, log10 x axis.
  const double y2 = kTop + kPanelH + kGap;
  std::vector<double> jct;
  for (const JobsSim* sim : sims) {
    for (const SimJob& j : sim->jobs()) {
      if (j.state == JobState::kDone)
        jct.push_back(std::max(1.0, static_cast<double>(j.finish_ms - j.spec.submit_ms) / 1000.0));
    }
  }
  std::sort(jct.begin(), jct.end());
  axes(y2, "job completion time (s, log scale)", "fraction of jobs");
  const double lo = jct.empty() ? 0 : std::floor(std::log10(jct.front()));
  const double hi = jct.empty() ? 1 : std::max(lo + 1, std::ceil(std::log10(jct.back())));
  for (double d = lo; d <= hi; d += 1) {
    const double x = kLeft + plot_w * (d - lo) / (hi - lo);
    out << "<text x=\"" << x << "\" y=\"" << y2 + kPanelH + 15 << "\" text-anchor=\"middle\">1e"
        << Fmt(d, 0) << "</text>\n";
  }
  for (int i = 0; i <= 4; ++i) {
    const double y = y2 + kPanelH * (1 - i / 4.0);
    out << "<text x=\"" << kLeft - 5 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">"
        << Fmt(i / 4.0, 2) << "</text>\n";
  }
  out << "<polyline fill=\"none\" stroke=\"darkorange\" stroke-width=\"1.5\" points=\"";
  const size_t n = jct.size();
  const size_t step = std::max<size_t>(1, n / 1000);  // at most ~1000 vertices
  for (size_t i = 0; i < n; i += step) {
    const double x = kLeft + plot_w * (std::log10(jct[i]) - lo) / (hi - lo);
    const double y = y2 + kPanelH * (1 - static_cast<double>(i + 1) / static_cast<double>(n));
    out << Fmt(x, 1) << ',' << Fmt(y, 1) << ' ';
  }
  if (n > 0)
    out << Fmt(kLeft + plot_w * (std::log10(jct.back()) - lo) / (hi - lo), 1) << ',' << Fmt(y2, 1);
  out << "\"/>\n</svg>\n";
}

}  // namespace stoker::sim
