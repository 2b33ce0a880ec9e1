#include "k8s/device_plugin.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "core/xid.h"
#include "deviceplugin.grpc.pb.h"
#include "k8s/resources.h"
#include "scheduler/cluster.h"
#include "scheduler/stoker_policy.h"

namespace stoker::k8s {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

std::string EndpointOf(std::string_view resource) {
  std::string name(resource);
  if (name.starts_with("stoker.io/")) name = name.substr(10);
  for (char& c : name) {
    if (c == '/') c = '-';
  }
  return "stoker-" + name + ".sock";
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

uint32_t Minor(const GpuSample& s) { return s.id.minor.value_or(s.id.index); }

// The device nodes of these GPUs plus the driver's shared ones, where they exist.
std::vector<DeviceNode> DeviceNodes(const std::vector<uint32_t>& minors, const std::string& root) {
  std::vector<DeviceNode> out;
  for (uint32_t m : minors) {
    const std::string node = "/dev/nvidia" + std::to_string(m);
    if (Exists(root + node.substr(4))) out.push_back({node, node, "rw"});
  }
  for (const char* shared : {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}) {
    const std::string node = shared;
    if (Exists(root + node.substr(4))) out.push_back({node, node, "rw"});
  }
  return out;
}

int64_t FreeMemory(const GpuSample& s) {
  const uint64_t total = s.memory_total_bytes.value_or(0);
  const uint64_t used = s.memory_used_bytes.value_or(0);
  return used >= total ? 0 : static_cast<int64_t>(total - used);
}

}  // namespace

std::string GpuUnhealthy(const GpuSample& s, bool recent_red_xid) {
  if (s.health != GpuHealth::kOk) return std::string("GPU ") + GpuHealthName(s.health);
  if (s.remapping_failed.value_or(false)) return "row remapping failed";
  if (s.remapping_pending.value_or(false)) return "row remapping pending";
  if (recent_red_xid) return "a red XID (hardware fault) recently";
  return "";
}

std::vector<ResourceDevices> DeviceLists(const std::vector<GpuSample>& gpus,
                                         const std::vector<std::string>& unhealthy,
                                         const Holdings& held,
                                         const std::set<std::string>& mig_profiles) {
  ResourceDevices whole{std::string(kGpuResource), EndpointOf(kGpuResource), {}};
  ResourceDevices milli{std::string(kGpuMilliResource), EndpointOf(kGpuMilliResource), {}};
  std::map<std::string, ResourceDevices> mig;
  for (const std::string& p : mig_profiles) {
    const std::string r = MigResourceName(p);
    mig[p] = ResourceDevices{r, EndpointOf(r), {}};
  }
  for (size_t i = 0; i < gpus.size(); ++i) {
    const GpuSample& g = gpus[i];
    if (g.id.uuid.empty()) continue;
    const bool healthy = i < unhealthy.size() && unhealthy[i].empty();
    if (g.mig_enabled.value_or(false)) {
      for (const MigInstance& m : g.mig_instances) {
        if (m.uuid.empty() || m.profile.empty()) continue;
        auto [it, added] = mig.try_emplace(m.profile);
        if (added) {
          const std::string r = MigResourceName(m.profile);
          it->second = ResourceDevices{r, EndpointOf(r), {}};
        }
        it->second.devices.push_back({m.uuid, healthy});
      }
      continue;
    }
    whole.devices.push_back({g.id.uuid, healthy && !held.SharedOut(g.id.uuid)});
    const bool shares_ok = healthy && !held.HeldWhole(g.id.uuid);
    for (int32_t k = 0; k < kMilliPerGpu; ++k) {
      milli.devices.push_back({ShareDeviceId(g.id.uuid, k), shares_ok});
    }
  }
  std::vector<ResourceDevices> out = {std::move(whole), std::move(milli)};
  for (auto& [profile, r] : mig) out.push_back(std::move(r));
  return out;
}

Result<std::vector<std::string>> PreferredDevices(std::string_view resource,
                                                  const std::vector<GpuSample>& gpus,
                                                  const std::vector<std::string>& available,
                                                  const std::vector<std::string>& must_include,
                                                  int32_t size) {
  if (size <= 0 || static_cast<size_t>(size) > available.size()) {
    return InvalidArgument("allocation_size " + std::to_string(size) + " with " +
                           std::to_string(available.size()) + " devices available");
  }
  if (must_include.size() > static_cast<size_t>(size)) {
    return InvalidArgument("more devices must be included than allocation_size");
  }
  const std::set<std::string> avail(available.begin(), available.end());
  for (const std::string& id : must_include) {
    if (!avail.count(id)) return InvalidArgument("must-include device " + id + " not available");
  }
  if (resource.starts_with(kMigResourcePrefix)) {
    std::vector<std::string> out = must_include;
    for (const std::string& id : available) {
      if (static_cast<int32_t>(out.size()) >= size) break;
      if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
    }
    return out;
  }
  // The node as the scheduler model sees it: only this node's non-MIG GPUs, each with the
  // capacity the request may take from it (devices available, measured free memory).
  std::vector<const GpuSample*> model_gpus;
  for (const GpuSample& g : gpus) {
    if (!g.mig_enabled.value_or(false) && !g.id.uuid.empty() &&
        model_gpus.size() < static_cast<size_t>(scheduler::kMaxGpusPerNode)) {
      model_gpus.push_back(&g);
    }
  }
  std::map<std::string, std::vector<std::string>> by_gpu;  // GPU UUID -> its available IDs
  for (const std::string& id : available) {
    auto d = ParseDeviceId(id);
    if (d) by_gpu[d->uuid].push_back(id);
  }
  const bool share = resource == kGpuMilliResource;
  scheduler::ClusterState cluster;
  scheduler::NodeSpec spec;
  spec.name = "this-node";
  spec.cpu_milli = int64_t{1} << 40;
  spec.memory_mib = int64_t{1} << 40;
  spec.num_gpus = static_cast<int32_t>(model_gpus.size());
  if (spec.num_gpus == 0)
    return InvalidArgument("no GPU on this node for " + std::string(resource));
  spec.gpu_model = *cluster.models().Intern("gpu");
  STOKER_ASSIGN_OR_RETURN(int32_t node, cluster.AddNode(spec));
  scheduler::Placement taken;
  taken.node = node;
  std::set<std::string> must_gpus;
  for (const std::string& id : must_include) {
    if (auto d = ParseDeviceId(id)) must_gpus.insert(d->uuid);
  }
  for (size_t i = 0; i < model_gpus.size(); ++i) {
    const GpuSample& g = *model_gpus[i];
    const auto& ids = by_gpu[g.id.uuid];
    int32_t free_milli = 0;
    if (share) {
      const uint64_t total = g.memory_total_bytes.value_or(0);
      const int64_t by_memory =
          total >= 1000 ? FreeMemory(g) / static_cast<int64_t>(total / 1000) : 0;
      free_milli = static_cast<int32_t>(
          std::min<int64_t>(static_cast<int64_t>(ids.size()), std::min<int64_t>(by_memory, 1000)));
      // A share must stay with the GPU of its must-include devices.
      if (!must_gpus.empty() && !must_gpus.count(g.id.uuid)) free_milli = 0;
    } else {
      free_milli = ids.empty() ? 0 : 1000;
    }
    if (free_milli < 1000) {
      scheduler::GpuShare s;
      s.gpu = static_cast<uint8_t>(i);
      s.milli = static_cast<int16_t>(1000 - free_milli);
      taken.gpus[taken.num_gpus++] = s;
    }
  }
  if (taken.num_gpus > 0) STOKER_RETURN_IF_ERROR(cluster.Allocate(taken));
  auto policy = scheduler::MakeStokerPolicy(scheduler::PolicyConfig{});
  std::vector<std::string> out;
  if (share) {
    if (size > kMilliPerGpu) return InvalidArgument("a share is at most 1000 milli-GPU");
    const scheduler::Request r = size == kMilliPerGpu ? scheduler::Request::WholeGpus(1, 0, 0)
                                                      : scheduler::Request::GpuShare(size, 0, 0);
    policy->Observe(r);
    const scheduler::PlacementResult pr = policy->Place(r, cluster);
    int gpu = pr.placed() ? pr.placement.gpus[0].gpu : -1;
    if (gpu < 0) {
      // No GPU has the memory too: the one with the most devices left (the kubelet decides).
      size_t best = 0;
      for (size_t i = 0; i < model_gpus.size(); ++i) {
        const size_t n = by_gpu[model_gpus[i]->id.uuid].size();
        if (n >= static_cast<size_t>(size) && n > best &&
            (must_gpus.empty() || must_gpus.count(model_gpus[i]->id.uuid))) {
          best = n;
          gpu = static_cast<int>(i);
        }
      }
    }
    if (gpu < 0) {
      return InvalidArgument("no GPU has " + std::to_string(size) + " share devices available");
    }
    out = must_include;
    for (const std::string& id : by_gpu[model_gpus[gpu]->id.uuid]) {
      if (static_cast<int32_t>(out.size()) >= size) break;
      if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
    }
    return out;
  }
  // Whole GPUs: the policy's choice of `size` free GPUs (must-include ones first).
  out = must_include;
  const int32_t more = size - static_cast<int32_t>(out.size());
  if (more > 0 && more <= scheduler::kMaxGpusPerNode) {
    for (const std::string& id : must_include) {
      for (size_t i = 0; i < model_gpus.size(); ++i) {
        if (model_gpus[i]->id.uuid == id) {
          scheduler::Placement p;
          p.node = node;
          p.num_gpus = 1;
          p.gpus[0] = {static_cast<uint8_t>(i), 1000, 0};
          (void)cluster.Allocate(p);
        }
      }
    }
    const scheduler::Request r = scheduler::Request::WholeGpus(more, 0, 0);
    policy->Observe(r);
    const scheduler::PlacementResult pr = policy->Place(r, cluster);
    if (pr.placed()) {
      for (int k = 0; k < pr.placement.num_gpus; ++k) {
        out.push_back(model_gpus[pr.placement.gpus[k].gpu]->id.uuid);
      }
    }
  }
  for (const std::string& id : available) {  // what the policy could not place, in order
    if (static_cast<int32_t>(out.size()) >= size) break;
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  }
  return out;
}

ContainerAllocation AllocateWhole(const std::vector<const GpuSample*>& gpus,
                                  const AllocateConfig& cfg) {
  ContainerAllocation a;
  std::string visible;
  std::vector<uint32_t> minors;
  for (const GpuSample* g : gpus) {
    visible += (visible.empty() ? "" : ",") + g->id.uuid;
    minors.push_back(Minor(*g));
  }
  a.envs["NVIDIA_VISIBLE_DEVICES"] = visible;
  a.devices = DeviceNodes(minors, cfg.dev_root);
  return a;
}

ContainerAllocation AllocateShare(const GpuSample& gpu, int32_t milli, const std::string& first_id,
                                  const AllocateConfig& cfg) {
  ContainerAllocation a = AllocateWhole({&gpu}, cfg);
  // The container sees this one GPU, as CUDA device 0.
  a.envs["CUDA_MPS_PIPE_DIRECTORY"] = cfg.mps_pipe_dir;
  a.envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string(std::max(1, (milli + 9) / 10));
  const uint64_t total = gpu.memory_total_bytes.value_or(0);
  if (total > 0) {
    const uint64_t limit_mib = total / kMiB * static_cast<uint64_t>(milli) / 1000;
    a.envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = "0=" + std::to_string(limit_mib) + "M";
  }
  a.envs["STOKER_GPU_MILLI"] = std::to_string(milli);
  a.envs[std::string(kShareDeviceEnv)] = first_id;
  a.mounts.push_back({cfg.mps_pipe_dir, cfg.mps_pipe_dir, false});
  a.mounts.push_back({"/dev/shm", cfg.mps_shm_dir, false});
  return a;
}

ContainerAllocation AllocateMig(const GpuSample& gpu, const std::vector<std::string>& mig_uuids,
                                const AllocateConfig& cfg) {
  ContainerAllocation a;
  std::string visible;
  for (const std::string& u : mig_uuids) visible += (visible.empty() ? "" : ",") + u;
  a.envs["NVIDIA_VISIBLE_DEVICES"] = visible;
  a.devices = DeviceNodes({Minor(gpu)}, cfg.dev_root);
  return a;
}

Result<ContainerAllocation> AllocateContainer(std::string_view resource,
                                              const std::vector<std::string>& device_ids,
                                              const std::vector<GpuSample>& gpus,
                                              const AllocateConfig& cfg) {
  if (device_ids.empty()) return InvalidArgument("no devices to allocate");
  auto gpu_of = [&](const std::string& uuid) -> const GpuSample* {
    for (const GpuSample& g : gpus) {
      if (g.id.uuid == uuid) return &g;
    }
    return nullptr;
  };
  auto mig_parent = [&](const std::string& uuid) -> const GpuSample* {
    for (const GpuSample& g : gpus) {
      for (const MigInstance& m : g.mig_instances) {
        if (m.uuid == uuid) return &g;
      }
    }
    return nullptr;
  };
  std::vector<DeviceId> ids;
  for (const std::string& id : device_ids) {
    auto d = ParseDeviceId(id);
    if (!d) return InvalidArgument("device '" + id.substr(0, 64) + "' is not a Stoker device");
    ids.push_back(*d);
  }
  if (resource == kGpuResource) {
    std::vector<const GpuSample*> chosen;
    for (const DeviceId& d : ids) {
      const GpuSample* g = d.kind == DeviceId::Kind::kWholeGpu ? gpu_of(d.uuid) : nullptr;
      if (g == nullptr) return InvalidArgument("no GPU " + d.uuid + " on this node");
      chosen.push_back(g);
    }
    return AllocateWhole(chosen, cfg);
  }
  if (resource == kGpuMilliResource) {
    const std::string& uuid = ids[0].uuid;
    for (const DeviceId& d : ids) {
      if (d.kind != DeviceId::Kind::kShare) {
        return InvalidArgument("device " + d.uuid + " is not a share device");
      }
      if (d.uuid != uuid) {
        return InvalidArgument("a share must be on one GPU; these devices are on " + uuid +
                               " and " + d.uuid);
      }
    }
    const GpuSample* g = gpu_of(uuid);
    if (g == nullptr) return InvalidArgument("no GPU " + uuid + " on this node");
    return AllocateShare(*g, static_cast<int32_t>(std::min<size_t>(ids.size(), kMilliPerGpu)),
                         device_ids[0], cfg);
  }
  if (resource.starts_with(kMigResourcePrefix)) {
    const GpuSample* parent = nullptr;
    std::vector<std::string> uuids;
    for (const DeviceId& d : ids) {
      const GpuSample* p = d.kind == DeviceId::Kind::kMig ? mig_parent(d.uuid) : nullptr;
      if (p == nullptr) return InvalidArgument("no MIG instance " + d.uuid + " on this node");
      parent = parent == nullptr ? p : parent;
      uuids.push_back(d.uuid);
    }
    ContainerAllocation a = AllocateMig(*parent, uuids, cfg);
    for (const DeviceId& d : ids) {  // instances on other GPUs bring their GPU's node too
      const GpuSample* p = mig_parent(d.uuid);
      if (p != parent) {
        for (const DeviceNode& n : DeviceNodes({Minor(*p)}, cfg.dev_root)) {
          if (std::find(a.devices.begin(), a.devices.end(), n) == a.devices.end()) {
            a.devices.push_back(n);
          }
        }
      }
    }
    return a;
  }
  return InvalidArgument("resource " + std::string(resource) + " is not Stoker's");
}

// ---- the plugin ---------------------------------------------------------------------------

class ResourceService;

struct DevicePlugin::Impl {
  GpuSource* source = nullptr;
  Clock* clock = nullptr;
  PodResourcesSource* pods = nullptr;
  DevicePluginOptions options;

