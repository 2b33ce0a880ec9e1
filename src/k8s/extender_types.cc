#include "k8s/extender_types.h"

#include <fmt/core.h>
#include <simdjson.h>
#include <strings.h>

namespace stoker::k8s {
namespace {

using json = nlohmann::json;
using ordered = nlohmann::ordered_json;

// The member `key` of object `o`, matched as Go's decoder matches field names (exact first,
// then case-insensitively); nullptr when absent.
const json* Member(const json& o, std::string_view key) {
  auto it = o.find(key);
  if (it != o.end()) return &*it;
  for (auto i = o.begin(); i != o.end(); ++i) {
    if (i.key().size() == key.size() && strncasecmp(i.key().data(), key.data(), key.size()) == 0) {
      return &*i;
    }
  }
  return nullptr;
}

// The same over simdjson's DOM.
bool Member(simdjson::dom::object o, std::string_view key, simdjson::dom::element* out) {
  if (!o[key].get(*out)) return true;
  for (auto field : o) {
    if (field.key.size() == key.size() &&
        strncasecmp(field.key.data(), key.data(), key.size()) == 0) {
      *out = field.value;
      return true;
    }
  }
  return false;
}

// Appends `s` as a JSON string.
void AppendString(std::string* out, std::string_view s) {
  bool plain = true;
  for (char c : s) {
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) {
      plain = false;
      break;
    }
  }
  if (plain) {
    out->push_back('"');
    out->append(s);
    out->push_back('"');
  } else {
    *out += json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
  }
}

Result<std::string> String(const json& o, std::string_view key, const std::string& where,
                           bool required) {
  const json* v = o.is_object() ? Member(o, key) : nullptr;
  if (v == nullptr || v->is_null()) {
    if (required) return InvalidArgument(where + "." + std::string(key) + ": required");
    return std::string();
  }
  if (!v->is_string()) {
    return InvalidArgument(where + "." + std::string(key) + ": must be a string");
  }
  const std::string& s = v->get_ref<const std::string&>();
  if (s.size() > kMaxNameBytes) {
    return InvalidArgument(where + "." + std::string(key) + ": longer than " +
                           std::to_string(kMaxNameBytes) + " bytes");
  }
  return s;
}

// A map of resource name -> quantity ({"stoker.io/gpu": "1", "cpu": "500m"}).
Result<std::map<std::string, std::string>> QuantityMap(const json& o, std::string_view key,
                                                       const std::string& where) {
  std::map<std::string, std::string> out;
  const json* m = o.is_object() ? Member(o, key) : nullptr;
  if (m == nullptr || m->is_null()) return out;
  const std::string here = where + "." + std::string(key);
  if (!m->is_object()) return InvalidArgument(here + ": must be an object");
  if (m->size() > 256) return InvalidArgument(here + ": more than 256 resources");
  for (const auto& [name, value] : m->items()) {
    if (name.size() > kMaxNameBytes) {
      return InvalidArgument(here + ": a resource name longer than " +
                             std::to_string(kMaxNameBytes) + " bytes");
    }
    if (value.is_string()) {
      out[name] = value.get<std::string>();
    } else if (value.is_number_integer()) {
      out[name] = std::to_string(value.get<int64_t>());
    } else {
      return InvalidArgument(
          fmt::format("{}.{}: a quantity must be a string such as \"1\"", here, name));
    }
  }
  return out;
}

Result<std::vector<ContainerResources>> Containers(const json& spec, std::string_view key,
                                                   const std::string& where) {
  std::vector<ContainerResources> out;
  const json* list = spec.is_object() ? Member(spec, key) : nullptr;
  if (list == nullptr || list->is_null()) return out;
  const std::string here = where + "." + std::string(key);
  if (!list->is_array()) return InvalidArgument(here + ": must be an array");
  if (list->size() > kMaxContainers) {
    return InvalidArgument(here + ": more than " + std::to_string(kMaxContainers) + " containers");
  }
  for (size_t i = 0; i < list->size(); ++i) {
    const json& c = (*list)[i];
    const std::string at = here + "[" + std::to_string(i) + "]";
    if (!c.is_object()) return InvalidArgument(at + ": must be an object");
    ContainerResources r;
    STOKER_ASSIGN_OR_RETURN(r.name, String(c, "name", at, false));
    const json* res = Member(c, "resources");
    if (res != nullptr && !res->is_null()) {
      if (!res->is_object()) return InvalidArgument(at + ".resources: must be an object");
      STOKER_ASSIGN_OR_RETURN(r.requests, QuantityMap(*res, "requests", at + ".resources"));
      STOKER_ASSIGN_OR_RETURN(r.limits, QuantityMap(*res, "limits", at + ".resources"));
    }
    out.push_back(std::move(r));
  }
  return out;
}

Result<PodGpuRequest> ParsePod(const json& pod) {
  const std::string where = "Pod";
  if (!pod.is_object()) return InvalidArgument("Pod: must be an object");
  const json* meta = Member(pod, "metadata");
  if (meta == nullptr || !meta->is_object()) {
    return InvalidArgument("Pod.metadata: required object");
  }
  STOKER_ASSIGN_OR_RETURN(std::string name, String(*meta, "name", "Pod.metadata", true));
  STOKER_ASSIGN_OR_RETURN(std::string ns, String(*meta, "namespace", "Pod.metadata", false));
  STOKER_ASSIGN_OR_RETURN(std::string uid, String(*meta, "uid", "Pod.metadata", false));
  std::map<std::string, std::string> annotations;
  if (const json* a = Member(*meta, "annotations"); a != nullptr && !a->is_null()) {
    if (!a->is_object()) return InvalidArgument("Pod.metadata.annotations: must be an object");
    if (a->size() > kMaxAnnotations) {
      return InvalidArgument("Pod.metadata.annotations: more than " +
                             std::to_string(kMaxAnnotations));
    }
    for (const auto& [k, v] : a->items()) {
      if (!k.starts_with("stoker.io/")) continue;  // only ours are read
      if (!v.is_string()) {
        return InvalidArgument("Pod.metadata.annotations." + k + ": must be a string");
      }
      annotations[k] = v.get<std::string>();
    }
  }
  const json* spec = Member(pod, "spec");
  if (spec != nullptr && !spec->is_null() && !spec->is_object()) {
    return InvalidArgument("Pod.spec: must be an object");
  }
  static const json kEmpty = json::object();
  const json& s = spec != nullptr && spec->is_object() ? *spec : kEmpty;
  STOKER_ASSIGN_OR_RETURN(auto containers, Containers(s, "containers", "Pod.spec"));
  STOKER_ASSIGN_OR_RETURN(auto inits, Containers(s, "initContainers", "Pod.spec"));
  auto req =
      ReadPodGpuRequest(ns.empty() ? "default" : ns, name, uid, containers, inits, annotations);
  if (!req.ok()) return req.status().WithContext("Pod");
  return std::move(req).value();
}

}  // namespace

