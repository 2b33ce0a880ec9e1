// `stoker up` in a temp data dir, driven by the CLI: CPU and (simulated) GPU jobs run, finish,
// fail and get cancelled; a job that ends while the server is down is reconciled on restart.

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "client/api_client.h"
#include "process_util.h"
#include "support/temp_dir.h"

namespace stoker::e2e {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

class UpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_ + "/config");
    port_ = FreePort();
    env_prefix_ = "env -u STOKER_SERVER -u STOKER_TOKEN XDG_CONFIG_HOME=" + dir_ + "/config ";
  }
  void TearDown() override {
    if (agent_ > 0) {
      ::kill(agent_, SIGKILL);
      WaitExit(agent_);
    }
    Stop();
    // Anything still running from the test's jobs belongs to the test's process groups; tmp_
    // removes the folder after this.
  }

  void Start() {
    // --allow-root-jobs: the tests run as root in CI, and submit as themselves.
    pid_ =
        Spawn({STOKER_BIN, "up", "--data-dir", dir_ + "/data", "--listen",
               "127.0.0.1:" + std::to_string(port_), "--node-timeout", "60", "--allow-root-jobs"},
              {{"XDG_CONFIG_HOME", dir_ + "/config"}}, dir_ + "/up.log");
    for (int i = 0; i < 300; ++i) {
      CmdResult r = Cli("nodes --json");
      if (r.exit_code == 0) {
        json nodes = json::parse(r.out, nullptr, false);
        if (nodes.is_array() && !nodes.empty()) return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL() << "stoker up did not come up; log:\n" << Log();
  }
  void Stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      EXPECT_EQ(WaitExit(pid_), 0) << Log();
      pid_ = -1;
    }
  }
  // What a process of the test wrote to `name` (up.log: `stoker up`; server.log: SpawnServer's).
  std::string Log(const std::string& name = "up.log") {
    std::ifstream in(dir_ + "/" + name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  CmdResult Cli(const std::string& args) {
    return e2e::Run(env_prefix_ + STOKER_BIN + std::string(" ") + args + " 2>/dev/null");
  }
  int64_t Submit(const std::string& args) {
    CmdResult r = Cli("submit --json " + args);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.out;
    json j = json::parse(r.out, nullptr, false);
    return j.is_object() ? j["id"].get<int64_t>() : -1;
  }
  json Job(int64_t id) {
    CmdResult r = Cli("job --json " + std::to_string(id));
    return json::parse(r.out, nullptr, false);
  }
  json WaitState(int64_t id, const std::set<std::string>& states, int timeout_s = 30) {
    json j;
    for (int i = 0; i < timeout_s * 10; ++i) {
      j = Job(id);
      if (j.is_object() && states.count(j["state"].get<std::string>())) return j;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "job " << id << " never reached the expected state; last: " << j.dump() << "\n"
                  << Log();
    return j;
  }

  // `stoker server` and a separate `stoker agent` (a simulated 8-GPU H100 node) that registers
  // with it over HTTP; the CLI talks to the server as admin. Leaves the agent in agent_ (stopped
  // by TearDown if the test ends early).
  void ServerAndAgent() {
    url_ = "http://127.0.0.1:" + std::to_string(port_);
    const std::map<std::string, std::string> env = {{"XDG_CONFIG_HOME", dir_ + "/config"}};
    pid_ = SpawnServer();
    for (int i = 0; i < 300 && admin_.empty(); ++i) {
      std::ifstream in(dir_ + "/srv/admin.token");
      std::getline(in, admin_);
      if (admin_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_FALSE(admin_.empty()) << "no admin token";
    env_prefix_ += "STOKER_SERVER=" + url_ + " ";
    base_prefix_ = env_prefix_;
    env_prefix_ += "STOKER_TOKEN=" + admin_ + " ";
    CmdResult t = Cli("token create --json --role agent --name gpu-node-7");
    ASSERT_EQ(t.exit_code, 0) << t.out;
    const std::string agent_token = json::parse(t.out)["token"].get<std::string>();
    agent_ =
        Spawn({STOKER_BIN, "agent", "--simulate", "h100-mig-node", "--hostname", "gpu-node-7",
               "--listen", "127.0.0.1:" + std::to_string(FreePort()), "--server", url_, "--token",
               agent_token, "--state-dir", dir_ + "/agent-jobs", "--allow-root-jobs"},
              env, dir_ + "/agent.log");
    json nodes;
    for (int i = 0; i < 300; ++i) {
      nodes = json::parse(Cli("nodes --json").out, nullptr, false);
      if (nodes.is_array() && nodes.size() == 1) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL() << "the agent did not register: " << nodes.dump();
  }
  // `stoker server` on port_ with its data in srv/ (its log appended to server.log).
  pid_t SpawnServer() {
    return Spawn({STOKER_BIN, "server", "--data-dir", dir_ + "/srv", "--listen",
                  "127.0.0.1:" + std::to_string(port_)},
                 {{"XDG_CONFIG_HOME", dir_ + "/config"}}, dir_ + "/server.log");
  }
  // A CLI command line run with another token (or none), stdout and stderr together.
  CmdResult CliAs(const std::string& token, const std::string& args) {
    return e2e::Run(base_prefix_ + (token.empty() ? "" : "STOKER_TOKEN=" + token + " ") +
                    STOKER_BIN + std::string(" ") + args + " 2>&1");
  }

  stoker::testing::TempDir tmp_{"e2e"};
  const std::string dir_ = tmp_.path();
  int port_ = 0;
  pid_t pid_ = -1;
  pid_t agent_ = -1;
  std::string url_, admin_, base_prefix_;
  std::string env_prefix_;
};

TEST_F(UpTest, JobsRunFinishFailAndGetCancelled) {
  Start();
  json nodes = json::parse(Cli("nodes --json").out);
  ASSERT_EQ(nodes.size(), 1u);
  const bool simulated = nodes[0]["simulated"].get<bool>();
  if (simulated) {
    EXPECT_EQ(nodes[0]["gpus"].size(), 8u);
    EXPECT_NE(Log().find("SIMULATED"), std::string::npos);
    EXPECT_NE(Cli("nodes").out.find("SIMULATED"), std::string::npos);
  }
  // The admin token was created with mode 0600.
  struct stat st;
  ASSERT_EQ(::stat((dir_ + "/data/admin.token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  const int64_t ok = Submit("--name hello -- sh -c 'echo hello; echo warn >&2'");
  const int64_t bad = Submit("-- sh -c 'exit 3'");
  const int64_t gpu = Submit(
      "--gpus 2 --cpu 0.5 --mem 256M -- sh -c 'echo dev=$CUDA_VISIBLE_DEVICES job=$STOKER_JOB_ID'");
  const int64_t longjob = Submit("-- sleep 300");
  int64_t mig = -1;
  if (simulated) mig = Submit("--mig 1g.10gb -- sh -c 'echo dev=$CUDA_VISIBLE_DEVICES'");

  json j = WaitState(ok, {"succeeded", "failed"});
  EXPECT_EQ(j["state"], "succeeded");
  EXPECT_EQ(j["exit_code"], 0);
  j = WaitState(bad, {"succeeded", "failed"});
  EXPECT_EQ(j["state"], "failed");
  EXPECT_EQ(j["exit_code"], 3);
  j = WaitState(gpu, {"succeeded", "failed"});
  EXPECT_EQ(j["state"], "succeeded");

  // Logs arrive with the job's end.
  for (int i = 0; i < 50 && Cli("logs " + std::to_string(ok)).out.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(Cli("logs " + std::to_string(ok)).out, "hello\n");
  EXPECT_EQ(Cli("logs --stderr " + std::to_string(ok)).out, "warn\n");
  const std::string gpu_out = Cli("logs -f " + std::to_string(gpu)).out;
  EXPECT_EQ(gpu_out, "dev=" + j["assignment"]["cuda_visible_devices"].get<std::string>() +
                         " job=" + std::to_string(gpu) + "\n");
  if (simulated) {
    json m = WaitState(mig, {"succeeded", "failed"});
    EXPECT_EQ(m["state"], "succeeded");
    EXPECT_NE(Cli("logs -f " + std::to_string(mig)).out.find("dev=MIG-"), std::string::npos);
  }

  WaitState(longjob, {"running"});
  CmdResult c = Cli("cancel " + std::to_string(longjob));
  EXPECT_EQ(c.exit_code, 0);
  j = WaitState(longjob, {"cancelled"});
  EXPECT_EQ(j["signal"], 15);

  json failed = json::parse(Cli("jobs --json --state failed").out);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0]["id"], bad);
  EXPECT_NE(Cli("jobs").out.find("hello"), std::string::npos);

  // Documented exit codes.
  EXPECT_EQ(Cli("job 999999").exit_code, 4);
  EXPECT_EQ(Cli("jobs --token stk_bogus").exit_code, 5);
  EXPECT_EQ(Cli("submit --gpus 99 -- true").exit_code, 2);
  EXPECT_EQ(e2e::Run(env_prefix_ + STOKER_BIN + " jobs --server http://127.0.0.1:1 2>/dev/null")
                .exit_code,
            3);
  // Users see only their own jobs.
  const std::string alice = Cli("token create --role user --name alice").out;
  ASSERT_FALSE(alice.empty());
  const std::string tok = alice.substr(0, alice.find('\n'));
  EXPECT_EQ(json::parse(Cli("jobs --json --token " + tok).out).size(), 0u);
  EXPECT_EQ(Cli("cancel " + std::to_string(longjob) + " --token " + tok).exit_code, 4);
  EXPECT_EQ(Cli("drain " + nodes[0]["name"].get<std::string>() + " --token " + tok).exit_code, 5);
  EXPECT_EQ(Cli("drain " + nodes[0]["name"].get<std::string>()).exit_code, 0);
  // On a drained node a job waits: `stoker queue` shows it with why, as its --json says.
  const int64_t waiting = Submit("--name waits-for-undrain -- true");
  json q;
  for (int i = 0; i < 100; ++i) {
    q = json::parse(Cli("queue --json").out, nullptr, false);
    if (q.is_array() && q.size() == 1 && !q[0]["reason"].get<std::string>().empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(q.is_array() && q.size() == 1) << q.dump();
  EXPECT_EQ(q[0]["job"], waiting);
  EXPECT_EQ(q[0]["position"], 1);
  char row[512];
  std::snprintf(row, sizeof row, "%-5d %-6lld %-10s %-18s %-5d %s\n", 1,
                static_cast<long long>(waiting), q[0]["user"].get<std::string>().c_str(),
                "waits-for-undrain", q[0]["priority"].get<int>(),
                q[0]["reason"].get<std::string>().c_str());
  const CmdResult shown = Cli("queue");
  EXPECT_EQ(shown.exit_code, 0);
  EXPECT_EQ(shown.out,
            "POS   ID     USER       NAME               PRIO  REASON\n" + std::string(row));
  EXPECT_EQ(Cli("cancel " + std::to_string(waiting)).exit_code, 0);
  EXPECT_EQ(Cli("undrain " + nodes[0]["name"].get<std::string>()).exit_code, 0);
  // A revoked token (`token revoke`, a DELETE) is refused from then on.
  std::string alice_id;
  for (const json& t : json::parse(Cli("token list --json").out)) {
    if (t["name"] == "alice") alice_id = t["id"].get<std::string>();
  }
  ASSERT_FALSE(alice_id.empty());
  EXPECT_EQ(Cli("token revoke " + alice_id).exit_code, 0);
  EXPECT_EQ(Cli("jobs --token " + tok).exit_code, 5);
}

// A job of `stoker up` runs beside the API's listener and connections, the store and the node's
// GPU library: it must hold none of them (a job that accepted on the inherited listener once
// read the admin and agent tokens), and a restart must find the port free while it runs.
TEST_F(UpTest, AJobHoldsNoDescriptorOfTheServer) {
  Start();
  json nodes = json::parse(Cli("nodes --json").out);
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_FALSE(nodes[0].value("isolation", "").empty()) << nodes[0].dump();
  const int64_t fds = Submit("-- sh -c 'ls -l /proc/$$/fd'");
  const int64_t sleeper = Submit("-- sleep 300");
  WaitState(fds, {"succeeded", "failed"});
  std::string out;
  for (int i = 0; i < 50 && out.empty(); ++i) {
    out = Cli("logs " + std::to_string(fds)).out;
    if (out.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::set<std::string> open;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t arrow = line.find(" -> ");
    if (arrow == std::string::npos) continue;
    const size_t name = line.rfind(' ', arrow - 1);
    open.insert(line.substr(name + 1, arrow - name - 1));
    EXPECT_EQ(line.find("socket:"), std::string::npos) << line;
  }
  EXPECT_EQ(open, (std::set<std::string>{"0", "1", "2"})) << out;

  // The sleeping job's own descriptors, seen from outside.
  WaitState(sleeper, {"running"});
  std::ifstream pid_file(dir_ + "/data/node/jobs/" + std::to_string(sleeper) + "/pid");
  int pid = 0;
  pid_file >> pid;
  ASSERT_GT(pid, 0);
  std::set<std::string> sleeper_fds;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    sleeper_fds.insert(e.path().filename().string());
    EXPECT_EQ(fs::read_symlink(e.path()).string().rfind("socket:", 0), std::string::npos);
  }
  EXPECT_EQ(sleeper_fds, (std::set<std::string>{"0", "1", "2"}));

  // A restart while the job runs binds the same port again.
  Stop();
  Start();
  WaitState(sleeper, {"running"});
  EXPECT_EQ(Cli("cancel " + std::to_string(sleeper)).exit_code, 0);
  WaitState(sleeper, {"cancelled"});
}

// Two `stoker up` with their own data directories on one machine: each registers its own entry
// for the CLI; with both running the CLI asks which (or follows STOKER_DATA_DIR); once one stops,
// its entry is gone and the CLI follows the other; once both stop, the CLI says so instead of
// talking to a dead address.
TEST_F(UpTest, SeveralUpOnOneMachineDoNotBreakEachOthersCli) {
  const std::map<std::string, std::string> env = {{"XDG_CONFIG_HOME", dir_ + "/config"}};
  const int port2 = FreePort();
  auto up = [&](const std::string& data, int port) {
    return Spawn({STOKER_BIN, "up", "--data-dir", dir_ + "/" + data, "--listen",
                  "127.0.0.1:" + std::to_string(port), "--allow-root-jobs", "--node-name", data},
                 env, dir_ + "/" + data + ".log");
  };
  const pid_t a = up("a", port_);
  const pid_t b = up("b", port2);
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        WaitExit(pid);
      }
    }
  } ra{a}, rb{b};
  auto nodes_of = [&](const std::string& data_dir) {
    const std::string prefix =
        data_dir.empty() ? "" : "STOKER_DATA_DIR=" + dir_ + "/" + data_dir + " ";
    return e2e::Run(env_prefix_ + prefix + STOKER_BIN + " nodes --json 2>&1");
  };
  for (int i = 0; i < 300; ++i) {
    if (nodes_of("a").exit_code == 0 && nodes_of("b").exit_code == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CmdResult ca = nodes_of("a");
  ASSERT_EQ(ca.exit_code, 0) << ca.out;
  EXPECT_EQ(json::parse(ca.out)[0]["name"], "a");
  EXPECT_EQ(json::parse(nodes_of("b").out)[0]["name"], "b");
  CmdResult both = nodes_of("");
  EXPECT_EQ(both.exit_code, 2) << both.out;
  EXPECT_NE(both.out.find("several `stoker up`"), std::string::npos) << both.out;

  ::kill(a, SIGTERM);
  EXPECT_EQ(WaitExit(a), 0);
  ra.pid = -1;
  CmdResult left = nodes_of("");
  ASSERT_EQ(left.exit_code, 0) << left.out;
  EXPECT_EQ(json::parse(left.out)[0]["name"], "b");

  ::kill(b, SIGKILL);  // a crash: its entry stays behind, pointing at a dead process
  WaitExit(b);
  rb.pid = -1;
  CmdResult none = nodes_of("");
  EXPECT_EQ(none.exit_code, 3) << none.out;
  EXPECT_NE(none.out.find("is no longer running"), std::string::npos) << none.out;
}

// The cluster layout of the README's "More nodes": `stoker server` and, as a separate process,
// `stoker agent --server --token` with an agent token created through the CLI.
TEST_F(UpTest, SeparateServerAndAgentRunJobs) {
  ServerAndAgent();
  if (HasFatalFailure()) return;
  const pid_t agent = agent_;
  json nodes = json::parse(Cli("nodes --json").out, nullptr, false);
  ASSERT_TRUE(nodes.is_array() && nodes.size() == 1u) << nodes.dump();
  EXPECT_EQ(nodes[0]["name"], "gpu-node-7");
  EXPECT_EQ(nodes[0]["gpus"].size(), 8u);

  const int64_t gpu = Submit("--gpus 1 -- sh -c 'echo dev=$CUDA_VISIBLE_DEVICES'");
  json j = WaitState(gpu, {"succeeded", "failed"});
  EXPECT_EQ(j["state"], "succeeded") << j.dump();
  EXPECT_EQ(j["assignment"]["node"], "gpu-node-7");
  EXPECT_EQ(Cli("logs -f " + std::to_string(gpu)).out,
            "dev=" + j["assignment"]["cuda_visible_devices"].get<std::string>() + "\n");
  // The node's samples reached the server through the heartbeats.
  json node = json::parse(Cli("nodes --json").out);
  EXPECT_GT(node[0]["last_heartbeat_ms"].get<int64_t>(), 0);

  ::kill(agent, SIGTERM);
  EXPECT_EQ(WaitExit(agent), 0);
  agent_ = -1;
  Stop();  // the server, expecting a clean exit
}

TEST_F(UpTest, JobThatEndsWhileTheServerIsDownIsReconciled) {
  Start();
  const int64_t id = Submit("-- sh -c 'sleep 3; echo finished; exit 7'");
  WaitState(id, {"running"});
  Stop();  // the server and the local agent go away; the job keeps running under its shim
  std::this_thread::sleep_for(std::chrono::seconds(4));
  Start();
  json j = WaitState(id, {"failed", "succeeded"});
  EXPECT_EQ(j["state"], "failed");
  EXPECT_EQ(j["exit_code"], 7);
  for (int i = 0; i < 50 && Cli("logs " + std::to_string(id)).out.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(Cli("logs " + std::to_string(id)).out, "finished\n");
}

// A server restarted while a job holds a GPU tells its observers of that job as it starts (it
// reads the unended jobs once for both): the dashboard's history puts the GPU's new samples
// under the job, and the efficiency engine zones the job by them. The agent, and the job, keep
// running across the restart.
TEST_F(UpTest, ARestartedServerKnowsTheJobsHoldingGpus) {
  ServerAndAgent();
  const int64_t id = Submit("--gpus 1 -- sleep 300");
  json job = WaitState(id, {"running"});
  ASSERT_TRUE(job.contains("assignment")) << job.dump();
  const uint32_t gpu = job["assignment"]["gpu_indices"].at(0).get<uint32_t>();

  ::kill(pid_, SIGTERM);
  ASSERT_EQ(WaitExit(pid_), 0) << Log("server.log");
  pid_ = SpawnServer();
  WaitState(id, {"running"});

  client::ApiClient api(url_, admin_, 5);
  // The GPU's columns in the last minute name the job once a report after the restart came in.
  bool history_knows = false;
  json gpus;
  for (int i = 0; i < 300 && !history_knows; ++i) {
    auto r = api.Get("/api/v1/history/gpus?window=1m&points=60&node=gpu-node-7");
    if (r.ok() && r->status == 200) {
      gpus = r->body;
      for (const json& g : gpus["gpus"]) {
        if (g["mig"].get<bool>() || g["index"].get<uint32_t>() != gpu) continue;
        for (const json& holder : g["job"]) history_knows |= holder.get<int64_t>() == id;
      }
    }
    if (!history_knows) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(history_knows) << gpus.dump() << "\n" << Log("server.log");

  bool engine_knows = false;
  json zones;
  for (int i = 0; i < 300 && !engine_knows; ++i) {
    CmdResult z = Cli("zones --json");
    zones = json::parse(z.out, nullptr, false);
    if (zones.is_object()) {
      for (const json& s : zones["jobs"]) engine_knows |= s["key"] == std::to_string(id);
    }
    if (!engine_knows) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(engine_knows) << zones.dump() << "\n" << Log("server.log");

  EXPECT_EQ(Cli("cancel " + std::to_string(id)).exit_code, 0);
  WaitState(id, {"cancelled"});
}

// `stoker sim size --history server` over the network: the jobs a real server ran on a separate
// agent's node, with the samples the agent's heartbeats carried, fetched by the CLI from
// GET /api/v1/report?format=records over HTTP and sized per job class; the server's rules apply
// to that request (a user sees only their own jobs, an unknown token is refused) and an
// unreachable server is named.
TEST_F(UpTest, SimSizeHistoryFromAServerOverTheNetwork) {
  ServerAndAgent();
  if (HasFatalFailure()) return;
  const int64_t train = Submit("--gpus 2 --class train -- sleep 5");
  const int64_t notebook = Submit("--gpus 1 --class notebook -- sleep 5");
  EXPECT_EQ(WaitState(train, {"succeeded", "failed"})["state"], "succeeded");
  EXPECT_EQ(WaitState(notebook, {"succeeded", "failed"})["state"], "succeeded");

  CmdResult r = CliAs(admin_, "sim size --history server --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const json sized = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(sized.is_object()) << r.out;
  EXPECT_EQ(sized["jobs_used"], 2) << r.out;
  EXPECT_EQ(sized["jobs_skipped"], 0) << r.out;
  std::map<std::string, json> classes;
  for (const json& c : sized["classes"]) classes[c["class"].get<std::string>()] = c;
  ASSERT_EQ(classes.size(), 2u) << r.out;
  EXPECT_EQ(classes["train"]["model"], "H100");
  EXPECT_EQ(classes["train"]["jobs"], 1);
  EXPECT_EQ(classes["train"]["gpus_requested"], 2);
  EXPECT_EQ(classes["notebook"]["gpus_requested"], 1);
  for (const auto& [name, c] : classes) {
    EXPECT_GT(c["memory_peak_bytes"].get<int64_t>(), 0) << name << ": no samples reached it";
    EXPECT_FALSE(c["need"].get<std::string>().empty()) << name;
  }
  ASSERT_EQ(sized["models"].size(), 1u) << r.out;
  EXPECT_EQ(sized["models"][0]["model"], "H100");
  EXPECT_EQ(sized["models"][0]["recorded_gpus"], 8);  // the agent's node
  EXPECT_EQ(sized["models"][0]["jobs"], 2);
  // Both jobs could run at once on the 8 GPUs: the history needs at most the 3 they asked for.
  EXPECT_GE(sized["models"][0]["gpus_as_requested"].get<int>(), 2);
  EXPECT_LE(sized["models"][0]["gpus_as_requested"].get<int>(), 3);
  // The table form of the same answer.
  r = CliAs(admin_, "sim size --history server");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("2 jobs (0 without samples skipped)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("train"), std::string::npos) << r.out;

  // A user's request returns their own jobs only: bob has none, so there is nothing to size.
  CmdResult t = Cli("token create --json --role user --name bob");
  ASSERT_EQ(t.exit_code, 0) << t.out;
  r = CliAs(json::parse(t.out)["token"].get<std::string>(), "sim size --history server");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("no job that ran has samples (0 jobs"), std::string::npos) << r.out;
  r = CliAs("not-a-token", "sim size --history server");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("unknown token"), std::string::npos) << r.out;

  ::kill(agent_, SIGTERM);
  EXPECT_EQ(WaitExit(agent_), 0);
  agent_ = -1;
  Stop();
  r = CliAs(admin_, "sim size --history server");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("cannot reach the server at " + url_), std::string::npos) << r.out;
}

}  // namespace
}  // namespace stoker::e2e
