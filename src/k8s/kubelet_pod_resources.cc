#include <grpcpp/grpcpp.h>

#include "k8s/pod_resources.h"
#include "podresources.grpc.pb.h"

namespace stoker::k8s {
namespace {

class KubeletPodResources final : public PodResourcesSource {
 public:
  KubeletPodResources(std::string socket_path, Duration timeout)
      : path_(std::move(socket_path)), timeout_(timeout) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxPodResourcesBytes);
    channel_ =
        grpc::CreateCustomChannel("unix://" + path_, grpc::InsecureChannelCredentials(), args);
    stub_ = v1::PodResourcesLister::NewStub(channel_);
  }

  Result<std::vector<ContainerDevices>> List() override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout_);
    v1::ListPodResourcesRequest req;
    v1::ListPodResourcesResponse resp;
    const grpc::Status st = stub_->List(&ctx, req, &resp);
    if (!st.ok()) {
      return Unavailable("kubelet PodResources at " + path_ + ": " + st.error_message());
    }
    std::vector<ContainerDevices> out;
    for (const v1::PodResources& pod : resp.pod_resources()) {
      for (const v1::ContainerResources& c : pod.containers()) {
        for (const v1::ContainerDevices& d : c.devices()) {
          ContainerDevices cd;
          cd.namespace_name = pod.namespace_();
          cd.pod = pod.name();
          cd.container = c.name();
          cd.resource = d.resource_name();
          cd.device_ids.assign(d.device_ids().begin(), d.device_ids().end());
          out.push_back(std::move(cd));
        }
      }
    }
    return out;
  }

 private:
  std::string path_;
  Duration timeout_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::PodResourcesLister::Stub> stub_;
};

}  // namespace

std::unique_ptr<PodResourcesSource> NewKubeletPodResources(std::string socket_path,
                                                           Duration timeout) {
  return std::make_unique<KubeletPodResources>(std::move(socket_path), timeout);
}

}  // namespace stoker::k8s
