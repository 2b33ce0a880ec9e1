// The job shim: a tiny supervisor per job. It starts the job in its own process group, records
// the job's pid, waits for it and writes the exit status to a file, so the status is never
// lost even if the agent is down when the job ends.

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "runner/runner.h"

extern char** environ;

namespace stoker::runner {
namespace {
using json = nlohmann::json;

void WriteAtomic(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  (void)!::write(fd, content.data(), content.size());
  ::fsync(fd);
  ::close(fd);
  ::rename(tmp.c_str(), path.c_str());
}

int Fail(const std::string& dir, const std::string& error) {
  json j;
  j["exit_code"] = 127;
  j["error"] = error;
  WriteAtomic(dir + "/exit.json", j.dump());
  return 127;
}

std::string StartTime(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string stat = ss.str();
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return "0";
  std::istringstream fields(stat.substr(close + 2));
  std::string f;
  for (int i = 3; i <= 22 && (fields >> f); ++i) {
  }
  return f.empty() ? "0" : f;
}

}  // namespace

int ShimMain(const std::string& dir) {
  ::signal(SIGHUP, SIG_IGN);
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGPIPE, SIG_IGN);
  WriteAtomic(dir + "/shim.pid", std::to_string(::getpid()) + "\n");

  std::ifstream spec_in(dir + "/spec.json");
  std::stringstream ss;
  ss << spec_in.rdbuf();
  json spec = json::parse(ss.str(), nullptr, false);
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
  std::string workdir = spec.value("workdir", "");

  // Identity: as root, become the submitting user; otherwise run as ourselves.
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

  // Environment: a small base, the job's own variables, then what Stoker sets (the job cannot
  // override its id or device list).
  std::map<std::string, std::string> env;
  const char* path = ::getenv("PATH");
  env["PATH"] = path ? path : "/usr/local/bin:/usr/bin:/bin";
  env["HOME"] = home;
  env["USER"] = user_name;
  env["LOGNAME"] = user_name;
  env["SHELL"] = shell;
  if (const char* lang = ::getenv("LANG")) env["LANG"] = lang;
  if (spec.contains("env") && spec["env"].is_object()) {
    for (const auto& [k, v] : spec["env"].items()) {
      if (v.is_string()) env[k] = v.get<std::string>();
    }
  }
  env["STOKER_JOB_ID"] = job_id;
  if (spec.contains("cuda_visible_devices") && spec["cuda_visible_devices"].is_string()) {
    env["CUDA_VISIBLE_DEVICES"] = spec["cuda_visible_devices"].get<std::string>();
  }
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> cargv;
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
    for (int sig : {SIGHUP, SIGINT, SIGPIPE, SIGTERM}) ::signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    if (root) {
      if (::setgid(gid) != 0) die("setgid");
      if (::initgroups(user_name.c_str(), gid) != 0) die("initgroups");
      if (::setuid(uid) != 0) die("setuid");
    }
    if (::chdir(workdir.c_str()) != 0) die(("chdir " + workdir).c_str());
    environ = envp.data();
    ::execvp(cargv[0], cargv.data());
    die(("exec " + argv[0]).c_str());
  }
  ::setpgid(child, child);  // also in the parent: no window where a cancel misses the group
  ::close(err_pipe[1]);
  ::close(out_fd);
  ::close(err_fd);
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

  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) return Fail(dir, std::string("waitpid: ") + std::strerror(errno));
  }
  json result;
  if (!exec_error.empty()) {
    result["exit_code"] = 127;
    result["error"] = exec_error;
  } else if (WIFEXITED(status)) {
    result["exit_code"] = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result["signal"] = WTERMSIG(status);
  }
  WriteAtomic(dir + "/exit.json", result.dump());
  return 0;
}

}  // namespace stoker::runner
