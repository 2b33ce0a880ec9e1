#include "efficiency/report.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unordered_map>

#include "efficiency/alerts.h"
#include "json/enum_json.h"

namespace stoker::efficiency {
namespace {

double Hours(Duration d) { return std::chrono::duration<double, std::ratio<3600>>(d).count(); }
double Secs(Duration d) { return std::chrono::duration<double>(d).count(); }

// Dense peak rates from the vendors' data sheets (SXM parts where there are several).
constexpr struct {
  const char* key;
  double tensor, fp32;
  bool mig;
} kPeaks[] = {
    {"B200", 2250, 80, true},   {"H200", 989, 67, true},  {"H100", 989, 67, true},
    {"A100", 312, 19.5, true},  {"A30", 165, 10.3, true}, {"L40S", 362, 91.6, false},
    {"L40", 181, 90.5, false},  {"L4", 121, 30.3, false}, {"A10", 125, 31.2, false},
    {"V100", 125, 15.7, false}, {"T4", 65, 8.1, false},
};

std::string Quarter(WallTime t) {
  const std::time_t tt =
      std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
  std::tm tm{};
  gmtime_r(&tt, &tm);
  return std::to_string(tm.tm_year + 1900) + "-Q" + std::to_string(tm.tm_mon / 3 + 1);
}

struct JobAcc {
  double dt = 0, act = 0, util = 0, util_dt = 0, sm = 0, sm_dt = 0, tensor = 0, tensor_dt = 0;
  double energy_j = 0, energy_dt = 0, flop = 0, flop_dt = 0, idle = 0;
  double peak_util = 0, sum_sq = 0;
  int64_t samples = 0, low = 0, high = 0;
  uint64_t mem_peak = 0, mem_total = 0;
  std::string model;
  std::map<std::string, std::pair<double, double>> per_gpu;  // gpu -> (activity*dt, dt)
  WallTime last{};
};

std::string Fixed(double v, int digits = 1) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(digits);
  o << v;
  return o.str();
}

std::string Credits(int64_t micro) { return Fixed(static_cast<double>(micro) / 1e6, 2); }

}  // namespace

int64_t PricePerGpuHourMicro(const EfficiencyConfig& cfg, const std::string& model) {
  for (const auto& [k, v] : cfg.price_per_gpu_hour_micro) {
    if (k != "*" && model.find(k) != std::string::npos) return v;
  }
  auto it = cfg.price_per_gpu_hour_micro.find("*");
  return it == cfg.price_per_gpu_hour_micro.end() ? 0 : it->second;
}

std::optional<PeakRates> LookupPeakRates(const std::string& model_name) {
  for (const auto& p : kPeaks) {
    if (model_name.find(p.key) != std::string::npos)
      return PeakRates{p.key, p.tensor, p.fp32, p.mig};
  }
  return std::nullopt;
}

double EstimateTflops(const PeakRates& peak, double sm_active, double tensor_active) {
  return tensor_active * peak.tensor_tflops +
         std::max(0.0, sm_active - tensor_active) * peak.fp32_tflops;
}

SampleEstimate EstimateSample(const RecordedSample& s) {
  SampleEstimate e;
  if (!s.sm_active) return e;
  const auto peak = LookupPeakRates(s.model);
  if (!peak) return e;
  e.tflops = EstimateTflops(*peak, *s.sm_active, s.tensor_active.value_or(0));
  if (s.power_w && *s.power_w > 0) e.tflops_per_watt = *e.tflops / *s.power_w;
  return e;
}

std::pair<WallTime, WallTime> ReportSpan(const RecordSet& rec) {
  if (rec.samples.empty() && rec.jobs.empty()) return {};
  WallTime from = rec.samples.empty() ? rec.jobs.front().info.start : rec.samples.front().t;
  WallTime to = rec.samples.empty() ? from : rec.samples.back().t;
  for (const auto& j : rec.jobs) {
    from = std::min(from, j.info.start);
    to = std::max(to, j.end == WallTime{} ? j.info.start : j.end);
  }
  return {from, to};
}

