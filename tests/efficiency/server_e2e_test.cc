// The efficiency engine end to end inside a real server: SQLite store, server::Server, the
// HTTP API handler (server::Api with the engine as its extension), and GPU samples read from
// the fake NVML library through the real dlopen adapter and the agent's sampler. Time is a
// ManualClock (server, sampler) plus the fake library's manual time: no sleeps, no timing.
//
// Story: alice submits a one-GPU job on a node whose GPU stays at 0 %. Within minutes the job
// is bronze; the yellow dip alert fires, then the orange JobGpusIdle; idle reclaim warns, then
// cancels the job through the server. The market charges the idle allocation to alice's team
// in the store's ledger until the team is out of credit; then only preemptible work is
// accepted at submission.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "fakenvml/fake_control.h"
#ifdef STOKER_HAVE_EFFICIENCY_SIM
#include "efficiency/history_sizing.h"
#endif
#include "integration/efficiency_service.h"
#include "node/node_agent.h"
#include "nvml/nvml_gpu_source.h"
#include "server/api.h"
#include "server/server.h"
#include "store/store.h"
#include "telemetry/sampler.h"
#include "telemetry/snapshot_json.h"

namespace stoker::efficiency {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kScenario = R"(
name: idle-node
hostname: n1
gpus:
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-idle-0
    pci_bus_id: "00000000:18:00.0"
    architecture: 8
    memory_total_mib: 81559
    util: 0
    temperature_c: 40
)";

// Short windows so the story plays in 30 simulated minutes; budget 1 credit at 6 credits per
// GPU-hour: 10 minutes of one GPU.
constexpr const char* kConfig = R"(
zones: {window: 10m, min_coverage: 2m}
idle_reclaim: {warn_after: 10m, act_after: 20m, action: cancel, exempt_users: []}
market:
  guaranteed_price: {"*": 6}
  preemptible_price: {"*": 2}
  budgets: {ml: 1}
  teams: {alice: ml}
  charge_interval: 5m
)";

struct Harness {
  explicit Harness(const char* config = kConfig) {
    dir =
        (std::filesystem::temp_directory_path() / ("stoker_eff_e2e_" + std::to_string(::getpid())))
            .string();
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    store = store::OpenSqliteStore(dir + "/stoker.db", {.synchronous_full = false}).value();
    server::ServerOptions o;
    o.data_dir = dir;
    server = server::Server::Create(store.get(), &clock, o).value();
    api = std::make_unique<server::Api>(server.get());
    auto cfg = LoadConfigYaml(config, "e2e.yaml");
    if (!cfg.ok()) throw std::runtime_error(cfg.status().ToString());
    ledger = std::make_unique<StoreLedgerStore>(store.get());
    svc = std::make_unique<EfficiencyService>(*cfg, server.get(), ledger.get());
    if (!svc->Init(clock.WallNow()).ok()) throw std::runtime_error("init");
    server->AddObserver(svc.get());
    api->AddExtension(svc.get());
    const server::Principal root{"root", server::Role::kAdmin};
    admin = *server->CreateToken(root, server::Role::kAdmin, "root");
    alice = *server->CreateToken(root, server::Role::kUser, "alice");
    agent = *server->CreateToken(root, server::Role::kAgent, "n1");
  }
  ~Harness() {
    svc.reset();
    api.reset();
    server.reset();
    store.reset();
    std::filesystem::remove_all(dir);
  }
  server::ApiResponse Call(const std::string& method, const std::string& path,
                           const std::string& token, const json& body = nullptr,
                           std::map<std::string, std::string> query = {}) {
    server::ApiRequest r;
    r.method = method;
    r.path = path;
    r.query = std::move(query);
    r.authorization = "Bearer " + token;
    if (!body.is_null()) r.body = body.dump();
    return api->Handle(r);
  }
  json Get(const std::string& path, const std::string& token,
           std::map<std::string, std::string> query = {}) {
    auto r = Call("GET", path, token, nullptr, std::move(query));
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    return json::parse(r.body, nullptr, false);
  }

  std::string dir;
  ManualClock clock;
  std::unique_ptr<store::Store> store;
  std::unique_ptr<server::Server> server;
  std::unique_ptr<server::Api> api;
  std::unique_ptr<StoreLedgerStore> ledger;
  std::unique_ptr<EfficiencyService> svc;
  std::string admin, alice, agent;
};

