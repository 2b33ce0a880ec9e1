#include "integration/k8s_extender_service.h"

#include <spdlog/spdlog.h>

#include "core/prometheus_text.h"
#include "efficiency/api_json.h"
#include "k8s/extender_types.h"

namespace stoker::integration {
namespace {
using http::RouteCall;
using http::Scope;
using server::Role;

double Seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

KubernetesExtender::KubernetesExtender(server::Server* server, const Clock* clock,
                                       KubernetesOptions options)
    : server_(server),
      clock_(clock),
      enabled_(options.enabled),
      options_(options.extender),
      zones_(options.zones),
      scorer_(options.extender),
      reclaim_every_(options.reclaim_every) {
  if (options.reclaim) {
    reclaim_ =
        std::make_unique<k8s::PodReclaim>(*options.reclaim, options.zones.metric, options.evictor);
  }
}

KubernetesExtender::~KubernetesExtender() { Stop(); }

void KubernetesExtender::OnHeartbeat(const std::string& node, const std::vector<GpuSample>& gpus,
                                     WallTime at) {
  if (!enabled_ || gpus.empty()) return;  // without samples: nothing new about the GPUs
  if (reclaim_) {
    // Queued, not observed here: reclaim_mu_ is held through evictions, and a heartbeat (an
    // HTTP worker) must not wait for them. The loop thread feeds these to the reclaimer.
    std::lock_guard lock(pending_mu_);
    pending_.emplace_back(node, gpus);
  }
  std::lock_guard lock(mu_);
  // The view reads only the GPUs' zones: observed with no jobs (the pods would each leave an
  // entry behind forever), and the transitions, which nothing here reports, dropped each time.
  for (const GpuSample& s : gpus) zones_.Observe(s, {});
  (void)zones_.TakeTransitions();
  view_.Update(node, k8s::GpusFromSamples(gpus, &zones_), at);
}

void KubernetesExtender::OnReport(const std::string& node,
                                  std::span<const server::SampleTick> ticks) {
  if (!enabled_) return;
  const server::SampleTick* last = nullptr;
  for (const server::SampleTick& t : ticks) {
    if (!t.gpus.empty()) last = &t;
  }
  if (last == nullptr) return;  // no samples: nothing new about the GPUs
  if (reclaim_) {
    std::lock_guard lock(pending_mu_);
    for (const server::SampleTick& t : ticks) {
      if (!t.gpus.empty()) pending_.emplace_back(node, t.gpus);
    }
  }
  std::lock_guard lock(mu_);
  for (const server::SampleTick& t : ticks) {
    for (const GpuSample& s : t.gpus) zones_.Observe(s, {});
  }
  (void)zones_.TakeTransitions();
  view_.Update(node, k8s::GpusFromSamples(last->gpus, &zones_), last->at);
}

Status KubernetesExtender::Off() {
  return FailedPrecondition(
      "the scheduler extender is off on this server: start it with --k8s-extender on, or map "
      "kube-scheduler's client certificate to the scheduler role (--tls-client-role CN=scheduler)");
}

void KubernetesExtender::RefreshNodeStates() {
  auto nodes = server_->ListNodes(server::Principal{"k8s-extender", Role::kAdmin});
  if (!nodes.ok()) return;
  std::lock_guard lock(mu_);
  for (const protocol::NodeStatus& n : *nodes) {
    view_.SetState(n.inventory.name, n.state == protocol::NodeState::kDrained,
                   n.state == protocol::NodeState::kLost);
  }
}

void KubernetesExtender::FeedReclaim() {
  if (!reclaim_) return;
  std::vector<std::pair<std::string, std::vector<GpuSample>>> batch;
  {
    std::lock_guard lock(pending_mu_);
    batch.swap(pending_);
  }
  if (batch.empty()) return;
  std::lock_guard lock(reclaim_mu_);
  for (const auto& [node, gpus] : batch) reclaim_->Observe(node, gpus);
}

void KubernetesExtender::EvaluateReclaim(WallTime now) {
  if (!reclaim_) return;
  FeedReclaim();
  std::lock_guard lock(reclaim_mu_);
  for (const efficiency::ReclaimRecord& r : reclaim_->Evaluate(now)) {
    if (r.action == efficiency::ReclaimAction::kWarn || r.dry_run) continue;
    (r.result.ok() ? evictions_ok_ : evictions_failed_).fetch_add(1, std::memory_order_relaxed);
  }
}

void KubernetesExtender::Start(Duration interval) {
  // Off, the extender answers every call with that and keeps no view: nothing to refresh (the
  // refresh copies every node's status, 3 % of the server's CPU at 10,000 nodes).
  if (!enabled_) return;
  RefreshNodeStates();
  loop_ = std::thread([this, interval] {
    std::unique_lock lock(loop_mu_);
    MonoTime last_reclaim = clock_->Now();
    while (!loop_cv_.wait_for(lock, interval, [this] { return stopping_; })) {
      lock.unlock();
      RefreshNodeStates();
      FeedReclaim();
      if (clock_->Now() - last_reclaim >= reclaim_every_) {
        last_reclaim = clock_->Now();
        EvaluateReclaim(clock_->WallNow());
      }
      lock.lock();
    }
  });
}

void KubernetesExtender::Stop() {
  {
    std::lock_guard lock(loop_mu_);
    stopping_ = true;
  }
  loop_cv_.notify_all();
  if (loop_.joinable()) loop_.join();
}

http::Response KubernetesExtender::Filter(std::string_view body) {
  const MonoTime start = clock_->Now();
  auto args = k8s::ParseExtenderArgs(body);
  std::lock_guard lock(mu_);
  ++filter_stats_.requests;
  if (!enabled_) {
    ++filter_stats_.errors;
    k8s::FilterOutcome err;
    err.error = "stoker: " + Off().message();
    return {200, k8s::FilterResultJson(nullptr, err)};
  }
  if (!args.ok()) {
    ++filter_stats_.errors;
    k8s::FilterOutcome err;
    err.error = "stoker: " + args.status().message();
    return {200, k8s::FilterResultJson(nullptr, err)};
  }
  const k8s::FilterOutcome out =
      k8s::FilterNodes(view_, args->pod, args->node_names, options_, clock_->WallNow());
  filter_stats_.passed += static_cast<int64_t>(out.passed.size());
  filter_stats_.failed += static_cast<int64_t>(out.failed.size());
  filter_stats_.unresolvable += static_cast<int64_t>(out.unresolvable.size());
  std::string answer = k8s::FilterResultJson(&*args, out);
  filter_stats_.seconds += Seconds(clock_->Now() - start);
  return {200, std::move(answer)};
}

http::Response KubernetesExtender::Prioritize(std::string_view body) {
  const MonoTime start = clock_->Now();
  auto args = k8s::ParseExtenderArgs(body);
  std::lock_guard lock(mu_);
  ++prioritize_stats_.requests;
  if (!enabled_) {
    ++prioritize_stats_.errors;
    return http::ErrorResponse(Off());
  }
  if (!args.ok()) {
    ++prioritize_stats_.errors;
    return http::ErrorResponse(args.status());
  }
  const std::vector<int64_t> scores =
      scorer_.Score(view_, args->pod, args->node_names, clock_->WallNow());
  std::vector<k8s::HostPriority> list;
  list.reserve(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) {
    list.push_back({args->node_names[i], k8s::WireScore(scores[i])});
  }
  std::string answer = k8s::HostPriorityListJson(list);
  prioritize_stats_.seconds += Seconds(clock_->Now() - start);
  return {200, std::move(answer)};
}

void KubernetesExtender::AddRoutes(http::Router* router) {
  const std::set<Role> callers = {Role::kScheduler, Role::kAdmin};
  router->Add({"POST",
               "/k8s/extender/filter",
               callers,
               Scope::kNone,
               {},
               "Kubernetes scheduler extender, filter verb: ExtenderArgs in, ExtenderFilterResult "
               "out (kube-scheduler extender/v1)",
               [this](const RouteCall& c) { return Filter(c.request.body); }});
  router->Add({"POST",
               "/k8s/extender/prioritize",
               callers,
               Scope::kNone,
               {},
               "Kubernetes scheduler extender, prioritize verb: ExtenderArgs in, HostPriorityList "
               "out (scores 0..10)",
               [this](const RouteCall& c) { return Prioritize(c.request.body); }});
  router->Add({"GET",
               "/k8s/reclaim",
               {Role::kAdmin},
               Scope::kNone,
               {},
               "Idle reclaim of pods: warnings and evictions with their evidence (empty when "
               "pod reclaim is off)",
               [this](const RouteCall&) {
                 server::json out = server::json::array();
                 std::lock_guard lock(reclaim_mu_);
                 if (reclaim_) {
                   for (const efficiency::ReclaimRecord& r : reclaim_->log()) {
                     out.push_back(efficiency::ReclaimRecordToJson(r));
                   }
                 }
                 return http::JsonResponse(200, out);
               }});
}

KubernetesExtender::ZoneTrackerSize KubernetesExtender::ZoneTrackerSizeForTest() {
  std::lock_guard lock(mu_);
  return {zones_.Jobs().size(), zones_.TakeTransitions().size()};
}

std::string KubernetesExtender::Metrics(const server::Principal& /*who*/) {
  std::lock_guard lock(mu_);
  prom::TextWriter w;
  const std::pair<const char*, const VerbStats*> verbs[] = {{"filter", &filter_stats_},
                                                            {"prioritize", &prioritize_stats_}};
  w.Family("stoker_k8s_extender_requests_total",
           "Scheduler-extender calls from kube-scheduler, by verb", prom::Type::kCounter);
  for (const auto& [verb, st] : verbs) {
    w.Sample("stoker_k8s_extender_requests_total", {{"verb", verb}},
             static_cast<double>(st->requests));
  }
  w.Family("stoker_k8s_extender_request_errors_total",
           "Scheduler-extender calls whose body could not be read, by verb", prom::Type::kCounter);
  for (const auto& [verb, st] : verbs) {
    w.Sample("stoker_k8s_extender_request_errors_total", {{"verb", verb}},
             static_cast<double>(st->errors));
  }
  w.Family("stoker_k8s_extender_seconds_total",
           "Time spent answering scheduler-extender calls, by verb", prom::Type::kCounter);
  for (const auto& [verb, st] : verbs) {
    w.Sample("stoker_k8s_extender_seconds_total", {{"verb", verb}}, st->seconds);
  }
  w.Family("stoker_k8s_extender_filtered_nodes_total",
           "Nodes the filter verb answered, by result (passed, failed: might fit after "
           "preemption, unresolvable: would not)",
           prom::Type::kCounter);
  for (const auto& [result, n] :
       {std::pair{"passed", filter_stats_.passed}, std::pair{"failed", filter_stats_.failed},
        std::pair{"unresolvable", filter_stats_.unresolvable}}) {
    w.Sample("stoker_k8s_extender_filtered_nodes_total", {{"result", result}},
             static_cast<double>(n));
  }
  w.Gauge("stoker_k8s_extender_nodes", "Nodes in the extender's view (nodes whose agents report)",
          static_cast<double>(view_.nodes().size()));
  // The eviction counters are atomics, not under reclaim_mu_: an evaluation holds that lock
  // through its eviction calls (up to seconds each), and a scrape must not wait for them while
  // holding mu_ (which would stall filter, prioritize and heartbeats).
  w.Family("stoker_k8s_pod_evictions_total",
           "Idle pods evicted through the Kubernetes API, by result", prom::Type::kCounter);
  w.Sample("stoker_k8s_pod_evictions_total", {{"result", "ok"}},
           static_cast<double>(evictions_ok_.load(std::memory_order_relaxed)));
  w.Sample("stoker_k8s_pod_evictions_total", {{"result", "failed"}},
           static_cast<double>(evictions_failed_.load(std::memory_order_relaxed)));
  if (!w.status().ok()) spdlog::error("k8s extender metrics: {}", w.status().ToString());
  return w.Take();
}

server::json KubernetesExtender::OpenApiPaths() const {
  const server::json args = {
      {"type", "object"},
      {"description",
       "ExtenderArgs (k8s.io/kube-scheduler extender/v1): Pod, and NodeNames "
       "(nodeCacheCapable: true) or Nodes (a NodeList)"},
      {"properties",
       {{"Pod", {{"type", "object"}}},
        {"Nodes", {{"type", "object"}, {"nullable", true}}},
        {"NodeNames", {{"type", "array"}, {"nullable", true}, {"items", {{"type", "string"}}}}}}}};
  auto op = [&](const char* summary, const server::json& response) {
    return server::json{
        {"post",
         {{"summary", summary},
          {"requestBody", {{"content", {{"application/json", {{"schema", args}}}}}}},
          {"responses",
           {{"200",
             {{"description", "OK"}, {"content", {{"application/json", {{"schema", response}}}}}}},
            {"400", {{"description", "prioritize: the body could not be read"}}},
            {"401", {{"description", "no token and no mapped client certificate"}}},
            {"403", {{"description", "role not allowed (scheduler or admin)"}}}}}}}};
  };
  const server::json filter_result = {
      {"type", "object"},
      {"description",
       "ExtenderFilterResult: Nodes or NodeNames (the form of the request), FailedNodes, "
       "FailedAndUnresolvableNodes, Error"}};
  const server::json priorities = {
      {"type", "array"},
      {"items",
       {{"type", "object"},
        {"properties",
         {{"Host", {{"type", "string"}}},
          {"Score", {{"type", "integer"}, {"minimum", 0}, {"maximum", 10}}}}}}}};
  return {{"/k8s/extender/filter", op("Scheduler extender: filter", filter_result)},
          {"/k8s/extender/prioritize", op("Scheduler extender: prioritize", priorities)},
          {"/k8s/reclaim",
           {{"get",
             {{"summary", "Idle reclaim of pods, with evidence"},
              {"responses", {{"200", {{"description", "the reclaim records, oldest first"}}}}}}}}}};
}

}  // namespace stoker::integration
