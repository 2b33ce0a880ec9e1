#include "runner/cgroup.h"

#include <fcntl.h>
#include <linux/bpf.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "core/job_scope.h"

namespace stoker::runner {
namespace {

constexpr long kCgroup2Magic = 0x63677270;  // CGROUP2_SUPER_MAGIC
// The NVIDIA driver's character devices: /dev/nvidia<N> are major 195 minor N; minor 255 is
// /dev/nvidiactl and 254 /dev/nvidia-modeset, which every CUDA process opens.
constexpr uint32_t kNvidiaMajor = 195;
constexpr uint32_t kNvidiaCtlMinor = 255;
constexpr uint32_t kNvidiaModesetMinor = 254;
constexpr int kCpuPeriodUs = 100000;

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status WriteFile(const std::string& path, const std::string& value) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Internal(Errno("open " + path));
  const ssize_t n = ::write(fd, value.data(), value.size());
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    errno = err;
    return Internal(Errno("write '" + value + "' to " + path));
  }
  return Status::Ok();
}

bool IsCgroup2(const std::string& dir) {
  struct statfs fs {};
  return ::statfs(dir.c_str(), &fs) == 0 && static_cast<long>(fs.f_type) == kCgroup2Magic;
}

// The first cgroup2 mount point in /proc/self/mountinfo ("" when there is none).
std::string Cgroup2Mount() {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS... - FSTYPE SOURCE SUPEROPTIONS
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream after(line.substr(dash + 3));
    std::string fstype;
    after >> fstype;
    if (fstype != "cgroup2") continue;
    std::istringstream before(line.substr(0, dash));
    std::string id, parent, devno, root, mount;
    if (before >> id >> parent >> devno >> root >> mount) return mount;
  }
  return "";
}

// This process's cgroup v2 path ("0::/path" in /proc/self/cgroup).
std::string OwnCgroup() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  }
  return "";
}

bool HasWord(const std::string& list, const std::string& word) {
  std::istringstream in(list);
  std::string w;
  while (in >> w) {
    if (w == word) return true;
  }
  return false;
}

// Whether systemd delegated `dir` (Delegate=yes): it marks the cgroup with an extended
// attribute, trusted.delegate for system services and user.delegate for user services.
bool Delegated(const std::string& dir) {
  char value[8] = {0};
  for (const char* name : {"trusted.delegate", "user.delegate"}) {
    const ssize_t n = ::getxattr(dir.c_str(), name, value, sizeof(value) - 1);
    if (n > 0 && value[0] == '1') return true;
  }
  return false;
}

int Bpf(int cmd, bpf_attr* attr) {
  return static_cast<int>(::syscall(__NR_bpf, cmd, attr, sizeof(*attr)));
}

bpf_insn Insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  bpf_insn i{};
  i.code = code;
  i.dst_reg = dst & 0xf;
  i.src_reg = src & 0xf;
  i.off = off;
  i.imm = imm;
  return i;
}