  std::mutex mu;
  std::condition_variable changed;
  bool stopping = false;
  std::vector<GpuSample> gpus;                   // guarded by mu: latest, identity kept
  std::map<std::string, ResourceDevices> lists;  // guarded by mu: by resource
  std::map<std::string, uint64_t> versions;      // guarded by mu: bumped when a list changes
  std::map<uint32_t, MonoTime> red_xid_at;       // guarded by mu

  struct Served {
    std::unique_ptr<ResourceService> service;
    std::unique_ptr<grpc::Server> server;
    std::string path;
  };
  std::mutex serve_mu;                   // serializes Watch/Start/Stop
  std::map<std::string, Served> served;  // guarded by serve_mu
  // guarded by serve_mu: the kubelet socket we registered with (a recreated file may reuse the
  // inode number, so its change time counts too)
  dev_t kubelet_dev = 0;
  ino_t kubelet_ino = 0;
  struct timespec kubelet_ctime {};

  std::mutex loop_mu;
  std::condition_variable loop_cv;
  bool loop_stop = false;
  std::vector<std::thread> threads;

  std::string Path(const std::string& file) const { return options.plugin_dir + "/" + file; }
  Status Serve(const std::string& resource);  // serve_mu held
  Status Register(const std::string& resource) const;
  void StopServing();  // serve_mu held
};

class ResourceService final : public v1beta1::DevicePlugin::Service {
 public:
  ResourceService(DevicePlugin::Impl* impl, std::string resource)
      : impl_(impl), resource_(std::move(resource)) {}

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* out) override {
    out->set_pre_start_required(false);
    out->set_get_preferred_allocation_available(true);
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(grpc::ServerContext* ctx, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
    uint64_t sent = UINT64_MAX;
    while (!ctx->IsCancelled()) {
      v1beta1::ListAndWatchResponse resp;
      {
        std::unique_lock lock(impl_->mu);
        impl_->changed.wait_for(lock, std::chrono::milliseconds(200), [&] {
          return impl_->stopping || impl_->versions[resource_] != sent;
        });
        if (impl_->stopping) break;
        const uint64_t v = impl_->versions[resource_];
        if (v == sent) continue;
        sent = v;
        for (const DeviceState& d : impl_->lists[resource_].devices) {
          v1beta1::Device* dev = resp.add_devices();
          dev->set_id(d.id);
          dev->set_health(std::string(d.healthy ? kHealthy : kUnhealthy));
        }
      }
      if (!writer->Write(resp)) break;
    }
    return grpc::Status::OK;
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const v1beta1::PreferredAllocationRequest* req,
                                      v1beta1::PreferredAllocationResponse* out) override {
    std::vector<GpuSample> gpus;
    {
      std::lock_guard lock(impl_->mu);
      gpus = impl_->gpus;
    }
    for (const auto& c : req->container_requests()) {
      std::vector<std::string> available(c.available_deviceids().begin(),
                                         c.available_deviceids().end());
      std::vector<std::string> must(c.must_include_deviceids().begin(),
                                    c.must_include_deviceids().end());
      auto chosen = PreferredDevices(resource_, gpus, available, must, c.allocation_size());
      if (!chosen.ok()) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, chosen.status().message());
      }
      auto* r = out->add_container_responses();
      for (const std::string& id : *chosen) r->add_deviceids(id);
    }
    return grpc::Status::OK;
  }

  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* req,
                        v1beta1::AllocateResponse* out) override {
    std::vector<GpuSample> gpus;
    {
      std::lock_guard lock(impl_->mu);
      gpus = impl_->gpus;
    }
    for (const auto& c : req->container_requests()) {
      std::vector<std::string> ids(c.devices_ids().begin(), c.devices_ids().end());
      auto a = AllocateContainer(resource_, ids, gpus, impl_->options.allocate);
      if (!a.ok()) {
        spdlog::warn("device plugin: {}: Allocate refused: {}", resource_, a.status().message());
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, a.status().message());
      }
      auto* r = out->add_container_responses();
      for (const auto& [k, v] : a->envs) (*r->mutable_envs())[k] = v;
      for (const Mount& m : a->mounts) {
        auto* pm = r->add_mounts();
        pm->set_container_path(m.container_path);
        pm->set_host_path(m.host_path);
        pm->set_read_only(m.read_only);
      }
      for (const DeviceNode& d : a->devices) {
        auto* pd = r->add_devices();
        pd->set_container_path(d.container_path);
        pd->set_host_path(d.host_path);
        pd->set_permissions(d.permissions);
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                 v1beta1::PreStartContainerResponse*) override {
    return grpc::Status::OK;
  }

 private:
  DevicePlugin::Impl* impl_;
  std::string resource_;
};

