#include "efficiency/idle_reclaim.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

namespace stoker::efficiency {

void IdleReclaimer::Observe(const std::string& job, const std::string& gpu, WallTime t,
                            int64_t activity_milli) {
  GpuIdle& g = state_[job].gpus[gpu];
  if (g.samples > 0 && t < g.last_sample) return;  // out of order: ignore
  const bool gap = g.samples > 0 && t - g.last_sample > policy_.max_sample_gap;
  if (activity_milli > policy_.idle_threshold) {
    g.idle = false;
    g.samples = 0;
    g.max_milli = 0;
    // An active sample ends the idle period: the job may be warned again later.
    JobState& js = state_[job];
    if (std::none_of(js.gpus.begin(), js.gpus.end(),
                     [](const auto& kv) { return kv.second.idle; })) {
      js.warned = false;
    }
  } else if (!g.idle || gap) {
    g.idle = true;
    g.idle_since = t;
    g.samples = 1;
    g.max_milli = activity_milli;
  } else {
    ++g.samples;
    g.max_milli = std::max(g.max_milli, activity_milli);
  }
  g.last_sample = t;
}

Duration IdleReclaimer::IdleFor(const JobInfo& job, WallTime now) const {
  auto it = state_.find(job.id);
  if (it == state_.end()) return Duration{0};
  const JobState& s = it->second;
  std::vector<std::string> gpus = job.gpus;
  if (gpus.empty()) {
    for (const auto& [k, v] : s.gpus) gpus.push_back(k);
  }
  if (gpus.empty()) return Duration{0};
  std::vector<Duration> idle;
  for (const auto& key : gpus) {
    auto g = s.gpus.find(key);
    if (g == s.gpus.end() || !g->second.idle ||
        now - g->second.last_sample > policy_.max_sample_gap) {
      idle.emplace_back(0);
    } else {
      idle.push_back(g->second.last_sample - g->second.idle_since);
    }
  }
  // The job is idle for as long as its k-th most idle GPU, k = ceil(fraction * gpus).
  const size_t k = static_cast<size_t>(
      std::ceil(policy_.min_idle_gpu_fraction * static_cast<double>(idle.size())));
  std::sort(idle.begin(), idle.end(), std::greater<>());
  return idle[std::clamp<size_t>(k, 1, idle.size()) - 1];
}

bool IdleReclaimer::Exempt(const JobInfo& j, std::string* why) const {
  if (policy_.exempt_interactive && j.interactive) {
    *why = "interactive job";
    return true;
  }
  if (std::find(policy_.exempt_users.begin(), policy_.exempt_users.end(), j.user) !=
      policy_.exempt_users.end()) {
    *why = "user " + j.user + " exempt";
    return true;
  }
  if (std::find(policy_.exempt_classes.begin(), policy_.exempt_classes.end(), j.job_class) !=
      policy_.exempt_classes.end()) {
    *why = "class " + j.job_class + " exempt";
    return true;
  }
  return false;
}

ReclaimEvidence IdleReclaimer::Evidence(const JobInfo& j, const JobState& s, WallTime now) const {
  ReclaimEvidence e;
  e.idle_threshold_milli = policy_.idle_threshold;
  e.warn_after = policy_.warn_after;
  e.act_after = policy_.act_after;
  e.window_end = now;
  e.window_start = now;
  e.gpus = static_cast<int>(j.gpus.empty() ? s.gpus.size() : j.gpus.size());
  for (const auto& [key, g] : s.gpus) {
    if (!j.gpus.empty() && std::find(j.gpus.begin(), j.gpus.end(), key) == j.gpus.end()) continue;
    if (!g.idle) continue;
    ++e.idle_gpus;
    e.samples += g.samples;
    e.max_activity_milli = std::max(e.max_activity_milli, g.max_milli);
    e.window_start = std::min(e.window_start, g.idle_since);
    e.window_end = g.last_sample;
  }
  return e;
}

std::vector<ReclaimRecord> IdleReclaimer::Evaluate(WallTime now) {
  std::vector<ReclaimRecord> made;
  if (!policy_.enabled) return made;
  for (const JobInfo& j : jobs_.Running()) {
    auto it = state_.find(j.id);
    if (it == state_.end()) continue;
    JobState& s = it->second;
    if (s.acted) continue;
    const Duration idle = IdleFor(j, now);
    if (idle < policy_.warn_after) continue;
    ReclaimRecord r;
    r.at = now;
    r.job = j.id;
    r.user = j.user;
    r.dry_run = policy_.dry_run;
    r.evidence = Evidence(j, s, now);
    std::string why;
    if (Exempt(j, &why)) {
      if (s.warned) continue;  // record the exemption once per idle period
      s.warned = true;
      r.action = ReclaimAction::kExempt;
      r.reason = why;
    } else if (!s.warned) {
      s.warned = true;
      r.action = ReclaimAction::kWarn;
      r.reason = "GPUs idle for " + FormatDuration(idle) + "; action after " +
                 FormatDuration(policy_.act_after);
      if (!policy_.dry_run) r.result = actions_.Warn(j, r.reason);
    } else if (idle >= policy_.act_after) {
      s.acted = !policy_.dry_run;
      r.action = policy_.action == IdleReclaimPolicy::Action::kCancel ? ReclaimAction::kCancel
                                                                      : ReclaimAction::kRequeue;
      r.reason = "GPUs idle for " + FormatDuration(idle) + " (act_after " +
                 FormatDuration(policy_.act_after) + ")";
      if (!policy_.dry_run) {
        r.result = r.action == ReclaimAction::kCancel ? actions_.Cancel(j, r.reason)
                                                      : actions_.Requeue(j, r.reason);
      } else {
        // Dry run reports once per idle period, then stays quiet.
        s.acted = true;
      }
    } else {
      continue;
    }
    if (!r.result.ok())
      spdlog::error("idle reclaim {} {}: {}", ReclaimActionName(r.action), j.id,
                    r.result.ToString());
    made.push_back(r);
    log_.push_back(r);
  }
  return made;
}

}  // namespace stoker::efficiency
