#include "scheduler/queue/job_queue.h"

#include <algorithm>
#include <utility>

#include "core/huge_pages.h"

namespace stoker::queue {

bool JobQueue::Push(const JobView& job) {
  if (index_.count(job.id) != 0) return false;
  const QueueKey key = policy_->Key(job);
  entries_.insert(Entry{key, job.gpus});
  index_.emplace(job.id, key);
  return true;
}

std::vector<JobId> KeyOrder(const QueuePolicy& policy, const std::vector<JobView>& jobs) {
  // Listed in strictly ascending ids (the server's queue), no job can be listed twice.
  std::vector<bool> repeated(jobs.size(), false);
  const bool ascending =
      std::adjacent_find(jobs.begin(), jobs.end(), [](const JobView& a, const JobView& b) {
        return a.id >= b.id;
      }) == jobs.end();
  if (!ascending) {
    std::vector<std::pair<JobId, size_t>> ids;  // (id, position)
    ids.reserve(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) ids.emplace_back(jobs[i].id, i);
    std::sort(ids.begin(), ids.end());
    for (size_t i = 1; i < ids.size(); ++i) {
      if (ids[i].first == ids[i - 1].first) repeated[ids[i].second] = true;
    }
  }
  std::vector<QueueKey> keys;
  keys.reserve(jobs.size());
  AdviseHugePagesFor(keys);
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!repeated[i]) keys.push_back(policy.Key(jobs[i]));
  }
  std::sort(keys.begin(), keys.end());
  std::vector<JobId> order;
  order.reserve(keys.size());
  for (const QueueKey& k : keys) order.push_back(k.id);
  return order;
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
