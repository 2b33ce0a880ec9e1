#include "efficiency/history_sizing.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "efficiency/mig_fit.h"
#include "efficiency/report.h"

namespace stoker::efficiency {
namespace {

constexpr int kSlicesPerGpu = 7;

std::string ShortModel(const std::string& name) {
  if (auto p = LookupPeakRates(name)) return p->model;
  return name.empty() ? "unknown" : name;
}

struct JobUse {
  const JobRecord* rec = nullptr;
  std::string model;
  uint64_t mem_peak = 0, mem_total = 0;
  double activity_p95 = 0;
  double tensor_sum = 0;
  int64_t tensor_n = 0;
  int gpus_busy = 0;
  WallTime last_sample{};
};

double Activity(const RecordedSample& s) {
  if (s.sm_active) return *s.sm_active;
  return s.util_pct.value_or(0) / 100.0;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

std::string Plural(int n) { return std::to_string(n) + (n == 1 ? " GPU" : " GPUs"); }

// The class's need from its largest use (see the header).
void DecideNeed(ClassNeed& c, double headroom) {
  if (c.gpus_busy >= 2) {
    c.need = Plural(c.gpus_busy);
    c.slices = kSlicesPerGpu * c.gpus_busy;
    return;
  }
  auto peak = LookupPeakRates(c.model);
  if (peak && peak->mig_capable && c.mem_total_bytes > 0) {
    const auto activity_milli = std::llround(c.activity_p95 * 100'000);
    const auto memory =
        static_cast<uint64_t>(std::ceil(static_cast<double>(c.mem_peak_bytes) * (1 + headroom)));
    if (const MigFit* m = SmallestMigFit(activity_milli, memory, c.mem_total_bytes)) {
      c.slices = m->slices;
      c.need = MigFitName(*m, c.mem_total_bytes);
      return;
    }
  }
  c.need = Plural(1);
  c.slices = kSlicesPerGpu;
}

}  // namespace

Result<HistorySizing> SizeFromHistory(const RecordSet& history, const HistorySizingOptions& o) {
  if (!(o.memory_headroom >= 0 && o.memory_headroom <= 1)) {
    return InvalidArgument("memory headroom: must be in [0, 1]");
  }
  if (!(o.busy_gpu_threshold > 0 && o.busy_gpu_threshold <= 1)) {
    return InvalidArgument("busy GPU threshold: must be in (0, 1]");
  }
  if (!(o.activity_percentile > 0 && o.activity_percentile <= 1)) {
    return InvalidArgument("activity percentile: must be in (0, 1]");
  }
  HistorySizing out;
  std::tie(out.from, out.to) = ReportSpan(history);
  for (const JobRecord& r : history.jobs) {
    if (r.info.start != WallTime{}) out.from = std::min(out.from, r.submit);  // waited before
  }
  out.span_hours = std::chrono::duration<double, std::ratio<3600>>(out.to - out.from).count();

  // Per job: its samples, per GPU.
  std::map<std::string, std::map<std::string, std::vector<const RecordedSample*>>> by_job;
  std::map<std::string, std::set<std::string>> gpus_of_model;
  for (const RecordedSample& s : history.samples) {
    gpus_of_model[ShortModel(s.model)].insert(s.gpu);
    if (!s.job.empty()) by_job[s.job][s.gpu].push_back(&s);
  }
  std::vector<JobUse> uses;
  for (const JobRecord& r : history.jobs) {
    auto it = by_job.find(r.info.id);
    if (r.info.start == WallTime{} || it == by_job.end()) {
      ++out.jobs_skipped;
      continue;
    }
    JobUse u;
    u.rec = &r;
    std::vector<double> act;
    for (const auto& [gpu, samples] : it->second) {
      double sum = 0;
      for (const RecordedSample* s : samples) {
        if (u.model.empty() && !s->model.empty()) u.model = ShortModel(s->model);
        if (s->mem_used) u.mem_peak = std::max(u.mem_peak, *s->mem_used);
        if (s->mem_total) u.mem_total = std::max(u.mem_total, *s->mem_total);
        if (s->tensor_active) {
          u.tensor_sum += *s->tensor_active;
          ++u.tensor_n;
        }
        const double a = Activity(*s);
        sum += a;
        act.push_back(a);
        u.last_sample = std::max(u.last_sample, s->t);
      }
      // (a mean at the threshold counts, whatever the rounding of the sum)
      if (sum / static_cast<double>(samples.size()) >= o.busy_gpu_threshold - 1e-9) ++u.gpus_busy;
    }
    if (u.model.empty()) u.model = ShortModel(r.info.gpu_model);
    u.activity_p95 = Percentile(std::move(act), o.activity_percentile);
    uses.push_back(u);
  }
  if (uses.empty()) {
    return InvalidArgument("history: no job that ran has samples (" +
                           std::to_string(history.jobs.size()) + " jobs, " +
                           std::to_string(history.samples.size()) + " samples)");
  }
  out.jobs_used = static_cast<int64_t>(uses.size());

  // Per (class, model): the largest use.
  std::map<std::pair<std::string, std::string>, ClassNeed> classes;
  std::map<std::pair<std::string, std::string>, std::pair<double, int64_t>> tensor;
  for (const JobUse& u : uses) {
    const std::string cls = u.rec->info.job_class.empty() ? "-" : u.rec->info.job_class;
    ClassNeed& c = classes[{cls, u.model}];
    c.job_class = cls;
    c.model = u.model;
    ++c.jobs;
    c.gpus_requested = std::max(c.gpus_requested, static_cast<int>(u.rec->info.gpus.size()));
    c.gpus_busy = std::max(c.gpus_busy, u.gpus_busy);
    c.mem_peak_bytes = std::max(c.mem_peak_bytes, u.mem_peak);
    c.mem_total_bytes = std::max(c.mem_total_bytes, u.mem_total);
    c.activity_p95 = std::max(c.activity_p95, u.activity_p95);
    auto& t = tensor[{cls, u.model}];
    t.first += u.tensor_sum;
    t.second += u.tensor_n;
  }
  for (auto& [key, c] : classes) {
    const auto& t = tensor[key];
    if (t.second > 0) c.tensor_active = t.first / static_cast<double>(t.second);
    DecideNeed(c, o.memory_headroom);
    out.classes.push_back(c);
  }

  // Per model: the jobs replayed on GPUs of 7 slices, as allocated and at their class's need.
  EfficiencyConfig prices;
  prices.price_per_gpu_hour_micro = o.price_per_gpu_hour_micro;
  std::map<std::string, std::vector<const JobUse*>> by_model;
  for (const JobUse& u : uses) by_model[u.model].push_back(&u);
  // Not a structured binding: the probe callback below captures the model, and clang (before
  // 16) refuses to capture a binding.
  for (const auto& model_jobs : by_model) {
    const std::string& model = model_jobs.first;
    const std::vector<const JobUse*>& jobs = model_jobs.second;
    ModelSize m;
    m.model = model;
    m.jobs = static_cast<int64_t>(jobs.size());
    auto seen = gpus_of_model.find(model);
    m.recorded_gpus = seen == gpus_of_model.end() ? 0 : static_cast<int>(seen->second.size());
    m.price_per_gpu_hour_micro = PricePerGpuHourMicro(prices, model);
    for (const bool right : {false, true}) {
      std::vector<sim::SimJobSpec> specs;
      for (const JobUse* u : jobs) {
        const JobRecord& r = *u->rec;
        const std::string cls = r.info.job_class.empty() ? "-" : r.info.job_class;
        sim::SimJobSpec j;
        j.name = r.info.id;
        j.submit_ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(r.submit - out.from).count();
        const WallTime end = r.end != WallTime{} ? r.end : std::max(u->last_sample, r.info.start);
        j.duration_ms = std::max<sim::SimMs>(
            1000,
            std::chrono::duration_cast<std::chrono::milliseconds>(end - r.info.start).count());
        j.gpus = right ? classes.at({cls, model}).slices
                       : kSlicesPerGpu * std::max(1, static_cast<int>(r.info.gpus.size()));
        j.min_gpus = j.gpus;
        specs.push_back(std::move(j));
      }
      std::sort(specs.begin(), specs.end(), [](const sim::SimJobSpec& a, const sim::SimJobSpec& b) {
        return a.submit_ms < b.submit_ms;
      });
      SizingOptions so;
      so.sim.idleness.idle_share = 0;  // the history is what it was: no idleness model
      so.sim.queue_policy = o.queue_policy;
      so.base.cluster = {1, kSlicesPerGpu};  // a "node" of the search is one GPU
      so.targets = o.targets;
      so.max_nodes = o.max_gpus;
      so.variants = {"static"};
      if (o.on_probe) {
        so.on_probe = [&, model](const SizingProbe& p) { o.on_probe(model, p); };
      }
      STOKER_ASSIGN_OR_RETURN(auto sized, SizeCluster(specs, so));
      const SizedVariant& v = sized.front();
      (right ? m.right_sized : m.as_requested) = v.nodes;
      if (right) {
        m.queue_mean_s = v.result.report.queue_delay_s.mean;
        m.queue_p99_s = v.result.report.queue_delay_s.p99;
      }
    }
    auto cost = [&](int32_t gpus) -> int64_t {
      if (gpus < 0) return -1;
      return std::llround(static_cast<double>(gpus) * out.span_hours *
                          static_cast<double>(m.price_per_gpu_hour_micro));
    };
    m.cost_recorded_micro = cost(m.recorded_gpus);
    m.cost_as_requested_micro = cost(m.as_requested);
    m.cost_right_sized_micro = cost(m.right_sized);
    out.models.push_back(m);
  }
  return out;
}

}  // namespace stoker::efficiency
