// stoker-k8s's part of the CLI (cli/kubelet.h): the device plugin and the PodResources client,
// over gRPC.
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>

#include "cli/cli.h"
#include "cli/common.h"
#include "cli/kubelet.h"
#include "core/clock.h"
#include "core/duration.h"
#include "k8s/device_plugin.h"
#include "k8s/pod_resources.h"
#include "nvml/nvml_gpu_source.h"
#include "nvml/simulated.h"

namespace stoker::cli {
namespace {

int RunDevicePlugin(const DevicePluginFlags& f) {
  auto refresh = ParseDuration(f.refresh);
  auto hold = ParseDuration(f.xid_hold);
  for (const Status& s : {refresh.status(), hold.status()}) {
    if (!s.ok()) {
      std::cerr << "stoker device-plugin: " << s.message() << "\n";
      return kExitUsage;
    }
  }
  if (*refresh < std::chrono::milliseconds(100) || *refresh > std::chrono::minutes(1)) {
    std::cerr << "stoker device-plugin: --refresh must be between 100ms and 1m\n";
    return kExitUsage;
  }
  Result<std::unique_ptr<GpuSource>> source =
      f.simulate.empty() ? nvml::OpenNvmlGpuSource({.library_path = f.nvml_lib})
                         : nvml::OpenSimulatedGpuSource(f.simulate);
  if (!source.ok()) {
    std::cerr << "stoker device-plugin: " << source.status().ToString() << "\n";
    return ExitCodeFor(source.status());
  }
  ShutdownSignals signals;  // before any thread starts
  SystemClock clock;
  std::unique_ptr<k8s::PodResourcesSource> pods;
  if (!f.pod_resources.empty()) pods = k8s::NewKubeletPodResources(f.pod_resources);
  k8s::DevicePluginOptions o;
  o.plugin_dir = f.plugin_dir;
  o.kubelet_socket = f.kubelet_socket;
  o.refresh = *refresh;
  o.xid_hold = *hold;
  o.allocate.mps_pipe_dir = f.mps_pipe_dir;
  o.allocate.mps_shm_dir = f.mps_shm_dir;
  o.allocate.dev_root = f.dev_root;
  o.mig_profiles.insert(f.mig_profiles.begin(), f.mig_profiles.end());
  k8s::DevicePlugin plugin(source->get(), &clock, pods.get(), o);
  if (Status s = plugin.Start(); !s.ok()) {
    if (s.code() != StatusCode::kUnavailable) {
      std::cerr << "stoker device-plugin: " << s.ToString() << "\n";
      return ExitCodeFor(s);
    }
    spdlog::warn("{}", s.message());  // the watch registers once the kubelet answers
  }
  std::string list;
  for (const std::string& r : plugin.Resources()) list += (list.empty() ? "" : ", ") + r;
  spdlog::info("stoker device-plugin{}: {} GPUs ({}); serving {} in {}",
               f.node_name.empty() ? "" : " on " + f.node_name, (*source)->DeviceCount(),
               (*source)->Describe(), list, f.plugin_dir);
  const int sig = signals.Wait();
  spdlog::info("stoker device-plugin: signal {}, stopping", sig);
  plugin.Stop();
  return kExitOk;
}

std::unique_ptr<k8s::PodResourcesSource> PodResources(const std::string& socket) {
  return k8s::NewKubeletPodResources(socket);
}

}  // namespace

void UseKubeletGrpc() {
  SetKubeletHooks({.run_device_plugin = RunDevicePlugin, .pod_resources = PodResources});
}

}  // namespace stoker::cli