// The device program: allow every device except NVIDIA GPU nodes (char 195:N) whose minor is
// not one of `minors` (nvidiactl and nvidia-modeset stay allowed). The context is
// struct bpf_cgroup_dev_ctx { u32 access_type (access << 16 | type); u32 major; u32 minor; }.
std::vector<bpf_insn> DeviceProgram(const std::vector<uint32_t>& minors) {
  std::vector<uint32_t> allowed = minors;
  allowed.push_back(kNvidiaCtlMinor);
  allowed.push_back(kNvidiaModesetMinor);
  std::vector<bpf_insn> p;
  // Offsets are filled in at the end: every "goto allow" jumps to the last two instructions.
  std::vector<size_t> to_allow;
  p.push_back(Insn(BPF_LDX | BPF_MEM | BPF_W, 2, 1, 0, 0));  // r2 = access_type
  p.push_back(Insn(BPF_ALU64 | BPF_AND | BPF_K, 2, 0, 0, 0xffff));
  to_allow.push_back(p.size());
  p.push_back(Insn(BPF_JMP | BPF_JNE | BPF_K, 2, 0, 0, BPF_DEVCG_DEV_CHAR));
  p.push_back(Insn(BPF_LDX | BPF_MEM | BPF_W, 3, 1, 4, 0));  // r3 = major
  to_allow.push_back(p.size());
  p.push_back(Insn(BPF_JMP | BPF_JNE | BPF_K, 3, 0, 0, static_cast<int32_t>(kNvidiaMajor)));
  p.push_back(Insn(BPF_LDX | BPF_MEM | BPF_W, 4, 1, 8, 0));  // r4 = minor
  for (uint32_t m : allowed) {
    to_allow.push_back(p.size());
    p.push_back(Insn(BPF_JMP | BPF_JEQ | BPF_K, 4, 0, 0, static_cast<int32_t>(m)));
  }
  p.push_back(Insn(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 0));  // deny
  p.push_back(Insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
  const size_t allow = p.size();
  p.push_back(Insn(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 1));  // allow
  p.push_back(Insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
  for (size_t at : to_allow) p[at].off = static_cast<int16_t>(allow - at - 1);
  return p;
}

// Loads the device program and attaches it to the cgroup directory `dir`.
Status AttachDeviceProgram(const std::string& dir, const std::vector<uint32_t>& minors) {
  const std::vector<bpf_insn> prog = DeviceProgram(minors);
  static const char kLicense[] = "Apache-2.0";  // device programs need no GPL-only helpers
  bpf_attr load{};
  load.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  load.insns = reinterpret_cast<uint64_t>(prog.data());
  load.insn_cnt = static_cast<uint32_t>(prog.size());
  load.license = reinterpret_cast<uint64_t>(kLicense);
  const int prog_fd = Bpf(BPF_PROG_LOAD, &load);
  if (prog_fd < 0) return Unavailable(Errno("load the GPU device filter (bpf)"));
  ::fcntl(prog_fd, F_SETFD, FD_CLOEXEC);
  const int cg_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (cg_fd < 0) {
    ::close(prog_fd);
    return Internal(Errno("open " + dir));
  }
  bpf_attr attach{};
  attach.target_fd = static_cast<uint32_t>(cg_fd);
  attach.attach_bpf_fd = static_cast<uint32_t>(prog_fd);
  attach.attach_type = BPF_CGROUP_DEVICE;
  const int rc = Bpf(BPF_PROG_ATTACH, &attach);
  const int err = errno;
  ::close(cg_fd);
  ::close(prog_fd);  // the attachment keeps the program alive with the cgroup
  if (rc != 0) {
    errno = err;
    return Unavailable(Errno("attach the GPU device filter to " + dir));
  }
  return Status::Ok();
}

}  // namespace

std::string CgroupSupport::Describe() const {
  if (!enabled()) return "no cgroups (" + why_not + "): process tracking only";
  std::string s = "cgroup v2 at " + parent + ":";
  std::string sep = " ";
  for (auto [on, name] : {std::pair{kill, "kill"},
                          {cpu, "cpu limits"},
                          {memory, "memory limits"},
                          {devices, "GPU device filter"}}) {
    if (!on) continue;
    s += sep + name;
    sep = ", ";
  }
  if (!why_not.empty()) s += " (not: " + why_not + ")";
  return s;
}

CgroupSupport ProbeCgroups(const std::string& requested, const std::string& node_dir) {
  CgroupSupport s;
  if (requested == "off") {
    s.why_not = "disabled by configuration";
    return s;
  }
  std::string base = requested;
  bool own = false;
  if (base.empty()) {
    const std::string mount = Cgroup2Mount();
    const std::string path = OwnCgroup();
    if (mount.empty() || path.empty()) {
      s.why_not = "no cgroup v2 hierarchy is mounted";
      return s;
    }
    base = mount + (path == "/" ? "" : path);
    own = true;
    if (path != "/" && !Delegated(base)) {
      s.why_not = "cgroup " + base +
                  " is not delegated to this process (run it as a systemd service with "
                  "Delegate=yes, or name a cgroup with --cgroup-parent)";
      return s;
    }
  } else {
    ::mkdir(base.c_str(), 0755);  // an explicit parent may be made here; EEXIST is fine
  }
  if (!IsCgroup2(base)) {
    s.why_not = base + " is not a cgroup v2 directory";
    return s;
  }
  const std::string parent = base + "/" + node_dir;
  if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) {
    s.why_not = Errno("cannot make cgroup " + parent);
    return s;
  }
  // Writable and usable: a probe directory, removed again.
  const std::string probe = parent + "/stoker-probe-" + std::to_string(::getpid());
  if (::mkdir(probe.c_str(), 0755) != 0 && errno != EEXIST) {
    s.why_not = Errno("cannot make cgroups in " + parent);
    return s;
  }
  s.parent = parent;
  s.kill = ::access((probe + "/cgroup.kill").c_str(), W_OK) == 0;
  std::string missing;
  auto note = [&](const std::string& what) { missing += (missing.empty() ? "" : "; ") + what; };
  // A controller reaches the job cgroups when both the base and the node directory hand it on.
  auto enable = [&](const char* name, bool* flag) {
    const std::string plus = std::string("+") + name;
    if (!HasWord(ReadFile(base + "/cgroup.controllers").value_or(""), name)) {
      return note(std::string(name) + " controller not available");
    }
    Status st = WriteFile(base + "/cgroup.subtree_control", plus);
    if (!st.ok() && own && errno == EBUSY) {
      // A cgroup with processes cannot hand controllers to its children ("no internal
      // processes"): move this process into a leaf of its own, as systemd documents for
      // delegated subtrees, and retry.
      const std::string leaf = base + "/stoker-agent";
      ::mkdir(leaf.c_str(), 0755);
      if (WriteFile(leaf + "/cgroup.procs", "0").ok()) {
        st = WriteFile(base + "/cgroup.subtree_control", plus);
      }
    }
    if (st.ok()) st = WriteFile(parent + "/cgroup.subtree_control", plus);
    if (st.ok()) {
      *flag = true;
    } else {
      note(std::string(name) + ": " + st.message());
    }
  };
  enable("cpu", &s.cpu);
  enable("memory", &s.memory);
  if (Status d = AttachDeviceProgram(probe, {}); d.ok()) {
    s.devices = true;
  } else {
    note(d.message());
  }
  if (!s.kill) note("no cgroup.kill (Linux 5.14+)");
  s.why_not = missing;
  ::rmdir(probe.c_str());
  return s;
}

