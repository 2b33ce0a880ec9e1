// The job commands: submit, jobs, job, cancel, logs, queue.

#include <fmt/core.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "cli/common.h"
#include "cli/table.h"
#include "core/size.h"

namespace stoker::cli {
namespace {
namespace fs = std::filesystem;

std::string GpuText(const json& spec) {
  if (spec.value("total_gpus", 0) > 0) {
    return std::to_string(spec["total_gpus"].get<int>()) + " (gang)";
  }
  if (spec.value("nodes", 0) > 0) {
    return std::to_string(spec["nodes"].get<int>()) + "x" + std::to_string(spec.value("gpus", 0));
  }
  if (spec.value("gpus", 0) > 0) {
    const int min = spec.value("min_gpus", 0);
    return std::to_string(spec["gpus"].get<int>()) +
           (min > 0 ? " (min " + std::to_string(min) + ")" : "");
  }
  if (spec.value("gpu_milli", 0) > 0) return std::to_string(spec["gpu_milli"].get<int>()) + "m";
  if (!spec.value("mig", std::string()).empty()) return "mig " + spec["mig"].get<std::string>();
  return "-";
}

void PrintJobsTable(const json& jobs) {
  const Table t({{"ID", 6},
                 {"USER", 10},
                 {"STATE", 11},
                 {"NAME", 18},
                 {"NODE", 14},
                 {"GPUS", 10},
                 {"AGE", 6},
                 {"INFO"}});
  fmt::print("{}", t.Header());
  const int64_t now = NowMs();
  for (const json& j : jobs) {
    std::string info = j.value("reason", "");
    if (j.contains("exit_code"))
      info =
          "exit " + std::to_string(j["exit_code"].get<int>()) + (info.empty() ? "" : "; " + info);
    std::string node = j.contains("assignment") ? j["assignment"].value("node", "") : "";
    if (j.contains("parts") && j["parts"].is_array() && !j["parts"].empty()) {
      // A gang: rank 0's node and how many more.
      node = j["parts"][0].value("node", "");
      if (j["parts"].size() > 1) node += "+" + std::to_string(j["parts"].size() - 1);
    }
    if (j.contains("assignment") &&
        !j["assignment"].value("cuda_visible_devices", std::string()).empty()) {
      info = "devices " + j["assignment"]["cuda_visible_devices"].get<std::string>() +
             (info.empty() ? "" : "; " + info);
    }
    std::string name = j.value("name", "");
    if (name.empty() && j["spec"]["command"].is_array() && !j["spec"]["command"].empty()) {
      name = j["spec"]["command"][0].get<std::string>();
    }
    fmt::print("{}",
               t.Line({fmt::format("{}", j["id"].get<int64_t>()), j.value("user", ""),
                       j.value("state", ""), name.substr(0, 18), node.empty() ? "-" : node,
                       GpuText(j["spec"]), Age(j.value("submit_ms", int64_t{0}), now), info}));
  }
}

struct SubmitFlags {
  int gpus = 0;
  int min_gpus = 0;
  int nodes = 0;
  int total_gpus = 0;
  int gpu_milli = 0;
  std::string gpu_mem;
  std::vector<std::string> gpu_models;
  std::string mig;
  double cpu = 0;
  std::string mem;
  std::string job_class;
  int priority = 0;
  bool preemptible = false;
  bool movable = false;
  std::string name;
  std::string workdir;
  std::vector<std::string> env;
  std::string on_node_loss;
  std::string user;
  std::vector<std::string> command;
};

int RunSubmit(const ClientFlags& c, const SubmitFlags& s) {
  json spec;
  spec["command"] = s.command;
  if (s.gpus) spec["gpus"] = s.gpus;
  if (s.min_gpus) spec["min_gpus"] = s.min_gpus;
  if (s.nodes) spec["nodes"] = s.nodes;
  if (s.total_gpus) spec["total_gpus"] = s.total_gpus;
  if (s.gpu_milli) spec["gpu_milli"] = s.gpu_milli;
  if (!s.gpu_mem.empty()) {
    auto v = ParseSizeMib(s.gpu_mem);
    if (!v.ok()) return Fail(v.status().WithContext("--gpu-mem"));
    spec["gpu_memory_mib"] = *v;
  }
  if (!s.gpu_models.empty()) spec["gpu_models"] = s.gpu_models;
  if (!s.mig.empty()) spec["mig"] = s.mig;
  if (s.cpu > 0) spec["cpu_milli"] = static_cast<int64_t>(s.cpu * 1000 + 0.5);
  if (!s.mem.empty()) {
    auto v = ParseSizeMib(s.mem);
    if (!v.ok()) return Fail(v.status().WithContext("--mem"));
    spec["memory_mib"] = *v;
  }
  if (!s.job_class.empty()) spec["class"] = s.job_class;
  if (s.priority) spec["priority"] = s.priority;
  if (s.preemptible) spec["preemptible"] = true;
  if (s.movable) spec["movable"] = true;
  if (!s.name.empty()) spec["name"] = s.name;
  std::string workdir = s.workdir;
  if (workdir.empty()) {
    std::error_code ec;
    workdir = fs::current_path(ec).string();
  }
  spec["workdir"] = workdir;
  if (!s.on_node_loss.empty()) spec["on_node_loss"] = s.on_node_loss;
  if (!s.user.empty()) spec["user"] = s.user;
  json env = json::object();
  for (const std::string& kv : s.env) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return Fail(InvalidArgument("--env: expected K=V, got '" + kv + "'"));
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!env.empty()) spec["env"] = env;
  auto client = MakeClient(c);
  if (!client.ok()) return Fail(client.status());
  auto r = Call(*client, "POST", "/api/v1/jobs", spec);
  if (!r.ok()) return Fail(r.status());
  if (c.json) {
    fmt::print("{}\n", r->dump(2));
  } else {
    fmt::print("submitted job {}\n", (*r)["id"].get<int64_t>());
  }
  return kExitOk;
}

int RunLogs(const ClientFlags& c, int64_t id, bool follow, bool stderr_stream, int part) {
  auto client = MakeClient(c);
  if (!client.ok()) return Fail(client.status());
  int64_t offset = 0;
  const std::string stream = stderr_stream ? "stderr" : "stdout";
  while (true) {
    auto r = Call(*client, "GET",
                  "/api/v1/jobs/" + std::to_string(id) + "/logs?stream=" + stream +
                      "&offset=" + std::to_string(offset) +
                      (part > 0 ? "&part=" + std::to_string(part) : std::string()));
    if (!r.ok()) return Fail(r.status());
    const std::string data = (*r)["data"].get<std::string>();
    std::fwrite(data.data(), 1, data.size(), stdout);
    std::fflush(stdout);
    offset = (*r)["next_offset"].get<int64_t>();
    if (!follow || (*r)["finished"].get<bool>()) break;
    if (data.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return kExitOk;
}

}  // namespace

void RegisterJobCommands(CLI::App& app, int& exit_code) {
  // stoker submit
  {
    auto* c = FlagStorage<ClientFlags>();
    auto* s = FlagStorage<SubmitFlags>();
    auto* cmd =
        app.add_subcommand("submit", "Submit a job: stoker submit --gpus 2 -- python train.py");
    AddClientFlags(cmd, c);
    cmd->add_option("--gpus", s->gpus,
                    "Whole GPUs (elastic maximum with --min-gpus; per node with --nodes)");
    cmd->add_option("--min-gpus", s->min_gpus, "Elastic minimum GPUs");
    cmd->add_option("--nodes", s->nodes,
                    "A gang: this many parts, each on a node of its own with --gpus GPUs; all "
                    "start together, with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set");
    cmd->add_option("--total-gpus", s->total_gpus,
                    "A gang of this many GPUs in all, split over as many nodes as needed (whole "
                    "nodes first)");
    cmd->add_option("--gpu-milli", s->gpu_milli, "A share of one GPU in milli-GPU (1..999)");
    cmd->add_option("--gpu-mem", s->gpu_mem, "GPU memory per GPU (MiB, or 16G)");
    cmd->add_option("--gpu-model", s->gpu_models, "Allowed GPU model (substring; repeatable)");
    cmd->add_option("--mig", s->mig, "MIG profile, e.g. 1g.10gb");
    cmd->add_option("--cpu", s->cpu, "CPU cores (e.g. 0.5)");
    cmd->add_option("--mem", s->mem, "Memory (MiB, or 4G)");
    cmd->add_option("--class", s->job_class, "Job class (weighted placement policy)");
    cmd->add_option("--priority", s->priority, "Priority (-1000..1000, larger first)");
    cmd->add_flag("--preemptible", s->preemptible, "The job may be preempted");
    cmd->add_flag("--movable", s->movable,
                  "The job checkpoints: the system may restart it at once to consolidate GPUs");
    cmd->add_option("--name", s->name, "Job name");
    cmd->add_option("--workdir", s->workdir, "Working directory (default: the current one)");
    cmd->add_option("--env", s->env, "Environment variable K=V (repeatable)");
    cmd->add_option("--on-node-loss", s->on_node_loss, "requeue (default) or fail");
    cmd->add_option("--user", s->user, "Submit for this user (admins)");
    cmd->add_option("command", s->command, "The command and its arguments (after --)")->required();
    cmd->callback([c, s, &exit_code] { exit_code = RunSubmit(*c, *s); });
  }
  // stoker jobs
  {
    auto* c = FlagStorage<ClientFlags>();
    auto* state = FlagStorage<std::string>();
    auto* user = FlagStorage<std::string>();
    auto* node = FlagStorage<std::string>();
    auto* cmd = app.add_subcommand("jobs", "List jobs");
    AddClientFlags(cmd, c);
    cmd->add_option(
        "--state", *state,
        "Comma-separated states (queued,assigned,running,cancelling,succeeded,failed,cancelled)");
    cmd->add_option("--user", *user, "Only this user's jobs");
    cmd->add_option("--node", *node, "Only jobs on this node");
    cmd->callback([c, state, user, node, &exit_code] {
      std::string q;
      if (!state->empty()) q += "&state=" + UrlEncode(*state);
      if (!user->empty()) q += "&user=" + UrlEncode(*user);
      if (!node->empty()) q += "&node=" + UrlEncode(*node);
      if (!q.empty()) q[0] = '?';
      exit_code = RunGetAndPrint(*c, "/api/v1/jobs" + q, PrintJobsTable);
    });
  }
  // stoker job ID
  {
    auto* c = FlagStorage<ClientFlags>();
    auto* id = FlagStorage<int64_t>(0);
    auto* cmd = app.add_subcommand("job", "Show one job and its events");
    AddClientFlags(cmd, c);
    cmd->add_option("id", *id, "Job id")->required();
    cmd->callback([c, id, &exit_code] {
      exit_code = RunGetAndPrint(*c, "/api/v1/jobs/" + std::to_string(*id), [&](const json& j) {
        PrintJobsTable(json::array({j}));
        fmt::print("\ncommand: {}\n", j["spec"]["command"].dump());
        if (j.contains("assignment")) fmt::print("assignment: {}\n", j["assignment"].dump());
        if (j.contains("parts")) {
          fmt::print("parts:\n");
          for (const json& p : j["parts"]) {
            fmt::print("  {}  {:<14} {:<9} devices {}{}\n", p.value("rank", 0),
                       p.value("node", std::string()), p.value("phase", std::string()),
                       p.value("cuda_visible_devices", std::string("-")),
                       p.contains("exit_code")
                           ? "  exit " + std::to_string(p["exit_code"].get<int>())
                       : p.contains("signal") ? "  signal " + std::to_string(p["signal"].get<int>())
                                              : std::string());
          }
        }
        auto client = MakeClient(*c);
        if (!client.ok()) return;
        auto ev = Call(*client, "GET", "/api/v1/jobs/" + std::to_string(*id) + "/events");
        if (!ev.ok()) return;
        fmt::print("events:\n");
        for (const json& e : *ev) {
          fmt::print("  {}  {:<10} {}\n", e["ts_ms"].get<int64_t>(), e["kind"].get<std::string>(),
                     e["message"].get<std::string>());
        }
      });
    });
  }
  // stoker cancel ID
  {
    auto* c = FlagStorage<ClientFlags>();
    auto* id = FlagStorage<int64_t>(0);
    auto* cmd =
        app.add_subcommand("cancel", "Cancel a job (SIGTERM to its process group, then SIGKILL)");
    AddClientFlags(cmd, c);
    cmd->add_option("id", *id, "Job id")->required();
    cmd->callback([c, id, &exit_code] {
      exit_code = RunAndPrint(
          *c, "POST", "/api/v1/jobs/" + std::to_string(*id) + "/cancel", nullptr,
          [&](const json& r) { fmt::print("job {}: {}\n", *id, r["state"].get<std::string>()); });
    });
  }
  // stoker logs ID [-f]
  {
    auto* c = FlagStorage<ClientFlags>();
    auto* id = FlagStorage<int64_t>(0);
    auto* follow = FlagStorage<bool>(false);
    auto* err = FlagStorage<bool>(false);
    auto* part = FlagStorage<int>(0);
    auto* cmd = app.add_subcommand("logs", "Print a job's output");
    AddClientFlags(cmd, c);
    cmd->add_option("id", *id, "Job id")->required();
    cmd->add_flag("-f,--follow", *follow, "Keep printing until the job ends");
    cmd->add_flag("--stderr", *err, "Print standard error instead of standard output");
    cmd->add_option("--part", *part, "A gang's part (rank) whose output to print (default 0)");
    cmd->callback([c, id, follow, err, part, &exit_code] {
      exit_code = RunLogs(*c, *id, *follow, *err, *part);
    });
    // stoker queue
    {
      auto* c = FlagStorage<ClientFlags>();
      auto* cmd = app.add_subcommand("queue", "Show queued jobs in scheduling order");
      AddClientFlags(cmd, c);
      cmd->callback([c, &exit_code] {
        exit_code = RunGetAndPrint(*c, "/api/v1/queue", [](const json& q) {
          fmt::print("{:<5} {:<6} {:<10} {:<18} {:<5} {}\n", "POS", "ID", "USER", "NAME", "PRIO",
                     "REASON");
          for (const json& e : q) {
            fmt::print("{:<5} {:<6} {:<10} {:<18} {:<5} {}\n", e["position"].get<int>(),
                       e["job"].get<int64_t>(), e["user"].get<std::string>(),
                       e["name"].get<std::string>(), e["priority"].get<int>(),
                       e["reason"].get<std::string>());
          }
        });
      });
    }
  }
}

}  // namespace stoker::cli
