// The job shim: a tiny supervisor per job. It starts the job in its own process group (and its
// cgroup, where the node has cgroups), records the job's pid, waits for it and writes the exit
// status to a file, so the status is never lost even if the agent is down when the job ends.
//
// It is the job's child subreaper: a process that leaves the job's process group and session
// (setsid, double fork) is re-parented to the shim instead of init, so the shim can still
// find it (its descendants in /proc) and stop it. When the job's main process ends, whatever
// of the job is left is stopped too (SIGTERM, then SIGKILL after kLeftoverGrace), so no
// process of a finished job keeps a GPU.

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/job_scope.h"
#include "runner/cgroup.h"
#include "runner/runner.h"

extern char** environ;

namespace stoker::runner {
namespace {
using json = nlohmann::json;

constexpr auto kLeftoverGrace = std::chrono::seconds(2);

void WriteAtomic(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  (void)!::write(fd, content.data(), content.size());
  ::fsync(fd);
  ::close(fd);
  (void)::rename(tmp.c_str(), path.c_str());  // best effort, as the write: no one to tell
}

int Fail(const std::string& dir, const std::string& error) {
  json j;
  j["exit_code"] = 127;
  j["error"] = error;
  WriteAtomic(dir + "/exit.json", j.dump());
  return 127;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);  // closed at return: nothing of the shim's reaches the job
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Fields after "pid (comm) ": [0] state (field 3), [1] ppid (4), ... [19] start time (22).
std::vector<std::string> StatFields(pid_t pid) {
  const std::string stat = ReadAll("/proc/" + std::to_string(pid) + "/stat");
  std::vector<std::string> fields;
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 > stat.size()) return fields;
  std::istringstream in(stat.substr(close + 2));
  std::string f;
  while (in >> f) fields.push_back(f);
  return fields;
}

std::string StartTime(pid_t pid) {
  const std::vector<std::string> f = StatFields(pid);
  return f.size() > 19 ? f[19] : "0";
}

// Every live descendant of this process (as subreaper it adopts orphans, so the whole tree of
// the job hangs below it), from /proc.
std::vector<pid_t> Descendants() {
  std::map<pid_t, std::vector<pid_t>> children;
  if (DIR* d = ::opendir("/proc")) {
    while (dirent* e = ::readdir(d)) {
      char* end = nullptr;
      const long pid = std::strtol(e->d_name, &end, 10);
      if (pid <= 0 || *end != '\0') continue;
      const std::vector<std::string> f = StatFields(static_cast<pid_t>(pid));
      if (f.size() < 2 || f[0] == "Z") continue;
      children[static_cast<pid_t>(std::atol(f[1].c_str()))].push_back(static_cast<pid_t>(pid));
    }
    ::closedir(d);
  }
  std::vector<pid_t> out;
  std::vector<pid_t> todo{::getpid()};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    for (pid_t c : children[p]) {
      out.push_back(c);
      todo.push_back(c);
    }
  }
  return out;
}

// Signals every process of the job: its process group, its cgroup, and every descendant.
void SignalJob(pid_t pgid, const std::string& cgroup, int sig) {
  if (pgid > 0) ::kill(-pgid, sig);
  if (!cgroup.empty()) {
    if (sig == SIGKILL) {
      (void)KillCgroup(cgroup);
    } else {
      (void)SignalCgroup(cgroup, sig);
    }
  }
  for (pid_t p : Descendants()) ::kill(p, sig);
}

bool JobLeft(const std::string& cgroup) {
  if (!Descendants().empty()) return true;
  return !cgroup.empty() && !CgroupPids(cgroup).empty();
}

// Reaps every exited child; records the main process's status.
void Reap(pid_t main, bool* main_done, int* main_status) {
  int status = 0;
  pid_t w;
  while ((w = ::waitpid(-1, &status, WNOHANG)) > 0) {
    if (w == main) {
      *main_done = true;
      *main_status = status;
    }
  }
}

}  // namespace

