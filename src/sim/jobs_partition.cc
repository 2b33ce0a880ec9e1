#include "sim/jobs_partition.h"

#include <fmt/core.h>

#include <fstream>
#include <map>

#include "core/integer.h"
#include "scheduler/queue/queue_policy.h"

namespace stoker::sim {

Result<std::vector<GroupCluster>> ParseGroupClusters(std::istream& in, std::string_view name) {
  std::vector<GroupCluster> out;
  std::string line;
  uint64_t line_no = 0;
  bool header = true;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (header) {
      header = false;
      continue;
    }
    const size_t comma = line.find(',');
    const std::string where = std::string(name) + ":" + std::to_string(line_no);
    if (comma == std::string::npos || line.find(',', comma + 1) != std::string::npos) {
      return InvalidArgument(where + ": expected 'group,nodes'");
    }
    GroupCluster g;
    g.group = line.substr(0, comma);
    const std::string n = line.substr(comma + 1);
    auto nodes = ParseInt(n, 1, 100000);
    if (g.group.empty() || !nodes.ok()) {
      return InvalidArgument(
          fmt::format("{}: nodes: expected a positive integer, got '{}'", where, n));
    }
    g.nodes = static_cast<decltype(g.nodes)>(*nodes);
    for (const auto& prev : out) {
      if (prev.group == g.group)
        return InvalidArgument(where + ": group '" + g.group + "' listed twice");
    }
    out.push_back(std::move(g));
  }
  if (out.empty()) return InvalidArgument(std::string(name) + ": no groups");
  return out;
}

Result<std::vector<GroupCluster>> LoadGroupClusters(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(path + ": cannot open group cluster file");
  return ParseGroupClusters(in, path);
}

Result<GroupedRun> RunPerGroup(const Trace& trace, const std::vector<GroupCluster>& groups,
                               int gpus_per_node, std::string_view queue_policy,
                               const JobsSimOptions& base) {
  std::map<std::string, std::vector<SimJobSpec>, std::less<>> by_group;
  for (const auto& g : groups) by_group[g.group];
  GroupedRun run;
  const std::vector<SimJobSpec> all = JobsFromTrace(trace);
  for (size_t i = 0; i < all.size(); ++i) {
    auto it = by_group.find(trace.jobs[i].group);
    if (it == by_group.end()) {
      ++run.dropped_jobs;
      continue;
    }
    it->second.push_back(all[i]);
  }
  for (const auto& g : groups) {
    std::vector<SimJobSpec>& jobs = by_group[g.group];
    if (jobs.empty()) continue;
    STOKER_ASSIGN_OR_RETURN(auto policy, queue::CreateQueuePolicy(queue_policy));
    JobsSimOptions opt = base;
    opt.cluster = ClusterShape{g.nodes, gpus_per_node};
    STOKER_ASSIGN_OR_RETURN(auto sim, JobsSim::Create(std::move(jobs), std::move(policy), opt));
    auto rep = sim->Run();
    if (!rep.ok()) return rep.status().WithContext("group " + g.group);
    run.sims.push_back(std::move(sim));
    run.groups.push_back(g.group);
  }
  if (run.sims.empty()) return InvalidArgument("no jobs belong to any listed group");
  return run;
}

}  // namespace stoker::sim
