// Fuzzes the API as `stoker server` wires it (the server's routes, the efficiency engine's and
// the Kubernetes scheduler extender's)
// through Api::Handle: every route of the route table, as admin, user, agent or nobody, with
// fuzzed path parameters, query parameters and bodies. The first bytes pick the route, the
// caller and which query parameters get fuzzed values; the rest is split into those values and
// the body. Any crash, sanitizer report or 5xx answer (other than 503) is a bug: bad input must
// always get a 4xx naming the problem.

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "integration/efficiency_service.h"
#include "integration/k8s_extender_service.h"
#include "server/api.h"
#include "server/server.h"
#include "store/store.h"

namespace {
using namespace stoker;
using namespace stoker::server;
using stoker::http::Route;

constexpr const char* kConfig = R"(
market:
  guaranteed_price: {"*": 6}
  budgets: {ml: 10}
  teams: {alice: ml}
)";

struct World {
  World() {
    dir = (std::filesystem::temp_directory_path() / ("stoker_fuzz_" + std::to_string(::getpid())))
              .string();
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    store = store::OpenSqliteStore(dir + "/stoker.db", {.synchronous_full = false}).value();
    ServerOptions o;
    o.data_dir = dir;
    server = Server::Create(store.get(), &clock, o).value();
    api = std::make_unique<Api>(server.get());
    auto cfg = efficiency::LoadConfigYaml(kConfig, "fuzz.yaml").value();
    ledger = std::make_unique<efficiency::StoreLedgerStore>(store.get());
    svc = std::make_unique<efficiency::EfficiencyService>(cfg, server.get(), ledger.get());
    (void)svc->Init(clock.WallNow());
    server->AddObserver(svc.get());
    api->AddExtension(svc.get());
    k8s = std::make_unique<integration::KubernetesExtender>(server.get(), &clock);
    server->AddObserver(k8s.get());
    api->AddExtension(k8s.get());
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
    JobSpec spec;
    spec.command = {"true"};
    spec.gpus = 1;
    (void)server->Submit(Principal{"alice", Role::kUser}, spec);
    server->RunSchedulingPass();
    routes = api->router().routes();
  }
  std::string dir;
  ManualClock clock;
  std::unique_ptr<store::Store> store;
  std::unique_ptr<Server> server;
  std::unique_ptr<Api> api;
  std::unique_ptr<efficiency::StoreLedgerStore> ledger;
  std::unique_ptr<efficiency::EfficiencyService> svc;
  std::unique_ptr<integration::KubernetesExtender> k8s;
  std::string tokens[3];
  std::vector<Route> routes;
};

World& W() {
  static World* w = new World();
  return *w;
}

// Takes the next '\x01'-terminated piece of the input (or the rest).
std::string Piece(const uint8_t*& p, const uint8_t* end) {
  const uint8_t* start = p;
  while (p < end && *p != 1) ++p;
  std::string out(reinterpret_cast<const char*>(start), static_cast<size_t>(p - start));
  if (p < end) ++p;
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  World& w = W();
  const Route& route = w.routes[data[0] % w.routes.size()];
  const uint8_t who = data[1];
  const uint8_t params = data[2];
  const uint8_t* p = data + 3;
  const uint8_t* end = data + size;
  // Path: each {parameter} is a valid value or a fuzzed one.
  std::string path = route.pattern == "/metrics" ? "" : "/api/v1";
  size_t i = 0;
  int nth = 0;
  while (i < route.pattern.size()) {
    const size_t open = route.pattern.find('{', i);
    if (open == std::string::npos) {
      path += route.pattern.substr(i);
      break;
    }
    path += route.pattern.substr(i, open - i);
    const size_t close = route.pattern.find('}', open);
    const std::string name = route.pattern.substr(open + 1, close - open - 1);
    if ((params >> (nth++ % 8)) & 1) {
      path += Piece(p, end);
    } else {
      path += name == "name" ? "n1" : "1";
    }
    i = close + 1;
  }
  ApiRequest r;
  r.method = route.method;
  r.path = path;
  if (who % 4 != 3) r.authorization = "Bearer " + w.tokens[who % 4];
  // Query: the declared parameters with fuzzed values, sometimes one that is not declared.
  for (size_t q = 0; q < route.query.size(); ++q) {
    if ((params >> (q % 8)) & 1) r.query[route.query[q].name] = Piece(p, end);
  }
  if (who & 0x80) r.query[Piece(p, end)] = Piece(p, end);
  r.body.assign(reinterpret_cast<const char*>(p), static_cast<size_t>(end - p));
  ApiResponse resp = w.api->Handle(r);
  if (resp.status >= 500 && resp.status != 503) {
    std::fprintf(stderr, "5xx for %s %s: %s\n", r.method.c_str(), r.path.c_str(),
                 resp.body.c_str());
    std::abort();
  }
  // Keep the state moving as in production: scheduling, liveness, the efficiency tick.
  w.clock.Advance(std::chrono::seconds(1));
  w.server->RunSchedulingPass();
  if ((who & 0x40) != 0) w.svc->Evaluate(w.clock.WallNow());
  return 0;
}
