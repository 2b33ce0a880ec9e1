// Slurm as the server's engine, one cycle at a time: a fake Slurm (answers and recorded
// actions), agents as an injected sample source, and the real efficiency engine (zones,
// reports, market ledger) behind it. Time is a ManualClock.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/clock.h"
#include "efficiency/config.h"
#include "efficiency/market.h"
#include "fake_client.h"
#include "integration/slurm_engine.h"
#include "slurm/engine_config.h"
#include "support/fake_gpu_source.h"

namespace stoker::slurm {
namespace {

using namespace std::chrono_literals;

// Node samples by name; a node absent from the map has no agent.
class FakeAgents final : public SampleSource {
 public:
  Result<std::vector<GpuSample>> Fetch(const std::string& node) override {
    auto it = answers.find(node);
    if (it == answers.end()) return Unavailable("GET http://" + node + ":9400: Connection refused");
    return it->second;
  }
  std::map<std::string, Result<std::vector<GpuSample>>> answers;
};

SlurmNode Node(std::string name) {
  SlurmNode n;
  n.name = std::move(name);
  n.state = "mixed";
  n.cpus = 16;
  n.real_memory_mib = 64000;
  n.gpus = 2;
  return n;
}

SlurmJob Running(uint32_t id, const std::string& user, const std::string& node,
                 std::vector<int32_t> gpus, int64_t start) {
  SlurmJob j;
  j.id = id;
  j.user = user;
  j.name = "train";
  j.partition = "gpu";
  j.state = "RUNNING";
  j.cpus = 1;
  j.nodes = {node};
  j.gpus_per_node = static_cast<int32_t>(gpus.size());
  j.gpu_indices = {std::move(gpus)};
  j.shard_counts = {0};
  j.shard_gpus = {{}};
  j.submit_time = start - 5;
  j.start_time = start;
  return j;
}

// GPU `index` at `util` %, with one process of Slurm job `job` (none when empty).
GpuSample Sample(uint32_t index, uint32_t util, const std::string& job, WallTime t) {
  GpuSample s = stoker::testing::MakeH100Sample(index, job.empty() ? 0 : 1);
  s.timestamp = t;
  s.util_gpu_pct = Field<uint32_t>::Of(util);
  s.gpm.sm_active = Field<double>::Of(util / 100.0);
  if (!job.empty()) {
    s.processes[0].job.kind = JobRef::Kind::kSlurm;
    s.processes[0].job.id = job;
    s.processes[0].job.user = "alice";
  }
  return s;
}

struct Harness {
  explicit Harness(const std::string& yaml) {
    dir = std::filesystem::temp_directory_path() /
          ("stoker_slurm_engine_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir / "spool");
    auto eff_cfg = efficiency::LoadConfigYaml(R"(
zones: {window: 10m, min_coverage: 1m}
market:
  guaranteed_price: {"*": 6}
  budgets: {ml: 100}
  teams: {alice: ml}
)");
    EXPECT_TRUE(eff_cfg.ok()) << eff_cfg.status().ToString();
    eff = std::make_unique<efficiency::EfficiencyService>(*eff_cfg, nullptr, &ledger);
    EXPECT_TRUE(eff->Init(clock.WallNow()).ok());
    auto cfg = LoadSlurmEngineConfigYaml(yaml + "\njobcomp_spool: " + (dir / "spool").string());
    EXPECT_TRUE(cfg.ok()) << cfg.status().ToString();
    engine = SlurmEngine::Create(*cfg, &slurm, &agents, eff.get(), &clock).value();
  }
  ~Harness() { std::filesystem::remove_all(dir); }

  std::string Metrics() { return engine->Metrics({"admin", server::Role::kAdmin}); }
  efficiency::Report Report() {
    return eff->BuildServerReport(efficiency::ReportOptions{}).value();
  }

  std::filesystem::path dir;
  ManualClock clock;
  testing::FakeSlurmClient slurm;
  FakeAgents agents;
  efficiency::MemoryLedgerStore ledger;
  std::unique_ptr<efficiency::EfficiencyService> eff;
  std::unique_ptr<SlurmEngine> engine;
};

int64_t Unix(WallTime t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

bool Has(const std::string& text, const std::string& line) {
  return text.find(line) != std::string::npos;
}

TEST(SlurmEngine, JobsAreMeasuredZonedReportedAndChargedFromTheSpool) {
  Harness h("reclaim: {idle: {enabled: false}, memory_held: {enabled: false}}");
  const int64_t t0 = Unix(h.clock.WallNow());
  h.slurm.nodes = std::vector<SlurmNode>{Node("a"), Node("b")};
  h.slurm.jobs = std::vector<SlurmJob>{Running(5, "alice", "a", {0, 1}, t0)};
  for (int step = 0; step <= 20; ++step) {
    const WallTime t = h.clock.WallNow();
    // GPU 0 busy with job 5's process; GPU 1 held by job 5 with no process on it (idle).
    h.agents.answers.insert_or_assign(
        "a", std::vector<GpuSample>{Sample(0, 80, "5", t), Sample(1, 0, "", t)});
    h.engine->CycleOnce();
    h.clock.Advance(10s);
  }
  // The efficiency engine sees Slurm job 5 on both GPUs: a zone, and a report row.
  bool zoned = false;
  for (const auto& z : h.eff->JobZones()) zoned |= z.key == "slurm:5";
  EXPECT_TRUE(zoned);
  efficiency::Report r = h.Report();
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(r.jobs[0].id, "slurm:5");
  EXPECT_EQ(r.jobs[0].user, "alice");
  EXPECT_EQ(r.jobs[0].gpus, 2);
  // Node b has no agent: said once in the log, counted in the metrics.
  const std::string m = h.Metrics();
  EXPECT_TRUE(Has(m, "stoker_slurm_nodes_without_agent 1\n")) << m;
  EXPECT_TRUE(Has(m, "stoker_slurm_agent_errors_total{kind=\"unreachable\"} 21\n")) << m;
  EXPECT_TRUE(Has(m, "stoker_slurm_jobs_running 1\n")) << m;
  EXPECT_TRUE(Has(m, "stoker_slurm_cycles_total 21\n")) << m;

  // The job ends: slurmctld's jobcomp hook spools it; the next cycle ends the record and
  // charges its 2 GPUs to alice's team, without asking Slurm.
  const int64_t end = Unix(h.clock.WallNow());
  h.slurm.jobs = std::vector<SlurmJob>{};
  // Slurm unreachable meanwhile: the spool is read all the same.
  h.slurm.nodes = Unavailable("slurm_load_node: Unable to contact slurm controller");
  {
    std::ofstream f(h.dir / "spool" / "5.env", std::ios::binary);
    using namespace std::string_literals;
    f << "JOBID=5\0UID=1000\0USERNAME=alice\0PARTITION=gpu\0JOBSTATE=COMPLETED\0NODES=a\0"s
      << "START=" << t0 << "\0END="s << end << "\0"s;
  }
  h.engine->CycleOnce();
  r = h.Report();
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_GT(r.jobs[0].end, r.jobs[0].start);
  int64_t charged = 0;
  for (const auto& e : h.eff->Ledger()) {
    if (e.job == "slurm:5") charged += e.milli_gpu_seconds;
  }
  EXPECT_EQ(charged, 2000 * (end - t0)) << "2 GPUs for the whole run";
  const std::string m2 = h.Metrics();
  EXPECT_TRUE(Has(m2, "stoker_slurm_jobcomp_records_total 1\n")) << m2;
  EXPECT_TRUE(Has(m2, "stoker_slurm_jobs_ended_total 1\n")) << m2;
  EXPECT_TRUE(Has(m2, "stoker_slurm_read_errors_total{kind=\"unreachable\"} 1\n")) << m2;
  EXPECT_FALSE(std::filesystem::exists(h.dir / "spool" / "5.env"));
}

// Reclaim sees a GPU the job holds without a process on it (the agent attributes nothing
// there), and never acts on evidence Slurm cannot confirm: while Slurm is unreachable nothing is
// done; a process attributed to a job Slurm does not run on that node counts for nobody.
TEST(SlurmEngine, ReclaimUsesTheAllocationAndNeverActsBlind) {
  Harness h(R"(
reclaim:
  idle: {warn_after: 2m, act_after: 4m, action: requeue}
  memory_held: {enabled: false}
)");
  const int64_t t0 = Unix(h.clock.WallNow());
  h.slurm.nodes = std::vector<SlurmNode>{Node("a")};
  h.slurm.jobs =
      std::vector<SlurmJob>{Running(7, "alice", "a", {0}, t0), Running(8, "bob", "a", {1}, t0)};
  auto cycle = [&](int steps) {
    for (int i = 0; i < steps; ++i) {
      const WallTime t = h.clock.WallNow();
      // Job 7 holds GPU 0 with nothing on it; GPU 1 runs a process that claims to be job 99.
      h.agents.answers.insert_or_assign(
          "a", std::vector<GpuSample>{Sample(0, 0, "", t), Sample(1, 90, "99", t)});
      h.engine->CycleOnce();
      h.clock.Advance(10s);
    }
  };
  cycle(15);  // 2.5 minutes: warned
  auto has_action = [&](const std::string& a) {
    return std::find(h.slurm.actions.begin(), h.slurm.actions.end(), a) != h.slurm.actions.end();
  };
  bool warned = false;
  for (const auto& a : h.slurm.actions) warned |= a.starts_with("comment 7 stoker idle-reclaim");
  EXPECT_TRUE(warned);
  EXPECT_FALSE(has_action("requeue 7"));
  // Slurm goes away past act_after: no action on what cannot be checked.
  h.slurm.jobs = Unavailable("slurm_load_jobs error: Unable to contact slurm controller");
  cycle(12);
  EXPECT_FALSE(has_action("requeue 7"));
  // Back: the job is requeued on the next evaluation; job 8 (busy through a process the agent
  // misattributed) is not a job 99 sample, and 8 itself is never reclaimed while its GPU works.
  h.slurm.jobs =
      std::vector<SlurmJob>{Running(7, "alice", "a", {0}, t0), Running(8, "bob", "a", {1}, t0)};
  cycle(2);
  EXPECT_TRUE(has_action("requeue 7"));
  EXPECT_FALSE(has_action("requeue 8"));
  const std::string m = h.Metrics();
  EXPECT_TRUE(Has(m, "stoker_slurm_reclaim_total{action=\"requeue\"} 1\n")) << m;
  EXPECT_TRUE(Has(m, "stoker_slurm_attributions_dropped_total")) << m;
  EXPECT_FALSE(Has(m, "stoker_slurm_attributions_dropped_total 0\n")) << m;
}

TEST(SlurmEngine, MalformedAgentAnswersAreCounted) {
  Harness h("");
  h.slurm.nodes = std::vector<SlurmNode>{Node("a")};
  h.agents.answers.insert_or_assign("a", InvalidArgument("snapshot: no \"gpus\" array"));
  h.engine->CycleOnce();
  EXPECT_TRUE(Has(h.Metrics(), "stoker_slurm_agent_errors_total{kind=\"malformed\"} 1\n"));
}

TEST(SlurmEngineConfig, ReadsEveryFieldAndNamesBadOnes) {
  auto c = LoadSlurmEngineConfigYaml(R"(
slurm_conf: /etc/slurm/slurm.conf
cycle: 5s
placement: fgd
queue: priority
backfill: false
keep_shards_apart: false
agents: {url: "http://{node}.cluster:9400", nodes: {g1: "http://10.0.0.1:9500"}, timeout: 1s}
reclaim:
  idle: {warn_after: 30m, act_after: 1h, action: requeue}
  memory_held: {warn_after: 10m, act_after: 20m, action: cancel, min_memory: 2G}
  exempt_partitions: [debug]
  hook: [/bin/true]
jobstats: {publish_every: 30s, price_per_gpu_hour: 2.5}
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->client.slurm_conf, "/etc/slurm/slurm.conf");
  EXPECT_EQ(c->cycle, 5s);
  EXPECT_EQ(c->measure_every, 10s);
  EXPECT_EQ(c->controller.policy, "fgd");
  EXPECT_EQ(c->controller.queue, "priority");
  EXPECT_FALSE(c->controller.backfill);
  EXPECT_FALSE(c->controller.keep_shards_apart);
  EXPECT_EQ(c->agents.UrlFor("g2"), "http://g2.cluster:9400");
  EXPECT_EQ(c->agents.UrlFor("g1"), "http://10.0.0.1:9500");
  EXPECT_TRUE(c->reclaim_enabled);
  EXPECT_EQ(c->reclaim.idle.act_after, 1h);
  EXPECT_EQ(c->reclaim.memory_held.action, efficiency::IdleReclaimPolicy::Action::kCancel);
  EXPECT_EQ(c->reclaim.held_memory_min_bytes, uint64_t{2} << 30);
  EXPECT_EQ(c->jobstats.publish_every_s, 30);
  EXPECT_FALSE(LoadSlurmEngineConfigYaml("").value().reclaim_enabled)
      << "reclaiming Slurm jobs is opted into";
  for (const auto& [yaml, what] : std::vector<std::pair<std::string, std::string>>{
           {"cycle: 0s", "cycle: must be between"},
           {"cycle: 20s", "measure_every: must not be shorter than cycle"},
           {"placement: nope", "placement:"},
           {"queue: lifo", "queue:"},
           {"agents: {url: ftp://x}", "agents.url:"},
           {"reclaim: {idle: {warn_after: 2h, act_after: 1h}}", "reclaim.idle.act_after"},
           {"reclaim: {memory_held: {min_memory: lots}}", "reclaim.memory_held.min_memory"},
           {"reclaim: {idle: {sometimes: 1}}", "reclaim.idle.sometimes: unknown field"},
           {"stearing: true", "x.yaml:1:1: stearing: unknown field"},
           {"submit_plan: /run/plan\nsteer_marker: \"\"", "steer_marker:"},
           {"submit_plan: /run/plan\nsteer_marker: \"a\\nnodes x\"", "steer_marker:"},
           {"submit_plan: /run/plan\nsteer_marker: \"a b\"", "steer_marker:"},
           {"cycle: [1", "x.yaml:"}}) {
    auto bad = LoadSlurmEngineConfigYaml(yaml, "x.yaml");
    ASSERT_FALSE(bad.ok()) << yaml;
    EXPECT_NE(bad.status().message().find(what), std::string::npos)
        << yaml << " -> " << bad.status().message();
  }
}

TEST(SlurmEngineConfig, ErrorsNameFileLineColumnAndPathInYamlAndJson) {
  auto bad = [](const std::string& text, const std::string& origin) {
    auto c = LoadSlurmEngineConfigYaml(text, origin);
    return c.ok() ? std::string("OK") : c.status().message();
  };
  EXPECT_EQ(bad(R"({"agents": {"url": "ftp://x"}})", "x.json"),
            "x.json:1:20: agents.url: 'ftp://x' is not an http(s):// URL");
  EXPECT_EQ(bad("reclaim:\n  memory_held:\n    min_memory: 2X\n", "x.yaml").substr(0, 49),
            "x.yaml:3:17: reclaim.memory_held.min_memory: size");
  EXPECT_EQ(bad("jobstats:\n  publish_every: 2d\n", "x.yaml"),
            "x.yaml:2:18: jobstats.publish_every: must be between 1s and 24h");
}

TEST(SlurmEngineConfig, SubmitPlanNeedsAOneWordMarker) {
  // The plan's script holds only marked jobs, the only ones the controller releases.
  auto ok = LoadSlurmEngineConfigYaml("submit_plan: /run/plan");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->controller.steer_marker, "stoker:steer");
  auto bad = LoadSlurmEngineConfigYaml("submit_plan: /run/plan\nsteer_marker: \"\"");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("steer_marker"), std::string::npos)
      << bad.status().message();
  EXPECT_TRUE(LoadSlurmEngineConfigYaml("steer_marker: \"\"").ok())
      << "without a plan an empty marker only turns steering off";
}

}  // namespace
}  // namespace stoker::slurm
