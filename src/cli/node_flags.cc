#include "cli/node_flags.h"

#include <fmt/core.h>

#include <filesystem>

#include "runner/cgroup.h"

namespace stoker::cli {

void AddJobRunFlags(CLI::App* cmd, JobRunFlags* flags) {
  cmd->add_flag("--allow-root-jobs", flags->allow_root,
                "When running as root, also run jobs whose user is root (refused by default)");
  cmd->add_option("--min-job-uid", flags->min_uid,
                  "When running as root, refuse jobs of users below this uid (system accounts) "
                  "unless --allow-job-user names them")
      ->capture_default_str();
  cmd->add_option("--allow-job-user", flags->allow_users,
                  "A system account that may run jobs anyway (repeatable)");
  cmd->add_option("--cgroup-parent", flags->cgroup_parent,
                  "cgroup v2 directory for job cgroups; 'off' for none; default: this process's "
                  "own cgroup when it is delegated (systemd Delegate=yes, or a container's root)");
  cmd->add_option("--address", flags->address,
                  "Host name or IP address where the other parts of a multi-node job reach this "
                  "node (MASTER_ADDR when it runs rank 0); default: the node's name");
}

std::string ApplyJobRunFlags(const JobRunFlags& flags, node::NodeOptions* no) {
  no->users.allow_root = flags.allow_root;
  no->users.min_uid = flags.min_uid;
  no->users.allow = {flags.allow_users.begin(), flags.allow_users.end()};
  no->address = flags.address;
  // One cgroup directory per job state folder: agents sharing a host never share job cgroups.
  std::error_code ec;
  const std::string state = std::filesystem::weakly_canonical(no->state_dir, ec).string();
  uint32_t h = 2166136261u;  // FNV-1a: the same name for the same folder on every build
  for (unsigned char c : state) h = (h ^ c) * 16777619u;
  no->cgroups = runner::ProbeCgroups(flags.cgroup_parent, fmt::format("stoker-{:08x}", h));
  return "jobs: " + no->cgroups.Describe();
}

}  // namespace stoker::cli
