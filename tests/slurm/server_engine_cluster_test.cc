// `stoker server --engine slurm` against the real test cluster (the slurm_cluster fixture), with
// a real `stoker agent` on node g1. The agent reads GPUs from the fake NVML library through the
// real dlopen path and /proc for processes, so the GPU processes are the real pids of jobs that
// the real slurmd started, attributed by the agent to their Slurm jobs (environment here:
// proctrack/linuxproc; cgroup path where Slurm uses cgroups). The other three nodes have no
// agent. In the server's loop:
//   - a held GPU job marked stoker:steer is released onto a node and starts;
//   - a job busy for 10 s and then idle is warned (Comment) and cancelled by idle reclaim; a busy
//     job and an interactive (exempt) job are left alone;
//   - /metrics of the agent is per Slurm job; zones, alerts and the report of the server name
//     the Slurm jobs; the cancelled job's record ends through the jobcomp spool;
//   - the busy job gets a JS1 summary in its AdminComment.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "cluster_util.h"
#include "slurm/client.h"

extern char** environ;

namespace stoker::slurm {
namespace {

using testing::kConf;
using testing::kDir;
using testing::Sh;
using testing::WaitFor;

const std::string kStoker = std::string(STOKER_BINARY_DIR) + "/bin/stoker";

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

// A child process with its output in a log file; terminated (TERM, then KILL) when it goes.
class Child {
 public:
  Child(std::vector<std::string> args, std::map<std::string, std::string> env,
        const std::string& log)
      : log_(log) {
    std::vector<std::string> envs;
    for (char** e = environ; *e != nullptr; ++e) envs.emplace_back(*e);
    for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : envs) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    if (posix_spawn(&pid_, args[0].c_str(), &fa, nullptr, argv.data(), envp.data()) != 0) {
      pid_ = -1;
    }
    posix_spawn_file_actions_destroy(&fa);
  }
  ~Child() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  bool Alive() const { return pid_ > 0 && ::kill(pid_, 0) == 0; }
  std::string Log() const {
    std::ifstream in(log_);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

 private:
  pid_t pid_ = -1;
  std::string log_;
};

struct RealJob {
  uint32_t id = 0;
  uint32_t pid = 0;
  std::string node;
  int32_t gpu = -1;
};

RealJob Start(CommandSlurmClient& client, const std::string& name) {
  const std::string pidfile = kDir + "/engine-" + name + ".pid";
  Sh("rm -f " + pidfile);
  RealJob j;
  j.id = static_cast<uint32_t>(
      std::stoul(Sh("cd " + kDir + " && sbatch --parsable -o /dev/null -J " + name +
                    " -w g1 --gres=gpu:1 " + "--wrap 'echo $$ > " + pidfile + ".tmp; mv " +
                    pidfile + ".tmp " + pidfile + "; exec sleep 300'")));
  EXPECT_TRUE(WaitFor([&] { return std::ifstream(pidfile).good(); })) << name;
  std::ifstream(pidfile) >> j.pid;
  auto jobs = client.Jobs();
  EXPECT_TRUE(jobs.ok()) << jobs.status().ToString();
  for (const SlurmJob& s : jobs.ok() ? *jobs : std::vector<SlurmJob>{}) {
    if (s.id == j.id && !s.nodes.empty() && !s.gpu_indices.empty() && !s.gpu_indices[0].empty()) {
      j.node = s.nodes[0];
      j.gpu = s.gpu_indices[0][0];
    }
  }
  return j;
}

std::string JobField(uint32_t job, const std::string& key) {
  const std::string line = Sh("scontrol -o show job " + std::to_string(job));
  const size_t at = line.find(" " + key + "=");
  if (at == std::string::npos) return "";
  const size_t start = at + key.size() + 2;
  const size_t end = key == "Comment" ? line.find(" StdErr=", start) : line.find(' ', start);
  return line.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

TEST(SlurmServerEngine, TheServerLoopSteersMeasuresReclaimsAndReportsSlurmJobs) {
  CommandSlurmClient client({kConf, "", std::chrono::seconds(30)});
  const RealJob idle = Start(client, "train-then-idle");
  const RealJob busy = Start(client, "train-busy");
  const RealJob exempt = Start(client, "interactive-notebook");
  ASSERT_TRUE(idle.pid && busy.pid && exempt.pid);
  ASSERT_EQ(idle.node, "g1");
  ASSERT_TRUE(idle.gpu >= 0 && busy.gpu >= 0 && exempt.gpu >= 0);

  // g1's GPUs: the jobs' real pids on the GPUs Slurm gave them; the first job busy for 10 s,
  // then idle; the busy one at 80 %; the interactive one idle.
  const std::string dir = kDir + "/engine-test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/data");
  {
    std::ofstream s(dir + "/g1.yaml");
    s << "name: slurm-g1\nhostname: g1\ngpus:\n";
    for (int g = 0; g < 8; ++g) {
      std::string util = "0";
      if (g == idle.gpu) util = "{interp: step, points: [[0, 80], [10, 0]]}";
      if (g == busy.gpu) util = "80";
      s << "  - {model: NVIDIA H100 80GB HBM3, uuid: GPU-g1-" << g
        << ", pci_bus_id: \"00000000:" << 10 + g
        << ":00.0\", architecture: 9, memory_total_mib: 81559, util: " << util << "}\n";
    }
    s << "processes:\n";
    for (const RealJob* j : {&idle, &busy, &exempt}) {
      s << "  - {pid: " << j->pid << ", name: python3, gpu: " << j->gpu
        << ", used_memory_mib: 2000}\n";
    }
  }
  const int agent_port = FreePort();
  Child agent({kStoker, "agent", "--nvml-lib", STOKER_FAKE_NVML_LIB, "--listen",
               "127.0.0.1:" + std::to_string(agent_port), "--hostname", "g1", "--interval", "1s"},
              {{"STOKER_FAKE_NVML_SCENARIO", dir + "/g1.yaml"}}, dir + "/agent.log");
  {
    std::ofstream c(dir + "/slurm.yaml");
    c << "slurm_conf: " << kConf << "\ncycle: 1s\nmeasure_every: 1s\n"
      << "agents:\n  url: http://127.0.0.1:1\n  timeout: 1s\n"
      << "  nodes: {g1: \"http://127.0.0.1:" << agent_port << "\"}\n"
      << "reclaim:\n  idle: {warn_after: 10s, act_after: 20s, action: cancel}\n"
      << "  memory_held: {enabled: false}\n  audit_log: " << dir << "/audit.jsonl\n"
      << "jobstats: {publish_every: 2s, price_per_gpu_hour: 2}\n"
      << "jobcomp_spool: " << kDir << "/jobcomp\n";
    std::ofstream e(dir + "/efficiency.yaml");
    e << "zones: {window: 1m, min_coverage: 5s}\nservice: {evaluate_every: 1s}\n"
      << "alerts:\n  rules:\n    - {name: SlurmJobIdle, grade: orange, scope: job, when: "
         "[{metric: idle, op: \"==\", value: 1}], for: 5s, summary: idle}\n";
  }
  const int server_port = FreePort();
  const std::string url = "http://127.0.0.1:" + std::to_string(server_port);
  Child server({kStoker, "server", "--engine", "slurm", "--slurm-config", dir + "/slurm.yaml",
                "--efficiency-config", dir + "/efficiency.yaml", "--data-dir", dir + "/data",
                "--listen", "127.0.0.1:" + std::to_string(server_port), "--sync", "normal"},
               {}, dir + "/server.log");
  std::string token;
  ASSERT_TRUE(WaitFor([&] {
    std::ifstream t(dir + "/data/admin.token");
    return static_cast<bool>(t >> token);
  })) << server.Log();
  httplib::Client api(url);
  auto get = [&](const std::string& path) {
    auto r = api.Get(path, {{"Authorization", "Bearer " + token}});
    return r && r->status == 200 ? r->body : std::string();
  };

  // A held GPU job marked for steering: the server's loop releases it onto a node (named
  // interactive-*, so idle reclaim leaves it be: no process of it shows on g1's GPUs).
  const uint32_t held = static_cast<uint32_t>(
      std::stoul(Sh("cd " + kDir + " && sbatch --parsable -o /dev/null -H --comment=stoker:steer " +
                    "-J interactive-steered --gres=gpu:2 --wrap 'sleep 120'")));
  EXPECT_TRUE(
      WaitFor([&] { return JobField(held, "JobState") == "RUNNING"; }, std::chrono::seconds(30)))
      << server.Log();

  // The agent's /metrics is per Slurm job.
  httplib::Client agent_http("http://127.0.0.1:" + std::to_string(agent_port));
  std::string agent_metrics;
  EXPECT_TRUE(WaitFor([&] {
    auto r = agent_http.Get("/metrics");
    agent_metrics = r ? r->body : "";
    return agent_metrics.find("jobid=\"" + std::to_string(busy.id) + "\"") != std::string::npos;
  })) << agent.Log();
  EXPECT_NE(agent_metrics.find("kind=\"slurm\""), std::string::npos);

  // Busy for 10 s, then idle: warned after 10 s of idleness, cancelled after 20 s.
  ASSERT_TRUE(WaitFor([&] { return JobField(idle.id, "JobState") == "CANCELLED"; },
                      std::chrono::seconds(150)))
      << server.Log();
  EXPECT_NE(JobField(idle.id, "Comment").find("stoker idle-reclaim warning (idle)"),
            std::string::npos)
      << JobField(idle.id, "Comment");
  EXPECT_EQ(JobField(busy.id, "JobState"), "RUNNING");
  EXPECT_EQ(JobField(exempt.id, "JobState"), "RUNNING");
  EXPECT_EQ(JobField(exempt.id, "Comment"), "");

  const std::string metrics = get("/metrics");
  EXPECT_NE(metrics.find("stoker_slurm_reclaim_total{action=\"cancel\"} 1\n"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("stoker_slurm_nodes_without_agent 3\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("stoker_slurm_jobs_steered_total 1\n"), std::string::npos) << metrics;
  // Zones and alerts name the Slurm jobs.
  EXPECT_NE(get("/api/v1/zones").find("slurm:" + std::to_string(busy.id)), std::string::npos);
  EXPECT_TRUE(WaitFor([&] {
    return get("/api/v1/alerts").find("slurm:" + std::to_string(exempt.id)) != std::string::npos;
  })) << get("/api/v1/alerts");
  // The cancelled job's record ends through the jobcomp spool; the report covers it.
  const std::string idle_key = "slurm:" + std::to_string(idle.id);
  nlohmann::json report;
  EXPECT_TRUE(WaitFor([&] {
    report = nlohmann::json::parse(get("/api/v1/report?format=json"), nullptr, false);
    if (report.is_discarded()) return false;
    for (const auto& j : report["jobs"]) {
      if (j["id"] == idle_key) return !j["end"].get<std::string>().starts_with("1970");
    }
    return false;
  })) << report.dump().substr(0, 2000);
  EXPECT_NE(metrics.find("stoker_slurm_jobcomp_records_total"), std::string::npos);
  // And `stoker report` shows it.
  FILE* p =
      popen((kStoker + " report --server " + url + " --token " + token + " 2>&1").c_str(), "r");
  std::string text;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) text.append(buf, n);
  pclose(p);
  EXPECT_NE(text.find(idle_key), std::string::npos) << text;
  // The busy job's efficiency summary in its AdminComment.
  EXPECT_TRUE(WaitFor([&] { return JobField(busy.id, "AdminComment").starts_with("JS1:"); }))
      << JobField(busy.id, "AdminComment");

  EXPECT_TRUE(server.Alive()) << server.Log();
  EXPECT_TRUE(agent.Alive()) << agent.Log();
  Sh("scancel --full -u $(id -un) || true");
  WaitFor([&] { return Sh("squeue -h -o %i").empty(); });
}

}  // namespace
}  // namespace stoker::slurm
