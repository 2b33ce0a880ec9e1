#include "core/clock.h"

namespace stoker {

MonoTime SystemClock::Now() const {
  return std::chrono::time_point_cast<Duration>(std::chrono::steady_clock::now());
}

WallTime SystemClock::WallNow() const {
  return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
}

bool SystemClock::SleepUntil(MonoTime deadline) {
  std::unique_lock lock(mu_);
  const uint64_t gen = wake_generation_;
  cv_.wait_until(lock, deadline, [&] { return wake_generation_ != gen; });
  return Now() >= deadline;
}

void SystemClock::Wake() {
  {
    std::lock_guard lock(mu_);
    ++wake_generation_;
  }
  cv_.notify_all();
}

MonoTime ManualClock::Now() const {
  std::lock_guard lock(mu_);
  return now_;
}

WallTime ManualClock::WallNow() const {
  std::lock_guard lock(mu_);
  return WallTime(now_.time_since_epoch() + wall_offset_);
}

bool ManualClock::SleepUntil(MonoTime deadline) {
  std::unique_lock lock(mu_);
  const uint64_t gen = wake_generation_;
  cv_.wait(lock, [&] { return now_ >= deadline || wake_generation_ != gen; });
  return now_ >= deadline;
}

void ManualClock::Wake() {
  {
    std::lock_guard lock(mu_);
    ++wake_generation_;
  }
  cv_.notify_all();
}

void ManualClock::Advance(Duration d) {
  {
    std::lock_guard lock(mu_);
    now_ += d;
  }
  cv_.notify_all();
}

void ManualClock::Set(MonoTime t) {
  {
    std::lock_guard lock(mu_);
    now_ = t;
  }
  cv_.notify_all();
}

}  // namespace stoker
