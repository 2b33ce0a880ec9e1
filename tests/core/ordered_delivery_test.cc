#include "core/ordered_delivery.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

namespace stoker {
namespace {

TEST(OrderedDelivery, WorkInItsTurnRunsAtOnceOnTheCallersThread) {
  OrderedDelivery order;
  std::vector<int> ran;
  auto t = order.Take();
  const auto caller = std::this_thread::get_id();
  std::thread::id ran_on;
  t.Deliver([&] {
    ran.push_back(0);
    ran_on = std::this_thread::get_id();
  });
  EXPECT_EQ(ran, std::vector<int>{0});
  EXPECT_EQ(ran_on, caller);
  // Delivered once: a second call does nothing.
  t.Deliver([&] { ran.push_back(99); });
  EXPECT_EQ(ran, std::vector<int>{0});
}

TEST(OrderedDelivery, LaterWorkWaitsForTheEarlierTicketAndRunsRightAfterIt) {
  OrderedDelivery order;
  std::vector<int> ran;
  auto first = order.Take();
  auto second = order.Take();
  auto third = order.Take();
  third.Deliver([&] { ran.push_back(3); });
  second.Deliver([&] { ran.push_back(2); });
  EXPECT_TRUE(ran.empty());  // both returned at once, their work left for the first's turn
  first.Deliver([&] { ran.push_back(1); });
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3}));
}

TEST(OrderedDelivery, ATicketDroppedUndeliveredPassesTheTurnOn) {
  OrderedDelivery order;
  std::vector<int> ran;
  std::optional<OrderedDelivery::Ticket> dropped = order.Take();
  auto next = order.Take();
  next.Deliver([&] { ran.push_back(2); });
  EXPECT_TRUE(ran.empty());
  dropped.reset();  // an error path returned early
  EXPECT_EQ(ran, std::vector<int>{2});
  // Moved from, a ticket delivers nothing twice: the turn after `moved` is not skipped.
  auto a = order.Take();
  OrderedDelivery::Ticket moved = std::move(a);
  auto b = order.Take();
  b.Deliver([&] { ran.push_back(4); });
  EXPECT_EQ(ran, std::vector<int>{2});
  moved.Deliver([&] { ran.push_back(3); });
  EXPECT_EQ(ran, (std::vector<int>{2, 3, 4}));
}

TEST(OrderedDelivery, WaitTurnReturnsOnceEveryEarlierTicketIsDelivered) {
  OrderedDelivery order;
  auto first = order.Take();
  auto second = order.Take();
  std::atomic<bool> turned{false};
  std::thread waiter([&] {
    second.WaitTurn();
    turned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(turned.load());
  first.Deliver({});
  waiter.join();
  EXPECT_TRUE(turned.load());
  // Work delivered by a third ticket meanwhile waits for `second`, however long it takes.
  std::vector<int> ran;
  auto third = order.Take();
  third.Deliver([&] { ran.push_back(3); });
  EXPECT_TRUE(ran.empty());
  second.Deliver([&] { ran.push_back(2); });
  EXPECT_EQ(ran, (std::vector<int>{2, 3}));
}

TEST(OrderedDelivery, ManyThreadsDeliverInTicketOrder) {
  OrderedDelivery order;
  constexpr int kTickets = 2000;
  std::vector<OrderedDelivery::Ticket> tickets;
  for (int i = 0; i < kTickets; ++i) tickets.push_back(order.Take());
  std::vector<int> ran;  // only ever appended to by the thread running works in turn
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      // Each thread delivers every fourth ticket, from the last down: most arrive early.
      for (int i = kTickets - 1 - t; i >= 0; i -= 4) {
        tickets[static_cast<size_t>(i)].Deliver([&ran, i] { ran.push_back(i); });
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(ran.size(), static_cast<size_t>(kTickets));
  for (int i = 0; i < kTickets; ++i) EXPECT_EQ(ran[static_cast<size_t>(i)], i);
}

}  // namespace
}  // namespace stoker
