// What one node's heartbeat may change: the current run of the jobs placed on it, and samples
// of the GPUs it registered, taken around the server's time. Everything else is refused and
// counted (issue: an agent could write any job's logs and erase another node's GPU history).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fstream>
#include <limits>

#include "protocol/limits.h"
#include "protocol/samples.h"
#include "server/api.h"
#include "server/server.h"
#include "test_util.h"

namespace stoker::server {
namespace {
using testing::Fixture;
using testing::Spec;

RunReport Running(int64_t id, int64_t attempt, const std::string& out = "") {
  RunReport r;
  r.id = id;
  r.attempt = attempt;
  r.phase = protocol::RunPhase::kRunning;
  r.stdout_data = out;
  return r;
}

GpuSample Sample(const std::string& uuid, uint32_t index, WallTime at) {
  GpuSample s;
  s.id.uuid = uuid;
  s.id.index = index;
  s.timestamp = at;
  s.util_gpu_pct = Field<uint32_t>::Of(50);
  return s;
}

class HeartbeatIsolation : public ::testing::Test {
 protected:
  HeartbeatIsolation() : f_("hb_isolation") {
    EXPECT_TRUE(f_.server->RegisterNode(f_.agent, f_.Node("n1", 2)).ok());
    n2_ = f_.server->CreateToken(f_.admin, Role::kAgent, "n2").value();
    NodeInventory n2 = f_.Node("n2", 2);
    for (auto& g : n2.gpus) g.uuid = "GPU-n2-" + std::to_string(g.index);
    EXPECT_TRUE(f_.server->RegisterNode(agent2_, n2).ok());
  }
  std::string Stdout(int64_t id) { return f_.server->ReadLog(f_.admin, id, "stdout", 0)->data; }
  double Metric(const std::string& series) {
    const std::string text = ServerMetricsText(f_.server->Metrics());
    const size_t at = text.find("\n" + series + " ");
    return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 2));
  }

  Fixture f_;
  std::string n2_;
  Principal agent2_{"n2", Role::kAgent};
};

TEST_F(HeartbeatIsolation, ANodeCannotWriteLogsOfJobsThatAreNotItsCurrentRun) {
  auto job = f_.server->Submit(f_.alice, Spec({"train"}, 1));
  ASSERT_TRUE(job.ok());
  ASSERT_EQ(f_.server->RunSchedulingPass().placed, 1);
  const std::string node = f_.server->GetJob(f_.admin, job->id)->assignment->node;
  const Principal& owner = node == "n1" ? f_.agent : agent2_;
  const Principal& other = node == "n1" ? agent2_ : f_.agent;
  const std::string other_name = node == "n1" ? "n2" : "n1";

  // Another node: its bytes are dropped and it is told to stop what it claims to run.
  Heartbeat forged;
  forged.jobs = {Running(job->id, 0, "forged\n"), Running(job->id + 1, 0, "future\n")};
  auto reply = f_.server->Heartbeat(other, other_name, forged);
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->cancel, (std::vector<int64_t>{job->id, job->id + 1}));
  EXPECT_EQ(Stdout(job->id), "");
  EXPECT_EQ(Metric("stoker_server_heartbeat_log_chunks_refused_total"), 2);

  // A job that did not exist yet when the bytes came gets none of them.
  auto later = f_.server->Submit(f_.alice, Spec({"later"}));
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->id, job->id + 1);
  EXPECT_EQ(Stdout(later->id), "");

  // The node the job runs on writes its logs.
  Heartbeat real;
  real.jobs = {Running(job->id, 0, "epoch 1\n")};
  ASSERT_TRUE(f_.server->Heartbeat(owner, node, real).ok());
  EXPECT_EQ(Stdout(job->id), "epoch 1\n");
  EXPECT_EQ(f_.server->GetJob(f_.admin, job->id)->state, JobState::kRunning);
}

