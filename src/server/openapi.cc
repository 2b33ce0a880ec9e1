// The OpenAPI 3 description of /api/v1 (kept next to the routes in api.cc; a test checks that
// every route is described): server/openapi.json, a data file embedded at build time
// (scripts/embed-assets.py --text), read once, with every `$name` in place of a bound or an
// enum list filled from the constant the parser checks (protocol/limits.h, the enum tables).
// tests/server/openapi_test.cc checks that the two agree.

#include "server/openapi.h"

#include <fmt/core.h>

#include "protocol/limits.h"
#include "server/api.h"

namespace stoker::server {

std::string_view OpenApiText();  // generated from openapi.json (scripts/embed-assets.py)

namespace {

template <class E, size_t N>
json Names(const EnumTable<E, N>& table) {
  json out = json::array();
  for (const auto& e : table.entries()) out.push_back(std::string(e.name));
  return out;
}

// `$name` where a bound or an enum list belongs: the constant's value.
Status Fill(json& j, const std::map<std::string, json>& constants, const std::string& path) {
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (s.size() < 2 || s[0] != '$' || !(s[1] >= 'a' && s[1] <= 'z')) return Status::Ok();
    auto it = constants.find(s.substr(1));
    if (it == constants.end()) {
      return InvalidArgument("openapi.json: " + path + ": no constant named " + s);
    }
    j = it->second;
    return Status::Ok();
  }
  if (j.is_object()) {
    for (auto& [k, v] : j.items()) {
      STOKER_RETURN_IF_ERROR(Fill(v, constants, fmt::format("{}/{}", path, k)));
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      STOKER_RETURN_IF_ERROR(Fill(j[i], constants, path + "/" + std::to_string(i)));
    }
  }
  return Status::Ok();
}

}  // namespace

const std::map<std::string, json>& OpenApiConstants() {
  static const std::map<std::string, json> constants = [] {
    std::map<std::string, json> c;
    for (const protocol::limits::NamedLimit& l : protocol::limits::Named()) {
      c[std::string(l.name)] = l.value;
    }
    c["job_states"] = Names(protocol::kJobStateNames);
    c["part_phases"] = Names(protocol::kPartPhaseNames);
    c["node_states"] = Names(protocol::kNodeStateNames);
    c["roles"] = Names(protocol::kRoleNames);
    c["on_node_loss"] = Names(protocol::kOnNodeLossNames);
    c["run_phases"] = Names(protocol::kRunPhaseNames);
    return c;
  }();
  return constants;
}

Result<json> LoadOpenApiDocument() {
  const std::string_view text = OpenApiText();
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgument("openapi.json: not a JSON object");
  }
  STOKER_RETURN_IF_ERROR(Fill(j, OpenApiConstants(), ""));
  return j;
}

const std::string& OpenApiDocument() {
  static const std::string doc = [] {
    auto d = LoadOpenApiDocument();
    if (d.ok()) return d->dump(1);
    // A broken embedded document is a build's bug (the OpenAPI test fails on it): the error is
    // served in its place.
    return json{
        {"openapi", "3.0.3"},
        {"info",
         {{"title", "Stoker API"}, {"version", "1"}, {"description", d.status().message()}}},
        {"paths", json::object()}}
        .dump(1);
  }();
  return doc;
}

}  // namespace stoker::server
