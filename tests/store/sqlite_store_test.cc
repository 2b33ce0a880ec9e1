#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <stdexcept>
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

// What a crash leaves on disk while the store is open: the database and its write-ahead log.
void CopyAsACrashWouldLeaveIt(const std::string& from, const std::string& to) {
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(from + "-wal", to + "-wal",
                             std::filesystem::copy_options::overwrite_existing);
}

TEST(SqliteStore, ALogCutInsideItsLastFrameIsSaidAtOpenAndTheRestIsKept) {
  const std::string path = TempDb("torn");
  const std::string copy = path + ".crash";
  auto store = OpenSqliteStore(path);
  ASSERT_TRUE(store.ok());
  for (int i = 1; i <= 3; ++i) {
    WriteBatch b;
    b.PutJob({i, "alice", "queued", "", "{}"});
    ASSERT_TRUE((*store)->Apply(b).ok());
  }
  CopyAsACrashWouldLeaveIt(path, copy);
  {
    auto intact = OpenSqliteStore(copy);
    ASSERT_TRUE(intact.ok());
    EXPECT_TRUE((*intact)->open_warnings().empty());
    EXPECT_EQ((*intact)->LoadJobs()->size(), 3u);
  }
  CopyAsACrashWouldLeaveIt(path, copy);
  // Cut the log inside its last frame, as a torn write would.
  const auto size = std::filesystem::file_size(copy + "-wal");
  std::filesystem::resize_file(copy + "-wal", size - 100);
  auto torn = OpenSqliteStore(copy);
  ASSERT_TRUE(torn.ok());
  ASSERT_EQ((*torn)->open_warnings().size(), 1u);
  EXPECT_NE((*torn)->open_warnings()[0].find("ends inside a frame"), std::string::npos)
      << (*torn)->open_warnings()[0];
  EXPECT_EQ((*torn)->LoadJobs()->size(), 2u) << "the committed transactions before it survive";
}

TEST(SqliteStore, ADamagedFrameIsSaidAtOpen) {
  const std::string path = TempDb("damaged");
  const std::string copy = path + ".crash";
  auto store = OpenSqliteStore(path);
  ASSERT_TRUE(store.ok());
  for (int i = 1; i <= 2; ++i) {
    WriteBatch b;
    b.PutJob({i, "alice", "queued", "", "{}"});
    ASSERT_TRUE((*store)->Apply(b).ok());
  }
  CopyAsACrashWouldLeaveIt(path, copy);
  {
    std::fstream f(copy + "-wal", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-10, std::ios::end);
    f.put('\x5a');
  }
  auto damaged = OpenSqliteStore(copy);
  ASSERT_TRUE(damaged.ok());
  ASSERT_EQ((*damaged)->open_warnings().size(), 1u);
  EXPECT_NE((*damaged)->open_warnings()[0].find("damaged frame"), std::string::npos);
}

TEST(SqliteStore, TheJobIdMarkIsDurableBesideTheDatabase) {
  const std::string path = TempDb("mark");
  {
    auto store = OpenSqliteStore(path);
    ASSERT_TRUE(store.ok());
    EXPECT_EQ(*(*store)->LoadJobIdMark(), 0);
    ASSERT_TRUE((*store)->SaveJobIdMark(1001).ok());
  }
  auto store = OpenSqliteStore(path);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(*(*store)->LoadJobIdMark(), 1001);
  {
    std::ofstream bad(path + ".ids");
    bad << "garbage";
  }
  EXPECT_FALSE((*store)->LoadJobIdMark().ok());
}

TEST(SqliteStore, AJobChangeIsWrittenBesideTheDocumentOfItsSubmission) {
  const std::string path = TempDb("status");
  {
    auto store = OpenSqliteStore(path);
    ASSERT_TRUE(store.ok());
    WriteBatch submit;
    submit.PutJob({1, "alice", "queued", "", R"({"spec":1})", ""});
    submit.PutJob({2, "bob", "queued", "", R"({"spec":2})", ""});
    ASSERT_TRUE((*store)->Apply(submit).ok());
    WriteBatch place;
    place.UpdateJob({1, "assigned", "n1", R"({"state":"assigned"})"});
    place.AddEvent({1, 10, "assigned", "to n1"});
    ASSERT_TRUE((*store)->Apply(place).ok());
    // A change of a job that is not stored fails its whole batch.
    WriteBatch bad;
    bad.UpdateJob({2, "running", "n1", R"({"state":"running"})"});
    bad.UpdateJob({3, "running", "n1", "{}"});
    const Status s = (*store)->Apply(bad);
    EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
    EXPECT_NE(s.message().find("job 3"), std::string::npos) << s.ToString();
  }
  auto store = OpenSqliteStore(path);
  ASSERT_TRUE(store.ok());
  auto jobs = (*store)->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].state, "assigned");
  EXPECT_EQ((*jobs)[0].node, "n1");
  EXPECT_EQ((*jobs)[0].doc, R"({"spec":1})") << "the document of the submission stays";
  EXPECT_EQ((*jobs)[0].status, R"({"state":"assigned"})");
  EXPECT_EQ((*jobs)[1].state, "queued") << "the failed batch left job 2 as it was";
  EXPECT_EQ((*jobs)[1].status, "");
  EXPECT_EQ((*store)->ListEvents(1)->size(), 1u);
  // Writing the whole row again clears the status it replaces.
  WriteBatch whole;
  whole.PutJob({1, "alice", "running", "n1", R"({"spec":1,"state":"running"})", ""});
  ASSERT_TRUE((*store)->Apply(whole).ok());
  jobs = (*store)->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ((*jobs)[0].doc, R"({"spec":1,"state":"running"})");
  EXPECT_EQ((*jobs)[0].status, "");
}

