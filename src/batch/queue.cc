#include "batch/queue.h"

#include <algorithm>
#include <string>

namespace stoker::batch {

namespace {
std::string Micros(Duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(d).count()) + " us";
}
}  // namespace

Status Validate(const Options& o) {
  if (o.max_batch_size < 1) return InvalidArgument("max_batch_size: must be at least 1");
  for (size_t p : o.preferred_batch_sizes) {
    if (p < 1 || p > o.max_batch_size) {
      return InvalidArgument("preferred_batch_sizes: " + std::to_string(p) +
                             " is outside [1, max_batch_size=" + std::to_string(o.max_batch_size) +
                             "]");
    }
  }
  if (o.max_queue_delay < Duration{0}) return InvalidArgument("max_queue_delay: negative");
  if (o.priority_levels < 1 || o.priority_levels > 64) {
    return InvalidArgument("priority_levels: must be in [1, 64]");
  }
  if (o.default_priority < 1 || o.default_priority > o.priority_levels) {
    return InvalidArgument("default_priority: must be in [1, priority_levels]");
  }
  bool any_delay = o.default_policy.timeout_action == TimeoutAction::kDelay &&
                   o.default_policy.timeout > Duration{0};
  for (const auto& [level, p] : o.priority_policies) {
    if (level < 1 || level > o.priority_levels) {
      return InvalidArgument("priority_policies: level " + std::to_string(level) +
                             " is outside [1, priority_levels]");
    }
    if (p.timeout < Duration{0}) return InvalidArgument("priority_policies: negative timeout");
    any_delay |= p.timeout_action == TimeoutAction::kDelay && p.timeout > Duration{0};
  }
  if (o.default_policy.timeout < Duration{0}) {
    return InvalidArgument("default_policy.timeout: negative");
  }
  if (o.preserve_ordering && o.priority_levels > 1) {
    return InvalidArgument("preserve_ordering: not with priority_levels > 1 (as in Triton)");
  }
  if (o.preserve_ordering && any_delay) {
    return InvalidArgument("preserve_ordering: not with a DELAY timeout policy (as in Triton)");
  }
  if (o.max_pending < 1) return InvalidArgument("max_pending: must be at least 1");
  if (o.max_length < 1) return InvalidArgument("max_length: must be at least 1");
  if (o.instances < 1 || o.instances > 1024) {
    return InvalidArgument("instances: must be in [1, 1024]");
  }
  if (o.adaptive.enabled) {
    if (o.adaptive.p99_objective <= Duration{0}) {
      return InvalidArgument("adaptive.p99_objective: must be positive");
    }
    if (!(o.adaptive.decrease > 0 && o.adaptive.decrease < 1)) {
      return InvalidArgument("adaptive.decrease: must be in (0, 1)");
    }
    if (!(o.adaptive.increase > 0 && o.adaptive.increase <= 1)) {
      return InvalidArgument("adaptive.increase: must be in (0, 1]");
    }
  }
  if (o.model_a_seconds < 0 || o.model_c_seconds < 0) {
    return InvalidArgument("model_a_seconds, model_c_seconds: must not be negative");
  }
  return Status::Ok();
}

BatchQueue::BatchQueue(const Options& o)
    : opt_(o),
      sources_(2 * static_cast<size_t>(o.priority_levels)),
      queued_level_(static_cast<size_t>(o.priority_levels) + 1, 0),
      limit_(o.max_batch_size),
      delay_(o.max_queue_delay) {
  std::sort(opt_.preferred_batch_sizes.begin(), opt_.preferred_batch_sizes.end());
}

const ModelQueuePolicy& BatchQueue::Policy(int level) const {
  auto it = opt_.priority_policies.find(level);
  return it == opt_.priority_policies.end() ? opt_.default_policy : it->second;
}

void BatchQueue::SetLimits(size_t batch_limit, Duration delay) {
  limit_ = std::clamp<size_t>(batch_limit, 1, opt_.max_batch_size);
  delay_ = std::max(Duration{0}, delay);
}

void BatchQueue::SetPredictor(double (*predict)(const void*, size_t), const void* ctx) {
  predict_ = predict;
  predict_ctx_ = ctx;
}

