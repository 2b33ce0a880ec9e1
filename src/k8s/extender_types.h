#pragma once
// The scheduler extender's wire format: k8s.io/kube-scheduler extender/v1, as kube-scheduler's
// HTTPExtender sends and reads it (POST <urlPrefix>/<verb>, Content-Type application/json).
//
// The Go structs have no json tags, so the field names are the Go names (PascalCase):
//   ExtenderArgs          {"Pod": v1.Pod, "Nodes": v1.NodeList | null, "NodeNames": [..] | null}
//                         nodeCacheCapable: true sends NodeNames, false sends full Node objects
//   ExtenderFilterResult  {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes",
//                          "Error"}; answered in the form the request came in: NodeNames for
//                          names (kube-scheduler reads them only when nodeCacheCapable), Nodes
//                          (the objects as received) for full nodes
//   HostPriorityList      [{"Host": name, "Score": 0..MaxExtenderPriority}]
//
// Pods and nodes use the API's own JSON (metadata, spec, status). Only what the extender needs
// is read from a pod (name, namespace, uid, annotations, containers' resources); node objects
// are kept as received so the filter can hand them back.
//
// Inputs are bounded (kMaxNodes names, kMaxContainers, string lengths) and every error names the
// path of the offending field: "Pod.spec.containers[1].resources.limits.stoker.io/gpu: ...".

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "k8s/resources.h"

namespace stoker::k8s {

// kube-scheduler's extender/v1 constants (MaxExtenderPriority = 10 in every release since the
// framework's MaxNodeScore became 100; kube-scheduler multiplies an extender's score by
// weight * MaxNodeScore / MaxExtenderPriority).
inline constexpr int64_t kMinExtenderPriority = 0;
inline constexpr int64_t kMaxExtenderPriority = 10;

inline constexpr size_t kMaxNodes = 50000;       // nodes in one request
inline constexpr size_t kMaxContainers = 100;    // containers (and init containers) of one pod
inline constexpr size_t kMaxNameBytes = 253;     // a Kubernetes object name
inline constexpr size_t kMaxAnnotations = 1024;  // annotations read from one pod

struct ExtenderArgs {
  PodGpuRequest pod;
  // true: the request carried NodeNames (nodeCacheCapable: true); false: Nodes.
  bool node_names_mode = true;
  std::vector<std::string> node_names;  // in request order (from NodeNames or each item)
  std::vector<std::string> nodes;       // full Node objects, minified JSON (Nodes mode only)
};

// Parses an ExtenderArgs body. InvalidArgument names the field.
Result<ExtenderArgs> ParseExtenderArgs(std::string_view body);

// A filter's outcome over the request's nodes.
struct FilterOutcome {
  std::vector<size_t> passed;  // indices into ExtenderArgs::node_names, in request order
  std::map<std::string, std::string> failed;        // FailedNodes: might fit after preemption
  std::map<std::string, std::string> unresolvable;  // FailedAndUnresolvableNodes
  std::string error;                                // Error: the whole call failed
};

// The ExtenderFilterResult body for `outcome` in the request's form (`args` may be null only
// when `outcome.error` is set: a request that could not be parsed).
std::string FilterResultJson(const ExtenderArgs* args, const FilterOutcome& outcome);

struct HostPriority {
  std::string host;
  int64_t score = 0;  // kMinExtenderPriority..kMaxExtenderPriority
};
std::string HostPriorityListJson(const std::vector<HostPriority>& list);

// Readers of the answers (tests, and a client that wants to check the server's answers the
// way kube-scheduler reads them).
Result<FilterOutcome> ParseFilterResult(std::string_view body, std::vector<std::string>* names);
Result<std::vector<HostPriority>> ParseHostPriorityList(std::string_view body);

}  // namespace stoker::k8s
