// Server benchmarks: one scheduling pass over 10,000 queued jobs on 1,000 nodes (target <= 1 s),
// durable submissions through the API handler layer with concurrent callers (group commit), and
// reading one heartbeat body (8 GPUs of an agent's samples) with the server's simdjson parser
// against an nlohmann tree of the same body (what the server did before).

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include "efficiency/config.h"
#include "integration/efficiency_service.h"
#include "protocol/job_status_text.h"
#include "protocol/samples.h"
#include "server/activity.h"
#include "server/api.h"
#include "server/server.h"
#include "store/store.h"
#include "support/fake_gpu_source.h"
#include "telemetry/sampler.h"
#include "telemetry/snapshot_json.h"
#include "web/history.h"

namespace stoker::server {
namespace {
namespace fs = std::filesystem;

struct World {
  explicit World(bool full_sync) {
    dir = (fs::temp_directory_path() / ("stoker_bench_" + std::to_string(::getpid()))).string();
    fs::remove_all(dir);
    fs::create_directories(dir);
    store = store::OpenSqliteStore(dir + "/stoker.db", {.synchronous_full = full_sync}).value();
    ServerOptions o;
    o.data_dir = dir;
    server = Server::Create(store.get(), &clock, o).value();
  }
  // The observers `stoker server` runs (src/cli/server_commands.cc): the efficiency engine with
  // its default configuration and the dashboard's history; each is told of every job a pass
  // changes.
  void Observe() {
    efficiency = std::make_unique<efficiency::EfficiencyService>(
        efficiency::LoadConfigYaml("").value(), server.get());
    history = std::make_unique<web::History>(&clock);
    server->AddObserver(efficiency.get());
    server->AddObserver(history.get());
  }
  ~World() {
    server.reset();
    efficiency.reset();
    history.reset();
    store.reset();
    fs::remove_all(dir);
  }
  std::string dir;
  ManualClock clock;
  std::unique_ptr<store::Store> store;
  std::unique_ptr<Server> server;
  std::unique_ptr<efficiency::EfficiencyService> efficiency;
  std::unique_ptr<web::History> history;
};

// What comes before the timed pass of SchedulingPassOverQueue.
struct PassSetup {
  // SQLite WAL with synchronous=FULL (NORMAL otherwise).
  bool full_sync = false;
  // A first pass (not timed) has placed a queue like it before the timed pass, as in a running
  // server, where every pass but the first follows another on the same nodes.
  bool warm = false;
  // As `stoker server` runs it, with its observers (World::Observe), whose share of the pass is
  // its notify phase, and every node having reported once before the jobs come.
  bool observed = false;
  // The pass a running server makes after an earlier one, with the queue as deep again: a first
  // pass (not timed) places the queue, every node reports the jobs it was given as started and
  // then as exited (0), and as many jobs as ended are submitted again before the timed pass.
  bool later = false;
};

// `nodes` nodes x 8 GPUs; `jobs` queued jobs of mixed shapes (whole GPUs, shares, CPU-only):
// the pass places what fits (about 80 %) and walks the rest. Timed: Server::RunSchedulingPass,
// from reading the view to the durable commit of every placement and event.
void SchedulingPassOverQueue(benchmark::State& state, int nodes, int jobs, PassSetup setup) {
  const auto [full_sync, warm, observed, later] = setup;
  for (auto _ : state) {
    state.PauseTiming();
    auto w = std::make_unique<World>(full_sync);
    if (observed) w->Observe();
    Principal admin{"admin", Role::kAdmin};
    for (int n = 0; n < nodes; ++n) {
      NodeInventory inv;
      inv.name = "node" + std::to_string(n);
      inv.cpu_milli = 96000;
      inv.memory_mib = 1 << 20;
      for (uint32_t g = 0; g < 8; ++g) {
        inv.gpus.push_back(GpuInfo{g,
                                   "GPU-" + std::to_string(n) + "-" + std::to_string(g),
                                   n % 2 ? "NVIDIA H100 80GB HBM3" : "NVIDIA A100-SXM4-80GB",
                                   81920,
                                   false,
                                   {}});
      }
      (void)w->server->RegisterNode(admin, inv);
    }
    // `count` jobs of the mix, from 8 threads.
    auto submit_queue = [&](int count) {
      std::vector<std::thread> submitters;
      for (int t = 0; t < 8; ++t) {
        submitters.emplace_back([&, t] {
          for (int i = t; i < count; i += 8) {
            JobSpec s;
            s.command = {"train"};
            s.cpu_milli = 4000;
            s.memory_mib = 16384;
            if (i % 10 < 6)
              s.gpus = 1 + i % 2;
            else if (i % 10 < 9)
              s.gpu_milli = 250 + 50 * (i % 5);
            (void)w->server->Submit(admin, s);
          }
        });
      }
      for (auto& th : submitters) th.join();
    };
    // Every node reports its GPUs' utilization once (as the agents do), so the passes read
    // measured use as at the load test, and the observers know every GPU.
    auto report_once = [&] {
      for (int n = 0; n < nodes; ++n) {
        const std::string name = "node" + std::to_string(n);
        Heartbeat hb;
        protocol::json shown = protocol::json::array();
        for (uint32_t g = 0; g < 8; ++g) {
          GpuSample s;
          s.id.uuid = "GPU-" + std::to_string(n) + "-" + std::to_string(g);
          s.id.index = g;
          s.timestamp = w->clock.WallNow();
          s.util_gpu_pct = Field<uint32_t>::Of((n * 8 + g) % 101);
          hb.gpus.push_back(s);
          shown.push_back(protocol::json{{"uuid", s.id.uuid}});
        }
        hb.samples_json = shown.dump();
        if (!w->server->Heartbeat(admin, name, hb).ok()) state.SkipWithError("heartbeat refused");
      }
    };
    // A server with observers has its agents reporting before jobs come.
    if (observed) report_once();
    submit_queue(jobs);
    if (warm) {
      report_once();
      (void)w->server->RunSchedulingPass();
      submit_queue(jobs);
    }
    if (later) {
      (void)w->server->RunSchedulingPass();
      auto placed = w->server->ListAllJobs(admin, JobFilter{.states = {JobState::kAssigned}});
      if (!placed.ok()) {
        state.SkipWithError("cannot list the placed jobs");
        break;
      }
      std::map<std::string, std::vector<const Job*>> on_node;
      for (const Job& j : placed.value()) {
        if (j.assignment) on_node[j.assignment->node].push_back(&j);
      }
      // Each node reports its runs started, then exited; the heartbeats' samples as before.
      bool refused = false;
      for (const protocol::RunPhase phase :
           {protocol::RunPhase::kRunning, protocol::RunPhase::kExited}) {
        for (const auto& [node, held] : on_node) {
          Heartbeat hb;
          for (const Job* j : held) {
            RunReport r;
            r.id = j->id;
            r.attempt = j->attempt();
            r.phase = phase;
            if (phase == protocol::RunPhase::kExited) {
              r.exit_code = 0;
              r.logs_complete = true;
            }
            hb.jobs.push_back(std::move(r));
          }
          if (!w->server->Heartbeat(admin, node, std::move(hb)).ok()) refused = true;
        }
      }
      if (refused) {
        state.SkipWithError("a node's report of its jobs was refused");
        break;
      }
      const int ended = static_cast<int>(placed.value().size());
      submit_queue(ended);
      state.counters["ended_before"] = ended;
    }
    // A client reading one job every millisecond through the pass (GET /jobs/{id} takes the
    // server's lock): its longest wait is how long the pass held the lock at most, as a
    // heartbeat or a submission would see it.
    std::atomic<bool> passing = true;
    double read_max_ms = 0;
    std::thread reader([&] {
      const int64_t id = 1;
      while (passing.load()) {
        const auto asked = std::chrono::steady_clock::now();
        (void)w->server->GetJob(admin, id);
        read_max_ms = std::max(read_max_ms, std::chrono::duration<double, std::milli>(
                                                std::chrono::steady_clock::now() - asked)
                                                .count());
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
    state.ResumeTiming();
    PassStats st = w->server->RunSchedulingPass();
    state.PauseTiming();
    passing = false;
    reader.join();
    state.counters["read_max_ms"] = read_max_ms;
    state.counters["queued"] = st.queued;
    state.counters["placed"] = st.placed;
    state.counters["blocked"] = st.blocked;
    state.counters["pass_s"] = st.seconds;
    // Where the pass's wall time went (the server's own split, as /metrics shows it).
    const PassPhaseSeconds ph = w->server->Metrics().last_pass_phases;
    state.counters["view_s"] = ph.view;
    state.counters["compute_s"] = ph.compute;
    state.counters["apply_s"] = ph.apply_lock_wait + ph.apply;
    state.counters["persist_s"] = ph.persist;
    state.counters["notify_s"] = ph.notify;
    w.reset();
    state.ResumeTiming();
  }
}

// 1,000 nodes x 8 GPUs; 10,000 queued jobs (issue 4's target: <= 1 s).
void BM_SchedulingPass10kJobs1kNodes(benchmark::State& state) {
  SchedulingPassOverQueue(state, 1000, 10000, {});
}
BENCHMARK(BM_SchedulingPass10kJobs1kNodes)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();

// 10,000 nodes x 8 GPUs (80,000 GPUs); 100,000 queued jobs, synchronous=FULL (issue 13's
// target: <= 1 s, durable writes included). Setting up takes minutes (100,000 durable
// submissions), so one iteration.
void BM_SchedulingPass100kJobs10kNodes(benchmark::State& state) {
  SchedulingPassOverQueue(state, 10000, 100000, {.full_sync = true});
}
BENCHMARK(BM_SchedulingPass100kJobs10kNodes)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

// The same pass as `stoker server` runs it: every node has reported its GPUs once, and the
// efficiency engine and the dashboard's history are told of every job the pass changed (the
// notify phase).
void BM_SchedulingPass100kJobs10kNodesObserved(benchmark::State& state) {
  SchedulingPassOverQueue(state, 10000, 100000, {.full_sync = true, .observed = true});
}
BENCHMARK(BM_SchedulingPass100kJobs10kNodesObserved)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

// The same, as a running server's later pass: an earlier pass placed a queue like it, those jobs
// started and ended, and as many were submitted again (SchedulingPassOverQueue's `later`).
void BM_SchedulingPass100kJobs10kNodesObservedLater(benchmark::State& state) {
  SchedulingPassOverQueue(state, 10000, 100000,
                          {.full_sync = true, .observed = true, .later = true});
}
BENCHMARK(BM_SchedulingPass100kJobs10kNodesObservedLater)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

// 10,000 nodes x 8 GPUs with 10 queued jobs: what a pass costs the server at 10,000 agents
// whenever anything is queued (each submission kicks one; the 10,000-agent load test submits
// 10 a second). The first pass of a server (nothing kept from a pass before), and a pass that
// follows one (Warm: what every later pass costs).
void BM_SchedulingPass10Jobs10kNodes(benchmark::State& state) {
  SchedulingPassOverQueue(state, 10000, 10, {});
}
BENCHMARK(BM_SchedulingPass10Jobs10kNodes)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime()
    ->MeasureProcessCPUTime();
void BM_SchedulingPass10Jobs10kNodesWarm(benchmark::State& state) {
  SchedulingPassOverQueue(state, 10000, 10, {.warm = true});
}
BENCHMARK(BM_SchedulingPass10Jobs10kNodesWarm)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

// The durable write of a large pass alone (what BM_SchedulingPass100kJobs10kNodes ends with):
// `range(0)` jobs stored as submitted, then one batch assigning them all (each job's state,
// node and status document with its assignment, plus its "assigned" event), as the server
// writes it. synchronous=FULL. Timed: until the batch's COMMIT is acknowledged (the log's copy
// into the database comes after it).
void BM_StoreAssignBatch(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    World w(true);
    store::WriteBatch submitted;
    store::WriteBatch assigned;
    for (int i = 1; i <= n; ++i) {
      Job j;
      j.id = i;
      j.user = "admin";
      j.spec.command = {"train"};
      j.spec.cpu_milli = 4000;
      j.spec.memory_mib = 16384;
      j.spec.gpus = 1 + i % 2;
      j.submit_ms = 1'700'000'000'000 + i;
      submitted.PutJob(store::JobRow{j.id, j.user, "queued", "", JobToJson(j).dump()});
      j.state = JobState::kAssigned;
      Assignment a;
      a.node = "node" + std::to_string(i % 10000);
      a.gpu_indices = {static_cast<uint32_t>(i % 8)};
      a.gpu_milli = 1000;
      a.cuda_visible_devices = std::to_string(i % 8);
      a.shares = {{static_cast<uint8_t>(i % 8), int16_t{1000}}};
      j.assignment = a;
      assigned.UpdateJob(
          store::JobStatusRow{j.id, "assigned", a.node, protocol::JobStatusToJson(j).dump()});
      assigned.AddEvent(store::EventRow{j.id, j.submit_ms + 1, "assigned",
                                        "to " + a.node + " devices " + a.cuda_visible_devices});
    }
    if (!w.store->Apply(std::move(submitted)).ok()) state.SkipWithError("setup write failed");
    // The writer copies a long log into the database after acknowledging its commit, before it
    // takes the next batch: a small batch here waits for the setup's copy, so the time below
    // is the assignment batch's own (up to its durable COMMIT).
    store::WriteBatch settle;
    settle.PutSetting(store::SettingRow{"bench", "settled"});
    if (!w.store->Apply(std::move(settle)).ok()) state.SkipWithError("setup write failed");
    state.ResumeTiming();
    if (!w.store->Apply(std::move(assigned)).ok()) state.SkipWithError("write failed");
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_StoreAssignBatch)
    ->Arg(80000)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

// The status documents of a large pass's placements (what the store's writer builds for
// BM_SchedulingPass100kJobs10kNodes): 80,000 placed jobs of its mix (whole GPUs, and shares
// with their MPS environment), each written as JSON text. range(0) 0: the JSON library's tree
// and dump() (protocol::JobStatusToJson); 1: protocol::JobStatusText (the same bytes).
void BM_StatusDocuments(benchmark::State& state) {
  std::vector<Job> jobs(80000);
  for (int i = 0; i < 80000; ++i) {
    Job& j = jobs[static_cast<size_t>(i)];
    j.id = i + 1;
    j.user = "admin";
    j.state = JobState::kAssigned;
    j.submit_ms = 1'700'000'000'000 + i;
    Assignment a;
    a.node = "node" + std::to_string(i % 10000);
    a.gpu_indices = {static_cast<uint32_t>(i % 8)};
    a.gpu_milli = i % 10 < 6 ? 1000 : 250 + 50 * (i % 5);
    a.cuda_visible_devices = std::to_string(i % 8);
    if (a.gpu_milli < 1000) {
      a.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string((a.gpu_milli + 9) / 10);
    }
    a.shares = {{static_cast<uint8_t>(i % 8), static_cast<int16_t>(a.gpu_milli)}};
    j.assignment = a;
  }
  const bool text = state.range(0) == 1;
  size_t bytes = 0;
  for (auto _ : state) {
    bytes = 0;
    for (const Job& j : jobs) {
      const std::string doc =
          text ? protocol::JobStatusText(j) : protocol::JobStatusToJson(j).dump();
      bytes += doc.size();
      benchmark::DoNotOptimize(doc.data());
    }
  }
  state.counters["bytes"] = static_cast<double>(bytes);
  state.SetItemsProcessed(state.iterations() * 80000);
}
BENCHMARK(BM_StatusDocuments)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// Durable submissions (synchronous=FULL) from `threads` concurrent callers through Api::Handle:
// validation, auth, the store's group commit. items/s = acknowledged submissions per second.
void BM_DurableSubmissions(benchmark::State& state) {
  static std::unique_ptr<World> w;
  static std::string token;
  if (state.thread_index() == 0) {
    w = std::make_unique<World>(true);
    token = w->server->CreateToken(Principal{"a", Role::kAdmin}, Role::kUser, "alice").value();
  }
  for (auto _ : state) {
    Api a(w->server.get());
    ApiRequest r{
        "POST", "/api/v1/jobs", {}, "Bearer " + token, R"({"command":["sleep","1"],"gpus":1})"};
    ApiResponse resp = a.Handle(r);
    if (resp.status != 201) state.SkipWithError("submission failed");
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    state.counters["jobs_in_store"] = static_cast<double>(w->store->LoadJobs()->size());
    w.reset();
  }
}
BENCHMARK(BM_DurableSubmissions)->Threads(1)->Threads(16)->Threads(64)->UseRealTime()->MinTime(2.0);

// An agent's snapshot of 8 H100s with `procs` processes each, as its sampler takes it.
telemetry::TelemetrySnapshot BenchSnapshot(size_t procs) {
  std::vector<GpuSample> gpus;
  for (uint32_t i = 0; i < 8; ++i) gpus.push_back(stoker::testing::MakeH100Sample(i, procs));
  stoker::testing::FakeGpuSource source(gpus);
  ManualClock clock;
  telemetry::Sampler sampler(&source, &clock, nullptr, telemetry::SamplerOptions{});
  for (uint32_t i = 0; i < 8; ++i) sampler.SampleOnce(i);
  telemetry::TelemetrySnapshot snap;
  sampler.Snapshot(&snap);
  return snap;
}

// An agent's heartbeat body in the full form: those samples as telemetry writes them.
std::string HeartbeatBenchBody(size_t procs) {
  const telemetry::TelemetrySnapshot snap = BenchSnapshot(procs);
  Heartbeat hb;
  hb.samples_json = telemetry::SnapshotToJson(snap, "bench")["gpus"].dump();
  return HeartbeatBody(hb);
}

// The compact form of the same samples: `ticks` seconds of the 8 GPUs (what a node sends
// every report interval), through the agent's codec.
std::string CompactBenchBody(size_t procs, int64_t ticks) {
  const telemetry::TelemetrySnapshot snap = BenchSnapshot(procs);
  std::vector<protocol::SampleTick> all;
  const WallTime t0 = WallTime(std::chrono::seconds(1'767'225'600));
  for (int64_t t = 0; t < ticks; ++t) {
    all.push_back({t0 + std::chrono::seconds(t), telemetry::ReportSamples(snap)});
  }
  Heartbeat hb;
  hb.ticks_json = protocol::CompactTicksJson(all, /*identity=*/false);
  return HeartbeatBody(hb);
}

// Reading a compact report of range(1) seconds (range(0) processes per GPU): compare its time
// per second of samples (us_per_second) with BM_HeartbeatParse's time for one second.
void BM_HeartbeatParseCompact(benchmark::State& state) {
  const int64_t ticks = state.range(1);
  const std::string body = CompactBenchBody(static_cast<size_t>(state.range(0)), ticks);
  for (auto _ : state) {
    auto hb = ParseHeartbeat(body);
    if (!hb.ok() || hb->ticks.size() != static_cast<size_t>(ticks)) {
      state.SkipWithError("compact body did not parse");
      break;
    }
    benchmark::DoNotOptimize(hb);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
  state.SetItemsProcessed(state.iterations() * ticks);  // seconds of 8 GPUs
  state.counters["body_bytes"] = static_cast<double>(body.size());
  state.counters["bytes_per_second_of_samples"] = static_cast<double>(body.size()) / ticks;
}
BENCHMARK(BM_HeartbeatParseCompact)->Args({1, 1})->Args({1, 10})->Args({25, 1})->Args({25, 10});

// One node's compact report of range(0) seconds of 8 GPUs (1 process each) through the server,
// observers aside (they have their own benchmarks): the body read, each sample checked against
// the node's inventory, its latest samples kept, the activity window fed, the reply built.
void BM_HeartbeatReport(benchmark::State& state) {
  const int64_t ticks = state.range(0);
  const std::string body = CompactBenchBody(1, ticks);
  World w(false);
  const Principal admin{"admin", Role::kAdmin};
  NodeInventory inv;
  inv.name = "bench-node";
  inv.cpu_milli = 96000;
  inv.memory_mib = 1 << 20;
  for (uint32_t g = 0; g < 8; ++g) {
    const GpuSample s = stoker::testing::MakeH100Sample(g, 1);
    inv.gpus.push_back(GpuInfo{g, s.id.uuid, s.id.name, 81920, false, {}});
  }
  if (!w.server->RegisterNode(admin, inv).ok()) {
    state.SkipWithError("register failed");
    return;
  }
  for (auto _ : state) {
    auto hb = ParseHeartbeat(body);
    auto reply = w.server->Heartbeat(admin, inv.name, std::move(*hb));
    if (!reply.ok()) {
      state.SkipWithError("heartbeat refused");
      break;
    }
    benchmark::DoNotOptimize(reply->report_interval_ms);
  }
  const ServerMetrics m = w.server->Metrics();
  int64_t refused = 0;
  for (const auto& [why, n] : m.samples_refused) refused += n;
  state.counters["refused"] = static_cast<double>(refused);
}
BENCHMARK(BM_HeartbeatReport)->Arg(1)->Arg(10);

void BM_HeartbeatParse(benchmark::State& state) {
  const std::string body = HeartbeatBenchBody(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    auto hb = ParseHeartbeat(body);
    benchmark::DoNotOptimize(hb);
  }
  state.SetItemsProcessed(state.iterations());  // seconds of 8 GPUs
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
  state.counters["body_bytes"] = static_cast<double>(body.size());
}
BENCHMARK(BM_HeartbeatParse)->Arg(1)->Arg(25);  // processes per GPU

// The previous path: the body as an nlohmann tree (built and freed per heartbeat).
void BM_HeartbeatParseNlohmannTree(benchmark::State& state) {
  const std::string body = HeartbeatBenchBody(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    json tree = json::parse(body);
    benchmark::DoNotOptimize(tree);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
  state.counters["body_bytes"] = static_cast<double>(body.size());
}
BENCHMARK(BM_HeartbeatParseNlohmannTree)->Arg(1)->Arg(25);

// What the server does before each pass: every GPU's measured activity (its window's mean)
// filled into the node view, at 10,000 nodes x 8 GPUs that have each reported. Arg 0: the
// window has not moved since the last fill and no GPU reported (every mean reused); 1: the
// window moved a bucket (every mean computed again from its buckets).
void BM_ActivityFill10kNodes(benchmark::State& state) {
  const bool moved = state.range(0) != 0;
  ActivityTracker tracker(std::chrono::minutes(5));
  const WallTime start{std::chrono::hours(24 * 365 * 50)};
  std::vector<pass::NodeView> view(10000);
  std::vector<GpuSample> samples(8);
  for (size_t i = 0; i < samples.size(); ++i) {
    samples[i].id.index = static_cast<uint32_t>(i);
    samples[i].util_gpu_pct = Field<uint32_t>::Of(static_cast<uint32_t>(10 * i));
  }
  for (size_t n = 0; n < view.size(); ++n) {
    view[n].name = "node-" + std::to_string(n);
    for (uint32_t i = 0; i < 8; ++i) view[n].gpus.push_back({.index = i, .model = "H100"});
    for (int s = 0; s < 30; ++s) {
      tracker.Record(view[n].name, samples, start + std::chrono::seconds(10 * s));
    }
  }
  WallTime now = start + std::chrono::seconds(300);
  tracker.Fill(&view, now);
  for (auto _ : state) {
    if (moved) now += std::chrono::seconds(10);  // a bucket is 10 s of a 5-minute window
    tracker.Fill(&view, now);
    benchmark::DoNotOptimize(view.data());
  }
  state.SetItemsProcessed(state.iterations() * 80000);
}
BENCHMARK(BM_ActivityFill10kNodes)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace stoker::server

BENCHMARK_MAIN();
