// Fuzzes Api::Handle with arbitrary bodies on every mutating endpoint, as admin, user and agent.
// The first byte picks endpoint and role; the rest is the body. Any crash, sanitizer report or
// a 5xx answer (other than 503) is a bug: bad input must always get a 4xx naming the problem.

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "server/api.h"
#include "server/server.h"
#include "store/store.h"

namespace {
using namespace stoker;
using namespace stoker::server;

struct World {
  World() {
    dir = (std::filesystem::temp_directory_path() / ("stoker_fuzz_" + std::to_string(::getpid()))).string();
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    store = store::OpenSqliteStore(dir + "/stoker.db", {.synchronous_full = false}).value();
    ServerOptions o;
    o.data_dir = dir;
    server = Server::Create(store.get(), &clock, o).value();
    api = std::make_unique<Api>(server.get());
    Principal admin{"admin", Role::kAdmin};
    tokens[0] = server->CreateToken(admin, Role::kAdmin, "admin").value();
    tokens[1] = server->CreateToken(admin, Role::kUser, "alice").value();
    tokens[2] = server->CreateToken(admin, Role::kAgent, "n1").value();
    NodeInventory inv;
    inv.name = "n1";
    inv.cpu_milli = 8000;
    inv.memory_mib = 16384;
    inv.gpus.push_back(GpuInfo{0, "GPU-0", "H100", 81920, false, {}});
    (void)server->RegisterNode(admin, inv);
  }
  std::string dir;
  ManualClock clock;
  std::unique_ptr<store::Store> store;
  std::unique_ptr<Server> server;
  std::unique_ptr<Api> api;
  std::string tokens[3];
};

World& W() {
  static World* w = new World();
  return *w;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const std::pair<const char*, const char*> kEndpoints[] = {
      {"POST", "/api/v1/jobs"},          {"POST", "/api/v1/nodes/register"},
      {"POST", "/api/v1/nodes/n1/heartbeat"}, {"PUT", "/api/v1/policy"},
      {"POST", "/api/v1/tokens"},        {"GET", "/api/v1/jobs"},
      {"POST", "/api/v1/jobs/1/cancel"}, {"GET", "/api/v1/jobs/1/logs"}};
  const uint8_t sel = data[0];
  const auto& [method, path] = kEndpoints[sel % 8];
  ApiRequest r;
  r.method = method;
  r.path = path;
  r.authorization = "Bearer " + W().tokens[(sel / 8) % 3];
  r.body.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  if (sel & 0x80) r.query["offset"] = r.body.substr(0, 8);
  ApiResponse resp = W().api->Handle(r);
  if (resp.status >= 500 && resp.status != 503) {
    std::fprintf(stderr, "5xx for %s %s: %s\n", method, path, resp.body.c_str());
    std::abort();
  }
  // Keep the server's state small: scheduling and liveness run as in production.
  W().server->RunSchedulingPass();
  return 0;
}
