#include "k8s/resources.h"

#include <fmt/core.h>

#include <set>

#include "core/integer.h"
#include "k8s/quantity.h"

namespace stoker::k8s {
namespace {

constexpr std::string_view kShareSeparator = "::";

// The quantity a container asks for `resource` (limits first: for extended resources a request
// without a limit is refused by the API server, and the two must be equal), nullopt if none.
Result<std::optional<int64_t>> Amount(const ContainerResources& c, const std::string& resource,
                                      const std::string& where) {
  const std::string* text = nullptr;
  if (auto it = c.limits.find(resource); it != c.limits.end()) {
    text = &it->second;
  } else if (auto rq = c.requests.find(resource); rq != c.requests.end()) {
    text = &rq->second;
  }
  if (text == nullptr) return std::optional<int64_t>();
  auto milli = QuantityMilliValue(*text);
  if (!milli.ok()) return milli.status().WithContext(where + ".resources." + resource);
  if (*milli % 1000 != 0) {
    return InvalidArgument(where + ".resources." + resource + ": '" + text->substr(0, 32) +
                           "' is not a whole number (extended resources are counted in units)");
  }
  if (auto rq = c.requests.find(resource);
      rq != c.requests.end() && c.limits.count(resource) != 0) {
    auto request = QuantityMilliValue(rq->second);
    if (!request.ok() || *request != *milli) {
      return InvalidArgument(where + ".resources." + resource +
                             ": requests and limits differ (they must be equal for an extended "
                             "resource)");
    }
  }
  return std::optional<int64_t>(*milli / 1000);
}

Result<ContainerGpuRequest> ReadContainer(const ContainerResources& c, const std::string& where) {
  ContainerGpuRequest out;
  out.container = c.name;
  int kinds = 0;
  STOKER_ASSIGN_OR_RETURN(auto whole, Amount(c, std::string(kGpuResource), where));
  if (whole && *whole > 0) {
    if (*whole > kMaxDevicesPerContainer) {
      return InvalidArgument(where + ".resources." + std::string(kGpuResource) + ": " +
                             std::to_string(*whole) + " GPUs is more than the " +
                             std::to_string(kMaxDevicesPerContainer) + " one container may ask");
    }
    out.whole_gpus = static_cast<int32_t>(*whole);
    ++kinds;
  }
  STOKER_ASSIGN_OR_RETURN(auto milli, Amount(c, std::string(kGpuMilliResource), where));
  if (milli && *milli > 0) {
    if (*milli > kMilliPerGpu) {
      return InvalidArgument(
          where + ".resources." + std::string(kGpuMilliResource) + ": " + std::to_string(*milli) +
          " is more than one GPU (a share is 1..1000 milli-GPU of one GPU; ask " +
          std::string(kGpuResource) + " for whole GPUs)");
    }
    out.gpu_milli = static_cast<int32_t>(*milli);
    ++kinds;
  }
  std::set<std::string> names;
  for (const auto* m : {&c.limits, &c.requests}) {
    for (const auto& [name, value] : *m) {
      if (name.size() > kMigResourcePrefix.size() && name.starts_with(kMigResourcePrefix)) {
        names.insert(name);
      }
    }
  }
  for (const std::string& name : names) {
    STOKER_ASSIGN_OR_RETURN(auto count, Amount(c, name, where));
    if (!count || *count == 0) continue;
    if (*count > kMaxDevicesPerContainer) {
      return InvalidArgument(fmt::format("{}.resources.{}: more than {} MIG instances", where, name,
                                         kMaxDevicesPerContainer));
    }
    if (out.mig_count > 0) {
      return InvalidArgument(fmt::format("{}.resources: two MIG profiles in one container ({}, {})",
                                         where, MigResourceName(out.mig_profile), name));
    }
    out.mig_profile = name.substr(kMigResourcePrefix.size());
    out.mig_count = static_cast<int32_t>(*count);
    ++kinds;
  }
  if (kinds > 1) {
    return InvalidArgument(where +
                           ".resources: asks for more than one kind of Stoker GPU resource ("
                           "whole GPUs, a share or MIG instances: pick one per container)");
  }
  return out;
}

}  // namespace

std::string MigResourceName(std::string_view profile) {
  return std::string(kMigResourcePrefix) + std::string(profile);
}

Result<PodGpuRequest> ReadPodGpuRequest(std::string namespace_name, std::string name,
                                        std::string uid,
                                        const std::vector<ContainerResources>& containers,
                                        const std::vector<ContainerResources>& init_containers,
                                        const std::map<std::string, std::string>& annotations) {
  PodGpuRequest out;
  out.namespace_name = std::move(namespace_name);
  out.name = std::move(name);
  out.uid = std::move(uid);
  for (size_t i = 0; i < containers.size(); ++i) {
    STOKER_ASSIGN_OR_RETURN(
        ContainerGpuRequest c,
        ReadContainer(containers[i], "spec.containers[" + std::to_string(i) + "]"));
    if (!c.empty()) out.containers.push_back(std::move(c));
  }
  for (size_t i = 0; i < init_containers.size(); ++i) {
    STOKER_ASSIGN_OR_RETURN(
        ContainerGpuRequest c,
        ReadContainer(init_containers[i], "spec.initContainers[" + std::to_string(i) + "]"));
    if (!c.empty()) out.init_containers.push_back(std::move(c));
  }
  if (auto it = annotations.find(std::string(kGpuMemoryAnnotation)); it != annotations.end()) {
    auto bytes = QuantityValue(it->second);
    if (!bytes.ok()) {
      return bytes.status().WithContext("metadata.annotations." +
                                        std::string(kGpuMemoryAnnotation));
    }
    if (*bytes <= 0) {
      return InvalidArgument("metadata.annotations." + std::string(kGpuMemoryAnnotation) +
                             ": must be more than 0");
    }
    out.gpu_memory_bytes = static_cast<uint64_t>(*bytes);
  }
  return out;
}

std::string ShareDeviceId(std::string_view gpu_uuid, int32_t k) {
  return std::string(gpu_uuid) + std::string(kShareSeparator) + std::to_string(k);
}

std::optional<DeviceId> ParseDeviceId(std::string_view id) {
  DeviceId d;
  if (id.starts_with("MIG-")) {
    d.kind = DeviceId::Kind::kMig;
    d.uuid = std::string(id);
    return d;
  }
  if (!id.starts_with("GPU-")) return std::nullopt;
  const size_t sep = id.find(kShareSeparator);
  if (sep == std::string_view::npos) {
    d.uuid = std::string(id);
    return d;
  }
  const std::string_view k = id.substr(sep + kShareSeparator.size());
  auto index = ParseInt(k, 0, kMilliPerGpu - 1);
  if (!index.ok()) return std::nullopt;
  d.kind = DeviceId::Kind::kShare;
  d.uuid = std::string(id.substr(0, sep));
  d.share_index = static_cast<int32_t>(*index);
  return d;
}

}  // namespace stoker::k8s