bool HasAlert(const json& alerts, const std::string& rule, const std::string& job) {
  for (const auto& a : alerts) {
    if (a["rule"] == rule && a["labels"].value("job", "") == job && a["state"] == "firing")
      return true;
  }
  return false;
}

TEST(EfficiencyServerE2ETest, IdleJobGoesBronzeAlertsIsReclaimedAndChargedThroughTheServer) {
  // GPUs through the real adapter: dlopen of the fake library, scripted with manual time.
  const std::string lib = fakenvml::FakeLibraryBuildPath();
  auto control = fakenvml::FakeNvmlControl::Open(lib);
  ASSERT_TRUE(control.ok()) << control.status().ToString();
  ASSERT_TRUE((*control)->SetScenario(kScenario, "idle-node.yaml").ok());
  auto source = nvml::OpenNvmlGpuSource(nvml::NvmlOptions{lib});
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  Harness h;
  telemetry::Sampler sampler(source->get(), &h.clock, nullptr, telemetry::SamplerOptions{});
  ASSERT_EQ(sampler.gpu_count(), 1u);

  // The node registers with the inventory the node agent builds from the same source.
  auto reg = h.Call("POST", "/api/v1/nodes/register", h.agent,
                    server::NodeInventoryToJson(node::BuildInventory("n1", source->get())));
  ASSERT_EQ(reg.status, 200) << reg.body;

  auto sub =
      h.Call("POST", "/api/v1/jobs", h.alice, {{"command", {"sleep", "100000"}}, {"gpus", 1}});
  ASSERT_EQ(sub.status, 201) << sub.body;
  const int64_t id = json::parse(sub.body)["id"].get<int64_t>();
  const std::string job = std::to_string(id);
  ASSERT_EQ(h.server->RunSchedulingPass().placed, 1);

  // One heartbeat every 30 simulated seconds, reporting the job running and the GPU samples.
  // The sampler stamps samples with the adapter's system time; the heartbeat time (server
  // clock) is the simulated one, so the stamp is dropped and the server's time used.
  bool cancel_ordered = false;
  auto heartbeat = [&](double t) {
    (*control)->SetTime(t);
    sampler.SampleOnce(0);
    telemetry::TelemetrySnapshot snap;
    sampler.Snapshot(&snap);
    json gpus = telemetry::SnapshotToJson(snap, "n1")["gpus"];
    for (auto& g : gpus) g.erase("timestamp_unix");
    json body = {{"jobs", json::array({{{"id", id}, {"phase", "running"}}})}, {"samples", gpus}};
    auto r = h.Call("POST", "/api/v1/nodes/n1/heartbeat", h.agent, body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json reply = json::parse(r.body);
    for (const auto& c : reply["cancel"]) cancel_ordered |= c.get<int64_t>() == id;
  };
  int minute = 0;
  auto run_until = [&](int until_minute) {
    for (; minute < until_minute; ++minute) {
      for (int half = 0; half < 2; ++half) {
        h.clock.Advance(30s);
        heartbeat(minute * 60.0 + half * 30.0);
      }
      h.svc->Evaluate(h.clock.WallNow());  // the service loop's tick, once a simulated minute
    }
  };

  run_until(4);
  json zones = h.Get("/api/v1/zones", h.alice);
  ASSERT_EQ(zones["jobs"].size(), 1u) << zones.dump();
  EXPECT_EQ(zones["jobs"][0]["key"], job);
  EXPECT_EQ(zones["jobs"][0]["zone"], "bronze");
  ASSERT_EQ(zones["gpus"].size(), 1u);
  EXPECT_EQ(zones["gpus"][0]["zone"], "bronze");
  EXPECT_TRUE(HasAlert(h.Get("/api/v1/alerts", h.alice), "GpuActivityDip", job));
  EXPECT_EQ(h.Get("/api/v1/jobs/" + job, h.alice)["state"], "running");

  run_until(12);
  json log = h.Get("/api/v1/reclaim", h.alice);
  ASSERT_EQ(log.size(), 1u) << log.dump();
  EXPECT_EQ(log[0]["action"], "warn");
  EXPECT_EQ(log[0]["job"], job);
  // Budget: 1 credit at 6/GPU-h lasts 10 minutes; charged every 5: out of credit by now.
  json budgets = h.Get("/api/v1/budgets", h.alice);
  ASSERT_EQ(budgets.size(), 1u);
  EXPECT_EQ(budgets[0]["team"], "ml");
  EXPECT_LE(budgets[0]["balance"].get<double>(), 0.0) << budgets.dump();
  EXPECT_EQ(budgets[0]["allowed_tier"], "preemptible");
  auto refused = h.Call("POST", "/api/v1/jobs", h.alice, {{"command", {"true"}}, {"gpus", 1}});
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_NE(refused.body.find("out of credit"), std::string::npos) << refused.body;
  auto best_effort = h.Call("POST", "/api/v1/jobs", h.alice,
                            {{"command", {"true"}}, {"gpus", 1}, {"preemptible", true}});
  EXPECT_EQ(best_effort.status, 201) << best_effort.body;
  ASSERT_TRUE(h.Call("POST",
                     "/api/v1/jobs/" + json::parse(best_effort.body)["id"].dump() + "/cancel",
                     h.alice)
                  .status == 200);

  run_until(16);
  EXPECT_TRUE(HasAlert(h.Get("/api/v1/alerts", h.alice), "JobGpusIdle", job));

  run_until(22);
  log = h.Get("/api/v1/reclaim", h.admin);
  ASSERT_EQ(log.size(), 2u) << log.dump();
  EXPECT_EQ(log[1]["action"], "cancel");
  EXPECT_EQ(log[1]["evidence"]["idle_gpus"], 1);
  EXPECT_GE(log[1]["evidence"]["samples"].get<int>(), 20);
  const std::string state = h.Get("/api/v1/jobs/" + job, h.alice)["state"];
  EXPECT_TRUE(state == "cancelling" || state == "cancelled") << state;
  run_until(23);  // the next heartbeat's reply tells the node to stop the job
  EXPECT_TRUE(cancel_ordered);

  // /metrics (any token) carries the engine's families and the market balance.
  auto metrics = h.Call("GET", "/metrics", h.admin);
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("stoker_efficiency_gpu_zone{uuid=\"GPU-idle-0\",zone=\"bronze\"} 1"),
            std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("stoker_efficiency_reclaim_actions_total{action=\"cancel\"} 1"),
            std::string::npos);
  EXPECT_NE(metrics.body.find("stoker_market_balance_credits{team=\"ml\"}"), std::string::npos);
  EXPECT_EQ(h.Call("GET", "/metrics", "nope").status, 401);
#ifdef STOKER_PROMTOOL
  {
    // `promtool check metrics` lints the exposition format (types, HELP, names, duplicates).
    const std::string path = h.dir + "/metrics.txt";
    std::ofstream(path) << metrics.body;
    const std::string cmd = std::string(STOKER_PROMTOOL) + " check metrics < " + path + " > " +
                            h.dir + "/promtool.out 2>&1";
    const int rc = std::system(cmd.c_str());
    std::ifstream lint(h.dir + "/promtool.out");
    const std::string lint_text((std::istreambuf_iterator<char>(lint)),
                                std::istreambuf_iterator<char>());
    EXPECT_EQ(rc, 0) << lint_text << "\n" << metrics.body;
  }
#endif

  // The ledger is in the store: grant, then charges for the idle allocation.
  auto stored = h.ledger->LoadAll();
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  ASSERT_GE(stored->size(), 3u);
  EXPECT_EQ((*stored)[0].kind, LedgerKind::kGrant);
  bool idle_charge = false;
  for (const auto& e : *stored) idle_charge |= e.kind == LedgerKind::kIdleCharge && e.job == job;
  EXPECT_TRUE(idle_charge);
  EXPECT_EQ(stored->size(), h.Get("/api/v1/ledger", h.admin).size());

  // The report over what the server saw: the job, its idle hours, the team's account.
  json report = h.Get("/api/v1/report", h.admin);
  ASSERT_EQ(report["jobs"].size(), 1u) << report.dump();
  EXPECT_EQ(report["jobs"][0]["id"], job);
  EXPECT_GT(report["jobs"][0]["idle_gpu_hours"].get<double>(), 0.2);
  ASSERT_EQ(report["accounts"].size(), 1u);
  EXPECT_TRUE(report["accounts"][0]["out_of_credit"].get<bool>());
  auto text = h.Call("GET", "/api/v1/report", h.admin, nullptr, {{"format", "text"}});
  EXPECT_NE(text.body.find("OUT OF CREDIT"), std::string::npos) << text.body;
}

