#include "scheduler/queue/job_queue.h"

#include <algorithm>

namespace stoker::queue {

bool JobQueue::Push(const JobView& job) {
  if (index_.count(job.id) != 0) return false;
  const QueueKey key = policy_->Key(job);
  entries_.insert(Entry{key, job.gpus});
  index_.emplace(job.id, key);
  return true;
}

bool JobQueue::Remove(JobId id) {
  const auto it = index_.find(id);
  if (it == index_.end()) return false;
  entries_.erase(Entry{it->second, 0});
  index_.erase(it);
  return true;
}

PreemptionPlan PlanPreemption(std::vector<RunningEntry> running, const JobQueue& waiting,
                              int64_t capacity_gpus) {
  PreemptionPlan plan;
  std::sort(running.begin(), running.end(),
            [](const RunningEntry& a, const RunningEntry& b) { return a.key < b.key; });
  int64_t quota = capacity_gpus;
  auto r = running.begin();
  auto w = waiting.begin();
  // Merge the two key-ordered sequences up to the last running job: waiting jobs behind every
  // running one cannot displace anything, and starting them is the ordinary fill's business.
  // (Stopping here keeps a round O(running + waiting jobs that outrank one), not O(queue).)
  while (r != running.end()) {
    const bool take_running = w == waiting.end() || (r != running.end() && r->key < w->key);
    if (take_running) {
      if (r->gpus <= quota) {
        quota -= r->gpus;
      } else {
        plan.preempt.push_back(r->id);
      }
      ++r;
    } else {
      if (w->gpus <= quota) {
        quota -= w->gpus;
        plan.start.push_back(w->key.id);
      }
      ++w;
    }
  }
  // A running job is only preempted if some waiting job was granted capacity ahead of it;
  // otherwise (e.g. a running job that no longer fits only because of rounding) keep it.
  if (plan.start.empty()) plan.preempt.clear();
  return plan;
}

}  // namespace stoker::queue