Result<uint32_t> BatchQueue::Enqueue(const SubmitOptions& s, MonoTime now) {
  if (s.count < 1 || s.count > opt_.max_batch_size) {
    return InvalidArgument("count: " + std::to_string(s.count) + " is outside [1, max_batch_size=" +
                           std::to_string(opt_.max_batch_size) + "]");
  }
  if (s.length > opt_.max_length) {
    return InvalidArgument("length: " + std::to_string(s.length) + " exceeds max_length " +
                           std::to_string(opt_.max_length));
  }
  if (s.timeout < Duration{0} || s.budget < Duration{0}) {
    return InvalidArgument("timeout, budget: must not be negative");
  }
  const int level =
      (s.priority < 1 || s.priority > opt_.priority_levels) ? opt_.default_priority : s.priority;
  const ModelQueuePolicy& p = Policy(level);
  if (p.max_queue_size > 0 && queued_level_[static_cast<size_t>(level)] >= p.max_queue_size) {
    return ResourceExhausted("exceeds the maximum queue size " + std::to_string(p.max_queue_size) +
                             " of priority level " + std::to_string(level));
  }
  if (queued_total_ >= opt_.max_pending) {
    return ResourceExhausted("exceeds the batcher's maximum of " +
                             std::to_string(opt_.max_pending) + " pending requests");
  }
  Duration timeout = p.timeout;
  if (p.allow_timeout_override && s.timeout > Duration{0} &&
      (timeout == Duration{0} || s.timeout < timeout)) {
    timeout = s.timeout;
  }
  uint32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = static_cast<uint32_t>(meta_.size());
    meta_.emplace_back();
  }
  Meta& m = meta_[slot];
  m.seq = next_seq_++;
  m.arrival = now;
  m.timeout = timeout;
  m.timeout_at = timeout > Duration{0} ? now + timeout : MonoTime::max();
  const Duration budget = s.budget > Duration{0}              ? s.budget
                          : opt_.latency_budget > Duration{0} ? opt_.latency_budget
                                                              : timeout;
  m.budget_at = budget > Duration{0} ? now + budget : MonoTime::max();
  m.count = s.count;
  m.length = s.length;
  m.bucket = s.length == 0 || opt_.pad_multiple == 0
                 ? s.length
                 : (s.length + opt_.pad_multiple - 1) / opt_.pad_multiple * opt_.pad_multiple;
  m.level = level;
  m.delayed = false;
  m.state = Meta::State::kQueued;
  Push(slot);
  if (m.timeout_at != MonoTime::max()) timeouts_.push({m.timeout_at, slot, m.seq});
  return slot;
}

void BatchQueue::Push(uint32_t slot) {
  Meta& m = meta_[slot];
  Lane& lane = sources_[SourceOf(m)][m.bucket];
  lane.q.push_back({slot, m.seq});
  ++lane.live;
  ++queued_total_;
  ++queued_level_[static_cast<size_t>(m.level)];
}

bool BatchQueue::Live(const Ref& r, size_t source) const {
  const Meta& m = meta_[r.slot];
  return m.seq == r.seq && m.state == Meta::State::kQueued && SourceOf(m) == source;
}

void BatchQueue::Unlink(uint32_t slot) {
  Meta& m = meta_[slot];
  const size_t src = SourceOf(m);
  auto it = sources_[src].find(m.bucket);
  --it->second.live;
  --queued_total_;
  --queued_level_[static_cast<size_t>(m.level)];
  Lane& lane = it->second;
  m.state = Meta::State::kTaken;  // the Ref in the lane is now stale
  if (lane.live == 0) {
    sources_[src].erase(it);
  } else if (lane.q.size() > 2 * lane.live + 32) {
    std::erase_if(lane.q, [&](const Ref& r) { return !Live(r, src); });
  }
}

void BatchQueue::Expire(MonoTime now, std::vector<Expired>* out) {
  if (timeouts_.size() > 4 * queued_total_ + 64) {  // drop entries of requests no longer queued
    std::vector<Timeout> keep;
    while (!timeouts_.empty()) {
      const Timeout& t = timeouts_.top();
      const Meta& m = meta_[t.slot];
      if (m.seq == t.seq && m.state == Meta::State::kQueued && !m.delayed) keep.push_back(t);
      timeouts_.pop();
    }
    timeouts_ = decltype(timeouts_)(std::greater<>(), std::move(keep));
  }
  while (!timeouts_.empty() && timeouts_.top().at <= now) {
    const Timeout t = timeouts_.top();
    timeouts_.pop();
    Meta& m = meta_[t.slot];
    if (m.seq != t.seq || m.state != Meta::State::kQueued || m.delayed) continue;
    const ModelQueuePolicy& p = Policy(m.level);
    Unlink(t.slot);
    if (p.timeout_action == TimeoutAction::kDelay) {
      m.state = Meta::State::kQueued;
      m.delayed = true;
      Push(t.slot);
    } else {
      out->push_back(
          {t.slot, DeadlineExceeded("request timed out after " + Micros(m.timeout) +
                                    " in the queue of priority level " + std::to_string(m.level))});
    }
  }
}

