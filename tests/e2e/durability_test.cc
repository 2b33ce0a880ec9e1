// kill -9 at random moments under load: every submission (and cancel) the API acknowledged is
// in the store after the crash, in its last acknowledged state.

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <random>
#include <set>

#include "client/api_client.h"
#include "process_util.h"
#include "protocol/model.h"
#include "store/store.h"
#include "support/temp_dir.h"

namespace stoker::e2e {
namespace {
using protocol::json;

TEST(Durability, AcknowledgedWritesSurviveKill9) {
  const stoker::testing::TempDir tmp("kill9");
  const std::string dir = tmp.path();
  std::mt19937 rng(12345);
  std::map<int64_t, std::string> acked;  // id -> last acknowledged state
  // Cancels sent but not answered when the server died: they may or may not have committed.
  std::set<int64_t> cancel_in_flight;
  const int kIterations = 15;
  for (int iter = 0; iter < kIterations; ++iter) {
    const int port = FreePort();
    const pid_t pid = Spawn(
        {STOKER_BIN, "server", "--data-dir", dir, "--listen", "127.0.0.1:" + std::to_string(port)},
        {}, dir + "/server.log");
    std::string token;
    const std::string url = "http://127.0.0.1:" + std::to_string(port);
    bool up = false;
    for (int i = 0; i < 200 && !up; ++i) {
      std::ifstream in(dir + "/admin.token");
      std::getline(in, token);
      if (!token.empty()) {
        client::ApiClient probe(url, token, 1);
        auto r = probe.Get("/api/v1/whoami");
        up = r.ok() && r->status == 200;
      }
      if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(up) << "server did not start (iteration " << iter << ")";

    std::mutex mu;
    std::atomic<bool> stop{false};
    std::vector<std::thread> clients;
    for (int t = 0; t < 4; ++t) {
      clients.emplace_back([&, t] {
        client::ApiClient c(url, token, 2);
        c.set_keep_alive(true);
        int n = 0;
        while (!stop) {
          auto r = c.Post("/api/v1/jobs",
                          json{{"command", {"sleep", "1"}}, {"name", "k" + std::to_string(t)}});
          if (!r.ok() || r->status != 201) break;  // the server died mid-request: not acknowledged
          const int64_t id = r->body["id"].get<int64_t>();
          {
            std::lock_guard lock(mu);
            acked[id] = "queued";
          }
          if (++n % 5 == 0) {
            {
              std::lock_guard lock(mu);
              cancel_in_flight.insert(id);
            }
            auto cr = c.Post("/api/v1/jobs/" + std::to_string(id) + "/cancel", json::object());
            if (!cr.ok() || cr->status != 200) break;
            std::lock_guard lock(mu);
            acked[id] = "cancelled";
            cancel_in_flight.erase(id);
          }
        }
      });
    }
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(100, 900)(rng)));
    ::kill(pid, SIGKILL);
    WaitExit(pid);
    stop = true;
    for (auto& th : clients) th.join();

    auto store = store::OpenSqliteStore(dir + "/stoker.db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto rows = (*store)->LoadJobs();
    ASSERT_TRUE(rows.ok());
    std::map<int64_t, std::string> found;
    for (const auto& row : *rows) {
      auto job = protocol::JobFromJson(
          json::parse(row.doc, nullptr, false),
          row.status.empty() ? json() : json::parse(row.status, nullptr, false));
      ASSERT_TRUE(job.ok()) << "job " << row.id << " half-written: " << job.status().ToString();
      EXPECT_EQ(protocol::JobStateName(job->state), row.state);
      found[row.id] = row.state;
    }
    for (auto& [id, state] : acked) {
      ASSERT_TRUE(found.count(id))
          << "acknowledged job " << id << " lost (iteration " << iter << ")";
      if (cancel_in_flight.count(id) && found[id] == "cancelled") {
        state = "cancelled";  // the unanswered cancel committed: now the last known state
        continue;
      }
      EXPECT_EQ(found[id], state) << "job " << id << " (iteration " << iter << ")";
    }
    cancel_in_flight.clear();  // the server that held them is gone: each committed or not
  }
  EXPECT_GT(acked.size(), 100u) << "the load was too light to mean anything";
}

}  // namespace
}  // namespace stoker::e2e
