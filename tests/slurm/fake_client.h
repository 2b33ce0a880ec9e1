#pragma once
// An in-memory SlurmClient for unit tests: serves given answers (or errors) and records the
// actions asked of it.
#include <string>
#include <vector>

#include "slurm/client.h"

namespace stoker::slurm::testing {

class FakeSlurmClient final : public SlurmClient {
 public:
  Result<std::vector<SlurmNode>> nodes = std::vector<SlurmNode>{};
  Result<std::vector<SlurmJob>> jobs = std::vector<SlurmJob>{};
  Status action_status;  // returned by every action
  std::vector<std::string> actions;

  Result<std::vector<SlurmNode>> Nodes() override { return nodes; }
  Result<std::vector<SlurmJob>> Jobs() override { return jobs; }
  Result<std::vector<SlurmPartition>> Partitions() override {
    return std::vector<SlurmPartition>{};
  }
  Status SetNodeWeight(const std::string& node, int64_t weight) override {
    return Record("weight " + node + " " + std::to_string(weight));
  }
  Status SteerAndRelease(uint32_t job, const std::vector<std::string>& n) override {
    std::string s = "steer " + std::to_string(job);
    for (const auto& x : n) s += " " + x;
    return Record(s);
  }
  std::vector<Status> SetExcludedNodesAll(const SteerList& jobs) override {
    std::vector<Status> out;
    for (const auto& [job, n] : jobs) {
      std::string s = "exclude " + std::to_string(job);
      for (const auto& x : n) s += " " + x;
      out.push_back(Record(s));
    }
    return out;
  }
  Status SetComment(uint32_t job, const std::string& text) override {
    return Record("comment " + std::to_string(job) + " " + text);
  }
  Status SetAdminComment(uint32_t job, const std::string& text) override {
    return Record("admin_comment " + std::to_string(job) + " " + text);
  }
  Status Requeue(uint32_t job) override { return Record("requeue " + std::to_string(job)); }
  Status Cancel(uint32_t job) override { return Record("cancel " + std::to_string(job)); }

 private:
  Status Record(std::string s) {
    actions.push_back(std::move(s));
    return action_status;
  }
};

}  // namespace stoker::slurm::testing
