#pragma once
// What the node tests share: the real server in-process, over HTTP on loopback (SQLite store,
// API, HTTP server in a fresh temp directory), and options for a node loop that runs its jobs
// as real processes through the test shim.

#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "node/node_agent.h"
#include "server/api.h"
#include "server/server.h"
#include "store/store.h"

namespace stoker::node::testing {

// Jobs run as their submitting user when the agent is root: submit as whoever runs the test.
inline std::string Me() {
  const passwd* pw = ::getpwuid(::geteuid());
  return pw ? pw->pw_name : "root";
}

struct ServerOverHttp {
  ServerOverHttp(const std::string& name, server::ServerOptions so, Clock* clock) {
    dir = (std::filesystem::temp_directory_path() /
           ("stoker_node_" + name + "_" + std::to_string(::getpid())))
              .string();
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    store = store::OpenSqliteStore(dir + "/stoker.db", {.synchronous_full = false}).value();
    so.data_dir = dir + "/server";
    core = server::Server::Create(store.get(), clock, so).value();
    api = std::make_unique<server::Api>(core.get());
    http = std::make_unique<http::Listener>(
        api.get(), http::ListenerOptions{.host = "127.0.0.1", .port = 0, .threads = 8});
    EXPECT_TRUE(http->Start().ok());
  }
  ~ServerOverHttp() {
    http->Stop();
    api.reset();
    core.reset();
    store.reset();
    std::filesystem::remove_all(dir);
  }

  // A node loop's options for node `name`: its agent token, its job state under the test's
  // directory, the test shim, a short cancel grace; root jobs allowed (the test may run as root
  // and submits as itself).
  NodeOptions Agent(const std::string& name, Duration grace = std::chrono::seconds(1),
                    bool allow_root = true) {
    NodeOptions no;
    no.server_url = http->url();
    no.token = core->CreateToken(admin, server::Role::kAgent, name).value();
    no.state_dir = dir + "/" + name;
    no.shim_argv = {STOKER_TEST_SHIM};
    no.cancel_grace = grace;
    no.users.allow_root = allow_root;
    return no;
  }
  // Cancels every job that has not ended; true while any has not.
  bool CancelAll() {
    bool active = false;
    const auto jobs = core->ListJobs(admin, server::JobFilter{});
    if (!jobs.ok()) return false;
    for (const server::Job& j : *jobs) {
      if (IsTerminal(j.state)) continue;
      active = true;
      (void)core->Cancel(admin, j.id);
    }
    return active;
  }

  std::string dir;
  server::Principal admin{"admin", server::Role::kAdmin};
  std::unique_ptr<store::Store> store;
  std::unique_ptr<server::Server> core;
  std::unique_ptr<server::Api> api;
  std::unique_ptr<http::Listener> http;
};

}  // namespace stoker::node::testing
