#include "telemetry/attribution.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

namespace stoker::telemetry {
namespace {

bool IsJobIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

bool IsHexOrDash(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == '-')) {
      return false;
    }
  }
  return true;
}

bool ParseUint32(std::string_view s, uint32_t* out) {
  if (s.empty() || s.size() > 10) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > UINT32_MAX) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

std::vector<std::string_view> SplitPath(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string_view::npos) next = path.size();
    if (next > pos) parts.push_back(path.substr(pos, next - pos));
    pos = next + 1;
  }
  return parts;
}

// The path field of each line ("hierarchy-id:controllers:path"); malformed lines are skipped.
std::vector<std::string_view> CgroupPaths(std::string_view content) {
  std::vector<std::string_view> paths;
  size_t pos = 0;
  while (pos < content.size()) {
    size_t eol = content.find('\n', pos);
    if (eol == std::string_view::npos) eol = content.size();
    std::string_view line = content.substr(pos, eol - pos);
    pos = eol + 1;
    const size_t c1 = line.find(':');
    if (c1 == std::string_view::npos) continue;
    const size_t c2 = line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    paths.push_back(line.substr(c2 + 1));
  }
  return paths;
}

bool MatchStoker(const std::vector<std::string_view>& parts, CgroupAttribution* out) {
  for (std::string_view p : parts) {
    if (!p.starts_with(kStokerJobScopePrefix)) continue;
    std::string_view id = p.substr(kStokerJobScopePrefix.size());
    if (id.ends_with(kStokerJobScopeSuffix)) id.remove_suffix(kStokerJobScopeSuffix.size());
    if (!IsValidStokerJobId(id)) continue;
    out->job.kind = JobRef::Kind::kStoker;
    out->job.id = std::string(id);
    return true;
  }
  return false;
}

// A Slurm job id or step name in a cgroup path or the environment: 1..64 id characters.
bool ValidSlurmName(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return IsJobIdChar(c); });
}

bool MatchSlurm(const std::vector<std::string_view>& parts, CgroupAttribution* out) {
  bool under_slurm = false;
  std::optional<uint32_t> uid;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string_view p = parts[i];
    if (p.starts_with("slurm")) under_slurm = true;
    if (!under_slurm) continue;
    uint32_t v = 0;
    if (p.starts_with("uid_") && ParseUint32(p.substr(4), &v)) uid = v;
    if (p.starts_with("job_")) {
      std::string_view id = p.substr(4);
      if (!ValidSlurmName(id)) continue;
      out->job.kind = JobRef::Kind::kSlurm;
      out->job.id = std::string(id);
      out->uid = uid;
      // The step directory follows the job's: step_0, step_batch, step_extern.
      if (i + 1 < parts.size() && parts[i + 1].starts_with("step_") &&
          ValidSlurmName(parts[i + 1].substr(5))) {
        out->job.step = std::string(parts[i + 1].substr(5));
      }
      return true;
    }
  }
  return false;
}

std::string_view ContainerIdFrom(std::string_view p) {
  if (p.ends_with(".scope")) p.remove_suffix(6);
  for (std::string_view prefix : {"cri-containerd-", "docker-", "crio-", "containerd-"}) {
    if (p.starts_with(prefix)) {
      p.remove_prefix(prefix.size());
      break;
    }
  }
  // Runtime sub-scopes such as crio-conmon-<id> are not the container itself.
  if (p.starts_with("conmon-")) return {};
  return p;
}

bool MatchKubernetes(const std::vector<std::string_view>& parts, CgroupAttribution* out) {
  bool under_kubepods = false;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string_view p = parts[i];
    if (p.starts_with("kubepods")) under_kubepods = true;
    if (!under_kubepods) continue;
    std::string_view uid;
    if (p.starts_with("pod")) {
      uid = p.substr(3);
    } else if (p.starts_with("kubepods-")) {
      const size_t at = p.find("-pod");
      if (at == std::string_view::npos) continue;
      uid = p.substr(at + 4);
    } else {
      continue;
    }
    if (uid.ends_with(".slice")) uid.remove_suffix(6);
    std::string pod_uid(uid);
    for (char& c : pod_uid) {
      if (c == '_') c = '-';
    }
    // Pod UIDs are 36-character UUIDs; a shorter match is some other "pod..." directory.
    if (pod_uid.size() < 32 || !IsHexOrDash(pod_uid)) continue;
    out->job.kind = JobRef::Kind::kKubernetes;
    out->job.id = std::move(pod_uid);
    if (i + 1 < parts.size()) out->job.container = std::string(ContainerIdFrom(parts[i + 1]));
    return true;
  }
  return false;
}

// Reads a whole (small) file; empty optional when it cannot be opened.
std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return data;
}

}  // namespace

CgroupAttribution ParseCgroupFile(std::string_view content) {
  CgroupAttribution out;
  const std::vector<std::string_view> paths = CgroupPaths(content);
  std::vector<std::vector<std::string_view>> split;
  split.reserve(paths.size());
  for (std::string_view p : paths) split.push_back(SplitPath(p));
  for (const auto& parts : split) {
    if (MatchStoker(parts, &out)) return out;
  }
  for (const auto& parts : split) {
    if (MatchSlurm(parts, &out)) return out;
  }
  for (const auto& parts : split) {
    if (MatchKubernetes(parts, &out)) return out;
  }
  return out;
}