Result<std::string> CreateJobCgroup(const CgroupSupport& support, const std::string& job_id,
                                    const CgroupLimits& limits) {
  if (!support.enabled()) return FailedPrecondition("no cgroups on this node");
  if (!IsValidStokerJobId(job_id)) return InvalidArgument("job id '" + job_id + "'");
  const std::string dir = support.parent + "/" + StokerJobScopeName(job_id);
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Internal(Errno("create cgroup " + dir));
  }
  if (support.cpu && limits.cpu_milli > 0) {
    const int64_t quota = limits.cpu_milli * kCpuPeriodUs / 1000;
    STOKER_RETURN_IF_ERROR(WriteFile(
        dir + "/cpu.max",
        std::to_string(std::max<int64_t>(quota, 1000)) + " " + std::to_string(kCpuPeriodUs)));
  }
  if (support.memory && limits.memory_mib > 0) {
    STOKER_RETURN_IF_ERROR(
        WriteFile(dir + "/memory.max", std::to_string(limits.memory_mib * 1024 * 1024)));
    // Without this the limit only moves the job's memory to swap.
    if (::access((dir + "/memory.swap.max").c_str(), W_OK) == 0) {
      STOKER_RETURN_IF_ERROR(WriteFile(dir + "/memory.swap.max", "0"));
    }
  }
  if (support.devices && limits.restrict_gpus) {
    STOKER_RETURN_IF_ERROR(AttachDeviceProgram(dir, limits.gpu_minors));
  }
  return dir;
}

std::vector<int> CgroupPids(const std::string& dir) {
  std::vector<int> pids;
  std::istringstream in(ReadFile(dir + "/cgroup.procs").value_or(""));
  int pid = 0;
  while (in >> pid) pids.push_back(pid);
  return pids;
}

Status SignalCgroup(const std::string& dir, int sig) {
  for (int pid : CgroupPids(dir)) ::kill(pid, sig);
  return Status::Ok();
}

Status KillCgroup(const std::string& dir) {
  if (::access((dir + "/cgroup.kill").c_str(), W_OK) == 0) {
    return WriteFile(dir + "/cgroup.kill", "1");
  }
  return SignalCgroup(dir, SIGKILL);
}

Status RemoveJobCgroup(const std::string& dir) {
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) return Internal(Errno("remove " + dir));
  return Status::Ok();
}

}  // namespace stoker::runner
