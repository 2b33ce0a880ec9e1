#pragma once
// A fake kubelet for the tests: the device-plugin Registration service (it records every
// request) and the PodResources List service (it answers what the test sets), over gRPC on unix
// sockets, as the kubelet serves them.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "deviceplugin.grpc.pb.h"
#include "k8s/pod_resources.h"
#include "podresources.grpc.pb.h"

namespace stoker::k8s {

// The kubelet's side: Registration on kubelet.sock (records every request) and PodResources.
class FakeKubelet final : public v1beta1::Registration::Service,
                          public v1::PodResourcesLister::Service {
 public:
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* req,
                        v1beta1::Empty*) override {
    std::lock_guard lock(mu_);
    requests_.push_back(*req);
    cv_.notify_all();
    return grpc::Status::OK;
  }
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* out) override {
    std::lock_guard lock(mu_);
    *out = pods_;
    return grpc::Status::OK;
  }

  // Serves Registration on `kubelet_sock` and PodResources on `pods_sock`.
  void Start(const std::string& kubelet_sock, const std::string& pods_sock) {
    ::unlink(kubelet_sock.c_str());
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + kubelet_sock, grpc::InsecureServerCredentials());
    b.RegisterService(static_cast<v1beta1::Registration::Service*>(this));
    registration_ = b.BuildAndStart();
    ASSERT_TRUE(registration_);
    if (!pods_sock.empty()) {
      ::unlink(pods_sock.c_str());
      grpc::ServerBuilder p;
      p.AddListeningPort("unix:" + pods_sock, grpc::InsecureServerCredentials());
      p.RegisterService(static_cast<v1::PodResourcesLister::Service*>(this));
      pods_server_ = p.BuildAndStart();
      ASSERT_TRUE(pods_server_);
    }
  }
  // A kubelet restart: its registration socket goes away and a new one (a new file) appears,
  // and like the kubelet it removes the plugins' sockets.
  void Restart(const std::string& kubelet_sock, const std::string& dir) {
    registration_->Shutdown(std::chrono::system_clock::now());
    registration_->Wait();
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.path().extension() == ".sock") std::filesystem::remove(e.path());
    }
    Start(kubelet_sock, "");
  }
  void Stop() {
    if (registration_) registration_->Shutdown(std::chrono::system_clock::now());
    if (pods_server_) pods_server_->Shutdown(std::chrono::system_clock::now());
  }

  // Waits until at least `n` registrations arrived.
  bool WaitForRegistrations(size_t n,
                            std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return requests_.size() >= n; });
  }
  std::vector<v1beta1::RegisterRequest> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }
  void SetPods(const std::vector<ContainerDevices>& list) {
    std::lock_guard lock(mu_);
    pods_.Clear();
    for (const ContainerDevices& cd : list) {
      v1::PodResources* p = pods_.add_pod_resources();
      p->set_name(cd.pod);
      p->set_namespace_(cd.namespace_name);
      v1::ContainerResources* c = p->add_containers();
      c->set_name(cd.container);
      v1::ContainerDevices* d = c->add_devices();
      d->set_resource_name(cd.resource);
      for (const std::string& id : cd.device_ids) d->add_device_ids(id);
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<v1beta1::RegisterRequest> requests_;
  v1::ListPodResourcesResponse pods_;
  std::unique_ptr<grpc::Server> registration_, pods_server_;
};

}  // namespace stoker::k8s
