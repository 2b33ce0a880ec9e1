#include "batch/simulate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <queue>
#include <random>

#include "batch/controller.h"
#include "batch/queue.h"
#include "batch/service_model.h"

namespace stoker::batch {

double Quantile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  rank = std::clamp<size_t>(rank, 1, v.size());
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(rank - 1), v.end());
  return v[rank - 1];
}

namespace {
Duration Secs(double s) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s));
}

// `service(items, rng)`: seconds of one batch; it may draw from the arrival stream's generator
// (the curve's jitter does, in the order the curve simulation always had).
template <typename Service>
SimResult Run(const Options& o, Service&& service, double rate, uint64_t requests, uint64_t seed) {
  SimResult r;
  BatchQueue q(o);
  ServiceModel model(o.model_a_seconds, o.model_c_seconds);
  q.SetPredictor(
      [](const void* m, size_t n) { return static_cast<const ServiceModel*>(m)->Predict(n); },
      &model);
  std::optional<AdaptiveController> ctl;
  if (o.adaptive.enabled) {
    ctl.emplace(o);
    ctl->Recompute(model);
    q.SetLimits(ctl->batch_limit(), ctl->delay());
  }
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);

  const MonoTime t0(std::chrono::seconds(1));
  MonoTime next_arrival = t0 + Secs(gap(rng));
  MonoTime first_arrival = next_arrival, last_done = t0;
  uint64_t arrived = 0;
  struct Running {
    MonoTime done;
    Formed batch;
    double seconds;
    bool operator>(const Running& x) const { return done > x.done; }
  };
  std::priority_queue<Running, std::vector<Running>, std::greater<>> running;
  int free_instances = o.instances;
  std::vector<MonoTime> arrival_of;  // by slot
  std::vector<double> latencies;
  latencies.reserve(requests);
  std::vector<Expired> expired;
  double busy = 0;
  uint64_t items = 0;
  MonoTime wake = MonoTime::max();
  MonoTime now = t0;
  while (arrived < requests || !running.empty() || q.queued() > 0) {
    const MonoTime a = arrived < requests ? next_arrival : MonoTime::max();
    const MonoTime d = running.empty() ? MonoTime::max() : running.top().done;
    const MonoTime w = free_instances > 0 ? wake : MonoTime::max();
    now = std::min({a, d, w});
    if (now == MonoTime::max()) break;  // cannot happen: something is always pending here
    if (d == now) {
      Running done = running.top();
      running.pop();
      ++free_instances;
      model.Observe(done.batch.items, done.seconds);
      for (uint32_t slot : done.batch.slots) {
        const Duration lat = now - arrival_of[slot];
        latencies.push_back(ToSeconds(lat));
        if (ctl) ctl->OnLatency(now, lat, model, q.queued());
        q.Release(slot);
      }
      if (ctl) q.SetLimits(ctl->batch_limit(), ctl->delay());
      r.completed += done.batch.slots.size();
      last_done = now;
    } else if (a == now) {
      ++arrived;
      ++r.offered;
      next_arrival = now + Secs(gap(rng));
      if (ctl) ctl->OnArrival();  // offered load, refused requests included
      Result<uint32_t> slot = q.Enqueue({}, now);
      if (!slot.ok()) {
        ++r.rejected;
      } else {
        if (arrival_of.size() <= *slot) arrival_of.resize(*slot + 1);
        arrival_of[*slot] = now;
      }
    }
    expired.clear();
    q.Expire(now, &expired);
    for (const Expired& e : expired) {
      ++r.rejected;
      q.Release(e.slot);
    }
    wake = MonoTime::max();
    while (free_instances > 0) {
      std::optional<Formed> f = q.Take(now, &wake);
      if (!f) break;
      const double secs = service(f->items, rng);
      busy += secs;
      items += f->items;
      ++r.batches;
      --free_instances;
      running.push({now + Secs(secs), std::move(*f), secs});
    }
  }
  r.span_seconds = ToSeconds(last_done - first_arrival);
  r.throughput = r.span_seconds > 0 ? static_cast<double>(r.completed) / r.span_seconds : 0;
  r.busy_fraction = r.span_seconds > 0 ? busy / (o.instances * r.span_seconds) : 0;
  r.mean_batch = r.batches ? static_cast<double>(items) / static_cast<double>(r.batches) : 0;
  r.max_latency = latencies.empty() ? 0 : *std::max_element(latencies.begin(), latencies.end());
  r.p50 = Quantile(latencies, 0.5);
  r.p99 = Quantile(latencies, 0.99);
  r.final_limit = q.batch_limit();
  r.final_delay = ToSeconds(q.delay());
  r.model_a = model.a();
  r.model_c = model.c();
  return r;
}

}  // namespace

SimResult Simulate(const Options& o, const ServiceCurve& curve, double rate, uint64_t requests,
                   uint64_t seed) {
  std::uniform_real_distribution<double> noise(-1.0, 1.0);
  return Run(
      o,
      [&](size_t items, std::mt19937_64& rng) {
        double secs = curve.a + curve.c * static_cast<double>(items);
        if (curve.jitter > 0) secs *= 1 + curve.jitter * noise(rng);
        return secs;
      },
      rate, requests, seed);
}

SimResult Simulate(const Options& o, const ServiceTime& service, double rate, uint64_t requests,
                   uint64_t seed) {
  return Run(
      o, [&](size_t items, std::mt19937_64&) { return service(items); }, rate, requests, seed);
}

}  // namespace stoker::batch