Report BuildReport(const RecordSet& rec, const EfficiencyConfig& cfg, const ReportOptions& opt) {
  Report r;
  r.notes.emplace_back(
      "Achieved TFLOPS are estimates: tensor activity x tensor peak + (SM - tensor activity) x "
      "FP32 peak, from GPM ratios and data-sheet dense peaks; not measured FLOP counts.");
  r.notes.emplace_back(
      "Used GPU-hours weight GPU time by activity (SM activity where reported, GPU "
      "utilisation otherwise); idle GPU-hours count time at exactly 0 %.");
  if (rec.samples.empty() && rec.jobs.empty()) return r;

  std::unordered_map<std::string, const JobRecord*> by_id;
  std::unordered_map<std::string, std::vector<const JobRecord*>> by_gpu;
  for (const auto& j : rec.jobs) {
    by_id[j.info.id] = &j;
    for (const auto& g : j.info.gpus) by_gpu[g].push_back(&j);
  }
  auto owner_of = [&](const RecordedSample& s) -> std::string {
    if (!s.job.empty()) return s.job;
    auto it = by_gpu.find(s.gpu);
    if (it == by_gpu.end()) return "";
    for (const JobRecord* j : it->second) {
      if (s.t >= j->info.start && (j->end == WallTime{} || s.t < j->end)) return j->info.id;
    }
    return "";
  };

  std::tie(r.from, r.to) = ReportSpan(rec);
  Duration bucket = opt.bucket;
  if (bucket <= Duration{0})
    bucket = std::max<Duration>(std::chrono::minutes(1), (r.to - r.from) / 48);
  if ((r.to - r.from) / bucket + 1 > kMaxReportBuckets) {
    const Duration asked = bucket;
    bucket = (r.to - r.from) / (kMaxReportBuckets - 1) + Duration(1);
    r.notes.push_back("bucket " + FormatDuration(asked) + " widened to " + FormatDuration(bucket) +
                      ": at most " + std::to_string(kMaxReportBuckets) + " buckets per report");
  }
  const size_t nb = static_cast<size_t>((r.to - r.from) / bucket) + 1;
  struct BucketAcc {
    double act = 0, dt = 0;
    std::set<std::string> gpus, allocated;
    std::map<std::string, std::pair<std::set<std::string>, std::set<std::string>>>
        nodes;  // node -> (gpus, busy)
  };
  std::vector<BucketAcc> buckets(nb);

  ZoneConfig zcfg = cfg.zones;
  ZoneTracker zones(zcfg);
  std::unordered_map<std::string, WallTime> last_seen;  // per GPU
  std::map<std::string, JobAcc> acc;

  for (const auto& s : rec.samples) {
    std::optional<double> activity =
        s.sm_active ? std::optional<double>(*s.sm_active * 100) : s.util_pct;
    if (zcfg.metric == ActivityMetric::kGpuUtil) activity = s.util_pct;
    Duration dt{0};
    if (auto it = last_seen.find(s.gpu); it != last_seen.end())
      dt = std::min(s.t - it->second, opt.max_sample_gap);
    last_seen[s.gpu] = s.t;
    const std::string job = owner_of(s);
    BucketAcc& b = buckets[std::min(nb - 1, static_cast<size_t>((s.t - r.from) / bucket))];
    b.gpus.insert(s.gpu);
    b.nodes[s.node].first.insert(s.gpu);
    if (!job.empty()) {
      b.allocated.insert(s.gpu);
      b.nodes[s.node].second.insert(s.gpu);
    }
    if (activity) {
      b.act += *activity * Secs(dt);
      b.dt += Secs(dt);
      const std::vector<std::string> jobs =
          job.empty() ? std::vector<std::string>{} : std::vector<std::string>{job};
      zones.ObserveActivity(s.gpu, s.t, std::llround(*activity * 1000),
                            s.sm_active ? ActivityMetric::kSmActive : ActivityMetric::kGpuUtil,
                            jobs);
    }
    if (job.empty()) continue;
    JobAcc& a = acc[job];
    const double d = Secs(dt);
    ++a.samples;
    a.last = std::max(a.last, s.t);
    if (a.model.empty()) a.model = s.model;
    if (activity) {
      a.act += *activity * d;
      a.dt += d;
      a.sum_sq += *activity * *activity * d;
      if (*activity == 0) a.idle += d;
      a.low += *activity < 5;
      a.high += *activity > 60;
      auto& pg = a.per_gpu[s.gpu];
      pg.first += *activity * d;
      pg.second += d;
    }
    if (s.util_pct) {
      a.util += *s.util_pct * d;
      a.util_dt += d;
      a.peak_util = std::max(a.peak_util, *s.util_pct);
    }
    if (s.sm_active) {
      a.sm += *s.sm_active * 100 * d;
      a.sm_dt += d;
    }
    if (s.tensor_active) {
      a.tensor += *s.tensor_active * 100 * d;
      a.tensor_dt += d;
    }
    if (s.power_w) {
      a.energy_j += *s.power_w * d;
      a.energy_dt += d;
    }
    if (s.mem_used) a.mem_peak = std::max(a.mem_peak, *s.mem_used);
    if (s.mem_total) a.mem_total = std::max(a.mem_total, *s.mem_total);
    if (s.sm_active) {
      if (auto peak = LookupPeakRates(s.model.empty() ? a.model : s.model)) {
        a.flop += EstimateTflops(*peak, *s.sm_active, s.tensor_active.value_or(0)) * d;
        a.flop_dt += d;
      }
    }
  }

  // Zone history per job from the same ZoneTracker the live engine uses.
  std::map<std::string, std::vector<ZoneChange>> history;
  for (const auto& t : zones.TakeTransitions()) {
    if (t.is_job) history[t.key].push_back({t.at, t.to});
  }

  std::set<std::string> ids;
  for (const auto& j : rec.jobs) ids.insert(j.info.id);
  for (const auto& [id, a] : acc) ids.insert(id);
  std::map<std::string, OwnerReport> users, teams;
  std::map<std::string, QuarterAudit> quarters;
  for (const auto& id : ids) {
    JobReport jr;
    jr.id = id;
    const JobRecord* rec_job = by_id.count(id) ? by_id[id] : nullptr;
    const JobAcc* a = acc.count(id) ? &acc[id] : nullptr;
    if (rec_job) {
      jr.user = rec_job->info.user;
      jr.team = rec_job->info.team;
      jr.model = rec_job->info.gpu_model;
      jr.gpus = static_cast<int>(rec_job->info.gpus.size());
      jr.start = rec_job->info.start;
      jr.end = rec_job->end != WallTime{} ? rec_job->end : (a ? a->last : rec_job->info.start);
    } else {
      jr.user = jr.team = "unknown";
      jr.start = r.from;
      jr.end = a->last;
    }
    if (a) {
      if (jr.model.empty()) jr.model = a->model;
      if (jr.gpus == 0) jr.gpus = static_cast<int>(a->per_gpu.size());
      jr.samples = a->samples;
      jr.used_gpu_hours = a->act / 100.0 / 3600.0;
      jr.idle_gpu_hours = a->idle / 3600.0;
      jr.avg_util_pct = a->util_dt > 0 ? a->util / a->util_dt : 0;
      jr.peak_util_pct = a->peak_util;
      if (a->sm_dt > 0) jr.avg_sm_pct = a->sm / a->sm_dt;
      if (a->tensor_dt > 0) jr.avg_tensor_pct = a->tensor / a->tensor_dt;
      jr.mem_peak_bytes = a->mem_peak;
      jr.mem_total_bytes = a->mem_total;
      // Energy from power integrated over the sampled time.
      if (a->energy_dt > 0) jr.energy_kwh = a->energy_j / 3.6e6;
      if (a->flop_dt > 0)
        jr.achieved_tflops =
            a->flop / a->flop_dt * std::max<double>(1, static_cast<double>(a->per_gpu.size()));
      // Per GPU: mean estimated TFLOPS over mean power (the job's total over its total).
      if (a->flop_dt > 0 && a->energy_dt > 0 && a->energy_j > 0)
        jr.tflops_per_watt = (a->flop / a->flop_dt) / (a->energy_j / a->energy_dt);
    }
    if (auto peak = LookupPeakRates(jr.model))
      jr.peak_tflops = peak->tensor_tflops * std::max(1, jr.gpus);
    jr.alloc_gpu_hours = Hours(jr.end - jr.start) * std::max(1, jr.gpus);
    jr.cost_micro =
        std::llround(jr.alloc_gpu_hours * static_cast<double>(PricePerGpuHourMicro(cfg, jr.model)));
    jr.zone_history = history[id];
    jr.zone = zones.Job(id).zone;

    for (auto* o : {&users[jr.user], &teams[jr.team]}) {
      ++o->jobs;
      o->alloc_gpu_hours += jr.alloc_gpu_hours;
      o->used_gpu_hours += jr.used_gpu_hours;
      o->idle_gpu_hours += jr.idle_gpu_hours;
      o->cost_micro += jr.cost_micro;
    }
    users[jr.user].name = jr.user;
    teams[jr.team].name = jr.team;
    QuarterAudit& q = quarters[Quarter(jr.start)];
    q.quarter = Quarter(jr.start);
    ++q.jobs;
    q.alloc_gpu_hours += jr.alloc_gpu_hours;
    q.used_gpu_hours += jr.used_gpu_hours;
    q.idle_gpu_hours += jr.idle_gpu_hours;
    r.cluster_alloc_gpu_hours += jr.alloc_gpu_hours;
    r.cluster_used_gpu_hours += jr.used_gpu_hours;
    r.cluster_idle_gpu_hours += jr.idle_gpu_hours;

    // ---- advice, only where the evidence supports it ----
    if (a && a->samples >= 10) {
      const auto peak = LookupPeakRates(jr.model);
      if (peak && jr.avg_tensor_pct && *jr.avg_tensor_pct < 1.0 && jr.avg_sm_pct &&
          *jr.avg_sm_pct > 20) {
        r.advice.push_back({id, "mixed-precision",
                            "Tensor cores idle on a " + peak->model +
                                ": enable mixed precision (bf16/fp16 autocast) to use them.",
                            "tensor activity " + Fixed(*jr.avg_tensor_pct) + " %, SM activity " +
                                Fixed(*jr.avg_sm_pct) + " %"});
      }
      const double low_share = static_cast<double>(a->low) / static_cast<double>(a->samples);
      const double high_share = static_cast<double>(a->high) / static_cast<double>(a->samples);
      if (low_share >= 0.25 && high_share >= 0.25) {
        r.advice.push_back(
            {id, "input-pipeline",
             "The GPU alternates between busy and idle: it likely waits on input. "
             "Move preprocessing to CPU workers (more DataLoader workers, prefetch).",
             Fixed(low_share * 100, 0) + " % of samples below 5 %, " + Fixed(high_share * 100, 0) +
                 " % above 60 %"});
      }
      if (a->per_gpu.size() >= 2) {
        int busy = 0;
        for (const auto& [g, v] : a->per_gpu) busy += v.second > 0 && v.first / v.second >= 10;
        if (busy < static_cast<int>(a->per_gpu.size())) {
          r.advice.push_back({id, "fewer-gpus",
                              "Only " + std::to_string(busy) + " of " +
                                  std::to_string(a->per_gpu.size()) + " GPUs did work: request " +
                                  std::to_string(std::max(1, busy)) + ".",
                              "GPUs below 10 % mean activity: " +
                                  std::to_string(a->per_gpu.size() - static_cast<size_t>(busy))});
        }
      }
      if (a->per_gpu.size() == 1 && peak && peak->mig_capable && jr.avg_util_pct < 15 &&
          jr.mem_peak_bytes > 0 && jr.mem_peak_bytes < 10ULL * 1000 * 1000 * 1000) {
        r.advice.push_back({id, "mig",
                            "Small job on a whole " + peak->model +
                                ": a 1g.10gb MIG slice fits it (seven such jobs per GPU).",
                            "mean utilisation " + Fixed(jr.avg_util_pct) + " %, memory peak " +
                                Fixed(static_cast<double>(jr.mem_peak_bytes) / 1e9) + " GB"});
      }
      const double mean = a->dt > 0 ? a->act / a->dt : 0;
      const double var = a->dt > 0 ? std::max(0.0, a->sum_sq / a->dt - mean * mean) : 0;
      if (mean > 0 && mean < 40 && std::sqrt(var) > mean &&
          !(rec_job && rec_job->info.preemptible)) {
        r.advice.push_back(
            {id, "preemptible",
             "Bursty job: run it in the preemptible (spot) tier at a lower price.",
             "mean activity " + Fixed(mean) + " %, std-dev " + Fixed(std::sqrt(var))});
      }
    }
    r.jobs.push_back(std::move(jr));
  }
  for (auto& [k, v] : users) r.users.push_back(v);
  for (auto& [k, v] : teams) r.teams.push_back(v);
  for (auto& [k, v] : quarters) r.audit.push_back(v);
  for (size_t i = 0; i < nb; ++i) {
    TimeBucket tb;
    tb.start = r.from + bucket * static_cast<int64_t>(i);
    tb.avg_activity_pct = buckets[i].dt > 0 ? buckets[i].act / buckets[i].dt : 0;
    tb.gpus_seen = static_cast<int>(buckets[i].gpus.size());
    tb.gpus_allocated = static_cast<int>(buckets[i].allocated.size());
    // Fragmentation: free GPUs stranded on partly allocated nodes, as a share of all free GPUs
    // (a whole-node job cannot use them). The scheduler's FGD measure needs request shapes
    // and CPU state the samples do not carry.
    int free_total = 0, stranded = 0;
    for (const auto& [node, v] : buckets[i].nodes) {
      const int free = static_cast<int>(v.first.size() - v.second.size());
      free_total += free;
      if (!v.second.empty()) stranded += free;
    }
    if (free_total > 0) tb.fragmentation_pct = 100.0 * stranded / free_total;
    r.timeline.push_back(tb);
  }
  std::vector<std::pair<double, int>> fgd(r.timeline.size());
  for (const FragmentationSample& f : rec.fragmentation) {
    if (f.t < r.from || f.t > r.to || f.total_gpu_milli <= 0) continue;
    const auto i = static_cast<size_t>((f.t - r.from) / bucket);
    if (i >= fgd.size()) continue;
    fgd[i].first += 100.0 * f.fragmented_gpu_milli / static_cast<double>(f.total_gpu_milli);
    fgd[i].second++;
  }
  for (size_t i = 0; i < fgd.size(); ++i) {
    if (fgd[i].second > 0) r.timeline[i].fgd_fragmentation_pct = fgd[i].first / fgd[i].second;
  }
  return r;
}

