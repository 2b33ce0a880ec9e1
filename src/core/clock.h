#pragma once
// Time is injected: production uses SystemClock, tests and the simulator use ManualClock, so the
// same code runs in all three without sleeping or reading the wall clock directly.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace stoker {

using Duration = std::chrono::nanoseconds;
// Monotonic time since an arbitrary epoch (for intervals, deadlines, sampling ticks).
using MonoTime = std::chrono::time_point<std::chrono::steady_clock, Duration>;
// Wall-clock time since the Unix epoch (for timestamps shown to people and stored).
using WallTime = std::chrono::time_point<std::chrono::system_clock, Duration>;

// Thread-safe. Implementations must be safe to call from any thread.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual MonoTime Now() const = 0;
  virtual WallTime WallNow() const = 0;
  // Blocks until Now() >= deadline or until Wake() is called; returns true when the deadline
  // passed. Sleeping through the clock lets ManualClock drive loops without real waiting.
  virtual bool SleepUntil(MonoTime deadline) = 0;
  // Interrupts SleepUntil callers (used for shutdown).
  virtual void Wake() = 0;
};

class SystemClock final : public Clock {
 public:
  MonoTime Now() const override;
  WallTime WallNow() const override;
  bool SleepUntil(MonoTime deadline) override;
  void Wake() override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t wake_generation_ = 0;
};

// A clock that moves only when told. Sleepers wake when Advance() moves past their deadline.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(MonoTime start = MonoTime(std::chrono::seconds(1)),
                       WallTime wall_start = WallTime(std::chrono::seconds(1767225600)))
      : now_(start), wall_offset_(wall_start.time_since_epoch() - start.time_since_epoch()) {}

  MonoTime Now() const override;
  WallTime WallNow() const override;
  bool SleepUntil(MonoTime deadline) override;
  void Wake() override;

  void Advance(Duration d);
  void Set(MonoTime t);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  MonoTime now_;
  Duration wall_offset_;
  uint64_t wake_generation_ = 0;
};

inline double ToSeconds(Duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace stoker
