#include "core/clock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace stoker {
namespace {

using namespace std::chrono_literals;

TEST(ManualClockTest, SleepersWakeWhenTimeAdvancesPastDeadline) {
  ManualClock clock;
  const MonoTime deadline = clock.Now() + 5s;
  bool reached = false;
  std::thread sleeper([&] { reached = clock.SleepUntil(deadline); });
  clock.Advance(2s);
  clock.Advance(3s);
  sleeper.join();
  EXPECT_TRUE(reached);
  EXPECT_EQ(clock.Now(), deadline);
}

TEST(ManualClockTest, WakeInterruptsSleep) {
  ManualClock clock;
  std::atomic<bool> done{false};
  bool reached = true;
  std::thread sleeper([&] {
    reached = clock.SleepUntil(clock.Now() + 1h);
    done = true;
  });
  // A Wake() issued before the sleeper waits is not seen by it, so keep waking until it returns.
  while (!done) {
    clock.Wake();
    std::this_thread::yield();
  }
  sleeper.join();
  EXPECT_FALSE(reached);
}

TEST(ManualClockTest, WallTimeMovesWithMonotonicTime) {
  ManualClock clock;
  const WallTime w0 = clock.WallNow();
  clock.Advance(90s);
  EXPECT_EQ(clock.WallNow() - w0, Duration(90s));
}

}  // namespace
}  // namespace stoker