Status DevicePlugin::Impl::Serve(const std::string& resource) {
  Served s;
  s.path = Path(EndpointOf(resource));
  ::unlink(s.path.c_str());  // a socket left by an earlier run
  s.service = std::make_unique<ResourceService>(this, resource);
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + s.path, grpc::InsecureServerCredentials());
  b.RegisterService(s.service.get());
  s.server = b.BuildAndStart();
  if (!s.server) return Unavailable("device plugin: cannot serve " + resource + " on " + s.path);
  served[resource] = std::move(s);
  return Status::Ok();
}

Status DevicePlugin::Impl::Register(const std::string& resource) const {
  auto channel = grpc::CreateChannel("unix://" + Path(options.kubelet_socket),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + options.rpc_timeout);
  v1beta1::RegisterRequest req;
  req.set_version(std::string(kDevicePluginApiVersion));
  req.set_endpoint(EndpointOf(resource));
  req.set_resource_name(resource);
  req.mutable_options()->set_pre_start_required(false);
  req.mutable_options()->set_get_preferred_allocation_available(true);
  v1beta1::Empty resp;
  const grpc::Status st = stub->Register(&ctx, req, &resp);
  if (!st.ok()) {
    return Unavailable("device plugin: the kubelet refused or did not answer Register for " +
                       resource + ": " + st.error_message());
  }
  return Status::Ok();
}