bool BatchQueue::Collect(size_t limit, Formed* f) {
  // The first request: the oldest of the highest non-empty source; its bucket is the batch's.
  size_t first_src = sources_.size();
  size_t bucket = 0;
  uint64_t best_seq = UINT64_MAX;
  for (size_t s = 0; s < sources_.size() && first_src == sources_.size(); ++s) {
    for (auto it = sources_[s].begin(); it != sources_[s].end();) {
      Lane& lane = it->second;
      while (!lane.q.empty() && !Live(lane.q.front(), s)) lane.q.pop_front();
      if (lane.q.empty()) {
        it = sources_[s].erase(it);
        continue;
      }
      if (lane.q.front().seq < best_seq) {
        best_seq = lane.q.front().seq;
        bucket = it->first;
        first_src = s;
      }
      ++it;
    }
  }
  if (first_src == sources_.size()) return false;
  f->slots.clear();
  f->items = 0;
  f->bucket = bucket;
  f->oldest_arrival = MonoTime::max();
  for (size_t s = first_src; s < sources_.size(); ++s) {
    auto it = sources_[s].find(bucket);
    if (it == sources_[s].end()) continue;
    for (const Ref& r : it->second.q) {
      if (!Live(r, s)) continue;
      const Meta& m = meta_[r.slot];
      if (f->items + m.count > limit) return true;  // FIFO: nothing jumps a request that waits
      f->slots.push_back(r.slot);
      f->items += m.count;
      f->oldest_arrival = std::min(f->oldest_arrival, m.arrival);
    }
  }
  return true;
}

void BatchQueue::Finish(Formed* f) {
  f->padded = 0;
  f->waste = 0;
  for (uint32_t slot : f->slots) {
    const Meta& m = meta_[slot];
    f->padded += static_cast<uint64_t>(m.count) * f->bucket;
    f->waste += static_cast<uint64_t>(m.count) * (f->bucket - m.length);
    Unlink(slot);
  }
}

std::optional<Formed> BatchQueue::Take(MonoTime now, MonoTime* wake) {
  *wake = MonoTime::max();
  if (!timeouts_.empty()) *wake = timeouts_.top().at;
  Formed f;
  if (!Collect(limit_, &f)) return std::nullopt;
  if (f.items >= limit_) {
    f.why = Formed::Why::kFull;
    Finish(&f);
    return f;
  }
  // The largest preferred size that a prefix of the candidates fills exactly.
  for (auto p = opt_.preferred_batch_sizes.rbegin(); p != opt_.preferred_batch_sizes.rend(); ++p) {
    if (*p > f.items || *p > limit_) continue;
    size_t items = 0, n = 0;
    while (n < f.slots.size() && items + meta_[f.slots[n]].count <= *p) {
      items += meta_[f.slots[n]].count;
      ++n;
    }
    if (items == *p) {
      f.slots.resize(n);
      f.items = items;
      f.oldest_arrival = MonoTime::max();
      for (uint32_t s : f.slots) f.oldest_arrival = std::min(f.oldest_arrival, meta_[s].arrival);
      f.why = Formed::Why::kPreferred;
      Finish(&f);
      return f;
    }
  }
  const MonoTime delay_at = f.oldest_arrival + delay_;
  if (now >= delay_at) {
    f.why = Formed::Why::kDelay;
    Finish(&f);
    return f;
  }
  MonoTime next = delay_at;
  if (opt_.release_on_slack) {
    MonoTime budget_at = MonoTime::max();
    for (uint32_t s : f.slots) budget_at = std::min(budget_at, meta_[s].budget_at);
    if (budget_at != MonoTime::max()) {
      const double t = predict_ != nullptr ? predict_(predict_ctx_, f.items) : 0.0;
      const MonoTime slack_at =
          budget_at - std::chrono::duration_cast<Duration>(std::chrono::duration<double>(t));
      if (now >= slack_at) {
        f.why = Formed::Why::kSlack;
        Finish(&f);
        return f;
      }
      next = std::min(next, slack_at);
    }
  }
  *wake = std::min(*wake, next);
  return std::nullopt;
}

std::optional<Formed> BatchQueue::TakeNow() {
  Formed f;
  if (!Collect(limit_, &f)) return std::nullopt;
  f.why = Formed::Why::kDrain;
  Finish(&f);
  return f;
}

void BatchQueue::Release(uint32_t slot) {
  Meta& m = meta_[slot];
  if (m.state == Meta::State::kQueued) Unlink(slot);
  m.state = Meta::State::kFree;  // stale references never match: a reused slot gets a new seq
  free_.push_back(slot);
}

}  // namespace stoker::batch