Result<ExtenderArgs> ParseExtenderArgs(std::string_view body) {
  // simdjson for the envelope (5,000 node names or Node objects in one call); the pod, small and
  // read field by field, through nlohmann.
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(body.data(), body.size()).get(doc)) {
    return InvalidArgument("body: not valid JSON");
  }
  simdjson::dom::object root;
  if (doc.get_object().get(root)) {
    return InvalidArgument("body: must be a JSON object (ExtenderArgs)");
  }
  ExtenderArgs out;
  simdjson::dom::element pod, names, nodes;
  const bool has_pod = Member(root, "Pod", &pod) && !pod.is_null();
  if (!has_pod) return InvalidArgument("Pod: required");
  const json pod_json = json::parse(simdjson::minify(pod), nullptr, false);
  STOKER_ASSIGN_OR_RETURN(out.pod, ParsePod(pod_json));
  if (Member(root, "NodeNames", &names) && !names.is_null()) {
    simdjson::dom::array list;
    if (names.get_array().get(list)) {
      return InvalidArgument("NodeNames: must be an array of strings");
    }
    if (list.size() > kMaxNodes) {
      return InvalidArgument("NodeNames: more than " + std::to_string(kMaxNodes) + " nodes");
    }
    out.node_names.reserve(list.size());
    size_t i = 0;
    for (simdjson::dom::element n : list) {
      std::string_view name;
      if (n.get_string().get(name) || name.empty() || name.size() > kMaxNameBytes) {
        return InvalidArgument("NodeNames[" + std::to_string(i) + "]: must be a node name (1.." +
                               std::to_string(kMaxNameBytes) + " bytes)");
      }
      out.node_names.emplace_back(name);
      ++i;
    }
    return out;
  }
  out.node_names_mode = false;
  if (!Member(root, "Nodes", &nodes) || nodes.is_null()) return out;  // no candidate nodes
  simdjson::dom::object list_obj;
  if (nodes.get_object().get(list_obj)) {
    return InvalidArgument("Nodes: must be a NodeList object");
  }
  simdjson::dom::element items_el;
  if (!Member(list_obj, "items", &items_el) || items_el.is_null()) return out;
  simdjson::dom::array items;
  if (items_el.get_array().get(items)) return InvalidArgument("Nodes.items: must be an array");
  if (items.size() > kMaxNodes) {
    return InvalidArgument("Nodes.items: more than " + std::to_string(kMaxNodes) + " nodes");
  }
  out.node_names.reserve(items.size());
  out.nodes.reserve(items.size());
  size_t i = 0;
  for (simdjson::dom::element n : items) {
    const std::string at = "Nodes.items[" + std::to_string(i++) + "]";
    simdjson::dom::object node;
    if (n.get_object().get(node)) return InvalidArgument(at + ": must be a Node object");
    simdjson::dom::element meta_el, name_el;
    simdjson::dom::object meta;
    if (!Member(node, "metadata", &meta_el) || meta_el.get_object().get(meta)) {
      return InvalidArgument(at + ".metadata: required object");
    }
    std::string_view name;
    if (!Member(meta, "name", &name_el) || name_el.get_string().get(name)) {
      return InvalidArgument(at + ".metadata.name: required string");
    }
    if (name.empty() || name.size() > kMaxNameBytes) {
      return InvalidArgument(at + ".metadata.name: must be 1.." + std::to_string(kMaxNameBytes) +
                             " bytes");
    }
    out.node_names.emplace_back(name);
    out.nodes.push_back(simdjson::minify(n));
  }
  return out;
}