TEST_F(HeartbeatIsolation, AnEarlierRunOfARequeuedJobIsStoppedNotRecorded) {
  auto job = f_.server->Submit(f_.alice, Spec({"train"}, 1));
  ASSERT_TRUE(job.ok());
  ASSERT_EQ(f_.server->RunSchedulingPass().placed, 1);
  const std::string node = f_.server->GetJob(f_.admin, job->id)->assignment->node;
  const Principal& owner = node == "n1" ? f_.agent : agent2_;
  Heartbeat hb;
  hb.jobs = {Running(job->id, 0, "run 0\n")};
  ASSERT_TRUE(f_.server->Heartbeat(owner, node, hb).ok());
  // Requeued by the system: the running run is stopped, its exit puts the job back.
  ASSERT_TRUE(f_.server->RequeueJob(job->id, "test").ok());
  RunReport exited = Running(job->id, 0);
  exited.phase = protocol::RunPhase::kExited;
  exited.signal = 15;
  exited.logs_complete = true;
  hb.jobs = {exited};
  ASSERT_TRUE(f_.server->Heartbeat(owner, node, hb).ok());
  auto j = f_.server->GetJob(f_.admin, job->id);
  ASSERT_EQ(j->state, JobState::kQueued);
  EXPECT_EQ(j->attempt(), 1);
  ASSERT_EQ(f_.server->RunSchedulingPass().placed, 1);
  const std::string node2 = f_.server->GetJob(f_.admin, job->id)->assignment->node;
  const Principal& owner2 = node2 == "n1" ? f_.agent : agent2_;
  // The new run's start order names its attempt.
  auto reply = f_.server->Heartbeat(owner2, node2, {});
  ASSERT_TRUE(reply.ok());
  ASSERT_EQ(reply->start.size(), 1u);
  EXPECT_EQ(reply->start[0].attempt, 1);
  // A late report of run 0 (e.g. from a node that was cut off) changes nothing.
  RunReport stale = Running(job->id, 0, "stale bytes\n");
  stale.phase = protocol::RunPhase::kExited;
  stale.exit_code = 0;
  hb.jobs = {stale};
  reply = f_.server->Heartbeat(owner2, node2, hb);
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->forget, std::vector<int64_t>{job->id});
  EXPECT_EQ(f_.server->GetJob(f_.admin, job->id)->state, JobState::kAssigned);
  EXPECT_EQ(Stdout(job->id), "");
  // Run 1 reports and is recorded.
  hb.jobs = {Running(job->id, 1, "run 1\n")};
  ASSERT_TRUE(f_.server->Heartbeat(owner2, node2, hb).ok());
  EXPECT_EQ(f_.server->GetJob(f_.admin, job->id)->state, JobState::kRunning);
  EXPECT_EQ(Stdout(job->id), "run 1\n");
}

TEST_F(HeartbeatIsolation, SamplesMustBeOfTheNodesOwnGpusAndTakenAroundNow) {
  struct Seen : ServerObserver {
    void OnHeartbeat(const std::string& node, const std::vector<GpuSample>& gpus,
                     WallTime) override {
      for (const GpuSample& g : gpus) uuids.push_back(node + ":" + g.id.uuid);
    }
    std::vector<std::string> uuids;
  } seen;
  f_.server->AddObserver(&seen);
  const WallTime now = f_.clock.WallNow();
  Heartbeat hb;
  hb.gpus = {Sample("GPU-0", 0, now),                                      // its own: kept
             Sample("GPU-n2-0", 0, now),                                   // n2's GPU
             Sample("GPU-1", 63, now),                                     // wrong index
             Sample("GPU-1", 1, now + std::chrono::hours(24 * 365 * 70)),  // the year 2096
             Sample("GPU-1", 1, now - std::chrono::hours(1))};             // an hour old
  hb.samples_json = R"([{"uuid":"GPU-0"},{"uuid":"GPU-n2-0"},{"uuid":"GPU-1","index":63},)"
                    R"({"uuid":"GPU-1","t":2096},{"uuid":"GPU-1","t":"old"}])";
  ASSERT_TRUE(f_.server->Heartbeat(f_.agent, "n1", hb).ok());
  EXPECT_EQ(seen.uuids, std::vector<std::string>{"n1:GPU-0"});
  // What GET /nodes/n1 shows holds only the kept sample.
  EXPECT_EQ(protocol::NodeStatusToJson(*f_.server->GetNode(f_.admin, "n1")).at("samples"),
            json::parse(R"([{"uuid":"GPU-0"}])"));
  EXPECT_EQ(Metric("stoker_server_heartbeat_samples_refused_total{reason=\"unknown_gpu\"}"), 1);
  EXPECT_EQ(Metric("stoker_server_heartbeat_samples_refused_total{reason=\"index_mismatch\"}"), 1);
  EXPECT_EQ(Metric("stoker_server_heartbeat_samples_refused_total{reason=\"clock\"}"), 2);
  // A real sample after the poisoned ones is taken as usual.
  hb.gpus = {Sample("GPU-1", 1, now)};
  hb.samples_json = R"([{"uuid":"GPU-1"}])";
  ASSERT_TRUE(f_.server->Heartbeat(f_.agent, "n1", hb).ok());
  EXPECT_EQ(seen.uuids.back(), "n1:GPU-1");
}

