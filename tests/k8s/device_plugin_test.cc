// The device plugin against a fake kubelet over the real gRPC protocol on unix sockets in a
// temporary directory: the kubelet's Registration service on kubelet.sock and its PodResources
// service, then the plugin's own sockets, called as the kubelet calls them. GPUs come from the
// fake NVML library through the real dlopen path, scripted by a scenario in which GPU 1 falls
// off the bus at t=20 s and comes back at t=40 s.
#include "k8s/device_plugin.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "deviceplugin.grpc.pb.h"
#include "fake_kubelet.h"
#include "fakenvml/fake_control.h"
#include "k8s/pod_resources.h"
#include "k8s/resources.h"
#include "nvml/nvml_gpu_source.h"

namespace stoker::k8s {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kScenario = R"(
name: k8s-plugin-node
hostname: gpu-k8s-01
loop_seconds: 0
gpus:
  - &h100
    model: NVIDIA H100 80GB HBM3
    uuid: GPU-11111111-0000-4000-8000-000000000000
    pci_bus_id: "00000000:18:00.0"
    architecture: 9
    memory_total_mib: 81920
    power_limit_w: 700
  - <<: *h100
    uuid: GPU-11111111-0001-4000-8000-000000000001
    pci_bus_id: "00000000:2A:00.0"
    minor: 1
    lost: [{from: 20, to: 40}]
)";

const std::string kGpu0 = "GPU-11111111-0000-4000-8000-000000000000";
const std::string kGpu1 = "GPU-11111111-0001-4000-8000-000000000001";

std::vector<std::string> Shares(const std::string& gpu, int from, int to) {
  std::vector<std::string> out;
  for (int k = from; k < to; ++k) out.push_back(ShareDeviceId(gpu, k));
  return out;
}

class DevicePluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("stoker_dp_" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/device-plugins");
    fs::create_directories(dir_ + "/dev");
    for (const char* n : {"nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"}) {
      std::ofstream(dir_ + "/dev/" + n) << "";
    }
    const std::string lib = fakenvml::FakeLibraryBuildPath();
    auto control = fakenvml::FakeNvmlControl::Open(lib);
    ASSERT_TRUE(control.ok()) << control.status().ToString();
    control_ = std::move(control).value();
    ASSERT_TRUE(control_->SetScenario(kScenario, "k8s-plugin.yaml").ok());
    auto source = nvml::OpenNvmlGpuSource(nvml::NvmlOptions{lib});
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    source_ = std::move(source).value();
    control_->SetTime(1);
    kubelet_.Start(Kubelet(), dir_ + "/pod-resources.sock");
    pods_ = NewKubeletPodResources(dir_ + "/pod-resources.sock", 2s);
    DevicePluginOptions o;
    o.plugin_dir = dir_ + "/device-plugins";
    o.refresh = 50ms;
    o.watch = 50ms;
    o.allocate.dev_root = dir_ + "/dev";
    o.allocate.mps_pipe_dir = "/run/stoker/mps/pipe";
    o.allocate.mps_shm_dir = "/run/stoker/mps/shm";
    plugin_ = std::make_unique<DevicePlugin>(source_.get(), &clock_, pods_.get(), o);
  }
  void TearDown() override {
    plugin_.reset();
    kubelet_.Stop();
    source_.reset();
    control_.reset();
    fs::remove_all(dir_);
  }
  std::string Kubelet() const { return dir_ + "/device-plugins/kubelet.sock"; }
  std::unique_ptr<v1beta1::DevicePlugin::Stub> Plugin(const std::string& endpoint) {
    auto ch = grpc::CreateChannel("unix://" + dir_ + "/device-plugins/" + endpoint,
                                  grpc::InsecureChannelCredentials());
    return v1beta1::DevicePlugin::NewStub(ch);
  }

  std::string dir_;
  SystemClock clock_;
  std::unique_ptr<fakenvml::FakeNvmlControl> control_;
  std::unique_ptr<GpuSource> source_;
  FakeKubelet kubelet_;
  std::unique_ptr<PodResourcesSource> pods_;
  std::unique_ptr<DevicePlugin> plugin_;
};

// Reads ListAndWatch answers until `pred` holds for one (or the deadline passes).
template <class Pred>
bool WatchUntil(grpc::ClientReader<v1beta1::ListAndWatchResponse>* reader, Pred pred,
                v1beta1::ListAndWatchResponse* last) {
  while (reader->Read(last)) {
    if (pred(*last)) return true;
  }
  return false;
}

