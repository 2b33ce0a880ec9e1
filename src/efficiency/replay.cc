#include "efficiency/replay.h"

#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

#include "efficiency/activity.h"
#include "efficiency/report.h"

namespace stoker::efficiency {

GpuSample ToGpuSample(const RecordedSample& r) {
  GpuSample s;
  s.id.uuid = r.gpu;
  s.id.name = r.model;
  s.timestamp = r.t;
  if (r.util_pct)
    s.util_gpu_pct = Field<uint32_t>::Of(static_cast<uint32_t>(std::lround(*r.util_pct)));
  if (r.sm_active) s.gpm.sm_active = Field<double>::Of(*r.sm_active);
  if (r.tensor_active) s.gpm.tensor_active = Field<double>::Of(*r.tensor_active);
  if (r.dram_bw) s.gpm.dram_bw_util = Field<double>::Of(*r.dram_bw);
  if (r.mem_used) s.memory_used_bytes = Field<uint64_t>::Of(*r.mem_used);
  if (r.mem_total) s.memory_total_bytes = Field<uint64_t>::Of(*r.mem_total);
  if (r.power_w)
    s.power_mw = Field<uint32_t>::Of(static_cast<uint32_t>(std::lround(*r.power_w * 1000)));
  if (r.temp_c)
    s.temperature_c = Field<uint32_t>::Of(static_cast<uint32_t>(std::lround(*r.temp_c)));
  if (!r.job.empty()) {
    GpuProcess p;
    p.job.kind = JobRef::Kind::kStoker;
    p.job.id = r.job;
    s.processes.push_back(p);
  }
  return s;
}

ZoneReplay ReplayZones(const RecordSet& records, const EfficiencyConfig& cfg) {
  ZoneTracker z(cfg.zones);
  std::unordered_map<std::string, uint64_t> mem_peak, mem_total;
  std::unordered_map<std::string, std::set<std::string>> gpus_of;
  std::unordered_map<std::string, std::string> model_of;
  for (const auto& r : records.samples) {
    const GpuSample s = ToGpuSample(r);
    const auto jobs = JobsOnGpu(s);
    z.Observe(s, jobs);
    for (const auto& j : jobs) {
      if (r.mem_used) mem_peak[j] = std::max(mem_peak[j], *r.mem_used);
      if (r.mem_total) mem_total[j] = std::max(mem_total[j], *r.mem_total);
      gpus_of[j].insert(r.gpu);
      if (!r.model.empty()) model_of[j] = r.model;
    }
  }
  ZoneReplay out;
  out.gpus = z.Gpus();
  out.jobs = z.Jobs();
  std::unordered_map<std::string, const JobRecord*> rec;
  for (const auto& j : records.jobs) rec[j.info.id] = &j;
  std::vector<JobLoad> loads;
  for (const auto& js : out.jobs) {
    JobLoad l;
    l.job = js.key;
    l.mean_milli = js.mean_milli;
    l.gpus = static_cast<int>(gpus_of[js.key].size());
    l.memory_peak_bytes = mem_peak[js.key];
    l.gpu_memory_bytes = mem_total[js.key] ? mem_total[js.key] : 80ULL * 1000 * 1000 * 1000;
    l.gpu_model = model_of[js.key];
    const auto peak = LookupPeakRates(l.gpu_model);
    l.mig_capable = peak && peak->mig_capable;
    if (auto it = rec.find(js.key); it != rec.end()) {
      l.user = it->second->info.user;
      l.movable = it->second->info.movable;
    }
    loads.push_back(std::move(l));
  }
  out.plan = PlanConsolidation(std::move(loads), cfg.zones);
  return out;
}

AlertReplay ReplayAlerts(const RecordSet& records, const EfficiencyConfig& cfg,
                         const std::vector<Notifier*>& notifiers) {
  AlertEngine engine(cfg.alerting, cfg.zones.metric);
  for (Notifier* n : notifiers) engine.AddNotifier(n);
  std::unordered_map<std::string, bool> memory_bound;
  for (const auto& j : records.jobs) memory_bound[j.info.id] = j.info.memory_bound;
  AlertReplay out;
  // Job-level signals: per job and sample time, the GPUs' activity.
  std::map<std::string, std::pair<double, int>> job_acc;  // job -> (max activity, gpus)
  auto flush = [&](WallTime t) {
    for (const auto& [job, v] : job_acc) {
      engine.ObserveJob(job, t,
                        {{"activity", v.first},
                         {"idle", v.first == 0 ? 1.0 : 0.0},
                         {"gpus", static_cast<double>(v.second)}});
    }
    job_acc.clear();
    engine.Apply(t, &out.errors);
  };
  WallTime current{};
  bool any = false;
  for (const auto& r : records.samples) {
    if (any && r.t != current) flush(current);
    current = r.t;
    any = true;
    const GpuSample s = ToGpuSample(r);
    Labels extra;
    if (!r.node.empty()) extra["hostname"] = r.node;
    engine.ObserveGpu(s, extra, !r.job.empty() && memory_bound[r.job]);
    if (!r.job.empty()) {
      if (auto a = ActivityMilli(s, cfg.zones.metric)) {
        auto& acc = job_acc.try_emplace(r.job, 0.0, 0).first->second;
        acc.first = std::max(acc.first, static_cast<double>(*a) / 1000.0);
        ++acc.second;
      }
    }
  }
  if (any) flush(current);
  out.fired = engine.history();
  out.active = engine.Active();
  return out;
}

namespace {

// Dry-run actions: a replay never touches jobs.
class NoActions final : public ReclaimActions {
 public:
  Status Warn(const JobInfo&, const std::string&) override { return Status::Ok(); }
  Status Requeue(const JobInfo&, const std::string&) override { return Status::Ok(); }
  Status Cancel(const JobInfo&, const std::string&) override { return Status::Ok(); }
};

}  // namespace

std::vector<ReclaimRecord> ReplayReclaim(const RecordSet& records, const EfficiencyConfig& cfg,
                                         Duration check_every) {
  StaticJobDirectory dir;
  std::unordered_map<std::string, JobInfo> known;
  for (const auto& j : records.jobs) known[j.info.id] = j.info;
  IdleReclaimPolicy policy = cfg.idle;
  policy.dry_run = true;
  NoActions actions;
  IdleReclaimer reclaimer(policy, dir, actions);
  WallTime next_check{};
  for (const auto& r : records.samples) {
    if (next_check == WallTime{}) next_check = r.t + check_every;
    while (r.t >= next_check) {
      reclaimer.Evaluate(next_check);
      next_check += check_every;
    }
    if (r.job.empty()) continue;
    if (!dir.Find(r.job)) {
      JobInfo info;
      if (auto it = known.find(r.job); it != known.end())
        info = it->second;
      else {
        info.id = r.job;
        info.start = r.t;
      }
      dir.Upsert(info);
    }
    const GpuSample s = ToGpuSample(r);
    if (auto a = ActivityMilli(s, cfg.zones.metric)) reclaimer.Observe(r.job, r.gpu, r.t, *a);
  }
  if (!records.samples.empty()) reclaimer.Evaluate(records.samples.back().t);
  return reclaimer.log();
}

}  // namespace stoker::efficiency
