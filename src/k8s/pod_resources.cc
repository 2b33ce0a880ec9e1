#include "k8s/pod_resources.h"

#include "k8s/resources.h"

namespace stoker::k8s {
bool Holdings::SharedOut(const std::string& gpu_uuid) const {
  auto it = shares.find(gpu_uuid);
  return it != shares.end() && !it->second.empty();
}

Holdings HoldingsFrom(const std::vector<ContainerDevices>& list) {
  Holdings h;
  for (const ContainerDevices& cd : list) {
    const bool ours = cd.resource == kGpuResource || cd.resource == kGpuMilliResource ||
                      cd.resource.starts_with(kMigResourcePrefix);
    if (!ours) continue;
    Holdings::Holder holder;
    holder.job.kind = JobRef::Kind::kKubernetes;
    holder.job.id = cd.namespace_name + "/" + cd.pod;
    holder.job.container = cd.container;
    const std::string key = holder.job.id + "/" + cd.container;
    h.containers[key] = holder;
    for (const std::string& id : cd.device_ids) {
      auto d = ParseDeviceId(id);
      if (!d) continue;
      switch (d->kind) {
        case DeviceId::Kind::kWholeGpu:
          h.whole[d->uuid] = holder;
          break;
        case DeviceId::Kind::kShare:
          h.shares[d->uuid][key].push_back(id);
          h.share_holder[id] = holder;
          break;
        case DeviceId::Kind::kMig:
          h.mig[d->uuid] = holder;
          break;
      }
    }
  }
  return h;
}

std::vector<GpuClaim> ClaimsOn(const Holdings& h, const std::string& gpu_uuid,
                               const std::vector<std::string>& mig_uuids) {
  std::vector<GpuClaim> out;
  if (auto it = h.whole.find(gpu_uuid); it != h.whole.end()) {
    GpuClaim c;
    c.job = it->second.job;
    c.whole = true;
    c.gpu_milli = kMilliPerGpu;
    out.push_back(std::move(c));
  }
  if (auto it = h.shares.find(gpu_uuid); it != h.shares.end()) {
    for (const auto& [key, ids] : it->second) {
      GpuClaim c;
      c.job = h.containers.at(key).job;
      c.gpu_milli = static_cast<int32_t>(std::min<size_t>(ids.size(), kMilliPerGpu));
      out.push_back(std::move(c));
    }
  }
  for (const std::string& mig : mig_uuids) {
    if (auto it = h.mig.find(mig); it != h.mig.end()) {
      GpuClaim c;
      c.job = it->second.job;
      c.mig_uuid = mig;
      out.push_back(std::move(c));
    }
  }
  return out;
}

}  // namespace stoker::k8s
