// stoker device-plugin: Stoker's GPU device plugin for the kubelet (docs/kubernetes.md). Its
// flags; it runs in stoker-k8s (cli/kubelet.h, cli/kubelet/grpc.cc).
#include "cli/cli.h"
#include "cli/kubelet.h"

namespace stoker::cli {

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
    // The device plugin itself runs in stoker-k8s (cli/kubelet.h).
    exit_code = Kubelet().run_device_plugin != nullptr ? Kubelet().run_device_plugin(*f)
                                                       : RunKubeletProgram("device-plugin");
  });
}

}  // namespace stoker::cli
