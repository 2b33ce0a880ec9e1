#include "server/activity.h"

#include <algorithm>

#include "protocol/limits.h"

namespace stoker::server {
namespace {

int64_t MsOf(WallTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

}  // namespace

ActivityTracker::ActivityTracker(Duration window)
    : window_(window),
      bucket_ms_(std::max<int64_t>(
          1, std::chrono::duration_cast<std::chrono::milliseconds>(window).count() / kBuckets)) {}

void ActivityTracker::Record(const std::string& node, const std::vector<GpuSample>& gpus,
                             WallTime now) {
  std::lock_guard lock(mu_);
  Node* windows = nullptr;
  for (const GpuSample& s : gpus) {
    const std::optional<int64_t> milli_pct = ActivityMilli(s, ActivityMetric::kAuto);
    if (!milli_pct || s.id.index > protocol::limits::kGpuIndexMax) continue;
    if (windows == nullptr) windows = &nodes_[node];
    if (windows->buckets.size() <= s.id.index) {
      windows->buckets.resize(s.id.index + 1);
      windows->means.resize(s.id.index + 1);
    }
    const int64_t index = MsOf(now) / bucket_ms_;
    windows->means[s.id.index].at = -1;
    Bucket& b = windows->buckets[s.id.index][static_cast<size_t>(index % (kBuckets + 1))];
    if (b.index != index) {
      if (b.index > index) continue;  // older than what the slot holds: outside the window
      b = Bucket{index, 0, 0};
    }
    b.sum += static_cast<int32_t>(*milli_pct / 100);  // milli-percent -> milli of the GPU
    ++b.count;
  }
}

void ActivityTracker::Fill(std::vector<pass::NodeView>* nodes, WallTime now) const {
  const int64_t now_index = MsOf(now) / bucket_ms_;
  const int64_t window_ms = std::chrono::duration_cast<std::chrono::milliseconds>(window_).count();
  // The lock is taken for a chunk of nodes at a time, so a heartbeat recording its samples waits
  // for one chunk, not for every GPU of the cluster (80,000 at 10,000 nodes: 10-40 ms under load).
  // Each node's means still come from one state of its buckets.
  constexpr size_t kChunk = 256;
  for (size_t from = 0; from < nodes->size(); from += kChunk) {
    std::lock_guard lock(mu_);
    const size_t to = std::min(nodes->size(), from + kChunk);
    for (size_t i = from; i < to; ++i) FillNodeLocked(&(*nodes)[i], now_index, now, window_ms);
  }
}

void ActivityTracker::FillNodeLocked(pass::NodeView* view, int64_t now_index, WallTime now,
                                     int64_t window_ms) const {
  auto it = nodes_.find(view->name);
  if (it == nodes_.end()) return;
  const Node& node = it->second;
  for (pass::GpuView& g : view->gpus) {
    if (g.index >= node.means.size()) continue;
    Mean& mean = node.means[g.index];
    if (mean.at != now_index) {
      int64_t sum = 0, count = 0, oldest = now_index + 1;
      for (const Bucket& b : node.buckets[g.index]) {
        // The buckets of (now - window, now]: kBuckets + 1 of them, the oldest partly outside.
        if (b.index < 0 || b.index > now_index || b.index < now_index - kBuckets) continue;
        sum += b.sum;
        count += b.count;
        oldest = std::min(oldest, b.index);
      }
      mean = Mean{now_index, sum, count, oldest};
    }
    if (mean.count == 0) continue;
    pass::GpuActivity a;
    a.busy_milli = static_cast<int32_t>(mean.sum / mean.count);
    a.covered_ms = std::min(window_ms, MsOf(now) - mean.oldest * bucket_ms_);
    g.activity = a;
  }
}

void ActivityTracker::ForgetNode(const std::string& node) {
  std::lock_guard lock(mu_);
  nodes_.erase(node);
}

}  // namespace stoker::server
