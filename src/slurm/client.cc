#include "slurm/client.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

extern char** environ;

namespace stoker::slurm {
namespace {

// Slurm values are passed as one argv element each, so no shell quoting is involved; newlines
// and NULs are refused so a comment cannot break Slurm's own line-oriented files.
Status CheckValue(std::string_view what, std::string_view v) {
  if (v.size() > 4096) return InvalidArgument(std::string(what) + ": longer than 4096 bytes");
  for (char c : v) {
    if (c == '\n' || c == '\r' || c == '\0') {
      return InvalidArgument(std::string(what) + ": contains a line break or NUL");
    }
  }
  return Status::Ok();
}

Status CheckNodeName(const std::string& n) {
  STOKER_RETURN_IF_ERROR(CheckValue("node name", n));
  if (n.empty() || n.find_first_of(" =,[]") != std::string::npos) {
    return InvalidArgument("node name '" + n + "' is not a single node");
  }
  return Status::Ok();
}

}  // namespace

Result<CommandOutput> RunCommand(const std::vector<std::string>& argv,
                                 const std::map<std::string, std::string>& env, Duration timeout,
                                 size_t max_output) {
  if (argv.empty()) return InvalidArgument("RunCommand: empty argv");
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return Internal(std::string("pipe2: ") + strerror(errno));
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return Internal(std::string("pipe2: ") + strerror(errno));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view kv(*e);
    const std::string key(kv.substr(0, kv.find('=')));
    if (env.count(key) == 0) env_strings.emplace_back(kv);
  }
  for (const auto& [k, v] : env) {
    std::string& kv = env_strings.emplace_back(k);
    kv += '=';
    kv += v;
  }
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return Unavailable("cannot run " + argv[0] + ": " + strerror(rc));
  }
  CommandOutput result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* bufs[2] = {&result.out, &result.err};
  int open_fds = 2;
  bool timed_out = false, too_big = false;
  char chunk[65536];
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    const int n = poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t got = read(fds[i].fd, chunk, sizeof chunk);
      if (got <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      if (bufs[i]->size() + static_cast<size_t>(got) > max_output) {
        too_big = true;
        open_fds = 0;
        break;
      }
      bufs[i]->append(chunk, static_cast<size_t>(got));
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  if (timed_out || too_big) kill(pid, SIGKILL);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return DeadlineExceeded(argv[0] + " did not finish within the timeout");
  if (too_big) return ResourceExhausted(argv[0] + ": output exceeds " + std::to_string(max_output));
  result.exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
  return result;
}

Status StatusFromSlurmError(const std::string& command, int exit_code, const std::string& err) {
  std::string text = err.substr(0, 400);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  for (char& c : text) {
    if (c == '\n') c = ' ';
  }
  const std::string msg = command + " exited with " + std::to_string(exit_code) + ": " + text;
  for (const char* s :
       {"Unable to contact slurm controller", "Socket timed out", "Connection refused",
        "Unable to process configuration file", "Could not establish a configuration source",
        "Zero Bytes were transmitted"}) {
    if (err.find(s) != std::string::npos) return Unavailable(msg);
  }
  for (const char* s : {"Invalid job id", "Invalid node name", "Job has already finished",
                        "Invalid partition name"}) {
    if (err.find(s) != std::string::npos) return NotFound(msg);
  }
  // A pending job's settings changed while it started.
  if (err.find("no longer pending") != std::string::npos) return FailedPrecondition(msg);
  return Internal(msg);
}

Result<std::string> CommandSlurmClient::Run(std::vector<std::string> argv) const {
  const std::string name = argv.empty() ? "" : argv[0];
  if (!options_.bin_dir.empty()) argv[0] = options_.bin_dir + "/" + argv[0];
  std::map<std::string, std::string> env;
  if (!options_.slurm_conf.empty()) env["SLURM_CONF"] = options_.slurm_conf;
  STOKER_ASSIGN_OR_RETURN(CommandOutput r,
                          RunCommand(argv, env, options_.timeout, kMaxAnswerBytes));
  if (r.exit_code != 0) {
    std::string cmd = name;
    if (argv.size() > 1) cmd += " " + argv[1];
    return StatusFromSlurmError(cmd, r.exit_code, r.err);
  }
  return std::move(r.out);
}

Result<std::vector<SlurmNode>> CommandSlurmClient::Nodes() {
  STOKER_ASSIGN_OR_RETURN(std::string out, Run({"sinfo", "--json"}));
  return ParseSinfoJson(out);
}

Result<std::vector<SlurmJob>> CommandSlurmClient::Jobs() {
  STOKER_ASSIGN_OR_RETURN(std::string out, Run({"squeue", "--json"}));
  return ParseSqueueJson(out);
}

Result<std::vector<SlurmPartition>> CommandSlurmClient::Partitions() {
  STOKER_ASSIGN_OR_RETURN(std::string out, Run({"scontrol", "-o", "show", "partition"}));
  return ParsePartitionsText(out);
}

Status CommandSlurmClient::SetNodeWeight(const std::string& node, int64_t weight) {
  STOKER_RETURN_IF_ERROR(CheckNodeName(node));
  if (weight < 1 || weight > 65533) return InvalidArgument("weight out of range 1..65533");
  return Run({"scontrol", "update", "NodeName=" + node, "Weight=" + std::to_string(weight)})
      .status();
}

namespace {

// Node names checked and joined for a node-list argument ("a,b").
Result<std::string> NodeListArg(const std::vector<std::string>& nodes) {
  std::string list;
  for (const std::string& n : nodes) {
    STOKER_RETURN_IF_ERROR(CheckNodeName(n));
    list += (list.empty() ? "" : ",") + n;
  }
  return list;
}

}  // namespace

