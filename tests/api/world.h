#pragma once
// The API as `stoker server` wires it, for tests: a server over a fresh SQLite store with the
// efficiency engine, the dashboard's history and the Kubernetes scheduler extender as its
// extensions (market teams: alice in ml, bob in vision), tokens for an admin, two users, the
// agents of two registered 4-GPU nodes and kube-scheduler (role scheduler).

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "integration/efficiency_service.h"
#include "integration/k8s_extender_service.h"
#include "server/api.h"
#include "server/server.h"
#include "store/store.h"
#include "web/history.h"

namespace stoker::server::testing {
namespace fs = std::filesystem;

// Teams for the market routes: alice is in ml, bob in vision.
inline constexpr const char* kConfig = R"(
market:
  guaranteed_price: {"*": 6}
  preemptible_price: {"*": 2}
  budgets: {ml: 100, vision: 100}
  teams: {alice: ml, bob: vision}
)";

// One server with the efficiency engine, two users, two nodes and their agents.
struct World {
  explicit World(const std::string& name) {
    dir = (fs::temp_directory_path() / ("stoker_authz_" + name + "_" + std::to_string(::getpid())))
              .string();
    fs::remove_all(dir);
    fs::create_directories(dir);
    store = store::OpenSqliteStore(dir + "/stoker.db", {.synchronous_full = false}).value();
    ServerOptions o;
    o.data_dir = dir;
    server = Server::Create(store.get(), &clock, o).value();
    api = std::make_unique<Api>(server.get());
    auto cfg = efficiency::LoadConfigYaml(kConfig, "authz.yaml");
    if (!cfg.ok()) throw std::runtime_error(cfg.status().ToString());
    ledger = std::make_unique<efficiency::StoreLedgerStore>(store.get());
    svc = std::make_unique<efficiency::EfficiencyService>(*cfg, server.get(), ledger.get());
    if (!svc->Init(clock.WallNow()).ok()) throw std::runtime_error("init");
    server->AddObserver(svc.get());
    api->AddExtension(svc.get());
    history = std::make_unique<web::History>(&clock);
    server->AddObserver(history.get());
    api->AddExtension(history.get());
    k8s = std::make_unique<integration::KubernetesExtender>(server.get(), &clock);
    server->AddObserver(k8s.get());
    api->AddExtension(k8s.get());
    const Principal root{"root", Role::kAdmin};
    tokens["admin"] = *server->CreateToken(root, Role::kAdmin, "root");
    tokens["alice"] = *server->CreateToken(root, Role::kUser, "alice");
    tokens["bob"] = *server->CreateToken(root, Role::kUser, "bob");
    tokens["n1"] = *server->CreateToken(root, Role::kAgent, "n1");
    tokens["n2"] = *server->CreateToken(root, Role::kAgent, "n2");
    tokens["sched"] = *server->CreateToken(root, Role::kScheduler, "kube-scheduler");
    for (const char* node : {"n1", "n2"}) {
      NodeInventory n;
      n.name = node;
      n.cpu_milli = 64000;
      n.memory_mib = 256 * 1024;
      for (uint32_t i = 0; i < 4; ++i) {
        n.gpus.push_back(GpuInfo{i,
                                 std::string("GPU-") + node + "-" + std::to_string(i),
                                 "NVIDIA H100 80GB HBM3",
                                 81920,
                                 false,
                                 {}});
      }
      EXPECT_TRUE(server->RegisterNode(root, n).ok());
    }
  }
  ~World() {
    k8s.reset();
    svc.reset();
    api.reset();
    history.reset();
    server.reset();
    store.reset();
    fs::remove_all(dir);
  }
  int64_t JobOf(const std::string& user, bool place = true) {
    JobSpec s;
    s.command = {"sleep", "100"};
    s.gpus = 1;
    auto j = server->Submit(Principal{user, Role::kUser}, s);
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    if (place) server->RunSchedulingPass();
    return j->id;
  }

  std::string dir;
  ManualClock clock;
  std::unique_ptr<store::Store> store;
  std::unique_ptr<Server> server;
  std::unique_ptr<Api> api;
  std::unique_ptr<efficiency::StoreLedgerStore> ledger;
  std::unique_ptr<efficiency::EfficiencyService> svc;
  std::unique_ptr<web::History> history;  // the dashboard's GPU history and its routes
  std::unique_ptr<integration::KubernetesExtender> k8s;  // the scheduler extender's routes
  std::map<std::string, std::string> tokens;
};

inline ApiRequest Req(const std::string& method, const std::string& path, std::string body = "",
                      std::map<std::string, std::string> query = {},
                      const std::string& token = "") {
  ApiRequest r;
  r.method = method;
  r.path = path;
  r.body = std::move(body);
  r.query = std::move(query);
  if (!token.empty()) r.authorization = "Bearer " + token;
  return r;
}

}  // namespace stoker::server::testing
