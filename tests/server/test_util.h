#pragma once
// A server over a fresh SQLite store in a temp directory, with tokens for each role.

#include <unistd.h>

#include <filesystem>
#include <memory>

#include "server/api.h"
#include "server/server.h"
#include "store/store.h"

namespace stoker::server::testing {

struct Fixture {
  // `other_clock`: the server's clock instead of `clock` (which is then unused).
  explicit Fixture(const std::string& name, ServerOptions opts = {}, Clock* other_clock = nullptr)
      : server_clock(other_clock != nullptr ? other_clock : &clock) {
    dir = (std::filesystem::temp_directory_path() /
           ("stoker_srv_" + name + "_" + std::to_string(::getpid())))
              .string();
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    options = opts;
    options.data_dir = dir;
    Open();
    admin = Principal{"root-admin", Role::kAdmin};
    admin_token = *server->CreateToken(admin, Role::kAdmin, "root-admin");
    alice_token = *server->CreateToken(admin, Role::kUser, "alice");
    bob_token = *server->CreateToken(admin, Role::kUser, "bob");
    agent_token = *server->CreateToken(admin, Role::kAgent, "n1");
  }
  ~Fixture() {
    api.reset();
    server.reset();
    store.reset();
    std::filesystem::remove_all(dir);
  }
  // (Re)opens store and server on the same directory: a server restart.
  void Open() {
    api.reset();
    server.reset();
    store.reset();
    store = store::OpenSqliteStore(dir + "/stoker.db", {.synchronous_full = false}).value();
    auto s = Server::Create(store.get(), server_clock, options);
    if (!s.ok()) throw std::runtime_error(s.status().ToString());
    server = std::move(*s);
    api = std::make_unique<Api>(server.get());
  }

  NodeInventory Node(const std::string& name, int gpus,
                     const std::string& model = "NVIDIA H100 80GB HBM3") {
    NodeInventory n;
    n.name = name;
    n.cpu_milli = 64000;
    n.memory_mib = 512 * 1024;
    for (int i = 0; i < gpus; ++i) {
      n.gpus.push_back(
          GpuInfo{static_cast<uint32_t>(i), "GPU-" + std::to_string(i), model, 81920, false, {}});
    }
    return n;
  }

  std::string dir;
  ServerOptions options;
  ManualClock clock;
  Clock* server_clock;
  std::unique_ptr<store::Store> store;
  std::unique_ptr<Server> server;
  std::unique_ptr<Api> api;
  Principal admin;
  std::string admin_token, alice_token, bob_token, agent_token;
  Principal alice{"alice", Role::kUser};
  Principal bob{"bob", Role::kUser};
  Principal agent{"n1", Role::kAgent};
};

inline JobSpec Spec(std::vector<std::string> cmd, int gpus = 0) {
  JobSpec s;
  s.command = std::move(cmd);
  s.gpus = gpus;
  return s;
}

}  // namespace stoker::server::testing
