#include "efficiency/jobs.h"

#include <algorithm>

namespace stoker::efficiency {

void StaticJobDirectory::Upsert(JobInfo j) {
  auto it =
      std::find_if(jobs_.begin(), jobs_.end(), [&](const JobInfo& x) { return x.id == j.id; });
  if (it != jobs_.end())
    *it = std::move(j);
  else
    jobs_.push_back(std::move(j));
}

void StaticJobDirectory::Remove(const std::string& id) {
  std::erase_if(jobs_, [&](const JobInfo& x) { return x.id == id; });
}

std::optional<JobInfo> StaticJobDirectory::Find(const std::string& job) const {
  for (const auto& j : jobs_) {
    if (j.id == job) return j;
  }
  return std::nullopt;
}

std::vector<JobInfo> StaticJobDirectory::Running() const { return jobs_; }

}  // namespace stoker::efficiency