// A database of schema version 4 (every release before jobs had a status column), as those
// releases wrote it, is migrated when opened: its rows read as they were, and they take
// changes from then on.
TEST(SqliteStore, AVersion4DatabaseIsMigratedAndReadsAsItWas) {
  const std::string path = TempDb("v4");
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    const char* v4 = R"sql(
PRAGMA journal_mode=WAL;
CREATE TABLE jobs (id INTEGER PRIMARY KEY, user TEXT NOT NULL, state TEXT NOT NULL,
                   node TEXT NOT NULL DEFAULT '', doc TEXT NOT NULL);
CREATE INDEX jobs_state ON jobs(state);
CREATE INDEX jobs_user ON jobs(user);
CREATE TABLE nodes (name TEXT PRIMARY KEY, doc TEXT NOT NULL);
CREATE TABLE tokens (hash TEXT PRIMARY KEY, name TEXT NOT NULL, role TEXT NOT NULL,
                     created_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL DEFAULT 0);
CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id INTEGER NOT NULL,
                     ts_ms INTEGER NOT NULL, kind TEXT NOT NULL, message TEXT NOT NULL);
CREATE INDEX events_job ON events(job_id);
CREATE TABLE ledger (seq INTEGER PRIMARY KEY, ts_ms INTEGER NOT NULL, team TEXT NOT NULL,
                     doc TEXT NOT NULL);
CREATE INDEX ledger_team ON ledger(team);
CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, ts_ms INTEGER NOT NULL,
                    actor TEXT NOT NULL, action TEXT NOT NULL, subject TEXT NOT NULL,
                    detail TEXT NOT NULL);
