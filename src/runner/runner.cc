#include "runner/runner.h"

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/job_scope.h"

namespace stoker::runner {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

bool ValidJobId(const std::string& id) { return IsValidStokerJobId(id); }

bool HasNul(const std::string& s) { return s.find('\0') != std::string::npos; }

std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status WriteFileAtomic(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Internal("open " + tmp + ": " + std::strerror(errno));
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      return Internal("write " + tmp + ": " + std::strerror(errno));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return Internal("rename " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

// Field 22 of /proc/<pid>/stat: start time in clock ticks since boot. Distinguishes a live job
// from an unrelated process that reused its pid.
std::optional<uint64_t> ProcessStartTime(int pid) {
  auto stat = ReadSmallFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return std::nullopt;
  const size_t close = stat->rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream in(stat->substr(close + 2));
  std::string field;
  // After "pid (comm) " the next token is field 3 (state); start time is field 22.
  for (int i = 3; i <= 22; ++i) {
    if (!(in >> field)) return std::nullopt;
  }
  try {
    return std::stoull(field);
  } catch (...) {
    return std::nullopt;
  }
}

bool ProcessAlive(int pid, std::optional<uint64_t> start_time) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  auto now_start = ProcessStartTime(pid);
  if (!now_start) return false;
  // A zombie still has its stat entry; treat state Z as ended.
  auto stat = ReadSmallFile("/proc/" + std::to_string(pid) + "/stat");
  if (stat) {
    const size_t close = stat->rfind(')');
    if (close != std::string::npos && close + 2 < stat->size() && (*stat)[close + 2] == 'Z') {
      return false;
    }
  }
  return !start_time || *start_time == *now_start;
}

}  // namespace

void CloseDescriptorsFrom(int lowest) {
  if (::close_range(static_cast<unsigned>(lowest), ~0U, 0) == 0) return;
  // Kernels before 5.9: close one by one up to the descriptor limit.
  rlimit rl{};
  const int max = ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                      ? static_cast<int>(std::min<rlim_t>(rl.rlim_cur, 1 << 20))
                      : 65536;
  for (int fd = lowest; fd < max; ++fd) ::close(fd);
}

Runner::Runner(RunnerOptions options, Clock* clock) : options_(std::move(options)), clock_(clock) {
  std::error_code ec;
  fs::create_directories(options_.state_dir, ec);
}

Runner::Runner(std::string state_dir, std::vector<std::string> shim_argv, Clock* clock,
               Duration grace)
    : Runner(
          RunnerOptions{
              .state_dir = std::move(state_dir), .shim_argv = std::move(shim_argv), .grace = grace},
          clock) {}

std::string Runner::JobDir(const std::string& job_id) const {
  return options_.state_dir + "/" + job_id;
}

Status Runner::CheckUser(const std::string& user) const {
  if (::geteuid() != 0) return Status::Ok();  // every job runs as this (unprivileged) user
  // No user: the job would run as this process, root.
  const passwd* pw = user.empty() ? ::getpwuid(0) : ::getpwnam(user.c_str());
  if (pw == nullptr) return PermissionDenied("user: '" + user + "' is not a user of this node");
  const UserPolicy& p = options_.users;
  if (pw->pw_uid == 0 && !p.allow_root) {
    return PermissionDenied("user: '" + std::string(pw->pw_name) +
                            "' is root; this node does not run jobs as root (--allow-root-jobs)");
  }
  if (pw->pw_uid != 0 && pw->pw_uid < p.min_uid && !p.allow.count(user)) {
    return PermissionDenied("user: '" + user + "' (uid " + std::to_string(pw->pw_uid) +
                            ") is a system account; this node runs jobs only for uid >= " +
                            std::to_string(p.min_uid) + " or users it allows by name");
  }
  return Status::Ok();
}

std::string Runner::JobCgroup(const std::string& job_id) const {
  auto text = ReadSmallFile(JobDir(job_id) + "/cgroup");
  if (!text) return "";
  std::string dir = *text;
  while (!dir.empty() && (dir.back() == '\n' || dir.back() == ' ')) dir.pop_back();
  return dir;
}

int Runner::LiveShim(const std::string& job_id) const {
  auto text = ReadSmallFile(JobDir(job_id) + "/shim.pid");
  if (!text) return 0;
  std::istringstream in(*text);
  int pid = 0;
  uint64_t start = 0;
  in >> pid;
  std::optional<uint64_t> start_time;
  if (in >> start) start_time = start;
  return ProcessAlive(pid, start_time) ? pid : 0;
}

Status Runner::Launch(const LaunchSpec& spec) {
  if (!ValidJobId(spec.job_id)) return InvalidArgument("job_id: must match [A-Za-z0-9_.-]{1,128}");
  if (spec.argv.empty() || spec.argv[0].empty()) return InvalidArgument("argv: must not be empty");
  for (size_t i = 0; i < spec.argv.size(); ++i) {
    if (HasNul(spec.argv[i])) {
      return InvalidArgument("argv[" + std::to_string(i) + "]: contains a NUL byte");
    }
  }
  if (HasNul(spec.workdir)) return InvalidArgument("workdir: contains a NUL byte");
  for (const auto& [k, v] : spec.env) {
    if (HasNul(k) || HasNul(v) || k.find('=') != std::string::npos || k.empty()) {
      return InvalidArgument("env." + k + ": invalid name or a NUL byte");
    }
  }
  STOKER_RETURN_IF_ERROR(CheckUser(spec.user));
  const std::string dir = JobDir(spec.job_id);
  std::error_code ec;
  if (fs::exists(dir, ec)) return AlreadyExists("job " + spec.job_id + " already has a directory");
  if (!fs::create_directories(dir, ec)) return Internal("create " + dir + ": " + ec.message());
  STOKER_RETURN_IF_ERROR(WriteFileAtomic(dir + "/attempt", std::to_string(spec.attempt) + "\n"));
  std::string cgroup;
  if (options_.cgroups.enabled()) {
    CgroupLimits limits{.cpu_milli = spec.cpu_milli,
                        .memory_mib = spec.memory_mib,
                        .restrict_gpus = true,
                        .gpu_minors = spec.gpu_minors};
    auto made = CreateJobCgroup(options_.cgroups, spec.job_id, limits);
    if (!made.ok()) {
      fs::remove_all(dir, ec);
      return made.status().WithContext("job " + spec.job_id + ": cgroup");
    }
    cgroup = *made;
    STOKER_RETURN_IF_ERROR(WriteFileAtomic(dir + "/cgroup", cgroup + "\n"));
  }

  json j;
  j["job_id"] = spec.job_id;
  j["argv"] = spec.argv;
  j["env"] = spec.env;
  j["workdir"] = spec.workdir;
  j["user"] = spec.user;
  j["cuda_visible_devices"] = spec.cuda_visible_devices;
  if (!cgroup.empty()) j["cgroup"] = cgroup;
  STOKER_RETURN_IF_ERROR(WriteFileAtomic(dir + "/spec.json", j.dump()));

  // Everything the forked children touch is prepared before fork (only async-signal-safe calls
  // may follow fork in a multi-threaded process).
  std::vector<std::string> args = options_.shim_argv;
  args.push_back(dir);
  std::vector<char*> cargs;
  cargs.reserve(args.size() + 1);
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  const std::string exit_path = dir + "/exit.json";
  const std::string exec_fail = R"({"exit_code":127,"error":"cannot start the job shim"})";

  const pid_t mid = ::fork();
  if (mid < 0) return Internal(std::string("fork: ") + std::strerror(errno));
  if (mid == 0) {
    // Intermediate child: fork the shim and exit, so the shim is re-parented to init (or the
    // nearest subreaper) and never depends on this process to be reaped.
    const pid_t shim = ::fork();
    if (shim == 0) {
      ::setsid();
      // A caller that blocks signals for sigwait() (stoker agent) must not pass the mask on:
      // the job would ignore the SIGTERM of a cancel.
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      const int devnull = ::open("/dev/null", O_RDWR);
      if (devnull >= 0) {
        ::dup2(devnull, 0);
        ::dup2(devnull, 1);
        ::dup2(devnull, 2);
      }
      // Nothing of this process (the API's listener and connections, the store, NVML's
      // devices) reaches the shim, whether or not it was opened close-on-exec.
      CloseDescriptorsFrom(3);
      ::execv(cargs[0], cargs.data());
      const int fd = ::open(exit_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        (void)!::write(fd, exec_fail.data(), exec_fail.size());
        ::close(fd);
      }
      ::_exit(127);
    }
    ::_exit(shim < 0 ? 1 : 0);
  }
  int status = 0;
  while (::waitpid(mid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Internal("fork of the job shim failed");
  return Status::Ok();
}

JobStatus Runner::Read(const std::string& job_id) const {
  const std::string dir = JobDir(job_id);
  JobStatus st;
  st.job_id = job_id;
  if (auto attempt = ReadSmallFile(dir + "/attempt")) {
    std::istringstream in(*attempt);
    in >> st.attempt;
  }
  if (auto pid_text = ReadSmallFile(dir + "/pid")) {
    std::istringstream in(*pid_text);
    in >> st.pid;
  }
  if (auto exit_text = ReadSmallFile(dir + "/exit.json")) {
    json j = json::parse(*exit_text, nullptr, false);
    st.phase = JobPhase::kExited;
    if (j.is_object()) {
      if (j.contains("exit_code") && j["exit_code"].is_number_integer()) {
        st.exit_code = j["exit_code"].get<int>();
      }
      if (j.contains("signal") && j["signal"].is_number_integer())
        st.signal = j["signal"].get<int>();
      if (j.contains("error") && j["error"].is_string()) st.error = j["error"].get<std::string>();
    } else {
      st.error = "unreadable exit.json";
    }
    return st;
  }
  // No exit file: the job runs while its shim lives.
  int shim_pid = 0;
  if (auto shim_text = ReadSmallFile(dir + "/shim.pid")) {
    std::istringstream in(*shim_text);
    in >> shim_pid;
  }
  if (shim_pid > 0 && ProcessAlive(shim_pid, std::nullopt)) {
    st.phase = st.pid > 0 ? JobPhase::kRunning : JobPhase::kStarting;
    return st;
  }
  if (shim_pid == 0) {
    // Launched moments ago; the shim has not written its pid yet (or never started: the
    // intermediate child then wrote exit.json, handled above).
    st.phase = JobPhase::kStarting;
    return st;
  }
  // The shim is gone without writing an exit status (killed, or the node rebooted).
  // Re-check exit.json: the shim may have written it between the two reads.
  if (fs::exists(dir + "/exit.json")) return Read(job_id);
  st.phase = JobPhase::kExited;
  st.error = "job supervisor disappeared; exit status unknown";
  return st;
}

Status Runner::Cancel(const std::string& job_id, std::optional<Duration> grace) {
  if (!ValidJobId(job_id) || !fs::exists(JobDir(job_id))) return NotFound("job " + job_id);
  JobStatus st = Read(job_id);
  if (st.phase == JobPhase::kExited) return Status::Ok();
  if (st.pid <= 0) return Unavailable("job " + job_id + " is still starting; retry");
  // The shim passes the signal to every process of the job (its cgroup, or every process it
  // adopted as subreaper). The job's own group and cgroup are signalled here too, so a cancel
  // works even when the shim is gone.
  if (const int shim = LiveShim(job_id); shim > 0) ::kill(shim, SIGTERM);
  // The job leads its own process group (pgid == pid).
  if (::kill(-st.pid, SIGTERM) != 0 && errno != ESRCH) {
    return Internal("kill " + std::to_string(st.pid) + ": " + std::strerror(errno));
  }
  if (const std::string cg = JobCgroup(job_id); !cg.empty()) (void)SignalCgroup(cg, SIGTERM);
  if (!kill_deadlines_.count(job_id))
    kill_deadlines_[job_id] = clock_->Now() + grace.value_or(options_.grace);
  return Status::Ok();
}

std::vector<JobStatus> Runner::Poll() {
  std::vector<JobStatus> out;
  std::error_code ec;
  std::vector<std::string> ids;
  for (const auto& entry : fs::directory_iterator(options_.state_dir, ec)) {
    if (entry.is_directory(ec)) ids.push_back(entry.path().filename().string());
  }
  std::sort(ids.begin(), ids.end());
  const MonoTime now = clock_->Now();
  for (const auto& id : ids) {
    JobStatus st = Read(id);
    auto it = kill_deadlines_.find(id);
    if (it != kill_deadlines_.end()) {
      if (st.phase == JobPhase::kExited) {
        kill_deadlines_.erase(it);
      } else if (now >= it->second && st.pid > 0) {
        if (const int shim = LiveShim(id); shim > 0) ::kill(shim, SIGUSR1);
        ::kill(-st.pid, SIGKILL);
        if (const std::string cg = JobCgroup(id); !cg.empty()) (void)KillCgroup(cg);
      }
    }
    out.push_back(std::move(st));
  }
  return out;
}

Result<JobStatus> Runner::Get(const std::string& job_id) {
  if (!ValidJobId(job_id) || !fs::exists(JobDir(job_id))) return NotFound("job " + job_id);
  return Read(job_id);
}

Status Runner::Forget(const std::string& job_id) {
  if (!ValidJobId(job_id)) return InvalidArgument("job_id");
  JobStatus st = Read(job_id);
  if (st.phase != JobPhase::kExited) return FailedPrecondition("job " + job_id + " still running");
  if (const std::string cg = JobCgroup(job_id); !cg.empty()) (void)RemoveJobCgroup(cg);
  std::error_code ec;
  fs::remove_all(JobDir(job_id), ec);
  kill_deadlines_.erase(job_id);
  if (ec) return Internal("remove " + JobDir(job_id) + ": " + ec.message());
  return Status::Ok();
}

}  // namespace stoker::runner
