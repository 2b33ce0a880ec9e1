#include "scheduler/queue/queue_policy.h"

#include <algorithm>

namespace stoker::queue {

Result<std::unique_ptr<LasPolicy>> LasPolicy::Create(std::vector<int64_t> thresholds_gpu_s) {
  std::vector<int64_t> ms;
  ms.reserve(thresholds_gpu_s.size());
  for (size_t i = 0; i < thresholds_gpu_s.size(); ++i) {
    const int64_t t = thresholds_gpu_s[i];
    if (t <= 0 || t > int64_t{1} << 40) {
      return InvalidArgument("las: threshold " + std::to_string(i) + " must be positive, got " +
                             std::to_string(t));
    }
    if (i > 0 && t <= thresholds_gpu_s[i - 1]) {
      return InvalidArgument("las: thresholds must be strictly increasing");
    }
    ms.push_back(t * 1000);
  }
  return std::unique_ptr<LasPolicy>(new LasPolicy(std::move(ms)));
}

int LasPolicy::QueueIndex(int64_t attained_gpu_ms) const {
  // Number of thresholds at or below the service: queue 0 until the first threshold is reached.
  return static_cast<int>(
      std::upper_bound(thresholds_gpu_ms_.begin(), thresholds_gpu_ms_.end(), attained_gpu_ms) -
      thresholds_gpu_ms_.begin());
}

std::optional<int64_t> LasPolicy::NextKeyChangeGpuMs(const JobView& j) const {
  const auto it =
      std::upper_bound(thresholds_gpu_ms_.begin(), thresholds_gpu_ms_.end(), j.attained_gpu_ms);
  if (it == thresholds_gpu_ms_.end()) return std::nullopt;
  return *it;
}

std::vector<std::string_view> QueuePolicyNames() {
  return {"fifo", "sjf", "srtf", "las", "priority"};
}

Result<std::unique_ptr<QueuePolicy>> CreateQueuePolicy(std::string_view name) {
  if (name == "fifo") return std::unique_ptr<QueuePolicy>(std::make_unique<FifoPolicy>());
  if (name == "sjf") return std::unique_ptr<QueuePolicy>(std::make_unique<SjfPolicy>());
  if (name == "srtf") return std::unique_ptr<QueuePolicy>(std::make_unique<SrtfPolicy>());
  if (name == "priority") return std::unique_ptr<QueuePolicy>(std::make_unique<PriorityPolicy>());
  if (name == "las") {
    STOKER_ASSIGN_OR_RETURN(auto las, LasPolicy::Create());
    return std::unique_ptr<QueuePolicy>(std::move(las));
  }
  std::string known;
  for (auto n : QueuePolicyNames()) known += (known.empty() ? "" : ", ") + std::string(n);
  return InvalidArgument("unknown queue policy '" + std::string(name) + "' (expected one of " +
                         known + ")");
}

}  // namespace stoker::queue