// ---------------- renderers ----------------

void AddLedgerToReport(const std::vector<LedgerEntry>& ledger, Report* r) {
  std::map<std::string, TeamAccount> by_team;
  for (const LedgerEntry& e : ledger) {
    TeamAccount& a = by_team[e.team];
    a.team = e.team;
    a.balance_micro += e.micro_credits;
    ++a.entries;
    switch (e.kind) {
      case LedgerKind::kGrant:
      case LedgerKind::kRefund:
        a.granted_micro += e.micro_credits;
        break;
      case LedgerKind::kCharge:
        a.charged_micro -= e.micro_credits;
        break;
      case LedgerKind::kIdleCharge:
        a.idle_charged_micro -= e.micro_credits;
        break;
    }
    if (e.reclaimed) a.reclaimed_micro -= e.micro_credits;
  }
  r->accounts.clear();
  for (auto& [team, a] : by_team) r->accounts.push_back(a);
}

std::string RenderText(const Report& r) {
  std::ostringstream o;
  o << "Stoker efficiency report " << FormatRfc3339(r.from) << " .. " << FormatRfc3339(r.to)
    << "\n\n";
  o << "Cluster: " << Fixed(r.cluster_alloc_gpu_hours) << " GPU-h allocated, "
    << Fixed(r.cluster_used_gpu_hours) << " used (activity-weighted), "
    << Fixed(r.cluster_idle_gpu_hours) << " idle\n\n";
  o << "Jobs\n";
  o << fmt::format(
      "  {:<14} {:<10} {:<8} {:>4} {:>8} {:>8} {:>7} {:>7} {:>7} {:>7} {:>9} {:>8} {:<7}\n", "JOB",
      "USER", "MODEL", "GPUS", "ALLOC_H", "USED_H", "UTIL%", "PEAK%", "SM%", "TENSOR%", "TFLOPS~",
      "COST", "ZONE");
  for (const auto& j : r.jobs) {
    o << fmt::format(
        "  {:<14} {:<10} {:<8} {:4} {:8.2f} {:8.2f} {:7.1f} {:7.1f} {:>7} {:>7} {:>9} {:>8} "
        "{:<7}\n",
        j.id, j.user, j.model.substr(0, 8), j.gpus, j.alloc_gpu_hours, j.used_gpu_hours,
        j.avg_util_pct, j.peak_util_pct, j.avg_sm_pct ? Fixed(*j.avg_sm_pct) : "n/a",
        j.avg_tensor_pct ? Fixed(*j.avg_tensor_pct) : "n/a",
        j.achieved_tflops ? Fixed(*j.achieved_tflops) : "n/a", Credits(j.cost_micro),
        ZoneName(j.zone));
  }
  for (const auto* list : {&r.users, &r.teams}) {
    o << "\n" << (list == &r.users ? "Users" : "Teams") << "\n";
    for (const auto& u : *list) {
      o << fmt::format(
          "  {:<14} jobs {:3}  alloc {:8.2f} GPU-h  used {:8.2f}  idle {:8.2f}  cost {}\n", u.name,
          u.jobs, u.alloc_gpu_hours, u.used_gpu_hours, u.idle_gpu_hours, Credits(u.cost_micro));
    }
  }
  if (!r.accounts.empty()) {
    o << "\nCompute market (credits)\n";
    for (const auto& a : r.accounts) {
      o << fmt::format(
          "  {:<14} balance {}  granted {}  charged {}  idle charged {}  on reclaimed {}{}\n",
          a.team, Credits(a.balance_micro), Credits(a.granted_micro), Credits(a.charged_micro),
          Credits(a.idle_charged_micro), Credits(a.reclaimed_micro),
          a.balance_micro <= 0 ? "  OUT OF CREDIT: preemptible only" : "");
    }
  }
  o << "\nQuarterly audit\n";
  for (const auto& q : r.audit) {
    o << fmt::format(
        "  {}  jobs {}  alloc {:.2f} GPU-h  used {:.2f}  idle {:.2f} ({:.0f} % of allocated)\n",
        q.quarter, q.jobs, q.alloc_gpu_hours, q.used_gpu_hours, q.idle_gpu_hours,
        q.alloc_gpu_hours > 0 ? 100 * q.idle_gpu_hours / q.alloc_gpu_hours : 0.0);
  }
  o << "\nAdvice\n";
  if (r.advice.empty()) o << "  none: no pattern with enough evidence\n";
  for (const auto& a : r.advice)
    o << "  [" << a.kind << "] " << a.subject << ": " << a.text << " (" << a.evidence << ")\n";
  o << "\nNotes\n";
  for (const auto& n : r.notes) o << "  " << n << "\n";
  return o.str();
}

