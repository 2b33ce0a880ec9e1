#include "runner/runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace stoker::runner {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

bool ValidJobId(const std::string& id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) return false;
  }
  return id != "." && id != "..";
}

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

std::string JobPhaseName(JobPhase p) {
  switch (p) {
    case JobPhase::kStarting:
      return "starting";
    case JobPhase::kRunning:
      return "running";
    case JobPhase::kExited:
      return "exited";
  }
  return "unknown";
}

Runner::Runner(std::string state_dir, std::vector<std::string> shim_argv, Clock* clock,
               Duration grace)
    : state_dir_(std::move(state_dir)),
      shim_argv_(std::move(shim_argv)),
      clock_(clock),
      grace_(grace) {
  std::error_code ec;
  fs::create_directories(state_dir_, ec);
}

std::string Runner::JobDir(const std::string& job_id) const { return state_dir_ + "/" + job_id; }

Status Runner::Launch(const LaunchSpec& spec) {
  if (!ValidJobId(spec.job_id)) return InvalidArgument("job_id: must match [A-Za-z0-9_.-]{1,128}");
  if (spec.argv.empty() || spec.argv[0].empty()) return InvalidArgument("argv: must not be empty");
  const std::string dir = JobDir(spec.job_id);
  std::error_code ec;
  if (fs::exists(dir, ec)) return AlreadyExists("job " + spec.job_id + " already has a directory");
  if (!fs::create_directories(dir, ec)) return Internal("create " + dir + ": " + ec.message());

  json j;
  j["job_id"] = spec.job_id;
  j["argv"] = spec.argv;
  j["env"] = spec.env;
  j["workdir"] = spec.workdir;
  j["user"] = spec.user;
  if (spec.cuda_visible_devices) j["cuda_visible_devices"] = *spec.cuda_visible_devices;
  STOKER_RETURN_IF_ERROR(WriteFileAtomic(dir + "/spec.json", j.dump()));

  // Everything the forked children touch is prepared before fork (only async-signal-safe calls
  // may follow fork in a multi-threaded process).
  std::vector<std::string> args = shim_argv_;
  args.push_back(dir);
  std::vector<char*> cargs;
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
  // The job leads its own process group (pgid == pid).
  if (::kill(-st.pid, SIGTERM) != 0 && errno != ESRCH) {
    return Internal("kill " + std::to_string(st.pid) + ": " + std::strerror(errno));
  }
  if (!kill_deadlines_.count(job_id))
    kill_deadlines_[job_id] = clock_->Now() + grace.value_or(grace_);
  return Status::Ok();
}

std::vector<JobStatus> Runner::Poll() {
  std::vector<JobStatus> out;
  std::error_code ec;
  std::vector<std::string> ids;
  for (const auto& entry : fs::directory_iterator(state_dir_, ec)) {
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
        ::kill(-st.pid, SIGKILL);
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
  std::error_code ec;
  fs::remove_all(JobDir(job_id), ec);
  kill_deadlines_.erase(job_id);
  if (ec) return Internal("remove " + JobDir(job_id) + ": " + ec.message());
  return Status::Ok();
}

}  // namespace stoker::runner
