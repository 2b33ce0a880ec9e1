#pragma once
// The batcher's Prometheus metrics, written with the tree's one text writer
// (core/prometheus_text.h). Not thread-safe: the batcher records under its lock.

#include <cstdint>
#include <string_view>
#include <vector>

#include "batch/queue.h"
#include "core/enum_table.h"
#include "core/prometheus_text.h"

namespace stoker::batch {

enum class Rejection { kQueueFull, kTimeout, kShutdown, kInvalid, kFailed, kCount };
// The `reason` label of the rejections counter.
inline constexpr EnumTable<Rejection, 5> kRejectionNames{"rejection",
                                                         {{{Rejection::kQueueFull, "queue_full"},
                                                           {Rejection::kTimeout, "timeout"},
                                                           {Rejection::kShutdown, "shutdown"},
                                                           {Rejection::kInvalid, "invalid"},
                                                           {Rejection::kFailed, "failed"}}}};
constexpr const auto& NamesOf(Rejection) { return kRejectionNames; }
static_assert(kRejectionNames.entries().size() == static_cast<size_t>(Rejection::kCount));
inline const char* RejectionName(Rejection r) { return kRejectionNames.CName(r); }

struct BatchMetrics {
  explicit BatchMetrics(const Options& o);

  void Batch(const Formed& f);
  void QueueDelay(Duration d) { queue_delay.Observe(ToSeconds(d)); }
  void Latency(Duration d) { latency.Observe(ToSeconds(d)); }
  void Reject(Rejection r, uint64_t n = 1) { rejections[static_cast<size_t>(r)] += n; }

  // Families named <prefix>_..., each sample with `labels`. Gauges passed in: queue depth per
  // level, the limits in force and the service model.
  void Write(prom::TextWriter& w, std::string_view prefix, const prom::Labels& labels,
             const BatchQueue& q, double model_a, double model_c) const;

  uint64_t accepted = 0;
  uint64_t answered = 0;
  uint64_t batches = 0;
  uint64_t items = 0;
  uint64_t padded = 0;
  uint64_t waste = 0;
  uint64_t rejections[static_cast<size_t>(Rejection::kCount)] = {};
  uint64_t why[5] = {};
  prom::Histogram batch_size;
  prom::Histogram queue_delay;
  prom::Histogram latency;
};

}  // namespace stoker::batch