int ShimMain(const std::string& dir) {
  // (signal() cannot fail for these signals.)
  (void)::signal(SIGHUP, SIG_IGN);
  (void)::signal(SIGINT, SIG_IGN);
  (void)::signal(SIGPIPE, SIG_IGN);
  // SIGCHLD, SIGTERM (cancel) and SIGUSR1 (kill) are taken synchronously with sigtimedwait.
  sigset_t wait_set;
  sigemptyset(&wait_set);
  sigaddset(&wait_set, SIGCHLD);
  sigaddset(&wait_set, SIGTERM);
  sigaddset(&wait_set, SIGUSR1);
  ::sigprocmask(SIG_BLOCK, &wait_set, nullptr);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  WriteAtomic(dir + "/shim.pid", std::to_string(::getpid()) + " " + StartTime(::getpid()) + "\n");

  json spec = json::parse(ReadAll(dir + "/spec.json"), nullptr, false);
  if (!spec.is_object() || !spec.contains("argv") || !spec["argv"].is_array() ||
      spec["argv"].empty()) {
    return Fail(dir, "spec.json missing or invalid");
  }
  std::vector<std::string> argv;
  for (const auto& a : spec["argv"]) {
    if (!a.is_string()) return Fail(dir, "spec.json: argv must be strings");
    argv.push_back(a.get<std::string>());
  }
  const std::string job_id = spec.value("job_id", "");
  const std::string user = spec.value("user", "");
  const std::string cgroup = spec.value("cgroup", "");
  std::string workdir = spec.value("workdir", "");

  // Identity: as root, become the submitting user (Runner::Launch checked the policy);
  // otherwise run as ourselves.
  const bool root = ::geteuid() == 0;
  uid_t uid = ::geteuid();
  gid_t gid = ::getegid();
  std::string home = "/";
  std::string user_name = user;
  std::string shell = "/bin/sh";
  const passwd* pw = root && !user.empty() ? ::getpwnam(user.c_str()) : ::getpwuid(uid);
  if (root && !user.empty() && pw == nullptr) return Fail(dir, "unknown user '" + user + "'");
  if (pw != nullptr) {
    uid = pw->pw_uid;
    gid = pw->pw_gid;
    home = pw->pw_dir ? pw->pw_dir : "/";
    user_name = pw->pw_name;
    if (pw->pw_shell && *pw->pw_shell) shell = pw->pw_shell;
  }
  if (workdir.empty()) workdir = home;

  // Environment: a documented clean base (nothing of the agent's own), the job's variables,
  // then what Stoker sets, which the job cannot override.
  std::map<std::string, std::string> env;
  env["PATH"] = std::string(kJobPath);
  env["HOME"] = home;
  env["USER"] = user_name;
  env["LOGNAME"] = user_name;
  env["SHELL"] = shell;
  env["LANG"] = "C.UTF-8";
  if (spec.contains("env") && spec["env"].is_object()) {
    for (const auto& [k, v] : spec["env"].items()) {
      if (v.is_string()) env[k] = v.get<std::string>();
    }
  }
  env[std::string(kStokerJobEnvVar)] = job_id;
  // Always set: a job without GPUs sees none, whatever it asked for.
  env["CUDA_VISIBLE_DEVICES"] = spec.value("cuda_visible_devices", "");
  std::vector<std::string> env_strings;
  env_strings.reserve(env.size());
  for (const auto& [k, v] : env) {
    std::string& e = env_strings.emplace_back(k);
    e += '=';
    e += v;
  }
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> cargv;
  cargv.reserve(argv.size() + 1);
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);

  const std::string out_path = dir + "/stdout.log";
  const std::string err_path = dir + "/stderr.log";
  const int out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  const int err_fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (out_fd < 0 || err_fd < 0) return Fail(dir, std::string("open logs: ") + std::strerror(errno));
  if (root) {
    (void)!::fchown(out_fd, uid, gid);
    (void)!::fchown(err_fd, uid, gid);
  }
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  // The child joins the job's cgroup itself ("0" = the writer) before it drops privileges.
  int procs_fd = -1;
  if (!cgroup.empty()) {
    procs_fd = ::open((cgroup + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (procs_fd < 0)
      return Fail(dir, "cannot join cgroup " + cgroup + ": " + std::strerror(errno));
  }

  // exec errors come back through a close-on-exec pipe: EOF means exec succeeded.
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return Fail(dir, "pipe failed");

  const pid_t child = ::fork();
  if (child < 0) return Fail(dir, std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    ::close(err_pipe[0]);
    auto die = [&](const char* what) {
      std::string msg = std::string(what) + ": " + std::strerror(errno);
      (void)!::write(err_pipe[1], msg.data(), msg.size());
      ::_exit(127);
    };
    ::setpgid(0, 0);
    if (procs_fd >= 0 && ::write(procs_fd, "0", 1) != 1) die("join the job's cgroup");
    for (int sig : {SIGHUP, SIGINT, SIGPIPE, SIGTERM, SIGUSR1}) (void)::signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    if (root) {
      if (::setgid(gid) != 0) die("setgid");
      if (::initgroups(user_name.c_str(), gid) != 0) die("initgroups");
      if (::setuid(uid) != 0) die("setuid");
    }
    if (::chdir(workdir.c_str()) != 0) die(("chdir " + workdir).c_str());
    // Only 0, 1 and 2 survive exec: everything else the shim holds is close-on-exec, and
    // anything that is not is made so here (the error pipe must stay open until exec).
    if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
      for (int fd = 3; fd < 1024; ++fd) {
        if (fd != err_pipe[1]) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
      }
    }
    environ = envp.data();
    ::execvp(cargv[0], cargv.data());
    die(("exec " + argv[0]).c_str());
  }
  ::setpgid(child, child);  // also in the parent: no window where a cancel misses the group
  ::close(err_pipe[1]);
  ::close(out_fd);
  ::close(err_fd);
  if (null_fd >= 0) ::close(null_fd);
  if (procs_fd >= 0) ::close(procs_fd);
  std::string exec_error;
  char buf[512];
  ssize_t n;
  while ((n = ::read(err_pipe[0], buf, sizeof(buf))) != 0) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    exec_error.append(buf, static_cast<size_t>(n));
  }
  ::close(err_pipe[0]);
  WriteAtomic(dir + "/pid",
              std::to_string(child) + " " + std::to_string(child) + " " + StartTime(child) + "\n");

  // Wait for the main process, passing the runner's signals on to the whole job.
  bool main_done = false;
  int main_status = 0;
  bool killed = false;
  while (!main_done) {
    siginfo_t info{};
    const timespec tick{1, 0};  // a SIGCHLD coalesced with another is caught on the next tick
    const int sig = ::sigtimedwait(&wait_set, &info, &tick);
    if (sig == SIGTERM) SignalJob(child, cgroup, SIGTERM);
    if (sig == SIGUSR1) {
      SignalJob(child, cgroup, SIGKILL);
      killed = true;
    }
    Reap(child, &main_done, &main_status);
  }
  // What is left of the job (daemons, processes that left its group) goes with it.
  if (JobLeft(cgroup)) {
    if (!killed) {
      SignalJob(0, cgroup, SIGTERM);
      const auto deadline = std::chrono::steady_clock::now() + kLeftoverGrace;
      while (JobLeft(cgroup) && std::chrono::steady_clock::now() < deadline) {
        siginfo_t info{};
        const timespec slice{0, 50'000'000};  // 50 ms
        ::sigtimedwait(&wait_set, &info, &slice);
        Reap(child, &main_done, &main_status);
      }
    }
    for (int round = 0; round < 100 && JobLeft(cgroup); ++round) {
      SignalJob(0, cgroup, SIGKILL);
      siginfo_t info{};
      const timespec slice{0, 20'000'000};  // 20 ms
      ::sigtimedwait(&wait_set, &info, &slice);
      Reap(child, &main_done, &main_status);
    }
  }
  // Whatever of the job ended as our zombie is reaped here, not left for init.
  Reap(child, &main_done, &main_status);
  if (!cgroup.empty()) (void)RemoveJobCgroup(cgroup);
  json result;
  if (!exec_error.empty()) {
    result["exit_code"] = 127;
    result["error"] = exec_error;
  } else if (WIFEXITED(main_status)) {
    result["exit_code"] = WEXITSTATUS(main_status);
  } else if (WIFSIGNALED(main_status)) {
    result["signal"] = WTERMSIG(main_status);
  }
  WriteAtomic(dir + "/exit.json", result.dump());
  return 0;
}

}  // namespace stoker::runner