namespace {

nlohmann::json ToJson(const Report& r) {
  using nlohmann::json;
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  json j;
  j["from"] = FormatRfc3339(r.from);
  j["to"] = FormatRfc3339(r.to);
  j["cluster"] = {{"alloc_gpu_hours", r.cluster_alloc_gpu_hours},
                  {"used_gpu_hours", r.cluster_used_gpu_hours},
                  {"idle_gpu_hours", r.cluster_idle_gpu_hours}};
  j["jobs"] = json::array();
  for (const auto& x : r.jobs) {
    json h = json::array();
    for (const auto& z : x.zone_history)
      h.push_back({{"at", FormatRfc3339(z.at)}, {"zone", z.zone}});
    j["jobs"].push_back({{"id", x.id},
                         {"user", x.user},
                         {"team", x.team},
                         {"model", x.model},
                         {"gpus", x.gpus},
                         {"start", FormatRfc3339(x.start)},
                         {"end", FormatRfc3339(x.end)},
                         {"samples", x.samples},
                         {"alloc_gpu_hours", x.alloc_gpu_hours},
                         {"used_gpu_hours", x.used_gpu_hours},
                         {"idle_gpu_hours", x.idle_gpu_hours},
                         {"avg_util_pct", x.avg_util_pct},
                         {"peak_util_pct", x.peak_util_pct},
                         {"avg_sm_pct", opt(x.avg_sm_pct)},
                         {"avg_tensor_pct", opt(x.avg_tensor_pct)},
                         {"mem_peak_bytes", x.mem_peak_bytes},
                         {"mem_total_bytes", x.mem_total_bytes},
                         {"energy_kwh", opt(x.energy_kwh)},
                         {"achieved_tflops_estimate", opt(x.achieved_tflops)},
                         {"tflops_per_watt_estimate", opt(x.tflops_per_watt)},
                         {"peak_tflops", opt(x.peak_tflops)},
                         {"zone", x.zone},
                         {"zone_history", h},
                         {"cost", static_cast<double>(x.cost_micro) / 1e6}});
  }
  for (const auto& [key, list] : {std::pair{"users", &r.users}, std::pair{"teams", &r.teams}}) {
    j[key] = json::array();
    for (const auto& u : *list) {
      j[key].push_back({{"name", u.name},
                        {"jobs", u.jobs},
                        {"alloc_gpu_hours", u.alloc_gpu_hours},
                        {"used_gpu_hours", u.used_gpu_hours},
                        {"idle_gpu_hours", u.idle_gpu_hours},
                        {"cost", static_cast<double>(u.cost_micro) / 1e6}});
    }
  }
  j["timeline"] = json::array();
  for (const auto& t : r.timeline) {
    j["timeline"].push_back({{"start", FormatRfc3339(t.start)},
                             {"avg_activity_pct", t.avg_activity_pct},
                             {"gpus_seen", t.gpus_seen},
                             {"gpus_allocated", t.gpus_allocated},
                             {"fragmentation_pct", opt(t.fragmentation_pct)},
                             {"fgd_fragmentation_pct", opt(t.fgd_fragmentation_pct)}});
  }
  j["audit"] = json::array();
  for (const auto& q : r.audit) {
    j["audit"].push_back({{"quarter", q.quarter},
                          {"jobs", q.jobs},
                          {"alloc_gpu_hours", q.alloc_gpu_hours},
                          {"used_gpu_hours", q.used_gpu_hours},
                          {"idle_gpu_hours", q.idle_gpu_hours}});
  }
  j["advice"] = json::array();
  for (const auto& a : r.advice) {
    j["advice"].push_back(
        {{"job", a.subject}, {"kind", a.kind}, {"text", a.text}, {"evidence", a.evidence}});
  }
  j["accounts"] = json::array();
  for (const auto& a : r.accounts) {
    j["accounts"].push_back({{"team", a.team},
                             {"balance", static_cast<double>(a.balance_micro) / 1e6},
                             {"granted", static_cast<double>(a.granted_micro) / 1e6},
                             {"charged", static_cast<double>(a.charged_micro) / 1e6},
                             {"idle_charged", static_cast<double>(a.idle_charged_micro) / 1e6},
                             {"reclaimed_charged", static_cast<double>(a.reclaimed_micro) / 1e6},
                             {"entries", a.entries},
                             {"out_of_credit", a.balance_micro <= 0}});
  }
  j["notes"] = r.notes;
  return j;
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) {
    if (c == '"') o += '"';
    o += c;
  }
  return o + "\"";
}