void DevicePlugin::Impl::StopServing() {
  {
    std::lock_guard lock(mu);
    stopping = true;
  }
  changed.notify_all();
  for (auto& [resource, s] : served) {
    s.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    s.server->Wait();
    ::unlink(s.path.c_str());
  }
  served.clear();
  std::lock_guard lock(mu);
  stopping = false;
}

DevicePlugin::DevicePlugin(GpuSource* source, Clock* clock, PodResourcesSource* pods,
                           DevicePluginOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->source = source;
  impl_->clock = clock;
  impl_->pods = pods;
  impl_->options = std::move(options);
}

DevicePlugin::~DevicePlugin() { Stop(); }

void DevicePlugin::Refresh() {
  Impl& s = *impl_;
  const uint32_t n = s.source->DeviceCount();
  std::vector<GpuSample> fresh(n);
  // Red XIDs since the last refresh (the events the NVML view delivers).
  auto events = s.source->WaitEvents(std::chrono::milliseconds(1));
  const MonoTime now = s.clock->Now();
  std::vector<GpuSample> previous;
  {
    std::lock_guard lock(s.mu);
    previous = s.gpus;
    if (events.ok()) {
      for (const GpuEvent& e : *events) {
        if (e.type == GpuEvent::Type::kXid && GradeXid(e.xid) == XidGrade::kRed) {
          s.red_xid_at[e.gpu_index] = now;
        }
      }
    }
  }
  for (uint32_t i = 0; i < n; ++i) {
    GpuSample& g = fresh[i];
    const Status st = s.source->Sample(i, &g);
    if (!st.ok()) g.health = GpuHealth::kUnreachable;
    // A GPU that does not answer keeps the identity it had, so its devices stay listed (as
    // Unhealthy) and come back under the same IDs.
    if (g.health != GpuHealth::kOk && i < previous.size()) {
      const GpuSample& p = previous[i];
      if (g.id.uuid.empty()) g.id = p.id;
      if (!g.mig_enabled.has_value()) g.mig_enabled = p.mig_enabled;
      if (g.mig_instances.empty()) g.mig_instances = p.mig_instances;
      if (!g.memory_total_bytes.has_value()) g.memory_total_bytes = p.memory_total_bytes;
    }
    if (g.id.index != i) g.id.index = i;
  }
  Holdings held;
  if (s.pods != nullptr) {
    auto list = s.pods->List();
    if (list.ok()) {
      held = HoldingsFrom(*list);
    } else {
      spdlog::warn("device plugin: {}", list.status().message());
    }
  }
  std::lock_guard lock(s.mu);
  std::vector<std::string> why(n);
  for (uint32_t i = 0; i < n; ++i) {
    auto x = s.red_xid_at.find(i);
    const bool recent = x != s.red_xid_at.end() && now - x->second < s.options.xid_hold;
    why[i] = GpuUnhealthy(fresh[i], recent);
  }
  bool any = false;
  for (ResourceDevices& r : DeviceLists(fresh, why, held, s.options.mig_profiles)) {
    auto it = s.lists.find(r.resource);
    if (it == s.lists.end() || it->second.devices != r.devices) {
      ++s.versions[r.resource];
      s.lists[r.resource] = std::move(r);
      any = true;
    }
  }
  s.gpus = std::move(fresh);
  if (any) s.changed.notify_all();
}