std::optional<std::string> FindEnvVar(std::string_view block, std::string_view name) {
  size_t pos = 0;
  while (pos < block.size()) {
    size_t end = block.find('\0', pos);
    if (end == std::string_view::npos) end = block.size();
    std::string_view entry = block.substr(pos, end - pos);
    if (entry.size() > name.size() && entry.starts_with(name) && entry[name.size()] == '=') {
      return std::string(entry.substr(name.size() + 1));
    }
    pos = end + 1;
  }
  return std::nullopt;
}

std::string ProcessInfo::UserName(uint32_t uid) const {
  struct passwd pwd {};
  struct passwd* result = nullptr;
  std::vector<char> buf(4096);
  if (getpwuid_r(static_cast<uid_t>(uid), &pwd, buf.data(), buf.size(), &result) == 0 &&
      result != nullptr && result->pw_name != nullptr) {
    return result->pw_name;
  }
  return std::to_string(uid);
}

Result<ProcessFacts> ProcfsProcessInfo::Lookup(uint32_t pid) const {
  const std::string dir = root_ + "/" + std::to_string(pid);
  ProcessFacts facts;
  std::optional<std::string> comm = ReadSmallFile(dir + "/comm");
  if (!comm) return NotFound("process " + std::to_string(pid) + " not found under " + root_);
  facts.name = std::move(*comm);
  while (!facts.name.empty() && facts.name.back() == '\n') facts.name.pop_back();
  facts.cgroup = ReadSmallFile(dir + "/cgroup").value_or("");
  // Other users' environments are unreadable without privileges; that is expected.
  facts.environ_block = ReadSmallFile(dir + "/environ").value_or("");
  if (std::optional<std::string> status = ReadSmallFile(dir + "/status")) {
    std::istringstream lines(*status);
    std::string line;
    while (std::getline(lines, line)) {
      if (!line.starts_with("Uid:")) continue;
      std::istringstream fields(line.substr(4));
      uint64_t real_uid = 0;
      if (fields >> real_uid && real_uid <= UINT32_MAX) facts.uid = static_cast<uint32_t>(real_uid);
      break;
    }
  }
  return facts;
}

Attributor::Attributor(const ProcessInfo* info, const Clock* clock, Duration ttl)
    : info_(info), clock_(clock), ttl_(ttl), last_prune_(clock->Now()) {}

JobRef Attributor::Resolve(uint32_t pid, std::string* name) const {
  JobRef job;
  Result<ProcessFacts> facts = info_->Lookup(pid);
  if (!facts.ok()) return job;
  if (name != nullptr) *name = facts->name;
  CgroupAttribution cg = ParseCgroupFile(facts->cgroup);
  job = std::move(cg.job);
  if (!job.known()) {
    if (auto id = FindEnvVar(facts->environ_block, kStokerJobEnvVar);
        id && IsValidStokerJobId(*id)) {
      job.kind = JobRef::Kind::kStoker;
      job.id = std::move(*id);
    } else if (auto sid = FindEnvVar(facts->environ_block, kSlurmJobEnvVar);
               sid && ValidSlurmName(*sid)) {
      job.kind = JobRef::Kind::kSlurm;
      job.id = std::move(*sid);
      // srun steps carry their step id; the batch script's processes do not (unknown then).
      if (auto step = FindEnvVar(facts->environ_block, kSlurmStepEnvVar);
          step && ValidSlurmName(*step)) {
        job.step = std::move(*step);
      }
    }
  }
  if (!facts->user.empty()) {
    job.user = facts->user;
  } else if (facts->uid) {
    job.user = info_->UserName(*facts->uid);
  } else if (cg.uid) {
    job.user = info_->UserName(*cg.uid);
  }
  return job;
}

JobRef Attributor::AttributePid(uint32_t pid, std::string* name) {
  const MonoTime now = clock_->Now();
  {
    std::lock_guard lock(mu_);
    auto it = cache_.find(pid);
    if (it != cache_.end()) {
      it->second.last_used = now;
      if (name != nullptr) *name = it->second.name;
      return it->second.job;
    }
  }
  // Resolve outside the lock: /proc reads must not serialise the per-GPU sampler threads.
  std::string resolved_name;
  JobRef job = Resolve(pid, &resolved_name);
  std::lock_guard lock(mu_);
  cache_[pid] = Entry{job, resolved_name, now};
  if (name != nullptr) *name = std::move(resolved_name);
  return job;
}

void Attributor::Attribute(GpuSample* sample) {
  std::string name;
  for (GpuProcess& p : sample->processes) {
    p.job = AttributePid(p.pid, &name);
    if (p.name.empty()) p.name = name;
  }
  if (claims_ != nullptr) claims_->Resolve(sample, *info_);
  bool prune = false;
  {
    std::lock_guard lock(mu_);
    prune = clock_->Now() - last_prune_ >= ttl_;
  }
  if (prune) Prune();
}

void Attributor::Prune() {
  const MonoTime now = clock_->Now();
  std::lock_guard lock(mu_);
  last_prune_ = now;
  std::erase_if(cache_, [&](const auto& kv) { return now - kv.second.last_used > ttl_; });
}

size_t Attributor::cache_size() const {
  std::lock_guard lock(mu_);
  return cache_.size();
}

}  // namespace stoker::telemetry