INSERT INTO jobs VALUES(7, 'alice', 'running', 'n1', '{"id":7,"state":"running"}');
PRAGMA user_version=4;
)sql";
    ASSERT_EQ(sqlite3_exec(db, v4, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  {
    auto store = OpenSqliteStore(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EXPECT_EQ((*store)->schema_version(), 5);
    auto jobs = (*store)->LoadJobs();
    ASSERT_TRUE(jobs.ok());
    ASSERT_EQ(jobs->size(), 1u);
    EXPECT_EQ((*jobs)[0].state, "running");
    EXPECT_EQ((*jobs)[0].doc, R"({"id":7,"state":"running"})");
    EXPECT_EQ((*jobs)[0].status, "");
    WriteBatch b;
    b.UpdateJob({7, "succeeded", "n1", R"({"state":"succeeded"})"});
    ASSERT_TRUE((*store)->Apply(b).ok());
  }
  auto store = OpenSqliteStore(path);
  ASSERT_TRUE(store.ok());
  auto jobs = (*store)->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ((*jobs)[0].state, "succeeded");
  EXPECT_EQ((*jobs)[0].doc, R"({"id":7,"state":"running"})");
  EXPECT_EQ((*jobs)[0].status, R"({"state":"succeeded"})");
}

// Rows a batch's `fill` adds are built on the writer thread when the batch's turn comes, and
// the batch keeps its place in the commit order: a batch queued after it applies after them.
TEST(SqliteStore, ABatchFilledOnTheWriterThreadKeepsItsPlaceInTheOrder) {
  const std::string path = TempDb("fill");
  auto store = OpenSqliteStore(path, SqliteOptions{.synchronous_full = false});
  ASSERT_TRUE(store.ok());
  WriteBatch submit;
  submit.PutJob({1, "alice", "queued", "", "{}", ""});
  ASSERT_TRUE((*store)->Apply(submit).ok());
  std::thread::id filled_on;
  WriteBatch events;
  events.AddEvent({1, 10, "assigned", "to n1"});
  auto first = (*store)->ApplyAsync(std::move(events), [&](WriteBatch* b) {
    filled_on = std::this_thread::get_id();
    b->UpdateJob({1, "assigned", "n1", R"({"state":"assigned"})"});
  });
  WriteBatch later;
  later.UpdateJob({1, "running", "n1", R"({"state":"running"})"});
  auto second = (*store)->ApplyAsync(std::move(later));
  ASSERT_TRUE(first.get().ok());
  ASSERT_TRUE(second.get().ok());
  EXPECT_NE(filled_on, std::this_thread::get_id());
  auto jobs = (*store)->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ((*jobs)[0].state, "running");
  EXPECT_EQ((*jobs)[0].status, R"({"state":"running"})");
  EXPECT_EQ((*store)->ListEvents(1)->size(), 1u);
  // A batch with nothing but a fill is still applied.
  auto only_fill = (*store)->ApplyAsync(WriteBatch{}, [](WriteBatch* b) {
    b->AddEvent({1, 20, "note", "filled"});
  });
  ASSERT_TRUE(only_fill.get().ok());
  EXPECT_EQ((*store)->ListEvents(1)->size(), 2u);
}

// 3,000 jobs of about 2 KB: about 6 MB of pages, well over the writer's 1,000-frame threshold
// for copying its log into the database.
WriteBatch ALongLog() {
  WriteBatch big;
  for (int i = 1; i <= 3000; ++i) {
    big.PutJob({i, "alice", "queued", "", "{\"pad\":\"" + std::string(2000, 'x') + "\"}"});
  }
  return big;
}

// The size of the database file once it exceeds `bytes`, or its size after 30 s: the writer
// copies its log into the database after a commit once no batch waits, on its own thread, so a
// test that has nothing queued waits for the copy rather than for the next batch.
std::uintmax_t SizeOnceOver(const std::string& path, std::uintmax_t bytes) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::uintmax_t size = std::filesystem::file_size(path);
  while (size <= bytes && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    size = std::filesystem::file_size(path);
  }
  return size;
}

// The writer copies the log into the database itself, after acknowledging the commit that
// made it long (not inside it, as SQLite's automatic checkpoint would): the log does not grow
// without bound, and what was acknowledged survives a crash before the copy.
TEST(SqliteStore, ALongLogIsCopiedIntoTheDatabaseAfterItsCommit) {
  const std::string path = TempDb("checkpoint");
  const std::string copy = path + ".crash";
  auto store = OpenSqliteStore(path, SqliteOptions{.synchronous_full = false});
  ASSERT_TRUE(store.ok());
  const auto empty_size = std::filesystem::file_size(path);
  WriteBatch big = ALongLog();
  ASSERT_TRUE((*store)->Apply(std::move(big)).ok());
  // Acknowledged: in the log, whatever the database file holds yet.
  CopyAsACrashWouldLeaveIt(path, copy);
  {
    auto crashed = OpenSqliteStore(copy);
    ASSERT_TRUE(crashed.ok());
    EXPECT_EQ((*crashed)->LoadJobs()->size(), 3000u);
  }
  // Nothing waits: the writer copies the log after the commit.
  EXPECT_GT(SizeOnceOver(path, empty_size + 5'000'000), empty_size + 5'000'000)
      << "the log was not copied into the database";
  WriteBatch next;
  next.AddEvent({1, 10, "note", "after the big one"});
  ASSERT_TRUE((*store)->Apply(std::move(next)).ok());
  EXPECT_EQ((*store)->LoadJobs()->size(), 3000u);
}

// While batches wait, the copy waits for them: a burst of commits (a large scheduling pass
// written in parts) copies the pages it rewrites once, after the burst, not after each commit.
TEST(SqliteStore, WhileBatchesWaitTheLogIsCopiedAfterThem) {
  const std::string path = TempDb("checkpoint_busy");
  auto store = OpenSqliteStore(path, SqliteOptions{.synchronous_full = false});
  ASSERT_TRUE(store.ok());
  const auto empty_size = std::filesystem::file_size(path);
  WriteBatch big = ALongLog();
  // The big batch's writer waits, inside it, until the next batch is queued behind it, so that
  // one is waiting when the big one commits.
  std::promise<void> entered, queued;
  auto first = (*store)->ApplyAsync(std::move(big), [&](WriteBatch*) {
    entered.set_value();
    queued.get_future().wait();
  });
  entered.get_future().wait();
  std::uintmax_t size_after_first = 0;
  auto second = (*store)->ApplyAsync(WriteBatch{}, [&](WriteBatch* rows) {
    size_after_first = std::filesystem::file_size(path);
    rows->AddEvent({1, 10, "note", "behind the big one"});
  });
  queued.set_value();
  ASSERT_TRUE(first.get().ok());
  ASSERT_TRUE(second.get().ok());
  EXPECT_LT(size_after_first, empty_size + 1'000'000) << "the log was copied while a batch waited";
  // Nothing waits after the second: the writer copies the log after its commit.
  EXPECT_GT(SizeOnceOver(path, empty_size + 5'000'000), empty_size + 5'000'000)
      << "the log was not copied into the database after the burst";
  WriteBatch third;
  third.AddEvent({1, 20, "note", "after the burst"});
  ASSERT_TRUE((*store)->Apply(std::move(third)).ok());
  EXPECT_EQ((*store)->LoadJobs()->size(), 3000u);
}

}  // namespace
}  // namespace stoker::store
