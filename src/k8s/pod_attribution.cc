#include "k8s/pod_attribution.h"

#include <spdlog/spdlog.h>

#include "k8s/resources.h"

namespace stoker::k8s {

PodAttribution::PodAttribution(PodResourcesSource* source, const Clock* clock, Duration refresh,
                               Duration ttl)
    : source_(source), clock_(clock), refresh_(refresh), ttl_(ttl) {}

Holdings PodAttribution::Current() const {
  const MonoTime now = clock_->Now();
  {
    std::lock_guard lock(mu_);
    if (have_ && now - fetched_ < refresh_) return held_;
  }
  auto list = source_->List();  // outside the lock: a kubelet call
  std::lock_guard lock(mu_);
  if (list.ok()) {
    held_ = HoldingsFrom(*list);
    have_ = true;
  } else if (!have_ || now - fetched_ >= refresh_) {
    spdlog::warn("pod attribution: {}", list.status().message());
  }
  fetched_ = now;
  std::erase_if(env_, [&](const auto& kv) { return now - kv.second.at > ttl_; });
  return held_;
}

std::string PodAttribution::ShareDeviceOf(uint32_t pid, const telemetry::ProcessInfo& info) const {
  const MonoTime now = clock_->Now();
  {
    std::lock_guard lock(mu_);
    auto it = env_.find(pid);
    if (it != env_.end()) return it->second.share_device;
  }
  std::string id;
  if (auto facts = info.Lookup(pid); facts.ok()) {
    id = telemetry::FindEnvVar(facts->environ_block, kShareDeviceEnv).value_or("");
  }
  std::lock_guard lock(mu_);
  env_[pid] = Env{id, now};
  return id;
}

void PodAttribution::Resolve(GpuSample* s, const telemetry::ProcessInfo& info) const {
  const Holdings held = Current();
  std::vector<std::string> migs;
  for (const MigInstance& m : s->mig_instances) migs.push_back(m.uuid);
  s->claims = ClaimsOn(held, s->id.uuid, migs);
  const auto whole = held.whole.find(s->id.uuid);
  const auto shares = held.shares.find(s->id.uuid);
  for (GpuProcess& p : s->processes) {
    if (p.job.kind != JobRef::Kind::kKubernetes) continue;  // not in a pod: nobody's claim
    const std::string user = p.job.user;
    const JobRef* holder = nullptr;
    if (whole != held.whole.end()) {
      holder = &whole->second.job;
    } else if (p.gpu_instance_id != UINT32_MAX) {
      for (const MigInstance& m : s->mig_instances) {
        if (m.gpu_instance_id != p.gpu_instance_id) continue;
        if (auto it = held.mig.find(m.uuid); it != held.mig.end()) holder = &it->second.job;
      }
    } else if (shares != held.shares.end() && !shares->second.empty()) {
      const std::string id = ShareDeviceOf(p.pid, info);
      if (auto it = held.share_holder.find(id); !id.empty() && it != held.share_holder.end()) {
        holder = &it->second.job;
      } else if (shares->second.size() == 1) {
        holder = &held.containers.at(shares->second.begin()->first).job;
      }
    }
    if (holder == nullptr) continue;
    p.job = *holder;
    p.job.user = user;
  }
}

}  // namespace stoker::k8s