std::string Html(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '&':
        o += "&amp;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

// JSON text safe inside a <script> element: '<' only occurs in JSON strings, where \u003c
// means the same, so no "</script>" or "<!--" can end or confuse the element.
std::string ScriptSafeJson(const nlohmann::json& j) {
  const std::string text = j.dump();
  std::string o;
  o.reserve(text.size());
  for (char c : text) {
    if (c == '<') {
      o += "\\u003c";
    } else {
      o += c;
    }
  }
  return o;
}

}  // namespace

std::string RenderJson(const Report& r) { return ToJson(r).dump(2) + "\n"; }

std::string RenderCsv(const Report& r) {
  std::ostringstream o;
  o << "job,user,team,model,gpus,start,end,alloc_gpu_hours,used_gpu_hours,idle_gpu_hours,"
       "avg_util_pct,peak_util_pct,avg_sm_pct,avg_tensor_pct,mem_peak_bytes,energy_kwh,"
       "achieved_tflops_estimate,peak_tflops,zone,cost,tflops_per_watt_estimate\n";
  auto opt = [](const std::optional<double>& v) { return v ? Fixed(*v, 3) : std::string(); };
  for (const auto& j : r.jobs) {
    o << CsvField(j.id) << ',' << CsvField(j.user) << ',' << CsvField(j.team) << ','
      << CsvField(j.model) << ',' << j.gpus << ',' << FormatRfc3339(j.start) << ','
      << FormatRfc3339(j.end) << ',' << Fixed(j.alloc_gpu_hours, 4) << ','
      << Fixed(j.used_gpu_hours, 4) << ',' << Fixed(j.idle_gpu_hours, 4) << ','
      << Fixed(j.avg_util_pct, 2) << ',' << Fixed(j.peak_util_pct, 2) << ',' << opt(j.avg_sm_pct)
      << ',' << opt(j.avg_tensor_pct) << ',' << j.mem_peak_bytes << ',' << opt(j.energy_kwh) << ','
      << opt(j.achieved_tflops) << ',' << opt(j.peak_tflops) << ',' << ZoneName(j.zone) << ','
      << Credits(j.cost_micro) << ',' << (j.tflops_per_watt ? Fixed(*j.tflops_per_watt, 4) : "")
      << '\n';
  }
  return o.str();
}

