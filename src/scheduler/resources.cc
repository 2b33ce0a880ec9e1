#include "scheduler/resources.h"

#include <string>

namespace stoker::scheduler {

Result<GpuModelId> GpuModelTable::Intern(std::string_view name) {
  if (name.empty()) return InvalidArgument("GPU model name is empty");
  if (auto id = Find(name)) return *id;
  if (size() >= kMaxGpuModels) {
    return ResourceExhausted("more than " + std::to_string(kMaxGpuModels) + " GPU models");
  }
  names_.emplace_back(name);
  return static_cast<GpuModelId>(names_.size() - 1);
}

std::optional<GpuModelId> GpuModelTable::Find(std::string_view name) const {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return static_cast<GpuModelId>(i);
  }
  return std::nullopt;
}

Result<GpuModelMask> GpuModelTable::ParseMask(std::string_view pipe_list) const {
  GpuModelMask mask = 0;
  while (!pipe_list.empty()) {
    size_t bar = pipe_list.find('|');
    std::string_view item = pipe_list.substr(0, bar);
    pipe_list = bar == std::string_view::npos ? std::string_view() : pipe_list.substr(bar + 1);
    if (item.empty()) continue;
    auto id = Find(item);
    if (!id) return NotFound("unknown GPU model '" + std::string(item) + "'");
    mask |= Bit(*id);
  }
  return mask;
}

bool ModelSupportsMig(std::string_view m) {
  return m.starts_with("A100") || m.starts_with("H100") || m.starts_with("H200") ||
         m.starts_with("A30") || m.starts_with("NVIDIA A100") || m.starts_with("NVIDIA H100") ||
         m.starts_with("NVIDIA H200");
}

Request Request::CpuOnly(int64_t cpu_milli, int64_t memory_mib) {
  Request r;
  r.cpu_milli = cpu_milli;
  r.memory_mib = memory_mib;
  return r;
}

Request Request::WholeGpus(int32_t n, int64_t cpu_milli, int64_t memory_mib) {
  Request r = CpuOnly(cpu_milli, memory_mib);
  r.num_gpu = n;
  r.gpu_milli = kMilliPerGpu;
  return r;
}

Request Request::GpuShare(int32_t gpu_milli, int64_t cpu_milli, int64_t memory_mib) {
  Request r = CpuOnly(cpu_milli, memory_mib);
  r.num_gpu = 1;
  r.gpu_milli = gpu_milli;
  return r;
}

Request Request::Mig(MigProfile profile, int64_t cpu_milli, int64_t memory_mib) {
  Request r = CpuOnly(cpu_milli, memory_mib);
  r.num_gpu = 1;
  r.mig = profile;
  return r;
}

int64_t Request::TotalGpuMilli() const {
  if (IsMig()) return MigSlices(mig) * kMilliPerGpu / kMigSlicesPerGpu;
  return static_cast<int64_t>(num_gpu) * gpu_milli;
}

Status ValidateRequest(const Request& r) {
  if (r.cpu_milli < 0) return InvalidArgument("cpu_milli: negative");
  if (r.memory_mib < 0) return InvalidArgument("memory_mib: negative");
  if (r.gpu_memory_mib < 0) return InvalidArgument("gpu_memory_mib: negative");
  if (r.num_gpu < 0) return InvalidArgument("num_gpu: negative");
  if (r.IsMig()) {
    if (r.num_gpu != 1 || r.gpu_milli != 0) {
      return InvalidArgument("mig: a MIG request takes one instance (num_gpu 1, gpu_milli 0)");
    }
    return Status::Ok();
  }
  if (r.num_gpu == 0) {
    if (r.gpu_milli != 0) return InvalidArgument("gpu_milli: set without num_gpu");
    return Status::Ok();
  }
  if (r.gpu_milli <= 0 || r.gpu_milli > kMilliPerGpu) {
    return InvalidArgument("gpu_milli: must be 1..1000 per GPU, got " +
                           std::to_string(r.gpu_milli));
  }
  if (r.gpu_milli < kMilliPerGpu && r.num_gpu != 1) {
    return InvalidArgument("gpu_milli: a fractional GPU (" + std::to_string(r.gpu_milli) +
                           ") is a share of ONE GPU, but num_gpu is " + std::to_string(r.num_gpu));
  }
  return Status::Ok();
}

}  // namespace stoker::scheduler
