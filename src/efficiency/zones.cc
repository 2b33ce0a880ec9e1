#include "efficiency/zones.h"

#include <algorithm>
#include <map>

#include "efficiency/activity.h"
#include "efficiency/mig_fit.h"

namespace stoker::efficiency {

Zone Classify(const ZoneConfig& cfg, int64_t mean_milli) {
  if (mean_milli < cfg.bronze_max) return Zone::kBronze;
  if (mean_milli < cfg.silver_max) return Zone::kSilver;
  if (mean_milli <= cfg.gold_max) return Zone::kGold;
  return Zone::kHot;
}

void ZoneTracker::Observe(const GpuSample& sample, std::span<const std::string> jobs) {
  ActivityMetric used = ActivityMetric::kAuto;
  const auto a = ActivityMilli(sample, cfg_.metric, &used);
  if (!a) return;
  ObserveActivity(GpuKey(sample), sample.timestamp, *a, used, jobs);
}

void ZoneTracker::ObserveActivity(const std::string& gpu_key, WallTime t, int64_t v,
                                  ActivityMetric m, std::span<const std::string> jobs) {
  ObserveActivity(TrackGpu(gpu_key), t, v, m, jobs);
}

ZoneTracker::GpuRef ZoneTracker::TrackGpu(const std::string& key) {
  GpuRef ref;
  ref.entry_ = &*gpus_.try_emplace(key, cfg_.window).first;
  return ref;
}

void ZoneTracker::ObserveActivity(GpuRef gpu, WallTime t, int64_t v, ActivityMetric m,
                                  std::span<const std::string> jobs) {
  Update(gpu.entry_->first, false, gpu.entry_->second, t, v, m);
  for (const auto& j : jobs) {
    auto jt = jobs_.try_emplace(j, cfg_.window).first;
    Update(j, true, jt->second, t, v, m);
  }
}

void ZoneTracker::Update(const std::string& key, bool is_job, Track& t, WallTime at, int64_t v,
                         ActivityMetric m) {
  if (!t.window.Add(at, v)) return;
  t.metric = m;
  Zone z = Zone::kUnknown;
  if (t.window.covered() >= cfg_.min_coverage) z = Classify(cfg_, t.window.mean());
  if (z != t.zone) {
    transitions_.push_back({at, key, is_job, t.zone, z});
    t.zone = z;
  }
}

ZoneStatus ZoneTracker::StatusOf(const std::string& key, const Track& t) const {
  ZoneStatus s;
  s.key = key;
  s.zone = t.zone;
  s.samples = t.window.count();
  s.zero_samples = t.window.zeros();
  s.metric = t.metric;
  if (!t.window.empty()) {
    s.mean_milli = t.window.mean();
    s.peak_milli = t.window.max();
    s.covered = t.window.covered();
    s.last_sample = t.window.newest();
  }
  return s;
}

ZoneStatus ZoneTracker::Gpu(const std::string& key) const {
  auto it = gpus_.find(key);
  if (it == gpus_.end()) return ZoneStatus{key};
  return StatusOf(key, it->second);
}

ZoneStatus ZoneTracker::Job(const std::string& id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return ZoneStatus{id};
  return StatusOf(id, it->second);
}

std::vector<ZoneStatus> ZoneTracker::Gpus() const {
  std::vector<ZoneStatus> out = GpusUnsorted();
  SortByKey(&out);
  return out;
}

std::vector<ZoneStatus> ZoneTracker::GpusUnsorted() const {
  std::vector<ZoneStatus> out;
  out.reserve(gpus_.size());
  for (const auto& [k, t] : gpus_) out.push_back(StatusOf(k, t));
  return out;
}

void ZoneTracker::SortByKey(std::vector<ZoneStatus>* statuses) {
  std::sort(statuses->begin(), statuses->end(),
            [](const auto& a, const auto& b) { return a.key < b.key; });
}

std::vector<ZoneStatus> ZoneTracker::Jobs() const {
  std::vector<ZoneStatus> out;
  for (const auto& [k, t] : jobs_) out.push_back(StatusOf(k, t));
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  return out;
}

std::vector<ZoneTransition> ZoneTracker::TakeTransitions() {
  std::vector<ZoneTransition> out;
  out.swap(transitions_);
  return out;
}

ConsolidationPlan PlanConsolidation(std::vector<JobLoad> jobs, const ZoneConfig& zones) {
  ConsolidationPlan plan;
  // Candidates: single-GPU jobs below gold that did something (idle ones are reclaimed instead).
  std::erase_if(jobs, [&](const JobLoad& j) {
    return j.gpus != 1 || j.mean_milli >= zones.silver_max || j.mean_milli == 0;
  });
  std::map<std::string, std::vector<JobLoad>> by_model;
  for (auto& j : jobs) by_model[j.gpu_model].push_back(std::move(j));
  for (auto& [model, list] : by_model) {
    std::sort(list.begin(), list.end(), [](const JobLoad& a, const JobLoad& b) {
      return a.mean_milli != b.mean_milli ? a.mean_milli > b.mean_milli : a.job < b.job;
    });
    struct Bin {
      std::vector<const JobLoad*> jobs;
      int64_t milli = 0;
      uint64_t mem = 0;
      uint64_t cap = 0;
    };
    std::vector<Bin> bins;
    for (const auto& j : list) {
      const uint64_t cap = j.gpu_memory_bytes / 10 * 9;  // keep 10 % headroom
      bool placed = false;
      for (auto& b : bins) {
        if (b.milli + j.mean_milli <= zones.gold_max && b.mem + j.memory_peak_bytes <= b.cap) {
          b.jobs.push_back(&j);
          b.milli += j.mean_milli;
          b.mem += j.memory_peak_bytes;
          placed = true;
          break;
        }
      }
      if (!placed) bins.push_back({{&j}, j.mean_milli, j.memory_peak_bytes, cap});
    }
    for (const auto& b : bins) {
      if (b.jobs.size() < 2) continue;  // nothing to pack
      PackGroup g;
      g.combined_milli = b.milli;
      g.combined_memory_bytes = b.mem;
      g.gpus_freed = static_cast<int>(b.jobs.size()) - 1;
      g.apply_now = true;
      bool all_mig = true;
      bool one_user = true;
      int slices = 0;
      std::string layout;
      for (const JobLoad* j : b.jobs) {
        g.jobs.push_back(j->job);
        g.apply_now = g.apply_now && j->movable;
        one_user = one_user && j->user == b.jobs.front()->user;
        const MigFit* p = j->mig_capable ? SmallestMigFit(j->mean_milli, j->memory_peak_bytes,
                                                          j->gpu_memory_bytes)
                                         : nullptr;
        if (!p) {
          all_mig = false;
        } else {
          slices += p->slices;
          layout += (layout.empty() ? "" : "+") + MigFitName(*p, j->gpu_memory_bytes);
        }
      }
      if (all_mig && slices <= 7) {
        g.mode = ShareMode::kMig;
        g.mig_layout = layout;
        g.reason = "every job fits a MIG slice: hardware isolation of memory and faults";
      } else if (one_user) {
        g.mode = ShareMode::kMps;
        g.reason = "one owner: MPS runs the kernels concurrently";
      } else {
        g.mode = ShareMode::kTimeSlicing;
        g.reason = "different owners and no MIG fit: time-slicing keeps address spaces apart";
      }
      plan.gpus_freed += g.gpus_freed;
      plan.groups.push_back(std::move(g));
    }
  }
  return plan;
}

}  // namespace stoker::efficiency