std::string RenderHtml(const Report& r, std::string_view chart_script) {
  std::ostringstream o;
  o << "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Stoker efficiency report</title>"
       "<style>body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse}"
       "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f1f3f5}"
       "td.l,th.l{text-align:left}.gold{color:#b08800}.silver{color:#868e96}.bronze{color:#a0522d}"
       ".hot{color:#e03131}</style></head><body>";
  o << "<h1>Stoker efficiency report</h1><p>" << FormatRfc3339(r.from) << " &ndash; "
    << FormatRfc3339(r.to) << "</p>";
  o << "<p><b>" << Fixed(r.cluster_alloc_gpu_hours) << "</b> GPU-hours allocated, <b>"
    << Fixed(r.cluster_used_gpu_hours) << "</b> used (activity-weighted), <b>"
    << Fixed(r.cluster_idle_gpu_hours) << "</b> idle.</p>";
  // The charts are drawn in the browser by `chart_script` (the dashboard's charting library,
  // web/src/report.ts) from the report's JSON, both inlined so the file works offline.
  const std::string no_script =
      chart_script.empty()
          ? "<p><i>(chart not drawn: this report was written without its chart script)</i></p>"
          : "";
  o << "<h2>Cluster over time</h2><div id='chart-cluster'>" << no_script << "</div>";
  const bool any_fgd = std::any_of(r.timeline.begin(), r.timeline.end(), [](const TimeBucket& t) {
    return t.fgd_fragmentation_pct.has_value();
  });
  if (any_fgd) {
    o << "<h2>Fragmentation over time (FGD measure, from the scheduler)</h2><div id='chart-fgd'>"
      << no_script << "</div>";
  }
  o << "<h2>Users: allocated vs used</h2><div id='chart-owners'>" << no_script << "</div>";
  o << "<h2>Cost by team</h2><div id='chart-cost'>" << no_script << "</div>";
  o << "<h2>Jobs</h2><table><tr><th class='l'>job</th><th class='l'>user</th><th "
       "class='l'>model</th>"
       "<th>GPUs</th><th>alloc GPU-h</th><th>used GPU-h</th><th>idle GPU-h</th><th>util %</th>"
       "<th>peak %</th><th>SM %</th><th>tensor %</th><th>mem peak GB</th><th>energy kWh</th>"
       "<th>TFLOPS (est.)</th><th>TFLOPS/W (est.)</th><th>peak TFLOPS</th><th "
       "class='l'>zone</th><th>cost</th></tr>";
  auto opt = [](const std::optional<double>& v, int d = 1) {
    return v ? Fixed(*v, d) : std::string("n/a");
  };
  for (const auto& j : r.jobs) {
    o << "<tr><td class='l'>" << Html(j.id) << "</td><td class='l'>" << Html(j.user)
      << "</td><td class='l'>" << Html(j.model) << "</td><td>" << j.gpus << "</td><td>"
      << Fixed(j.alloc_gpu_hours, 2) << "</td><td>" << Fixed(j.used_gpu_hours, 2) << "</td><td>"
      << Fixed(j.idle_gpu_hours, 2) << "</td><td>" << Fixed(j.avg_util_pct) << "</td><td>"
      << Fixed(j.peak_util_pct) << "</td><td>" << opt(j.avg_sm_pct) << "</td><td>"
      << opt(j.avg_tensor_pct) << "</td><td>" << Fixed(static_cast<double>(j.mem_peak_bytes) / 1e9)
      << "</td><td>" << opt(j.energy_kwh, 2) << "</td><td>" << opt(j.achieved_tflops) << "</td><td>"
      << opt(j.tflops_per_watt, 3) << "</td><td>" << opt(j.peak_tflops, 0) << "</td><td class='l "
      << ZoneName(j.zone) << "'>" << ZoneName(j.zone);
    for (const auto& z : j.zone_history) o << " &rarr;" << ZoneName(z.zone);
    o << "</td><td>" << Credits(j.cost_micro) << "</td></tr>";
  }
  o << "</table>";
  for (const auto& [title, list] : {std::pair{"Users", &r.users}, std::pair{"Teams", &r.teams}}) {
    o << "<h2>" << title
      << "</h2><table><tr><th class='l'>name</th><th>jobs</th><th>alloc GPU-h</th>"
         "<th>used GPU-h</th><th>idle GPU-h</th><th>cost</th></tr>";
    for (const auto& u : *list) {
      o << "<tr><td class='l'>" << Html(u.name) << "</td><td>" << u.jobs << "</td><td>"
        << Fixed(u.alloc_gpu_hours, 2) << "</td><td>" << Fixed(u.used_gpu_hours, 2) << "</td><td>"
        << Fixed(u.idle_gpu_hours, 2) << "</td><td>" << Credits(u.cost_micro) << "</td></tr>";
    }
    o << "</table>";
  }
  if (!r.accounts.empty()) {
    o << "<h2>Compute market</h2><table><tr><th class='l'>team</th><th>balance</th><th>granted</th>"
         "<th>charged</th><th>idle charged</th><th>on reclaimed</th></tr>";
    for (const auto& a : r.accounts) {
      o << "<tr><td class='l'>" << Html(a.team) << "</td><td>" << Credits(a.balance_micro)
        << "</td><td>" << Credits(a.granted_micro) << "</td><td>" << Credits(a.charged_micro)
        << "</td><td>" << Credits(a.idle_charged_micro) << "</td><td>" << Credits(a.reclaimed_micro)
        << "</td></tr>";
    }
    o << "</table>";
  }
  o << "<h2>Quarterly audit</h2><table><tr><th class='l'>quarter</th><th>jobs</th><th>alloc "
       "GPU-h</th>"
       "<th>used GPU-h</th><th>idle GPU-h</th><th>idle share</th></tr>";
  for (const auto& q : r.audit) {
    o << "<tr><td class='l'>" << q.quarter << "</td><td>" << q.jobs << "</td><td>"
      << Fixed(q.alloc_gpu_hours, 2) << "</td><td>" << Fixed(q.used_gpu_hours, 2) << "</td><td>"
      << Fixed(q.idle_gpu_hours, 2) << "</td><td>"
      << Fixed(q.alloc_gpu_hours > 0 ? 100 * q.idle_gpu_hours / q.alloc_gpu_hours : 0)
      << " %</td></tr>";
  }
  o << "</table><h2>Advice</h2><ul>";
  if (r.advice.empty()) o << "<li>none: no pattern with enough evidence</li>";
  for (const auto& a : r.advice) {
    o << "<li><b>" << Html(a.kind) << "</b> " << Html(a.subject) << ": " << Html(a.text) << " <i>("
      << Html(a.evidence) << ")</i></li>";
  }
  o << "</ul><h2>Notes</h2><ul>";
  for (const auto& n : r.notes) o << "<li>" << Html(n) << "</li>";
  o << "</ul>";
  if (!chart_script.empty()) {
    o << "<script type='application/json' id='stoker-report-data'>" << ScriptSafeJson(ToJson(r))
      << "</script><script>" << chart_script << "</script>";
  }
  o << "</body></html>\n";
  return o.str();
}

}  // namespace stoker::efficiency