std::string FilterResultJson(const ExtenderArgs* args, const FilterOutcome& outcome) {
  if (!outcome.error.empty() || args == nullptr) {
    ordered r;
    r["Nodes"] = nullptr;
    r["NodeNames"] = nullptr;
    r["FailedNodes"] = nullptr;
    r["FailedAndUnresolvableNodes"] = nullptr;
    r["Error"] = outcome.error.empty() ? "internal error" : outcome.error;
    return r.dump();
  }
  std::string out;
  size_t size = 128;
  for (size_t i : outcome.passed) {
    size += args->node_names_mode ? args->node_names[i].size() + 3 : args->nodes[i].size() + 1;
  }
  out.reserve(size);
  if (args->node_names_mode) {
    out += "{\"Nodes\":null,\"NodeNames\":[";
    for (size_t k = 0; k < outcome.passed.size(); ++k) {
      if (k > 0) out += ',';
      AppendString(&out, args->node_names[outcome.passed[k]]);
    }
    out += "]";
  } else {
    out += "{\"Nodes\":{\"metadata\":{},\"items\":[";
    for (size_t k = 0; k < outcome.passed.size(); ++k) {
      if (k > 0) out += ',';
      out += args->nodes[outcome.passed[k]];
    }
    out += "]},\"NodeNames\":null";
  }
  for (const auto& [key, m] : {std::pair{"FailedNodes", &outcome.failed},
                               std::pair{"FailedAndUnresolvableNodes", &outcome.unresolvable}}) {
    out += ",\"";
    out += key;
    out += "\":{";
    bool first = true;
    for (const auto& [node, why] : *m) {
      if (!first) out += ',';
      first = false;
      AppendString(&out, node);
      out += ':';
      AppendString(&out, why);
    }
    out += '}';
  }
  out += ",\"Error\":\"\"}";
  return out;
}

std::string HostPriorityListJson(const std::vector<HostPriority>& list) {
  std::string out = "[";
  out.reserve(list.size() * 32 + 2);
  for (size_t i = 0; i < list.size(); ++i) {
    if (i > 0) out += ',';
    out += "{\"Host\":";
    AppendString(&out, list[i].host);
    out += ",\"Score\":";
    out += std::to_string(list[i].score);
    out += '}';
  }
  out += ']';
  return out;
}

Result<FilterOutcome> ParseFilterResult(std::string_view body, std::vector<std::string>* names) {
  const json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return InvalidArgument("ExtenderFilterResult: not a JSON object");
  }
  FilterOutcome out;
  names->clear();
  if (const json* e = Member(doc, "Error"); e != nullptr && e->is_string()) {
    out.error = e->get<std::string>();
  }
  if (const json* n = Member(doc, "NodeNames"); n != nullptr && n->is_array()) {
    for (const json& s : *n) {
      if (!s.is_string()) return InvalidArgument("NodeNames: must hold strings");
      names->push_back(s.get<std::string>());
    }
  } else if (const json* nodes = Member(doc, "Nodes"); nodes != nullptr && nodes->is_object()) {
    const json* items = Member(*nodes, "items");
    if (items != nullptr && items->is_array()) {
      for (const json& item : *items) {
        const json* meta = item.is_object() ? Member(item, "metadata") : nullptr;
        const json* name = meta != nullptr && meta->is_object() ? Member(*meta, "name") : nullptr;
        if (name == nullptr || !name->is_string()) {
          return InvalidArgument("Nodes.items: an item without metadata.name");
        }
        names->push_back(name->get<std::string>());
      }
    }
  }
  for (const auto& [key, target] : {std::pair{"FailedNodes", &out.failed},
                                    std::pair{"FailedAndUnresolvableNodes", &out.unresolvable}}) {
    if (const json* m = Member(doc, key); m != nullptr && m->is_object()) {
      for (const auto& [k, v] : m->items()) {
        if (!v.is_string()) return InvalidArgument(std::string(key) + ": must map to strings");
        (*target)[k] = v.get<std::string>();
      }
    }
  }
  return out;
}

Result<std::vector<HostPriority>> ParseHostPriorityList(std::string_view body) {
  const json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_array()) {
    return InvalidArgument("HostPriorityList: not a JSON array");
  }
  std::vector<HostPriority> out;
  for (const json& h : doc) {
    if (!h.is_object() || !h.contains("Host") || !h["Host"].is_string() || !h.contains("Score") ||
        !h["Score"].is_number_integer()) {
      return InvalidArgument("HostPriorityList: each entry needs Host (string) and Score (int)");
    }
    out.push_back({h["Host"].get<std::string>(), h["Score"].get<int64_t>()});
  }
  return out;
}

}  // namespace stoker::k8s
