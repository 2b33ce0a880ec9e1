// A fixed, seeded scenario driven through the real Server: nodes of several shapes (one with
// MIG GPUs beside plain ones), a mix of whole-GPU, shared, MIG, CPU-only, elastic, preemptible
// and prioritised jobs, agents that start what they are told and finish work at random, a
// drained node and a node that stops reporting. After every scheduling pass the test checks the
// invariants of the decisions and records them (pass stats, every job as the API shows it, the
// queue with its reasons) as one text line each.
//
// The record is the server's decision sequence: written to $STOKER_DECISION_TRACE_DIR/
// <scenario>.txt when that variable names a directory, so two builds can be compared with cmp
// (docs/scheduling.md, "The scheduling pass").
//
// Every scenario also runs with each pass building its node view and cluster afresh
// (ServerOptions::incremental_pass = false) and must record the same decisions as the server's
// incremental passes; the measured variants add GPU utilization to every report, so the
// policies that place by measured use see it change from pass to pass.

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "server/server.h"
#include "test_util.h"

namespace stoker::server {
namespace {
using testing::Fixture;

// splitmix64: the same sequence on every platform and standard library.
class Rand {
 public:
  explicit Rand(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  int Below(int n) { return static_cast<int>(Next() % static_cast<uint64_t>(n)); }
  bool Chance(int percent) { return Below(100) < percent; }

 private:
  uint64_t s_;
};

NodeInventory MakeNode(const std::string& name, int plain, int mig, const std::string& model) {
  NodeInventory n;
  n.name = name;
  n.cpu_milli = 32000;
  n.memory_mib = 256 * 1024;
  for (int i = 0; i < plain + mig; ++i) {
    GpuInfo g{
        static_cast<uint32_t>(i), name + "-GPU-" + std::to_string(i), model, 81920, false, {}};
    if (i >= plain) {
      g.mig_enabled = true;
      for (int k = 0; k < 3; ++k) {
        g.mig.push_back(MigInfo{g.uuid + "-mig" + std::to_string(k), "2g.20gb", 2});
      }
    }
    n.gpus.push_back(g);
  }
  return n;
}

JobSpec RandomSpec(Rand& r) {
  JobSpec s;
  s.command = {"work"};
  s.cpu_milli = 500 + 500 * r.Below(8);
  s.memory_mib = 1024 * (1 + r.Below(16));
  switch (r.Below(10)) {
    case 0:
      break;  // CPU only
    case 1:
    case 2:
      s.gpu_milli = 100 * (1 + r.Below(9));
      break;
    case 3:
      s.mig = "2g.20gb";
      break;
    case 4:
      s.gpus = 4;
      s.min_gpus = 2;
      break;
    default:
      s.gpus = 1 << r.Below(3);  // 1, 2 or 4
  }
  s.preemptible = r.Chance(45);
  s.priority = r.Below(3);
  if (r.Chance(10)) s.gpu_models = {"A100"};
  return s;
}

struct Agent {
  std::string name;
  std::vector<uint32_t> plain_gpus;   // indices of the GPUs without MIG (the measured ones)
  std::map<int64_t, RunReport> runs;  // what the node runs or has just finished
  std::set<int64_t> stopping;         // told to cancel: exits at its next report
  bool silent = false;                // stopped reporting (the node will be lost)
};

// How a scenario runs: with the server's incremental passes or afresh; with or without measured
// GPU utilization in the reports.
struct Variant {
  bool incremental = true;
  bool measured = false;
};

std::string Scenario(const std::string& name, int32_t ratio_milli, const std::string& policy,
                     uint64_t seed, bool backfill, Variant variant = {}) {
  ServerOptions o;
  o.backfill = backfill;
  o.gpu_oversubscription_milli = ratio_milli;
  o.placement_policy = policy;
  o.incremental_pass = variant.incremental;
  // Measured headroom must cover the window before oversubscription admits beyond capacity.
  if (variant.measured) o.activity_window = std::chrono::seconds(20);
  Fixture f("trace_" + name, o);
  Rand r(seed);
  std::vector<Agent> agents;
  const Principal admin = f.admin;
  auto add_node = [&](const NodeInventory& inv) {
    EXPECT_TRUE(f.server->RegisterNode(admin, inv).ok());
    Agent a{inv.name, {}, {}, {}, false};
    for (const GpuInfo& g : inv.gpus) {
      if (!g.mig_enabled) a.plain_gpus.push_back(g.index);
    }
    agents.push_back(a);
  };
  add_node(MakeNode("a1", 8, 0, "NVIDIA H100 80GB HBM3"));
  add_node(MakeNode("a2", 4, 0, "NVIDIA H100 80GB HBM3"));
  add_node(MakeNode("a3", 4, 0, "NVIDIA A100-SXM4-80GB"));
  add_node(MakeNode("a4", 2, 2, "NVIDIA A100-SXM4-80GB"));
  add_node(MakeNode("a5", 8, 0, "NVIDIA H100 80GB HBM3"));

  std::ostringstream out;
  std::vector<int64_t> ids;
  for (int step = 0; step < 80; ++step) {
    f.clock.Advance(std::chrono::seconds(1));
    for (int k = r.Below(4); k > 0; --k) {
      auto j = f.server->Submit(r.Chance(50) ? f.alice : f.bob, RandomSpec(r));
      EXPECT_TRUE(j.ok()) << j.status().ToString();
      if (j.ok()) ids.push_back(j->id);
    }
    if (!ids.empty() && r.Chance(8)) {
      (void)f.server->Cancel(admin,
                             ids[static_cast<size_t>(r.Below(static_cast<int>(ids.size())))]);
    }
    if (step == 20) {
      EXPECT_TRUE(f.server->SetDrained(admin, "a2", true).ok());
    }
    if (step == 45) {
      EXPECT_TRUE(f.server->SetDrained(admin, "a2", false).ok());
    }
    if (step == 30) agents[4].silent = true;  // a5 stops reporting: lost after the timeout
    (void)f.server->CheckNodeTimeouts();

    const PassStats st = f.server->RunSchedulingPass();
    out << "step " << step << " queued " << st.queued << " placed " << st.placed << " blocked "
        << st.blocked << " infeasible " << st.infeasible << " preempting " << st.preempting
        << " oversubscribed " << st.oversubscribed << " preempted " << st.preempted << "\n";
    auto jobs = f.server->ListJobs(admin, JobFilter{});
    EXPECT_TRUE(jobs.ok());
    // Invariants of the decisions: per GPU, guaranteed work within one GPU and everything
    // within the ratio; each MIG instance used once.
    std::map<std::pair<std::string, uint32_t>, std::pair<int64_t, int64_t>> load;  // g, total
    std::set<std::string> mig_used;
    for (const Job& j : *jobs) {
      out << JobToJson(j).dump() << "\n";
      if (!IsActive(j.state) || !j.assignment) continue;
      if (!j.assignment->mig_uuid.empty()) {
        EXPECT_TRUE(mig_used.insert(j.assignment->mig_uuid).second) << j.assignment->mig_uuid;
        continue;
      }
      for (const auto& [pos, milli] : j.assignment->shares) {
        auto& l = load[{j.assignment->node, pos}];
        if (!j.spec.preemptible) l.first += milli;
        l.second += milli;
      }
    }
    for (const auto& [gpu, l] : load) {
      EXPECT_LE(l.first, 1000) << gpu.first << " GPU " << gpu.second << " step " << step;
      EXPECT_LE(l.second, ratio_milli) << gpu.first << " GPU " << gpu.second << " step " << step;
    }
    auto q = f.server->Queue(admin);
    EXPECT_TRUE(q.ok());
    json shown = json::array();  // as GET /queue answers
    for (const QueueEntry& e : *q) shown.push_back(protocol::QueueEntryToJson(e));
    out << shown.dump() << "\n";

    // The agents: start what they are told, finish work now and then, stop what is cancelled.
    for (Agent& a : agents) {
      if (a.silent) continue;
      Heartbeat hb;
      for (auto it = a.runs.begin(); it != a.runs.end(); ++it) {
        RunReport& rep = it->second;
        if (rep.phase == protocol::RunPhase::kRunning &&
            (a.stopping.count(rep.id) || r.Chance(12))) {
          rep.phase = protocol::RunPhase::kExited;
          if (a.stopping.count(rep.id)) {
            rep.signal = 15;
          } else {
            rep.exit_code = r.Chance(80) ? 0 : 1;
          }
          rep.logs_complete = true;
        }
        hb.jobs.push_back(rep);
      }
      // This second's utilization of every GPU without MIG: 0-40 %, so measured headroom admits
      // oversubscription now and then.
      if (variant.measured) {
        json shown = json::array();
        for (uint32_t g : a.plain_gpus) {
          GpuSample s;
          s.id.uuid = a.name + "-GPU-" + std::to_string(g);
          s.id.index = g;
          s.timestamp = f.clock.WallNow();
          s.util_gpu_pct = Field<uint32_t>::Of(static_cast<uint32_t>(r.Below(41)));
          hb.gpus.push_back(s);
          shown.push_back(json{{"uuid", s.id.uuid}});
        }
        hb.samples_json = shown.dump();
      }
      auto reply = f.server->Heartbeat(admin, a.name, hb);
      EXPECT_TRUE(reply.ok()) << reply.status().ToString();
      if (!reply.ok()) continue;
      for (int64_t id : reply->forget) {
        a.runs.erase(id);
        a.stopping.erase(id);
      }
      for (int64_t id : reply->cancel) {
        if (a.runs.count(id)) {
          a.stopping.insert(id);
        }
      }
      for (const LaunchOrder& o : reply->start) {
        RunReport rep;
        rep.id = o.id;
        rep.attempt = o.attempt;
        rep.phase = protocol::RunPhase::kRunning;
        a.runs[o.id] = rep;
      }
    }
  }
  return out.str();
}

void Record(const std::string& name, const std::string& trace) {
  const char* dir = std::getenv("STOKER_DECISION_TRACE_DIR");
  if (dir == nullptr || *dir == '\0') return;
  std::ofstream f(std::string(dir) + "/" + name + ".txt", std::ios::binary);
  f << trace;
  EXPECT_TRUE(f.good()) << "cannot write the decision trace to " << dir;
}

void RunScenario(const std::string& name, int32_t ratio, const std::string& policy, uint64_t seed,
                 bool backfill = true, bool measured = false) {
  const std::string trace = Scenario(name, ratio, policy, seed, backfill, {true, measured});
  // The scenario exercises what it is for: placements, waits, preemption and, with a ratio,
  // GPUs shared beyond capacity.
  EXPECT_NE(trace.find("\"state\":\"succeeded\""), std::string::npos);
  EXPECT_NE(trace.find("preempted for job"), std::string::npos);
  EXPECT_NE(trace.find("waiting for"), std::string::npos);
  int oversubscribed_passes = 0;
  for (size_t at = trace.find(" oversubscribed "); at != std::string::npos;
       at = trace.find(" oversubscribed ", at + 1)) {
    oversubscribed_passes += trace[at + 16] != '0';
  }
  if (ratio > 1000) {
    EXPECT_GT(oversubscribed_passes, 0);
  } else {
    EXPECT_EQ(oversubscribed_passes, 0);
  }
  // Deterministic: the same scenario gives the same decisions.
  EXPECT_EQ(trace, Scenario(name + "_again", ratio, policy, seed, backfill, {true, measured}));
  // Incremental passes (the node view and the cluster kept between passes) decide exactly as
  // passes that build both afresh.
  EXPECT_EQ(trace, Scenario(name + "_afresh", ratio, policy, seed, backfill, {false, measured}))
      << "the incremental passes decided otherwise than passes built afresh";
  Record(name, trace);
}

TEST(DecisionTrace, DefaultPolicyNoOversubscription) { RunScenario("stoker_1000", 1000, "", 7); }
TEST(DecisionTrace, DefaultPolicyOversubscribed) { RunScenario("stoker_1500", 1500, "", 11); }
TEST(DecisionTrace, BestFitOversubscribed) { RunScenario("bestfit_1300", 1300, "bestfit", 13); }
TEST(DecisionTrace, WeightedStrictQueue) {
  RunScenario("weighted_1500", 1500, "weighted", 17, false);
}
// Placement by measured use, the utilization changing every second.
TEST(DecisionTrace, DefaultPolicyMeasured) {
  RunScenario("stoker_measured", 1000, "", 19, true, true);
}
TEST(DecisionTrace, WeightedMeasured) {
  RunScenario("weighted_measured", 1500, "weighted", 23, true, true);
}

}  // namespace
}  // namespace stoker::server
