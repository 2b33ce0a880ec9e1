// The job commands: submit, jobs, job, cancel, logs, queue. A submission sends the protocol's
// codec of its job spec (cli/submit.h), and jobs are read with the protocol's decoder, so the
// job document is written once (protocol/job.h) for the server and the CLI.

#include <fmt/core.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "cli/common.h"
#include "cli/submit.h"
#include "cli/table.h"
#include "core/size.h"
#include "protocol/job.h"
#include "protocol/limits.h"

namespace stoker::cli {
namespace {
namespace fs = std::filesystem;

using protocol::Job;
using protocol::JobSpec;

std::string GpuText(const JobSpec& spec) {
  if (spec.total_gpus > 0) return std::to_string(spec.total_gpus) + " (gang)";
  if (spec.nodes > 0) return std::to_string(spec.nodes) + "x" + std::to_string(spec.gpus);
  if (spec.gpus > 0) {
    return std::to_string(spec.gpus) +
           (spec.min_gpus > 0 ? " (min " + std::to_string(spec.min_gpus) + ")" : "");
  }
  if (spec.gpu_milli > 0) return std::to_string(spec.gpu_milli) + "m";
  if (!spec.mig.empty()) return "mig " + spec.mig;
  return "-";
}

void PrintJobsTable(const std::vector<Job>& jobs) {
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
  for (const Job& j : jobs) {
    std::string info = j.reason;
    if (j.exit_code) {
      info = fmt::format("exit {}{}{}", *j.exit_code, info.empty() ? "" : "; ", info);
    }
    std::string node = j.assignment ? j.assignment->node : "";
    if (!j.parts.empty()) {
      // A gang: rank 0's node and how many more.
      node = j.parts[0].assignment.node;
      if (j.parts.size() > 1) node += "+" + std::to_string(j.parts.size() - 1);
    }
    if (j.assignment && !j.assignment->cuda_visible_devices.empty()) {
      info = fmt::format("devices {}{}{}", j.assignment->cuda_visible_devices,
                         info.empty() ? "" : "; ", info);
    }
    std::string name = j.spec.name;
    if (name.empty() && !j.spec.command.empty()) name = j.spec.command[0];
    fmt::print("{}", t.Line({fmt::format("{}", j.id), j.user, protocol::JobStateName(j.state),
                             name.substr(0, 18), node.empty() ? "-" : node, GpuText(j.spec),
                             Age(j.submit_ms, now), info}));
  }
}

// One job as the server sent it, read with the protocol's decoder (the server's own; its errors
// name the job's id). Spec fields this version does not know (a newer server's) are skipped.
Result<Job> DecodeJob(const json& doc) {
  auto job = protocol::JobFromJson(doc, protocol::UnknownFields::kIgnore);
  if (!job.ok()) return job.status().WithContext("the server's answer");
  return job;
}

// GET `path` (one job, or a listing when `list`); prints the answer as JSON with --json, else
// decodes the jobs and prints them through `text`.
int RunGetJobs(const ClientFlags& c, const std::string& path, bool list,
               const std::function<void(const std::vector<Job>&)>& text) {
  auto client = MakeClient(c);
  if (!client.ok()) return Fail(client.status());
  auto r = Call(*client, "GET", path);
  if (!r.ok()) return Fail(r.status());
  if (c.json) {
    fmt::print("{}\n", r->dump(2));
    return kExitOk;
  }
  std::vector<Job> jobs;
  if (!list) {
    auto job = DecodeJob(*r);
    if (!job.ok()) return Fail(job.status());
    jobs.push_back(std::move(*job));
  } else {
    if (!r->is_array()) return Fail(InvalidArgument("the server's job listing is not an array"));
    jobs.reserve(r->size());
    for (const json& doc : *r) {
      auto job = DecodeJob(doc);
      if (!job.ok()) return Fail(job.status());
      jobs.push_back(std::move(*job));
    }
  }
  text(jobs);
  return kExitOk;
}

// stoker queue: the queued jobs in scheduling order, each entry read with the protocol's
// decoder (an error names the entry's place in the answer and the field).
int RunQueue(const ClientFlags& c) {
  auto client = MakeClient(c);
  if (!client.ok()) return Fail(client.status());
  auto r = Call(*client, "GET", "/api/v1/queue");
  if (!r.ok()) return Fail(r.status());
  if (c.json) {
    fmt::print("{}\n", r->dump(2));
    return kExitOk;
  }
  if (!r->is_array()) return Fail(InvalidArgument("the server's queue is not an array"));
  std::vector<protocol::QueueEntry> entries;
  entries.reserve(r->size());
  for (size_t i = 0; i < r->size(); ++i) {
    auto e = protocol::QueueEntryFromJson((*r)[i]);
    if (!e.ok()) {
      return Fail(e.status().WithContext(fmt::format("the server's queue, entry {}", i)));
    }
    entries.push_back(std::move(*e));
  }
  const Table t({{"POS", 5}, {"ID", 6}, {"USER", 10}, {"NAME", 18}, {"PRIO", 5}, {"REASON"}});
  fmt::print("{}", t.Header());
  for (const protocol::QueueEntry& e : entries) {
    fmt::print("{}", t.Line({fmt::format("{}", e.position), fmt::format("{}", e.job), e.user,
                             e.name, fmt::format("{}", e.priority), e.reason}));
  }
  return kExitOk;
}

int RunSubmit(const ClientFlags& c, const SubmitFlags& s) {
  std::string cwd;
  if (s.workdir.empty()) {
    std::error_code ec;
    cwd = fs::current_path(ec).string();
  }
  auto spec = SubmitSpec(s, cwd);
  if (!spec.ok()) return Fail(spec.status());
  auto client = MakeClient(c);
  if (!client.ok()) return Fail(client.status());
  auto r = Call(*client, "POST", "/api/v1/jobs", protocol::JobSpecToJson(*spec));
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
    // A reader that has gone (stdout a closed pipe: SIGPIPE is ignored) ends the command, which
    // would otherwise follow the log for nobody.
    if (std::fwrite(data.data(), 1, data.size(), stdout) != data.size() ||
        std::fflush(stdout) != 0) {
      return Fail(Internal(fmt::format("writing the log: {}", std::strerror(errno))));
    }
    offset = (*r)["next_offset"].get<int64_t>();
    if (!follow || (*r)["finished"].get<bool>()) break;
    if (data.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return kExitOk;
}

}  // namespace

void AddSubmitFlags(CLI::App* cmd, SubmitFlags* s) {
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
}

Result<protocol::JobSpec> SubmitSpec(const SubmitFlags& s, const std::string& cwd) {
  JobSpec spec;
  spec.command = s.command;
  const std::pair<const char*, int> counts[] = {{"--gpus", s.gpus},
                                                {"--min-gpus", s.min_gpus},
                                                {"--nodes", s.nodes},
                                                {"--total-gpus", s.total_gpus},
                                                {"--gpu-milli", s.gpu_milli}};
  for (const auto& [flag, v] : counts) {
    if (v < 0) return InvalidArgument(fmt::format("{}: must not be negative, got {}", flag, v));
  }
  spec.gpus = s.gpus;
  spec.min_gpus = s.min_gpus;
  spec.nodes = s.nodes;
  spec.total_gpus = s.total_gpus;
  spec.gpu_milli = s.gpu_milli;
  if (!s.gpu_mem.empty()) {
    auto v = ParseSizeMib(s.gpu_mem);
    if (!v.ok()) return v.status().WithContext("--gpu-mem");
    spec.gpu_memory_mib = *v;
  }
  spec.gpu_models = s.gpu_models;
  spec.mig = s.mig;
  // Not `s.cpu < 0`: NaN is refused too. 0 leaves the default.
  if (!(s.cpu >= 0))
    return InvalidArgument(fmt::format("--cpu: must not be negative, got {}", s.cpu));
  if (s.cpu > 0) {
    constexpr double kMaxCores = protocol::limits::kCpuMilliMax / 1000.0;
    if (s.cpu > kMaxCores) {
      return InvalidArgument(fmt::format("--cpu: at most {} cores, got {}", kMaxCores, s.cpu));
    }
    spec.cpu_milli = std::llround(s.cpu * 1000);
    if (spec.cpu_milli < protocol::limits::kCpuMilliMin) {
      return InvalidArgument(fmt::format("--cpu: at least 0.001 cores, got {}", s.cpu));
    }
  }
  if (!s.mem.empty()) {
    auto v = ParseSizeMib(s.mem);
    if (!v.ok()) return v.status().WithContext("--mem");
    spec.memory_mib = *v;
  }
  spec.job_class = s.job_class;
  spec.priority = s.priority;
  spec.preemptible = s.preemptible;
  spec.movable = s.movable;
  spec.name = s.name;
  spec.workdir = s.workdir.empty() ? cwd : s.workdir;
  if (!s.on_node_loss.empty()) {
    auto loss = protocol::kOnNodeLossNames.Find(s.on_node_loss);
    if (!loss) {
      return InvalidArgument("--on-node-loss: must be 'requeue' or 'fail', got '" + s.on_node_loss +
                             "'");
    }
    spec.on_node_loss = *loss;
  }
  spec.user = s.user;
  for (const std::string& kv : s.env) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument("--env: expected K=V, got '" + kv + "'");
    }
    spec.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return spec;
}

void RegisterJobCommands(CLI::App& app, int& exit_code) {
  // stoker submit
  {
    auto* c = FlagStorage<ClientFlags>();
    auto* s = FlagStorage<SubmitFlags>();
    auto* cmd =
        app.add_subcommand("submit", "Submit a job: stoker submit --gpus 2 -- python train.py");
    AddClientFlags(cmd, c);
    AddSubmitFlags(cmd, s);
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
      exit_code = RunGetJobs(*c, "/api/v1/jobs" + q, true, PrintJobsTable);
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
      exit_code =
          RunGetJobs(*c, "/api/v1/jobs/" + std::to_string(*id), false, [&](const auto& one) {
            const Job& j = one.front();
            PrintJobsTable(one);
            fmt::print("\ncommand: {}\n", json(j.spec.command).dump());
            if (j.assignment) {
              fmt::print("assignment: {}\n", protocol::AssignmentToJson(*j.assignment).dump());
            }
            if (!j.parts.empty()) {
              fmt::print("parts:\n");
              for (size_t rank = 0; rank < j.parts.size(); ++rank) {
                const protocol::GangPart& p = j.parts[rank];
                fmt::print("  {}  {:<14} {:<9} devices {}{}\n", rank, p.assignment.node,
                           protocol::PartPhaseName(p.phase), p.assignment.cuda_visible_devices,
                           p.exit_code ? "  exit " + std::to_string(*p.exit_code)
                           : p.signal  ? "  signal " + std::to_string(*p.signal)
                                       : std::string());
              }
            }
            auto client = MakeClient(*c);
            if (!client.ok()) return;
            auto ev = Call(*client, "GET", "/api/v1/jobs/" + std::to_string(*id) + "/events");
            if (!ev.ok()) return;
            fmt::print("events:\n");
            for (const json& e : *ev) {
              fmt::print("  {}  {:<10} {}\n", e["ts_ms"].get<int64_t>(),
                         e["kind"].get<std::string>(), e["message"].get<std::string>());
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
      cmd->callback([c, &exit_code] { exit_code = RunQueue(*c); });
    }
  }
}

}  // namespace stoker::cli