bool DevicePlugin::Watch() {
  Impl& s = *impl_;
  std::lock_guard serve(s.serve_mu);
  struct stat st {};
  if (::stat(s.Path(s.options.kubelet_socket).c_str(), &st) != 0) return false;  // kubelet down
  std::vector<std::string> wanted;
  {
    std::lock_guard lock(s.mu);
    for (const auto& [resource, r] : s.lists) wanted.push_back(resource);
  }
  const bool kubelet_new = st.st_dev != s.kubelet_dev || st.st_ino != s.kubelet_ino ||
                           st.st_ctim.tv_sec != s.kubelet_ctime.tv_sec ||
                           st.st_ctim.tv_nsec != s.kubelet_ctime.tv_nsec;
  bool lost_socket = false;
  for (const auto& [resource, served] : s.served) lost_socket |= !Exists(served.path);
  bool new_resource = false;
  for (const std::string& r : wanted) new_resource |= s.served.count(r) == 0;
  if (!kubelet_new && !lost_socket && !new_resource) return false;
  if (kubelet_new || lost_socket) {
    // The kubelet restarted (it removes every plugin socket when it starts) or our socket went:
    // serve anew and register everything again.
    if (!s.served.empty()) {
      spdlog::info("device plugin: {}; registering again",
                   kubelet_new ? "the kubelet's socket is new" : "a socket of ours is gone");
    }
    s.StopServing();
  }
  bool all = true;
  for (const std::string& r : wanted) {
    if (s.served.count(r) != 0) continue;
    if (Status st2 = s.Serve(r); !st2.ok()) {
      spdlog::error("{}", st2.message());
      all = false;
      continue;
    }
    if (Status reg = s.Register(r); !reg.ok()) {
      spdlog::warn("{}", reg.message());
      s.served[r].server->Shutdown(std::chrono::system_clock::now());
      s.served[r].server->Wait();
      ::unlink(s.served[r].path.c_str());
      s.served.erase(r);
      all = false;
    }
  }
  if (all) {
    s.kubelet_dev = st.st_dev;
    s.kubelet_ino = st.st_ino;
    s.kubelet_ctime = st.st_ctim;
    registrations_.fetch_add(1);
  }
  return all;
}

