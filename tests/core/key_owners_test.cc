#include "core/key_owners.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace stoker {
namespace {

using Gpu = std::pair<std::string, int>;

TEST(KeyOwners, ForgettingAnOwnerDropsOnlyTheKeysItStillHolds) {
  KeyOwners<Gpu, int> owners;
  owners.Set({"a", 0}, 7);
  owners.Set({"a", 1}, 7);
  owners.Set({"b", 0}, 8);
  owners.Set({"a", 1}, 9);  // taken by job 9 since
  ASSERT_NE(owners.Find({"a", 1}), nullptr);
  EXPECT_EQ(*owners.Find({"a", 1}), 9);

  std::vector<Gpu> dropped;
  owners.Forget(7, [&](const Gpu& g) { dropped.push_back(g); });
  EXPECT_EQ(dropped, (std::vector<Gpu>{{"a", 0}}));
  EXPECT_EQ(owners.Find({"a", 0}), nullptr);
  EXPECT_EQ(*owners.Find({"a", 1}), 9);
  EXPECT_EQ(*owners.Find({"b", 0}), 8);

  // Forgotten once, an owner has nothing left to drop; an unknown owner neither.
  dropped.clear();
  owners.Forget(7, [&](const Gpu& g) { dropped.push_back(g); });
  owners.Forget(42, [&](const Gpu& g) { dropped.push_back(g); });
  EXPECT_TRUE(dropped.empty());

  owners.Forget(9);
  EXPECT_EQ(owners.Find({"a", 1}), nullptr);
  EXPECT_EQ(owners.size(), 1u);
  std::vector<Gpu> held;
  owners.Forget(9, [&](const Gpu& g) { held.push_back(g); });  // forgotten: nothing
  EXPECT_TRUE(held.empty());
  owners.Forget(8, [&](const Gpu& g) { held.push_back(g); });
  EXPECT_EQ(held, (std::vector<Gpu>{{"b", 0}}));
}

TEST(KeyOwners, AnOwnerSetAgainAfterForgettingHoldsItsNewKeys) {
  KeyOwners<Gpu, std::string> owners;
  owners.Set({"a", 0}, "job-1");
  owners.Forget("job-1");
  owners.Set({"b", 3}, "job-1");  // requeued and placed elsewhere
  owners.Set({"b", 3}, "job-1");  // told twice
  EXPECT_EQ(owners.Find({"a", 0}), nullptr);
  ASSERT_NE(owners.Find({"b", 3}), nullptr);
  EXPECT_EQ(*owners.Find({"b", 3}), "job-1");
  int dropped = 0;
  owners.Forget("job-1", [&](const Gpu&) { ++dropped; });
  EXPECT_EQ(dropped, 1);
  EXPECT_EQ(owners.size(), 0u);
}

TEST(KeyOwners, AnOwnersKeysAreDroppedInTheOrderSetWithoutThoseTakenSince) {
  KeyOwners<Gpu, std::string> owners;
  owners.Set({"b", 1}, "job-1");
  owners.Set({"a", 0}, "job-1");
  owners.Set({"c", 2}, "job-1");
  owners.Set({"a", 0}, "job-2");  // taken since
  std::vector<Gpu> held;
  owners.Forget("job-1", [&](const Gpu& g) { held.push_back(g); });
  EXPECT_EQ(held, (std::vector<Gpu>{{"b", 1}, {"c", 2}}));
  EXPECT_EQ(*owners.Find({"a", 0}), "job-2");
  held.clear();
  owners.Forget("job-3", [&](const Gpu& g) { held.push_back(g); });
  EXPECT_TRUE(held.empty());
}

// The owner kept in each key's own slot (a GPU's state): a job forgets only the slots that still
// name it, in the order it was set on them, and its list is emptied.
TEST(KeyOwners, ForgetHeldClearsOnlyTheSlotsThatStillNameTheOwner) {
  std::map<Gpu, int> slot_of = {{{"a", 0}, 0}, {{"a", 1}, 0}, {{"b", 0}, 0}};
  auto slot = [&](const Gpu& g) -> int* {
    auto it = slot_of.find(g);
    return it == slot_of.end() ? nullptr : &it->second;
  };
  std::vector<Gpu> held7 = {{"a", 0}, {"a", 1}, {"c", 9}};  // c/9: no slot (a GPU never seen)
  for (const Gpu& g : held7) {
    if (int* s = slot(g)) *s = 7;
  }
  std::vector<Gpu> held8 = {{"b", 0}};
  *slot({"b", 0}) = 8;
  *slot({"a", 1}) = 9;  // taken by job 9 since

  std::vector<Gpu> still;
  ForEachStillHeld(held7, 7, slot, [&](const Gpu& g) { still.push_back(g); });
  EXPECT_EQ(still, (std::vector<Gpu>{{"a", 0}}));

  ForgetHeld(held7, 7, slot);
  EXPECT_TRUE(held7.empty());
  EXPECT_EQ(slot_of.at({"a", 0}), 0);
  EXPECT_EQ(slot_of.at({"a", 1}), 9);
  EXPECT_EQ(slot_of.at({"b", 0}), 8);
  ForgetHeld(held7, 7, slot);  // nothing left to forget
  EXPECT_EQ(slot_of.at({"a", 1}), 9);

  still.clear();
  ForEachStillHeld(held8, 8, slot, [&](const Gpu& g) { still.push_back(g); });
  EXPECT_EQ(still, held8);
  ForgetHeld(held8, 8, slot);
  EXPECT_EQ(slot_of.at({"b", 0}), 0);
}

}  // namespace
}  // namespace stoker