// The compact form: a report of N seconds reaches the observers as N calls, oldest first, each
// with its own time, so zones and alerts keep 1 s resolution whatever the report interval. A GPU
// named by index alone is the registered one (its UUID filled in); an index the node did not
// register is refused like a foreign UUID.
TEST_F(HeartbeatIsolation, ACompactReportReachesObserversOncePerSecondWithItsTime) {
  struct Seen : ServerObserver {
    void OnHeartbeat(const std::string& node, const std::vector<GpuSample>& gpus,
                     WallTime at) override {
      std::string one = node + "@" + std::to_string(ToSeconds(at.time_since_epoch()));
      for (const GpuSample& g : gpus) {
        one += " " + g.id.uuid + "=" + std::to_string(g.util_gpu_pct.value_or(999));
        EXPECT_EQ(g.timestamp, at);
      }
      calls.push_back(one);
    }
    std::vector<std::string> calls;
  } seen;
  f_.server->AddObserver(&seen);
  const WallTime now = f_.clock.WallNow();
  const double t0 = ToSeconds(now.time_since_epoch()) - 9;
  Heartbeat hb;
  std::vector<std::string> want;
  for (int t = 0; t < 10; ++t) {
    const WallTime at = now - std::chrono::seconds(9 - t);
    GpuSample a = Sample("", 0, at);
    a.util_gpu_pct = Field<uint32_t>::Of(t);
    GpuSample b = Sample("", 1, at);
    b.util_gpu_pct = Field<uint32_t>::Of(100 - t);
    GpuSample foreign = Sample("", 7, at);  // n1 registered GPUs 0 and 1
    hb.ticks.push_back({at, {a, b, foreign}});
    want.push_back("n1@" + std::to_string(t0 + t) + " GPU-0=" + std::to_string(t) +
                   " GPU-1=" + std::to_string(100 - t));
  }
  // Through the wire: the body the agent writes, read as the server reads it.
  hb.ticks_json = protocol::CompactTicksJson(hb.ticks, /*identity=*/false);
  auto parsed = ParseHeartbeat(HeartbeatBody(hb));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  auto reply = f_.server->Heartbeat(f_.agent, "n1", std::move(*parsed));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(seen.calls, want);
  EXPECT_EQ(Metric("stoker_server_heartbeat_samples_refused_total{reason=\"unknown_gpu\"}"), 10);
  // GET /nodes/n1 shows the newest second in the full form.
  const json samples =
      protocol::NodeStatusToJson(*f_.server->GetNode(f_.admin, "n1")).at("samples");
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[1]["uuid"], "GPU-1");
  EXPECT_EQ(samples[1]["fields"]["util_gpu_pct"]["value"], 91);
  EXPECT_EQ(samples[1]["health"], "ok");
  // Two nodes, the default rate: the shortest interval.
  EXPECT_EQ(reply->report_interval_ms, protocol::limits::kReportIntervalMsMin);
}

// The report interval grows with the number of nodes (nodes / heartbeat_rate), within its
// bounds and a third of the node timeout.
TEST(ReportInterval, GrowsWithTheClusterWithinItsBounds) {
  ServerOptions o;
  o.heartbeat_rate = 2;  // reports a second
  o.report_interval_max = std::chrono::seconds(4);
  Fixture f("report_interval", o);
  auto interval = [&] { return f.server->Heartbeat(f.agent, "n1", {}).value().report_interval_ms; };
  ASSERT_TRUE(f.server->RegisterNode(f.agent, f.Node("n1", 1)).ok());
  EXPECT_EQ(interval(), 1000);  // 1 node / 2 a second: 0.5 s, the minimum is 1 s
  for (int i = 2; i <= 5; ++i) {
    const std::string name = "n" + std::to_string(i);
    ASSERT_TRUE(f.server->CreateToken(f.admin, Role::kAgent, name).ok());
    NodeInventory inv = f.Node(name, 1);
    for (auto& g : inv.gpus) g.uuid = "GPU-" + name;
    ASSERT_TRUE(f.server->RegisterNode(Principal{name, Role::kAgent}, inv).ok());
  }
  EXPECT_EQ(interval(), 2500);  // 5 nodes / 2 a second
  for (int i = 6; i <= 20; ++i) {
    const std::string name = "n" + std::to_string(i);
    ASSERT_TRUE(f.server->CreateToken(f.admin, Role::kAgent, name).ok());
    NodeInventory inv = f.Node(name, 1);
    for (auto& g : inv.gpus) g.uuid = "GPU-" + name;
    ASSERT_TRUE(f.server->RegisterNode(Principal{name, Role::kAgent}, inv).ok());
  }
  EXPECT_EQ(interval(), 4000);  // 10 s by the rate; report_interval_max is 4 s
  o.report_interval_max = std::chrono::seconds(60);
  o.node_timeout = std::chrono::seconds(9);
  f.options = o;
  f.options.data_dir = f.dir;
  f.Open();
  EXPECT_EQ(interval(), 3000);  // a third of the node timeout
}

