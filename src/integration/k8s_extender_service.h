#pragma once
// The Kubernetes scheduler extender inside `stoker server`: kube-scheduler calls
//
//   POST /api/v1/k8s/extender/filter       ExtenderArgs -> ExtenderFilterResult
//   POST /api/v1/k8s/extender/prioritize   ExtenderArgs -> HostPriorityList
//
// (urlPrefix https://HOST:PORT/api/v1/k8s/extender, filterVerb filter, prioritizeVerb
// prioritize; roles scheduler and admin: kube-scheduler authenticates with a client certificate
// mapped to the scheduler role, docs/kubernetes.md). The cluster view is fed by the server's
// heartbeats (the agents' GPU samples, with the pods that hold each GPU) and by the nodes'
// drained/lost states, which a background thread reads every refresh interval.
//
// Idle reclaim of pods (off unless configured): the efficiency engine's reclaimer over the pods
// the samples show holding GPUs, evaluated in the same background thread, evictions through the
// Kubernetes API (k8s/pod_reclaim.h); GET /api/v1/k8s/reclaim (admins) lists its records with
// their evidence.
//
// A filter request that cannot be read is answered 200 with the reason in Error (kube-scheduler
// shows that message; a 400 would show only "code 400"); a prioritize request that cannot be
// read gets the API's 400 (kube-scheduler ignores prioritize errors and scores without us).

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "efficiency/config.h"
#include "efficiency/zones.h"
#include "k8s/cluster_view.h"
#include "k8s/extender.h"
#include "k8s/pod_reclaim.h"
#include "server/api.h"
#include "server/server.h"

namespace stoker::integration {

struct KubernetesOptions {
  // false: Kubernetes is not configured on this server (`stoker server --k8s-extender`): the
  // extender takes no heartbeats (every report would cost the server its zones and view for
  // nothing) and its verbs answer that it is off.
  bool enabled = true;
  k8s::ExtenderOptions extender;
  efficiency::ZoneConfig zones;
  // Idle reclaim of pods: nullopt = off. With a policy and no evictor, records only (dry run).
  std::optional<efficiency::IdleReclaimPolicy> reclaim;
  k8s::PodEvictor* evictor = nullptr;  // not owned
  Duration reclaim_every = std::chrono::seconds(30);
};

class KubernetesExtender final : public server::ServerObserver, public server::ApiExtension {
 public:
  // `server` and `clock` are not owned and must outlive this.
  KubernetesExtender(server::Server* server, const Clock* clock, KubernetesOptions options = {});
  ~KubernetesExtender() override;

  // ServerObserver.
  void OnHeartbeat(const std::string& node, const std::vector<GpuSample>& gpus,
                   WallTime at) override;
  // A report's seconds: each feeds the GPUs' zones (and pod reclaim), the node's view is built
  // once, from the last second with samples (the view holds only the latest).
  void OnReport(const std::string& node, std::span<const server::SampleTick> ticks) override;
  bool enabled() const { return enabled_; }

  // ApiExtension.
  void AddRoutes(http::Router* router) override;
  std::string Metrics(const server::Principal& who) override;
  server::json OpenApiPaths() const override;

  // The two verbs (the routes call these; tests too).
  http::Response Filter(std::string_view body);
  http::Response Prioritize(std::string_view body);

  // Reads every node's drained/lost state from the server into the view.
  void RefreshNodeStates();
  // For tests: the zone tracker's job entries and its pending transitions (which this takes).
  struct ZoneTrackerSize {
    size_t jobs = 0, transitions = 0;
  };
  ZoneTrackerSize ZoneTrackerSizeForTest();

  // Hands the heartbeats queued since the last call to the reclaimer (the thread does this every
  // interval; EvaluateReclaim first does it too). No-op when reclaim is off.
  void FeedReclaim();
  // One evaluation of pod reclaim at `now` (the thread's step; no-op when reclaim is off).
  void EvaluateReclaim(WallTime now);
  // RefreshNodeStates every `interval` on a thread of its own, until Stop().
  void Start(Duration interval = std::chrono::seconds(2));
  void Stop();

 private:
  struct VerbStats {
    int64_t requests = 0, errors = 0;
    int64_t passed = 0, failed = 0, unresolvable = 0;
    double seconds = 0;
  };

  // The answer of a verb while the extender is off.
  static Status Off();

  server::Server* server_;
  const Clock* clock_;
  bool enabled_;
  k8s::ExtenderOptions options_;
  std::mutex mu_;
  k8s::ClusterView view_;                      // guarded by mu_
  efficiency::ZoneTracker zones_;              // guarded by mu_
  k8s::Scorer scorer_;                         // guarded by mu_
  VerbStats filter_stats_, prioritize_stats_;  // guarded by mu_

  // Pod reclaim: its own lock, as an eviction waits on the Kubernetes API.
  std::mutex reclaim_mu_;
  std::unique_ptr<k8s::PodReclaim> reclaim_;  // guarded by reclaim_mu_; null when off
  Duration reclaim_every_;
  // Atomics, so that Metrics() never takes reclaim_mu_ (held through evictions).
  std::atomic<int64_t> evictions_ok_{0}, evictions_failed_{0};
  // Heartbeats waiting for the reclaimer: OnHeartbeat appends under this small lock and never
  // takes reclaim_mu_; FeedReclaim (the loop thread) swaps them out.
  std::mutex pending_mu_;
  std::vector<std::pair<std::string, std::vector<GpuSample>>> pending_;  // guarded by pending_mu_

  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool stopping_ = false;
  std::thread loop_;
};

}  // namespace stoker::integration
