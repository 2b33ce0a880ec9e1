#include "telemetry/sampler.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <sstream>

namespace stoker::telemetry {

using namespace std::chrono_literals;

Sampler::Sampler(GpuSource* source, Clock* clock, Attributor* attributor, SamplerOptions options)
    : source_(source), clock_(clock), attributor_(attributor), options_(options) {
  const uint32_t n = source_ != nullptr ? source_->DeviceCount() : 0;
  slots_.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->state.sample.id.index = i;
  }
}

Sampler::~Sampler() { Stop(); }

Status Sampler::Start() {
  if (options_.interval < kMinSampleInterval) {
    return InvalidArgument("sample interval " + std::to_string(ToSeconds(options_.interval)) +
                           "s is below the minimum of 0.1s");
  }
  if (!threads_.empty()) return FailedPrecondition("sampler already started");
  stop_ = false;
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    ++running_;
    threads_.emplace_back([this, i] { RunGpu(i); });
  }
  if (source_ != nullptr && options_.watch_events) {
    ++running_;
    threads_.emplace_back([this] { RunEvents(); });
  }
  return Status::Ok();
}

void Sampler::Stop() {
  if (threads_.empty()) return;
  stop_ = true;
  // A Wake() issued just before a thread starts sleeping is not seen by it, so keep waking
  // until every thread has left its loop.
  while (running_.load() > 0) {
    clock_->Wake();
    std::this_thread::sleep_for(1ms);
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void Sampler::SampleOnce(uint32_t index) {
  if (source_ == nullptr || index >= slots_.size()) return;
  Slot& slot = *slots_[index];
  const MonoTime t0 = clock_->Now();
  Status status = source_->Sample(index, &slot.scratch);
  const MonoTime t1 = clock_->Now();
  if (!status.ok()) {
    std::lock_guard lock(slot.mu);
    ++slot.state.sample_errors_total;
    slot.state.last_error = status.ToString();
    slot.state.last_source_duration = t1 - t0;
    return;
  }
  if (attributor_ != nullptr) attributor_->Attribute(&slot.scratch);
  const auto fields = protocol::GpuScalarFields();
  std::array<uint8_t, protocol::kMaxScalarFields> errored{};
  for (size_t f = 0; f < fields.size(); ++f) {
    errored[f] = fields[f].get(slot.scratch).state == FieldState::kError ? 1 : 0;
  }
  std::lock_guard lock(slot.mu);
  // A lost GPU cannot tell its identity; keep the last known one so its series (and the
  // stoker_gpu_health{state="lost"} alert) keep their uuid/model labels.
  if (slot.scratch.id.uuid.empty() && !slot.state.sample.id.uuid.empty()) {
    slot.scratch.id = slot.state.sample.id;
  }
  // Swap rather than copy: the old sample's vectors become the next read's scratch storage.
  std::swap(slot.state.sample, slot.scratch);
  slot.state.have_sample = true;
  slot.state.last_error.clear();
  ++slot.state.samples_total;
  for (size_t f = 0; f < fields.size(); ++f) slot.state.field_errors_total[f] += errored[f];
  slot.state.last_source_duration = t1 - t0;
  slot.state.last_agent_duration = clock_->Now() - t1;
}

void Sampler::RunGpu(uint32_t index) {
  const Duration interval = options_.interval;
  const MonoTime start = clock_->Now();
  uint64_t k = 0;
  while (!stop_) {
    const MonoTime deadline = start + interval * static_cast<int64_t>(k);
    if (clock_->Now() < deadline) {
      clock_->SleepUntil(deadline);
      if (stop_) break;
      if (clock_->Now() < deadline) continue;  // woken early
    }
    SampleOnce(index);
    // The next tick is the first one not already in the past; the ones in between were
    // missed because this read overran, and are counted rather than queued.
    const Duration elapsed = clock_->Now() - start;
    uint64_t next = static_cast<uint64_t>((elapsed + interval - Duration(1)) / interval);
    if (next <= k) next = k + 1;
    if (next > k + 1) {
      std::lock_guard lock(slots_[index]->mu);
      slots_[index]->state.skipped_ticks_total += next - k - 1;
    }
    k = next;
  }
  --running_;
}

void Sampler::RunEvents() {
  bool logged = false;
  while (!stop_) {
    Result<std::vector<GpuEvent>> events = source_->WaitEvents(options_.event_wait);
    if (!events.ok()) {
      ++event_errors_;
      if (!logged) {
        spdlog::warn(
            "GPU event watch failed ({}); XID counters will not update; retrying every "
            "30s",
            events.status().ToString());
        logged = true;
      }
      clock_->SleepUntil(clock_->Now() + 30s);
      continue;
    }
    for (const GpuEvent& e : *events) RecordEvent(e);
  }
  --running_;
}

void Sampler::RecordEvent(const GpuEvent& event) {
  if (event.type != GpuEvent::Type::kXid || event.gpu_index >= slots_.size()) return;
  Slot& slot = *slots_[event.gpu_index];
  std::lock_guard lock(slot.mu);
  ++slot.state.xid_counts[event.xid];
  slot.state.last_xid = event.xid;
  slot.state.last_xid_time = clock_->WallNow();
}

void Sampler::Snapshot(TelemetrySnapshot* out) const {
  const WallTime now = clock_->WallNow();
  out->taken_at = now;
  out->nvml_available = source_ != nullptr;
  out->simulated = source_ != nullptr && source_->simulated();
  out->source_description = source_ != nullptr ? source_->Describe() : unavailable_reason_;
  out->event_errors_total = event_errors_.load();
  out->gpus.resize(slots_.size());
  for (size_t i = 0; i < slots_.size(); ++i) {
    {
      std::lock_guard lock(slots_[i]->mu);
      out->gpus[i] = slots_[i]->state;
    }
    GpuState& g = out->gpus[i];
    if (g.last_xid != 0 && now - g.last_xid_time > options_.xid_hold) g.last_xid = 0;
  }
}

HostStats ReadHostStats(const std::string& proc_root) {
  HostStats h;
  {
    std::ifstream in(proc_root + "/loadavg");
    double l1 = 0, l5 = 0, l15 = 0;
    if (in >> l1 >> l5 >> l15) {
      h.load1 = Field<double>::Of(l1);
      h.load5 = Field<double>::Of(l5);
      h.load15 = Field<double>::Of(l15);
    }
  }
  std::ifstream in(proc_root + "/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemTotal:") h.memory_total_bytes = Field<uint64_t>::Of(kib * 1024);
    if (key == "MemAvailable:") h.memory_available_bytes = Field<uint64_t>::Of(kib * 1024);
  }
  return h;
}

}  // namespace stoker::telemetry
