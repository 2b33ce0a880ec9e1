#include "core/key_owners.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(owners.by_key(), (std::map<Gpu, int>{{{"b", 0}, 8}}));
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
  EXPECT_TRUE(owners.by_key().empty());
}

}  // namespace
}  // namespace stoker
