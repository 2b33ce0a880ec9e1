#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "store/store.h"

namespace stoker::store {
namespace {

std::string TempDb(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("stoker_store_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return (dir / "stoker.db").string();
}

TEST(SqliteStore, RoundTripAndReopen) {
  const std::string path = TempDb("roundtrip");
  {
    auto store = OpenSqliteStore(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    WriteBatch b;
    b.PutJob({1, "alice", "queued", "", R"({"x":1})"});
    b.PutNode({"n1", "{}"});
    b.PutToken({"abc", "alice", "user", 5});
    b.AddEvent({1, 10, "submitted", "hi"});
    ASSERT_TRUE((*store)->Apply(b).ok());
    WriteBatch b2;
    b2.PutJob({1, "alice", "running", "n1", R"({"x":2})"});
    ASSERT_TRUE((*store)->Apply(b2).ok());
  }
  auto store = OpenSqliteStore(path);
  ASSERT_TRUE(store.ok());
  auto jobs = (*store)->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].state, "running");
  EXPECT_EQ((*jobs)[0].node, "n1");
  EXPECT_EQ((*jobs)[0].doc, R"({"x":2})");
  EXPECT_EQ((*store)->LoadNodes()->size(), 1u);
  EXPECT_EQ((*store)->LoadTokens()->at(0).role, "user");
  EXPECT_EQ((*store)->ListEvents(1)->at(0).kind, "submitted");
  EXPECT_EQ(*(*store)->MaxJobId(), 1);
}

TEST(SqliteStore, ConcurrentAppliesAreAllDurable) {
  const std::string path = TempDb("concurrent");
  auto store = OpenSqliteStore(path, SqliteOptions{.synchronous_full = false});
  ASSERT_TRUE(store.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        WriteBatch b;
        b.PutJob({t * 1000 + i + 1, "u", "queued", "", "{}"});
        ASSERT_TRUE((*store)->Apply(b).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ((*store)->LoadJobs()->size(), 400u);
}

TEST(SqliteStore, NewerSchemaIsRefused) {
  const std::string path = TempDb("newer");
  { ASSERT_TRUE(OpenSqliteStore(path).ok()); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto again = OpenSqliteStore(path);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace stoker::store