// A report rate that is not a positive number, or an interval range upside down, is refused when
// the server starts (before, a rate of 0 silently became 1,000 when the interval was computed).
TEST(ReportInterval, ARateOrRangeThatMakesNoSenseIsRefusedAtStart) {
  Fixture f("report_interval_options");
  for (double rate : {0.0, -5.0, std::numeric_limits<double>::quiet_NaN(),
                      std::numeric_limits<double>::infinity()}) {
    ServerOptions o;
    o.heartbeat_rate = rate;
    auto s = Server::Create(f.store.get(), &f.clock, o);
    ASSERT_FALSE(s.ok()) << rate;
    EXPECT_NE(s.status().ToString().find("heartbeat rate"), std::string::npos)
        << s.status().ToString();
  }
  ServerOptions o;
  o.report_interval_min = std::chrono::seconds(5);
  o.report_interval_max = std::chrono::seconds(2);
  auto s = Server::Create(f.store.get(), &f.clock, o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().ToString().find("report interval"), std::string::npos)
      << s.status().ToString();
}

TEST(NodeRegistration, WronglyTypedOrDuplicatedFieldsAreRefused) {
  auto reg = [](const std::string& text) { return ParseNodeInventory(json::parse(text)).status(); };
  const std::string gpu = R"({"index":0,"uuid":"GPU-a","model":"H100")";
  EXPECT_TRUE(reg(R"({"name":"n","gpus":[)" + gpu + "}]}").ok());
  Status s = reg(R"({"name":"n","gpus":[)" + gpu + R"(,"mig":"1g.10gb"}]})");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("gpus[0].mig"), std::string::npos) << s.ToString();
  s = reg(R"({"name":"n","gpus":[)" + gpu + "}," + gpu + "}]}");
  EXPECT_NE(s.message().find("appears twice"), std::string::npos) << s.ToString();
  s = reg(R"({"name":"n","gpus":[)" + gpu + R"(,"colour":"red"}]})");
  EXPECT_NE(s.message().find("gpus[0]: colour: unknown field"), std::string::npos) << s.ToString();
  s = reg(R"({"name":"n","gpus":[{"index":0,"model":"H100"}]})");
  EXPECT_NE(s.message().find("gpus[0].uuid: required"), std::string::npos) << s.ToString();
}

TEST(Submission, NulBytesAndStokersOwnVariablesAreRefused) {
  Fixture f("submit_nul");
  JobSpec s = Spec({"sh"});
  s.workdir = std::string("/tmp\0/../root", 13);
  Status st = f.server->Submit(f.alice, s).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("workdir"), std::string::npos) << st.ToString();
  s = Spec({std::string("sh\0x", 4)});
  EXPECT_NE(f.server->Submit(f.alice, s).status().message().find("command[0]"), std::string::npos);
  for (const char* name :
       {"CUDA_VISIBLE_DEVICES", "STOKER_JOB_ID", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"}) {
    s = Spec({"sh"});
    s.env[name] = "0";
    st = f.server->Submit(f.alice, s).status();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << name;
    EXPECT_NE(st.message().find(std::string("env.") + name), std::string::npos) << st.ToString();
  }
  EXPECT_TRUE(f.server->ListJobs(f.admin, {})->empty());
}

}  // namespace
}  // namespace stoker::server

namespace stoker::server {
namespace {

// A store that lost its newest rows (a write-ahead log cut short) must not hand their ids out
// again: the id mark beside the database is ahead of every id handed out, before it is handed.
TEST(JobIds, AreNeverReusedEvenWhenTheStoreLosesItsNewestJobs) {
  testing::Fixture f("job_ids");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(f.server->Submit(f.alice, testing::Spec({"x"})).ok());
  // While the server runs, the mark on disk is already past every id it handed out (a crash
  // now continues after it).
  std::ifstream running(f.dir + "/stoker.db.ids");
  int64_t mark = 0;
  running >> mark;
  EXPECT_GE(mark, 4);
  f.server.reset();  // a clean stop records exactly where ids continue
  f.store.reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((f.dir + "/stoker.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DELETE FROM jobs WHERE id=3", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  f.Open();
  auto next = f.server->Submit(f.alice, testing::Spec({"y"}));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->id, 4) << "job 3 was lost; its id must not come back";
}

}  // namespace
}  // namespace stoker::server