Status DevicePlugin::Start() {
  Impl& s = *impl_;
  std::error_code ec;
  if (!std::filesystem::is_directory(s.options.plugin_dir, ec)) {
    return InvalidArgument("device plugin: no directory " + s.options.plugin_dir +
                           " (the kubelet's device-plugin directory)");
  }
  Refresh();
  const bool registered = Watch();
  {
    std::lock_guard lock(s.loop_mu);
    s.loop_stop = false;
  }
  auto loop = [this](Duration every, auto step) {
    return std::thread([this, every, step] {
      std::unique_lock lock(impl_->loop_mu);
      while (!impl_->loop_cv.wait_for(lock, every, [this] { return impl_->loop_stop; })) {
        lock.unlock();
        step();
        lock.lock();
      }
    });
  };
  s.threads.push_back(loop(s.options.refresh, [this] { Refresh(); }));
  s.threads.push_back(loop(s.options.watch, [this] { (void)Watch(); }));
  if (!registered) {
    return Unavailable("device plugin: not registered with the kubelet at " +
                       s.Path(s.options.kubelet_socket) + " yet (retrying)");
  }
  return Status::Ok();
}

void DevicePlugin::Stop() {
  Impl& s = *impl_;
  {
    std::lock_guard lock(s.loop_mu);
    s.loop_stop = true;
  }
  s.loop_cv.notify_all();
  for (std::thread& t : s.threads) t.join();
  s.threads.clear();
  std::lock_guard serve(s.serve_mu);
  s.StopServing();
}

std::vector<std::string> DevicePlugin::Resources() const {
  std::lock_guard lock(impl_->mu);
  std::vector<std::string> out;
  for (const auto& [r, l] : impl_->lists) out.push_back(r);
  return out;
}

}  // namespace stoker::k8s