std::string HealthOf(const v1beta1::ListAndWatchResponse& r, const std::string& id) {
  for (const auto& d : r.devices()) {
    if (d.id() == id) return d.health();
  }
  return "absent";
}

TEST_F(DevicePluginTest, RegistersEachResourceAndReportsHealthThatFlipsAndRecovers) {
  ASSERT_TRUE(plugin_->Start().ok());
  ASSERT_TRUE(kubelet_.WaitForRegistrations(2));
  std::set<std::string> resources, endpoints;
  for (const auto& r : kubelet_.requests()) {
    EXPECT_EQ(r.version(), "v1beta1");
    EXPECT_TRUE(r.options().get_preferred_allocation_available());
    EXPECT_FALSE(r.options().pre_start_required());
    resources.insert(r.resource_name());
    endpoints.insert(r.endpoint());
    EXPECT_TRUE(fs::exists(dir_ + "/device-plugins/" + r.endpoint())) << r.endpoint();
  }
  EXPECT_EQ(resources, (std::set<std::string>{"stoker.io/gpu", "stoker.io/gpu-milli"}));
  EXPECT_EQ(endpoints, (std::set<std::string>{"stoker-gpu.sock", "stoker-gpu-milli.sock"}));

  auto stub = Plugin("stoker-gpu.sock");
  {
    grpc::ClientContext ctx;
    v1beta1::Empty e;
    v1beta1::DevicePluginOptions opts;
    ASSERT_TRUE(stub->GetDevicePluginOptions(&ctx, e, &opts).ok());
    EXPECT_TRUE(opts.get_preferred_allocation_available());
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  v1beta1::Empty e;
  auto reader = stub->ListAndWatch(&ctx, e);
  v1beta1::ListAndWatchResponse r;
  ASSERT_TRUE(reader->Read(&r));
  ASSERT_EQ(r.devices_size(), 2);
  EXPECT_EQ(HealthOf(r, kGpu0), "Healthy");
  EXPECT_EQ(HealthOf(r, kGpu1), "Healthy");
  // GPU 1 falls off the bus: the same device, Unhealthy.
  control_->SetTime(25);
  ASSERT_TRUE(WatchUntil(
      reader.get(), [](const auto& x) { return HealthOf(x, kGpu1) == "Unhealthy"; }, &r));
  EXPECT_EQ(HealthOf(r, kGpu0), "Healthy");
  // ... and comes back: Healthy again (a plugin that cannot recover would stay Unhealthy).
  control_->SetTime(45);
  ASSERT_TRUE(WatchUntil(
      reader.get(), [](const auto& x) { return HealthOf(x, kGpu1) == "Healthy"; }, &r));
  ctx.TryCancel();

  // The share resource: 1,000 devices per GPU.
  grpc::ClientContext mctx;
  mctx.set_deadline(std::chrono::system_clock::now() + 10s);
  auto milli = Plugin("stoker-gpu-milli.sock")->ListAndWatch(&mctx, e);
  ASSERT_TRUE(milli->Read(&r));
  EXPECT_EQ(r.devices_size(), 2000);
  EXPECT_EQ(HealthOf(r, ShareDeviceId(kGpu1, 999)), "Healthy");
  mctx.TryCancel();
}

TEST_F(DevicePluginTest, AGpuIsGivenWholeOrSharedNeverBoth) {
  // GPU 0 has shares handed out; GPU 1 is held whole (what the kubelet's PodResources says).
  std::vector<ContainerDevices> pods = {
      {"ml", "infer", "server", "stoker.io/gpu-milli", Shares(kGpu0, 0, 600)},
      {"ml", "train", "main", "stoker.io/gpu", {kGpu1}}};
  kubelet_.SetPods(pods);
  ASSERT_TRUE(plugin_->Start().ok());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  v1beta1::Empty e;
  v1beta1::ListAndWatchResponse r;
  auto whole = Plugin("stoker-gpu.sock")->ListAndWatch(&ctx, e);
  ASSERT_TRUE(whole->Read(&r));
  EXPECT_EQ(HealthOf(r, kGpu0), "Unhealthy");  // shared out: not offered whole
  EXPECT_EQ(HealthOf(r, kGpu1), "Healthy");    // the whole-GPU pod keeps its device
  ctx.TryCancel();
  grpc::ClientContext mctx;
  mctx.set_deadline(std::chrono::system_clock::now() + 10s);
  auto milli = Plugin("stoker-gpu-milli.sock")->ListAndWatch(&mctx, e);
  ASSERT_TRUE(milli->Read(&r));
  EXPECT_EQ(HealthOf(r, ShareDeviceId(kGpu0, 700)), "Healthy");
  EXPECT_EQ(HealthOf(r, ShareDeviceId(kGpu1, 0)), "Unhealthy");  // held whole: no shares
  // The whole-GPU pod ends: GPU 1's shares are offered again.
  kubelet_.SetPods({pods[0]});
  ASSERT_TRUE(WatchUntil(
      milli.get(), [](const auto& x) { return HealthOf(x, ShareDeviceId(kGpu1, 0)) == "Healthy"; },
      &r));
  mctx.TryCancel();
}

// The kubelet asks which devices to give; the answer is Stoker's placement policy's, which
// minimises expected fragmentation (FGD's measure over the shapes it has seen), not naive best
// fit: it fills a GPU exactly, and it does not leave a sliver no share can use.
TEST_F(DevicePluginTest, PreferredAllocationPacksSharesByStokersPolicy) {
  ASSERT_TRUE(plugin_->Start().ok());
  auto stub = Plugin("stoker-gpu-milli.sock");
  auto ask = [&](const std::vector<std::string>& available, int32_t size,
                 v1beta1::PreferredAllocationRequest* req) {
    req->Clear();
    auto* c = req->add_container_requests();
    for (const std::string& id : available) c->add_available_deviceids(id);
    c->set_allocation_size(size);
    grpc::ClientContext ctx;
    v1beta1::PreferredAllocationResponse resp;
    EXPECT_TRUE(stub->GetPreferredAllocation(&ctx, *req, &resp).ok());
    std::set<std::string> gpus;
    for (const std::string& id : resp.container_responses(0).deviceids()) {
      gpus.insert(ParseDeviceId(id)->uuid);
    }
    EXPECT_EQ(resp.container_responses(0).deviceids_size(), size);
    return gpus;
  };
  v1beta1::PreferredAllocationRequest req;
  // 700 of GPU 0's shares are taken: a 300 share fills it exactly.
  std::vector<std::string> available = Shares(kGpu0, 700, 1000);
  for (const std::string& id : Shares(kGpu1, 0, 1000)) available.push_back(id);
  EXPECT_EQ(ask(available, 300, &req), std::set<std::string>{kGpu0});
  // 500 do not fit the 300 left on GPU 0: all on GPU 1.
  EXPECT_EQ(ask(available, 500, &req), std::set<std::string>{kGpu1});
  // With 400 left on GPU 0, a 300 share would leave 100 there that no such share can use: the
  // policy takes GPU 1 (700 and 400 left, both still usable), where best fit would take GPU 0.
  available = Shares(kGpu0, 600, 1000);
  for (const std::string& id : Shares(kGpu1, 0, 1000)) available.push_back(id);
  EXPECT_EQ(ask(available, 300, &req), std::set<std::string>{kGpu1});
  auto* c = req.mutable_container_requests(0);
  v1beta1::PreferredAllocationResponse resp;
  // A must-include device keeps the share on its GPU.
  c->add_must_include_deviceids(ShareDeviceId(kGpu1, 7));
  c->set_allocation_size(100);
  grpc::ClientContext ctx3;
  ASSERT_TRUE(stub->GetPreferredAllocation(&ctx3, req, &resp).ok());
  const auto& with = resp.container_responses(0).deviceids();
  EXPECT_EQ(with[0], ShareDeviceId(kGpu1, 7));
  for (const std::string& id : with) EXPECT_EQ(ParseDeviceId(id)->uuid, kGpu1);
  // More than is available: refused, naming the sizes.
  c->set_allocation_size(5000);
  grpc::ClientContext ctx4;
  const grpc::Status st = stub->GetPreferredAllocation(&ctx4, req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(DevicePluginTest, AllocateGivesTheGpuAndForAShareItsMpsLimits) {
  ASSERT_TRUE(plugin_->Start().ok());
  v1beta1::AllocateRequest req;
  auto* c = req.add_container_requests();
  for (const std::string& id : Shares(kGpu0, 100, 350)) c->add_devices_ids(id);  // 250 milli
  grpc::ClientContext ctx;
  v1beta1::AllocateResponse resp;
  ASSERT_TRUE(Plugin("stoker-gpu-milli.sock")->Allocate(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.container_responses_size(), 1);
  const auto& a = resp.container_responses(0);
  const auto& env = a.envs();
  EXPECT_EQ(env.at("NVIDIA_VISIBLE_DEVICES"), kGpu0);
  EXPECT_EQ(env.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "25");
  EXPECT_EQ(env.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=20480M");  // a quarter of 80 GiB
  EXPECT_EQ(env.at("CUDA_MPS_PIPE_DIRECTORY"), "/run/stoker/mps/pipe");
  EXPECT_EQ(env.at("STOKER_K8S_SHARE_DEVICE"), ShareDeviceId(kGpu0, 100));
  ASSERT_EQ(a.mounts_size(), 2);
  EXPECT_EQ(a.mounts(0).container_path(), "/run/stoker/mps/pipe");
  EXPECT_EQ(a.mounts(0).host_path(), "/run/stoker/mps/pipe");
  EXPECT_EQ(a.mounts(1).container_path(), "/dev/shm");
  EXPECT_EQ(a.mounts(1).host_path(), "/run/stoker/mps/shm");
  std::set<std::string> devices;
  for (const auto& d : a.devices()) {
    devices.insert(d.host_path());
    EXPECT_EQ(d.permissions(), "rw");
  }
  // GPU 0's node and the driver's shared nodes that exist (no nvidia-uvm-tools here).
  EXPECT_EQ(devices, (std::set<std::string>{"/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"}));

  // Whole GPUs: both devices, no MPS.
  v1beta1::AllocateRequest wreq;
  auto* w = wreq.add_container_requests();
  w->add_devices_ids(kGpu0);
  w->add_devices_ids(kGpu1);
  grpc::ClientContext wctx;
  ASSERT_TRUE(Plugin("stoker-gpu.sock")->Allocate(&wctx, wreq, &resp).ok());
  EXPECT_EQ(resp.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), kGpu0 + "," + kGpu1);
  EXPECT_EQ(resp.container_responses(0).envs().count("CUDA_MPS_PIPE_DIRECTORY"), 0u);
  EXPECT_EQ(resp.container_responses(0).devices_size(), 4);

  // A share spread over two GPUs is refused, with the reason.
  v1beta1::AllocateRequest bad;
  auto* b = bad.add_container_requests();
  b->add_devices_ids(ShareDeviceId(kGpu0, 1));
  b->add_devices_ids(ShareDeviceId(kGpu1, 1));
  grpc::ClientContext bctx;
  const grpc::Status st = Plugin("stoker-gpu-milli.sock")->Allocate(&bctx, bad, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("a share must be on one GPU"), std::string::npos);
}

TEST_F(DevicePluginTest, RegistersAgainWhenTheKubeletRestartsOrItsSocketIsDeleted) {
  ASSERT_TRUE(plugin_->Start().ok());
  ASSERT_TRUE(kubelet_.WaitForRegistrations(2));
  // The plugin's own socket is deleted: it serves again and registers again.
  fs::remove(dir_ + "/device-plugins/stoker-gpu.sock");
  ASSERT_TRUE(kubelet_.WaitForRegistrations(4));
  for (int i = 0; i < 100 && !fs::exists(dir_ + "/device-plugins/stoker-gpu.sock"); ++i) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(fs::exists(dir_ + "/device-plugins/stoker-gpu.sock"));
  // The kubelet restarts: a new kubelet.sock, the plugin sockets removed.
  kubelet_.Restart(Kubelet(), dir_ + "/device-plugins");
  ASSERT_TRUE(kubelet_.WaitForRegistrations(6));
  for (int i = 0; i < 100 && !fs::exists(dir_ + "/device-plugins/stoker-gpu-milli.sock"); ++i) {
    std::this_thread::sleep_for(20ms);
  }
  // The new sockets serve.
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  v1beta1::Empty e;
  v1beta1::DevicePluginOptions opts;
  ASSERT_TRUE(Plugin("stoker-gpu-milli.sock")->GetDevicePluginOptions(&ctx, e, &opts).ok());
}

TEST_F(DevicePluginTest, StartFailsClearlyWithoutTheKubeletsDirectory) {
  DevicePluginOptions o;
  o.plugin_dir = dir_ + "/no-such-dir";
  DevicePlugin p(source_.get(), &clock_, nullptr, o);
  const Status st = p.Start();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no-such-dir"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace stoker::k8s