TEST(EfficiencyServerE2ETest, RoutesEnforceRolesAndSilencesWork) {
  Harness h;
  EXPECT_EQ(h.Call("GET", "/api/v1/zones", h.agent).status, 403);
  EXPECT_EQ(h.Call("GET", "/api/v1/zones", "bad").status, 401);
  EXPECT_EQ(h.Call("POST", "/api/v1/silences", h.alice, {{"matchers", {{"uuid", "GPU-1"}}}}).status,
            403);
  auto bad = h.Call("POST", "/api/v1/silences", h.admin,
                    {{"matchers", {{"uuid", "GPU-1"}}}, {"duration", "-5m"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("duration"), std::string::npos) << bad.body;
  auto unknown = h.Call("POST", "/api/v1/silences", h.admin,
                        {{"matchers", {{"uuid", "GPU-1"}}}, {"until", 5}});
  EXPECT_EQ(unknown.status, 400);
  EXPECT_NE(unknown.body.find("until: unknown field"), std::string::npos) << unknown.body;
  auto ok = h.Call("POST", "/api/v1/silences", h.admin,
                   {{"matchers", {{"uuid", "GPU-1"}}}, {"duration", "2h"}, {"comment", "RMA"}});
  ASSERT_EQ(ok.status, 201) << ok.body;
  const std::string sid = json::parse(ok.body)["id"];
  EXPECT_EQ(h.Get("/api/v1/silences", h.alice).size(), 1u);
  EXPECT_EQ(h.Call("DELETE", "/api/v1/silences/" + sid, h.alice).status, 403);
  EXPECT_EQ(h.Call("DELETE", "/api/v1/silences/" + sid, h.admin).status, 200);
  EXPECT_EQ(h.Call("DELETE", "/api/v1/silences/" + sid, h.admin).status, 404);
  EXPECT_EQ(h.Call("GET", "/api/v1/report", h.alice, nullptr, {{"format", "pdf"}}).status, 400);
  EXPECT_EQ(h.Call("GET", "/api/v1/ledger", h.alice, nullptr, {{"team", "other"}}).status, 403);
  // Paths the engine does not serve still answer 404 from the API.
  EXPECT_EQ(h.Call("GET", "/api/v1/nonsense", h.admin).status, 404);
  // CPU-only work is free: accepted whatever the balance.
  EXPECT_EQ(h.Call("POST", "/api/v1/jobs", h.alice, {{"command", {"true"}}}).status, 201);
}

}  // namespace
}  // namespace stoker::efficiency

