#pragma once
// `stoker submit`'s flags and the job spec they make. The request body is the protocol's own
// codec of that spec (protocol::JobSpecToJson), the document the server parses with
// protocol::ParseJobSpec; the flags are declared here once, for the command and for the tests
// that read a command line into the body it sends.

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "protocol/job.h"

namespace stoker::cli {

struct SubmitFlags {
  int gpus = 0;
  int min_gpus = 0;
  int nodes = 0;
  int total_gpus = 0;
  int gpu_milli = 0;
  std::string gpu_mem;
  std::vector<std::string> gpu_models;
  std::string mig;
  double cpu = 0;
  std::string mem;
  std::string job_class;
  int priority = 0;
  bool preemptible = false;
  bool movable = false;
  std::string name;
  std::string workdir;
  std::vector<std::string> env;
  std::string on_node_loss;
  std::string user;
  std::vector<std::string> command;
};

void AddSubmitFlags(CLI::App* cmd, SubmitFlags* s);

// The job spec of these flags; `cwd` is the working directory unless --workdir names one. A
// flag left out, or a count given as 0, leaves the spec's default (no GPU, one node, 1 CPU,
// 512 MiB, on_node_loss requeue). A negative count (--gpus, --min-gpus, --nodes, --total-gpus,
// --gpu-milli, --cpu), a --cpu below one milli-CPU or above the bound, a size that does not
// parse or an --env that is not K=V: InvalidArgument naming the flag. Everything else (ranges,
// combinations, MIG profiles) the server checks with ParseJobSpec and names the field.
Result<protocol::JobSpec> SubmitSpec(const SubmitFlags& s, const std::string& cwd);

}  // namespace stoker::cli
