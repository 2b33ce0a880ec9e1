#pragma once
// Flags of every command that runs jobs on this machine (`up`, `node`, `agent --server`): who
// jobs may run as and where their cgroups go, applied to the node loop's options in one place.

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "node/node_agent.h"

namespace stoker::cli {

struct JobRunFlags {
  bool allow_root = false;
  uint32_t min_uid = 1000;
  std::vector<std::string> allow_users;
  std::string cgroup_parent;  // "" find it, "off", or a cgroup v2 directory
  std::string address;        // where other nodes reach this one (gangs); "" its name
};

void AddJobRunFlags(CLI::App* cmd, JobRunFlags* flags);

// Sets `no`'s user policy and cgroup support (probed here, once; the job state folder must be
// set already: it names the node's cgroup directory) and returns the line that says what this
// node enforces for jobs, for the start-up message.
std::string ApplyJobRunFlags(const JobRunFlags& flags, node::NodeOptions* no);

}  // namespace stoker::cli