namespace stoker::efficiency {
namespace {

// One API document: the efficiency routes appear in /api/v1/openapi.json beside the server's.
TEST(EfficiencyServerE2ETest, OpenApiDocumentListsTheEfficiencyRoutes) {
  Harness h;
  server::ApiRequest r;
  r.method = "GET";
  r.path = "/api/v1/openapi.json";
  const server::ApiResponse res = h.api->Handle(r);
  ASSERT_EQ(res.status, 200);
  const json doc = json::parse(res.body, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << res.body.substr(0, 200);
  const json& paths = doc["paths"];
  EXPECT_TRUE(paths.contains("/jobs"));  // the server's own routes are still there
  for (const char* p : {"/zones", "/alerts", "/silences", "/silences/{id}", "/reclaim", "/ledger",
                        "/budgets", "/report"}) {
    EXPECT_TRUE(paths.contains(p)) << p;
  }
  EXPECT_TRUE(paths["/silences"].contains("post"));
  EXPECT_TRUE(paths["/silences/{id}"].contains("delete"));
  // Every documented GET answers for an admin (not 404/405): the document matches the routes.
  for (const char* p :
       {"/zones", "/alerts", "/silences", "/reclaim", "/ledger", "/budgets", "/report"}) {
    EXPECT_EQ(h.Call("GET", std::string("/api/v1") + p, h.admin).status, 200) << p;
  }
}

}  // namespace
}  // namespace stoker::efficiency

#ifdef STOKER_HAVE_EFFICIENCY_SIM
namespace stoker::efficiency {
namespace {

// Four H100s on one node; `load` gives each GPU index its activity, tensor activity and memory.
std::string SizingScenario(const std::map<int, std::tuple<int, int, int>>& load) {
  std::string y = "name: sizing\nhostname: n1\ngpus:\n";
  for (int i = 0; i < 4; ++i) {
    auto it = load.find(i);
    const auto [act, tensor, mem] = it == load.end() ? std::tuple{0, 0, 0} : it->second;
    y += "  - model: NVIDIA H100 80GB HBM3\n    uuid: GPU-h-" + std::to_string(i) +
         "\n    pci_bus_id: \"00000000:1" + std::to_string(i) +
         ":00.0\"\n    architecture: 9\n    memory_total_mib: 81559\n    util: " +
         std::to_string(act) + "\n    sm_active: " + std::to_string(act) +
         "\n    tensor_active: " + std::to_string(tensor) +
         "\n    mem_used_mib: " + std::to_string(mem) + "\n    temperature_c: 40\n";
  }
  return y;
}

// The history a server records (jobs placed by its scheduler, samples from the fake NVML through
// the real adapter, heartbeats through the API), exported by GET /report?format=records, sized.
TEST(EfficiencyServerE2ETest, HistoryFromTheServerSizesEachClassAndTheGpusItNeeds) {
  const std::string lib = fakenvml::FakeLibraryBuildPath();
  auto control = fakenvml::FakeNvmlControl::Open(lib);
  ASSERT_TRUE(control.ok()) << control.status().ToString();
  ASSERT_TRUE((*control)->SetScenario(SizingScenario({}), "sizing.yaml").ok());
  auto source = nvml::OpenNvmlGpuSource(nvml::NvmlOptions{lib});
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  Harness h("price_per_gpu_hour: {H100: 4, \"*\": 1}\n");
  auto reg = h.Call("POST", "/api/v1/nodes/register", h.agent,
                    server::NodeInventoryToJson(node::BuildInventory("n1", source->get())));
  ASSERT_EQ(reg.status, 200) << reg.body;

  // A 2-GPU training job (busy, tensor cores, 60 GB a GPU), a notebook (10 %, 6 GB) and an
  // evaluation job (40 %, 30 GB), each of its class.
  struct Submitted {
    int gpus;
    const char* cls;
    std::tuple<int, int, int> load;
    int64_t id = 0;
  };
  std::vector<Submitted> jobs = {
      {2, "train", {95, 60, 60000}}, {1, "notebook", {10, 0, 6000}}, {1, "eval", {40, 10, 30000}}};
  for (Submitted& j : jobs) {
    auto sub = h.Call("POST", "/api/v1/jobs", h.alice,
                      {{"command", {"sleep", "100000"}},
                       {"gpus", j.gpus},
                       {"class", j.cls},
                       {"cpu_milli", 100},
                       {"memory_mib", 64}});
    ASSERT_EQ(sub.status, 201) << sub.body;
    j.id = json::parse(sub.body)["id"].get<int64_t>();
  }
  int placed = 0;
  for (int pass = 0; pass < 3 && placed < 3; ++pass) placed += h.server->RunSchedulingPass().placed;
  ASSERT_EQ(placed, 3) << h.Get("/api/v1/jobs", h.admin).dump();
  // The GPUs' behaviour follows where the scheduler put each job.
  std::map<int, std::tuple<int, int, int>> load;
  for (const Submitted& j : jobs) {
    const json job = h.Get("/api/v1/jobs/" + std::to_string(j.id), h.alice);
    for (const auto& g : job["assignment"]["gpu_indices"]) load[g.get<int>()] = j.load;
  }
  ASSERT_EQ(load.size(), 4u);
  // The fake library plays a scenario from its next initialisation: reopen the adapter.
  source->reset();
  ASSERT_TRUE((*control)->SetScenario(SizingScenario(load), "sizing.yaml").ok());
  source = nvml::OpenNvmlGpuSource(nvml::NvmlOptions{lib});
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  telemetry::Sampler sampler(source->get(), &h.clock, nullptr, telemetry::SamplerOptions{});
  ASSERT_EQ(sampler.gpu_count(), 4u);

  // An hour of heartbeats every 30 s, every job running.
  json running = json::array();
  for (const Submitted& j : jobs) running.push_back({{"id", j.id}, {"phase", "running"}});
  for (int k = 0; k < 120; ++k) {
    h.clock.Advance(30s);
    (*control)->SetTime(k * 30.0);
    for (uint32_t g = 0; g < 4; ++g) sampler.SampleOnce(g);
    telemetry::TelemetrySnapshot snap;
    sampler.Snapshot(&snap);
    json gpus = telemetry::SnapshotToJson(snap, "n1")["gpus"];
    for (auto& g : gpus) g.erase("timestamp_unix");
    auto r = h.Call("POST", "/api/v1/nodes/n1/heartbeat", h.agent,
                    {{"jobs", running}, {"samples", gpus}});
    ASSERT_EQ(r.status, 200) << r.body;
  }

  auto exported = h.Call("GET", "/api/v1/report", h.admin, nullptr, {{"format", "records"}});
  ASSERT_EQ(exported.status, 200) << exported.body;
  std::istringstream in(exported.body);
  auto history = ReadRecordsJsonl(in, "records");
  ASSERT_TRUE(history.ok()) << history.status().ToString();
  ASSERT_EQ(history->jobs.size(), 3u);
  EXPECT_GE(history->samples.size(), 4u * 119);

  HistorySizingOptions o;
  o.price_per_gpu_hour_micro = {{"H100", 4'000'000}, {"*", 1'000'000}};
  auto sized = SizeFromHistory(*history, o);
  ASSERT_TRUE(sized.ok()) << sized.status().ToString();
  EXPECT_EQ(sized->jobs_used, 3);
  std::map<std::string, ClassNeed> need;
  for (const ClassNeed& c : sized->classes) need[c.job_class] = c;
  ASSERT_EQ(need.size(), 3u);
  EXPECT_EQ(need["train"].model, "H100");
  EXPECT_EQ(need["train"].gpus_busy, 2);
  EXPECT_EQ(need["train"].need, "2 GPUs");
  EXPECT_NEAR(need["train"].tensor_active.value_or(0), 0.6, 0.01);
  EXPECT_EQ(need["notebook"].need, "1g.10gb");  // 6 GB + 10 % and 10 % of the SMs: one slice
  EXPECT_NEAR(need["notebook"].activity_p95, 0.10, 0.01);
  EXPECT_EQ(need["eval"].need, "3g.40gb");  // 40 % of the SMs needs 3 of 7 slices; 33 GB fits
  EXPECT_EQ(need["eval"].mem_peak_bytes, 30000ull << 20);

  // All three started together and ran the hour: as requested they need the 4 GPUs (on 3, one
  // job would wait an hour: mean 20 min); right-sized, the notebook and the evaluation share one.
  ASSERT_EQ(sized->models.size(), 1u);
  const ModelSize& m = sized->models[0];
  EXPECT_EQ(m.model, "H100");
  EXPECT_EQ(m.recorded_gpus, 4);
  EXPECT_EQ(m.as_requested, 4);
  EXPECT_EQ(m.right_sized, 3);
  EXPECT_EQ(m.queue_mean_s, 0);
  EXPECT_EQ(m.price_per_gpu_hour_micro, 4'000'000);
  EXPECT_NEAR(sized->span_hours, 1.0, 0.02);
  EXPECT_EQ(m.cost_right_sized_micro, std::llround(3 * sized->span_hours * 4e6));
  EXPECT_EQ(m.cost_as_requested_micro, m.cost_recorded_micro);

  // A user's export holds only their own jobs: bob has none.
  const server::Principal root{"root", server::Role::kAdmin};
  const std::string bob = *h.server->CreateToken(root, server::Role::kUser, "bob");
  auto theirs = h.Call("GET", "/api/v1/report", bob, nullptr, {{"format", "records"}});
  ASSERT_EQ(theirs.status, 200);
  EXPECT_EQ(theirs.body, "");
}

}  // namespace
}  // namespace stoker::efficiency
#endif
