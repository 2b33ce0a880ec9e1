// stoker device-plugin: Stoker's GPU device plugin for the kubelet (docs/kubernetes.md).
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>

#include "cli/cli.h"
#include "cli/common.h"
#include "core/clock.h"
#include "core/duration.h"

#ifdef STOKER_HAVE_K8S_GRPC
#include "k8s/device_plugin.h"
#include "k8s/pod_resources.h"
#include "nvml/nvml_gpu_source.h"
#include "nvml/simulated.h"
#endif

namespace stoker::cli {
namespace {

struct DevicePluginFlags {
  std::string plugin_dir = "/var/lib/kubelet/device-plugins";
  std::string kubelet_socket = "kubelet.sock";
  std::string pod_resources;
  std::string node_name;
  std::string mps_pipe_dir = "/run/stoker/mps/pipe";
  std::string mps_shm_dir = "/run/stoker/mps/shm";
  std::string dev_root = "/dev";
  std::string refresh = "1s";
  std::string xid_hold = "5m";
  std::vector<std::string> mig_profiles;
  std::string simulate;
  std::string nvml_lib = "libnvidia-ml.so.1";
};

#ifdef STOKER_HAVE_K8S_GRPC
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
#endif

}  // namespace

void RegisterKubernetesCommands(CLI::App& app, int& exit_code) {
  auto* f = FlagStorage<DevicePluginFlags>();
  CLI::App* cmd = app.add_subcommand(
      "device-plugin",
      "Kubernetes GPU device plugin: stoker.io/gpu, stoker.io/gpu-milli (MPS-limited shares), "
      "stoker.io/mig-<profile>");
  cmd->add_option("--device-plugin-dir", f->plugin_dir,
                  "The kubelet's device-plugin directory (its socket and ours)")
      ->capture_default_str();
  cmd->add_option("--kubelet-socket", f->kubelet_socket,
                  "The kubelet's registration socket in that directory")
      ->capture_default_str();
  cmd->add_option("--kubelet-pod-resources", f->pod_resources,
                  "The kubelet's PodResources socket: what is allocated (a GPU is then given "
                  "whole or shared, never both)");
  cmd->add_option("--node-name", f->node_name, "This node's name (for the log)");
  cmd->add_option("--mps-pipe-dir", f->mps_pipe_dir,
                  "nvidia-cuda-mps-control's pipe directory (CUDA_MPS_PIPE_DIRECTORY), mounted "
                  "into shares")
      ->capture_default_str();
  cmd->add_option("--mps-shm-dir", f->mps_shm_dir,
                  "Host directory the MPS daemon uses as /dev/shm, mounted there into shares")
      ->capture_default_str();
  cmd->add_option("--dev-root", f->dev_root, "Where the GPU device nodes are")
      ->capture_default_str();
  cmd->add_option("--refresh", f->refresh, "How often GPU health and allocations are read")
      ->capture_default_str();
  cmd->add_option("--xid-hold", f->xid_hold, "How long a red XID keeps a GPU unhealthy")
      ->capture_default_str();
  cmd->add_option("--mig-profile", f->mig_profiles,
                  "Serve stoker.io/mig-<profile> even while no instance has it (repeatable)");
  cmd->add_option("--simulate", f->simulate, "Serve a simulated node (fake-NVML scenario)");
  cmd->add_option("--nvml-lib", f->nvml_lib, "NVML library to load")->capture_default_str();
  cmd->callback([f, &exit_code] {
#ifdef STOKER_HAVE_K8S_GRPC
    exit_code = RunDevicePlugin(*f);
#else
    std::cerr << "stoker device-plugin: this build has no gRPC (the portable binary); use the "
                 "Debian build\n";
    exit_code = kExitUnavailable;
#endif
  });
}

}  // namespace stoker::cli
