#include "batch/metrics.h"

#include <string>

namespace stoker::batch {

namespace {
std::vector<double> SizeBounds(size_t max) {
  std::vector<double> b;
  for (size_t x = 1; x < max; x *= 2) b.push_back(static_cast<double>(x));
  b.push_back(static_cast<double>(max));
  return b;
}
}  // namespace

BatchMetrics::BatchMetrics(const Options& o)
    : batch_size(SizeBounds(o.max_batch_size)),
      queue_delay(prom::Histogram::ExponentialBounds(25e-6, 2, 16)),
      latency(prom::Histogram::ExponentialBounds(25e-6, 2, 16)) {}

void BatchMetrics::Batch(const Formed& f) {
  ++batches;
  items += f.items;
  padded += f.padded;
  waste += f.waste;
  ++why[static_cast<size_t>(f.why)];
  batch_size.Observe(static_cast<double>(f.items));
}

void BatchMetrics::Write(prom::TextWriter& w, std::string_view prefix, const prom::Labels& labels,
                         const BatchQueue& q, double model_a, double model_c) const {
  const std::string p(prefix);
  auto with = [&](const char* k, std::string v) {
    prom::Labels l = labels;
    l.emplace_back(k, std::move(v));
    return l;
  };
  w.Family(p + "_queue_depth", "Requests waiting in the batcher's queue, by priority level",
           prom::Type::kGauge);
  for (int level = 1; level <= q.options().priority_levels; ++level) {
    w.Sample(p + "_queue_depth", with("priority", std::to_string(level)),
             static_cast<double>(q.queued(level)));
  }
  w.Counter(p + "_requests_total", "Requests accepted into the queue",
            static_cast<double>(accepted), labels);
  w.Family(p + "_rejections_total", "Requests answered with an error, by reason",
           prom::Type::kCounter);
  for (size_t r = 0; r < static_cast<size_t>(Rejection::kCount); ++r) {
    w.Sample(p + "_rejections_total", with("reason", RejectionName(static_cast<Rejection>(r))),
             static_cast<double>(rejections[r]));
  }
  w.Family(p + "_batches_total", "Batches run, by what released them", prom::Type::kCounter);
  for (size_t i = 0; i < 5; ++i) {
    w.Sample(p + "_batches_total", with("trigger", WhyName(static_cast<Formed::Why>(i))),
             static_cast<double>(why[i]));
  }
  w.HistogramFamily(p + "_batch_size", "Items per batch", batch_size, labels);
  w.HistogramFamily(p + "_queue_delay_seconds", "Time from arrival to the batch's dispatch",
                    queue_delay, labels);
  w.HistogramFamily(p + "_request_latency_seconds", "Time from arrival to the answer", latency,
                    labels);
  w.Counter(p + "_padded_elements_total", "Input elements after padding to the bucket length",
            static_cast<double>(padded), labels);
  w.Counter(p + "_padding_waste_elements_total", "Padding elements added to fill buckets",
            static_cast<double>(waste), labels);
  w.Gauge(p + "_batch_limit", "Batch size limit in force (the adaptive controller moves it)",
          static_cast<double>(q.batch_limit()), labels);
  w.Gauge(p + "_queue_delay_limit_seconds", "Queue delay in force", ToSeconds(q.delay()), labels);
  w.Family(p + "_service_model_seconds",
           "Learned service time t(b) = a + c*b: term a (per batch) and c (per item)",
           prom::Type::kGauge);
  w.Sample(p + "_service_model_seconds", with("term", "a"), model_a);
  w.Sample(p + "_service_model_seconds", with("term", "c"), model_c);
}

}  // namespace stoker::batch