Status CommandSlurmClient::SteerAndRelease(uint32_t job, const std::vector<std::string>& nodes) {
  STOKER_ASSIGN_OR_RETURN(const std::string list, NodeListArg(nodes));
  const std::string id = std::to_string(job);
  if (!list.empty()) {
    STOKER_RETURN_IF_ERROR(
        Run({"scontrol", "update", "JobId=" + id, "ReqNodeList=" + list}).status());
  }
  return Run({"scontrol", "release", id}).status();
}

std::vector<Status> SlurmClient::SteerAndReleaseAll(const SteerList& jobs) {
  std::vector<Status> out;
  out.reserve(jobs.size());
  for (const auto& [job, nodes] : jobs) out.push_back(SteerAndRelease(job, nodes));
  return out;
}

std::map<std::string, Status> SlurmClient::SetNodeWeights(const std::map<std::string, int64_t>& w) {
  std::map<std::string, Status> out;
  for (const auto& [node, weight] : w) out[node] = SetNodeWeight(node, weight);
  return out;
}

namespace {

// Runs f(0..n-1) on up to `width` threads.
template <typename F>
void ForEachParallel(size_t n, size_t width, F f) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (size_t t = 0; t < std::min(n, width); ++t) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < n; i = next++) f(i);
    });
  }
  for (std::thread& t : threads) t.join();
}

constexpr size_t kIdsPerCommand = 200;  // keeps each argument list short

}  // namespace

std::vector<Status> CommandSlurmClient::SetExcludedNodesAll(const SteerList& jobs) {
  std::vector<Status> out(jobs.size());
  ForEachParallel(jobs.size(), 8, [&](size_t i) {
    const auto& [job, nodes] = jobs[i];
    auto list = NodeListArg(nodes);
    out[i] =
        list.ok()
            ? Run({"scontrol", "update", "JobId=" + std::to_string(job), "ExcNodeList=" + *list})
                  .status()
            : list.status();
  });
  return out;
}

std::vector<Status> CommandSlurmClient::SteerAndReleaseAll(const SteerList& jobs) {
  std::vector<Status> out(jobs.size());
  ForEachParallel(jobs.size(), 8, [&](size_t i) {
    const auto& [job, nodes] = jobs[i];
    auto list = NodeListArg(nodes);
    if (!list.ok()) {
      out[i] = list.status();
    } else if (!list->empty()) {
      out[i] = Run({"scontrol", "update", "JobId=" + std::to_string(job), "ReqNodeList=" + *list})
                   .status();
    }
  });
  // One release for every job whose node list is set. When it fails (a job vanished meanwhile:
  // the others are released all the same), each job is released alone to learn which failed;
  // releasing a job that is not held is a no-op.
  std::vector<size_t> ready;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (out[i].ok()) ready.push_back(i);
  }
  for (size_t from = 0; from < ready.size(); from += kIdsPerCommand) {
    const size_t to = std::min(ready.size(), from + kIdsPerCommand);
    std::string ids;
    for (size_t k = from; k < to; ++k) {
      ids += (ids.empty() ? "" : ",") + std::to_string(jobs[ready[k]].first);
    }
    if (Run({"scontrol", "release", ids}).ok()) continue;
    ForEachParallel(to - from, 8, [&](size_t k) {
      const size_t i = ready[from + k];
      out[i] = Run({"scontrol", "release", std::to_string(jobs[i].first)}).status();
    });
  }
  return out;
}

std::map<std::string, Status> CommandSlurmClient::SetNodeWeights(
    const std::map<std::string, int64_t>& w) {
  std::map<std::string, Status> out;
  std::map<int64_t, std::vector<std::string>> by_weight;
  for (const auto& [node, weight] : w) {
    out[node] = CheckNodeName(node);
    if (out[node].ok() && (weight < 1 || weight > 65533)) {
      out[node] = InvalidArgument("weight out of range 1..65533");
    }
    if (out[node].ok()) by_weight[weight].push_back(node);
  }
  for (const auto& [weight, nodes] : by_weight) {
    for (size_t from = 0; from < nodes.size(); from += kIdsPerCommand) {
      const size_t to = std::min(nodes.size(), from + kIdsPerCommand);
      std::string list;
      for (size_t k = from; k < to; ++k) list += (list.empty() ? "" : ",") + nodes[k];
      Status s = Run({"scontrol", "update", "NodeName=" + list, "Weight=" + std::to_string(weight)})
                     .status();
      if (s.ok()) continue;
      // One unknown node fails the whole command: set each alone to learn which.
      for (size_t k = from; k < to; ++k) out[nodes[k]] = SetNodeWeight(nodes[k], weight);
    }
  }
  return out;
}

Status CommandSlurmClient::SetComment(uint32_t job, const std::string& text) {
  STOKER_RETURN_IF_ERROR(CheckValue("comment", text));
  return Run({"scontrol", "update", "JobId=" + std::to_string(job), "Comment=" + text}).status();
}

Status CommandSlurmClient::SetAdminComment(uint32_t job, const std::string& text) {
  STOKER_RETURN_IF_ERROR(CheckValue("admin comment", text));
  return Run({"scontrol", "update", "JobId=" + std::to_string(job), "AdminComment=" + text})
      .status();
}

Status CommandSlurmClient::Requeue(uint32_t job) {
  return Run({"scontrol", "requeue", std::to_string(job)}).status();
}

Status CommandSlurmClient::Cancel(uint32_t job) {
  return Run({"scancel", std::to_string(job)}).status();
}

}  // namespace stoker::slurm
