// The OpenAPI document (server/openapi.json) and the parsers agree: every bound the document
// states for a body field is accepted at the bound and refused past it by the real parser, every
// bound in the document is one such tested bound, and every enum is the list of an enum table.
#include "server/openapi.h"

#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "protocol/limits.h"
#include "server/api.h"
#include "support/enum_tables.h"
#include "test_util.h"

namespace stoker::server {
namespace {

const json& Doc() {
  static const json doc = [] {
    auto d = LoadOpenApiDocument();
    EXPECT_TRUE(d.ok()) << d.status().message();
    return d.ok() ? *d : json::object();
  }();
  return doc;
}

// A body schema and the parser that reads it.
struct Target {
  std::string schema;  // a components/schemas name
  json base;           // a valid body
  std::function<Status(const json&)> parse;
  // Seeds for generated strings, by field path ("mig": a profile stays a profile when padded).
  std::map<std::string, std::string> seeds;
  // Makes the body valid around the field under test (fields that exclude each other).
  std::function<void(json&, const std::string&)> context = [](json&, const std::string&) {};
  // Makes the i-th item of a generated array distinct where the parser wants unique items.
  std::function<void(json&, const std::string&, size_t)> unique = [](json&, const std::string&,
                                                                     size_t) {};
  // Fields of the schema that are answers only (a node's state), not read by this parser.
  std::set<std::string> answers = {};
};

// A step into a body: a key, "[0]" (the first item) or "{*}" (a map's value).
using Path = std::vector<std::string>;
std::string Show(const Path& p) {
  std::string out;
  for (const std::string& s : p) out += (s[0] == '[' || s[0] == '{' || out.empty() ? "" : ".") + s;
  return out;
}

json* At(json& body, const Path& p, bool create) {
  json* cur = &body;
  for (const std::string& step : p) {
    if (step == "[0]") {
      if (!cur->is_array() || cur->empty()) {
        if (!create) return nullptr;
        *cur = json::array({json::object()});
      }
      cur = &(*cur)[0];
    } else if (step == "{*}") {
      if (!cur->is_object() || cur->empty()) {
        if (!create) return nullptr;
        *cur = json::object({{"V", "x"}});
      }
      cur = &cur->begin().value();
    } else {
      if (!cur->is_object()) *cur = json::object();
      if (!cur->contains(step) && !create) return nullptr;
      cur = &(*cur)[step];
    }
  }
  return cur;
}

class Walker {
 public:
  Walker(const Target& t, std::set<std::string>* tested) : t_(t), tested_(tested) {}

  void Schema(const json& s, const std::string& ptr, const Path& path) {
    if (s.contains("$ref")) {
      const std::string ref = s["$ref"];
      const std::string name = ref.substr(ref.rfind('/') + 1);
      Schema(Doc()["components"]["schemas"][name], "/components/schemas/" + name, path);
      return;
    }
    if (s.contains("properties")) {
      for (const auto& [name, sub] : s["properties"].items()) {
        Path p = path;
        p.push_back(name);
        if (t_.answers.count(Show(p))) continue;
        Field(sub, ptr + "/properties/" + name, p);
      }
    }
  }

 private:
  void Field(const json& s, const std::string& ptr, const Path& path) {
    if (s.contains("$ref")) {
      Schema(s, ptr, path);
      return;
    }
    const std::string type = s.value("type", "");
    if (s.contains("maxLength")) {
      const size_t n = s["maxLength"];
      Check(path, String(path, n), String(path, n + 1), ptr + "/maxLength");
    }
    if (type == "integer" && s.contains("minimum")) {
      const int64_t m = s["minimum"];
      Check(path, json(m), json(m - 1), ptr + "/minimum");
    }
    if (type == "integer" && s.contains("maximum")) {
      const int64_t m = s["maximum"];
      Check(path, json(m), json(m + 1), ptr + "/maximum");
    }
    if (s.contains("maxItems")) {
      const size_t n = s["maxItems"];
      Check(path, Array(path, n), Array(path, n + 1), ptr + "/maxItems");
    }
    if (s.contains("minItems")) {
      const size_t n = s["minItems"];
      Check(path, Array(path, n), Array(path, n - 1), ptr + "/minItems");
    }
    if (s.contains("maxProperties")) {
      const size_t n = s["maxProperties"];
      Check(path, Map(path, n), Map(path, n + 1), ptr + "/maxProperties");
    }
    if (s.contains("enum")) {
      for (const json& e : s["enum"]) Accepts(path, e, ptr + "/enum " + e.dump());
      Check(path, s["enum"][0], json("no-such-" + path.back()), ptr + "/enum");
    }
    if (s.contains("properties")) Schema(s, ptr, path);
    if (s.contains("items") && s["items"].is_object()) {
      Path p = path;
      p.push_back("[0]");
      Field(s["items"], ptr + "/items", p);
    }
    if (s.contains("additionalProperties") && s["additionalProperties"].is_object()) {
      Path p = path;
      p.push_back("{*}");
      Field(s["additionalProperties"], ptr + "/additionalProperties", p);
    }
  }

  json String(const Path& path, size_t n) {
    json body = t_.base;
    const json* existing = At(body, path, false);
    std::string s = t_.seeds.count(Show(path))          ? t_.seeds.at(Show(path))
                    : existing && existing->is_string() ? existing->get<std::string>()
                                                        : "";
    s.resize(n, 'a');
    return s;
  }
  json Array(const Path& path, size_t n) {
    json body = t_.base;
    const json* existing = At(body, path, false);
    const json item =
        existing && existing->is_array() && !existing->empty() ? (*existing)[0] : json("x");
    json out = json::array();
    for (size_t i = 0; i < n; ++i) {
      json copy = item;
      t_.unique(copy, Show(path), i);
      out.push_back(std::move(copy));
    }
    return out;
  }
  json Map(const Path& path, size_t n) {
    json body = t_.base;
    const json* existing = At(body, path, false);
    const json value = existing && existing->is_object() && !existing->empty()
                           ? existing->begin().value()
                           : json("x");
    json out = json::object();
    for (size_t i = 0; i < n; ++i) out["V" + std::to_string(i)] = value;
    return out;
  }

  Status Parse(const Path& path, const json& value) {
    json body = t_.base;
    t_.context(body, Show(path));
    *At(body, path, true) = value;
    return t_.parse(body);
  }
  void Accepts(const Path& path, const json& value, const std::string& what) {
    const Status st = Parse(path, value);
    EXPECT_TRUE(st.ok()) << t_.schema << " " << Show(path) << " " << what << ": " << st.message();
  }
  void Check(const Path& path, const json& at, const json& past, const std::string& ptr) {
    tested_->insert(ptr);
    Accepts(path, at, "at the bound " + ptr);
    const Status st = Parse(path, past);
    EXPECT_FALSE(st.ok()) << t_.schema << " " << Show(path) << ": past the bound " << ptr
                          << " accepted";
    std::string leaf;
    for (const std::string& step : path) {
      if (step[0] != '[' && step[0] != '{') leaf = step;
    }
    EXPECT_NE(st.message().find(leaf), std::string::npos)
        << t_.schema << " " << Show(path)
        << ": the error does not name the field: " << st.message();
  }

  const Target& t_;
  std::set<std::string>* tested_;
};

// A key as a JSON pointer step ("/jobs/{id}" -> "~1jobs~1{id}").
std::string Step(const std::string& key) {
  std::string out;
  for (char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

// Every bound keyword of the document outside the route table's parameters.
void Bounds(const json& j, const std::string& ptr, std::set<std::string>* out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (k == "parameters") continue;  // the route table's, checked by the router's own tests
      const std::string p = ptr + "/" + Step(k);
      if ((k == "maxLength" || k == "minimum" || k == "maximum" || k == "maxItems" ||
           k == "minItems" || k == "maxProperties") &&
          v.is_number()) {
        out->insert(ptr + "/" + k);
      } else if (k == "enum" && v.is_array()) {
        out->insert(ptr + "/enum");
      } else {
        Bounds(v, p, out);
      }
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) Bounds(j[i], ptr + "/" + std::to_string(i), out);
  }
}

TEST(OpenApi, TheEmbeddedDocumentReadsAndNamesOnlyKnownConstants) {
  auto d = LoadOpenApiDocument();
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ((*d)["openapi"], "3.0.3");
  // The fills happened: a bound and an enum from the constants.
  EXPECT_EQ((*d)["components"]["schemas"]["JobSpec"]["properties"]["gpus"]["maximum"],
            protocol::limits::kGpusPerJob);
  EXPECT_EQ((*d)["components"]["schemas"]["Job"]["properties"]["state"]["enum"].size(), 7u);
  std::function<void(const json&)> no_names = [&](const json& j) {
    if (j.is_string()) {
      const std::string& v = j.get_ref<const std::string&>();
      EXPECT_FALSE(v.size() > 1 && v[0] == '$' && v[1] >= 'a' && v[1] <= 'z') << "unfilled " << v;
    }
    for (const json& c : j) {
      if (j.is_structured()) no_names(c);
    }
  };
  no_names(*d);
}

TEST(OpenApi, EveryDocumentedBoundIsTheParsersAtTheBoundAndPastIt) {
  std::vector<Target> targets;
  targets.push_back(Target{"JobSpec",
                           json{{"command", {"true"}},
                                {"gpus", 8},
                                {"workdir", "/w"},
                                {"gpu_models", {"H100"}},
                                {"env", {{"A", "1"}}}},
                           [](const json& b) {
                             auto s = protocol::ParseJobSpec(b);
                             return s.ok() ? protocol::CheckSubmission(*s) : s.status();
                           },
                           {{"mig", "1g."}, {"workdir", "/"}}});
  // One GPU shape at a time: a share, a MIG profile or a gang's total goes without whole GPUs.
  targets.back().context = [](json& b, const std::string& field) {
    if (field == "gpu_milli" || field == "mig" || field == "total_gpus") b.erase("gpus");
  };
  // A node's registration (POST /nodes/register reads the Node schema's inventory fields).
  targets.push_back(Target{"Node",
                           json{{"name", "n1"}},
                           [](const json& b) { return protocol::ParseNodeInventory(b).status(); },
                           {}});
  targets.back().answers = {"state", "samples"};
  targets.push_back(
      Target{"Heartbeat",
             json{{"jobs", {{{"id", 1}, {"phase", "running"}}}},
                  {"samples", json::array()},
                  // The compact form's samples (with them, "samples" is not read).
                  {"format", 2},
                  {"keys", {"util_gpu_pct"}},
                  {"ticks",
                   {{{"t", 1767225600},
                     {"gpus", {{{"i", 0}, {"v", {1}}, {"mig", {{{"uuid", "MIG-1"}}}}}}}}}}},
             [](const json& b) { return protocol::ParseHeartbeat(b.dump()).status(); },
             {}});
  targets.push_back(Target{"HeartbeatReply",
                           json{{"start", json::array()},
                                {"cancel", json::array()},
                                {"forget", json::array()},
                                {"log_offsets", json::object()},
                                {"cancel_grace_ms", {{"5", 1000}}},
                                {"report_interval_ms", 5000}},
                           [](const json& b) { return protocol::ParseHeartbeatReply(b).status(); },
                           {}});

  std::set<std::string> tested;
  for (const Target& t : targets) {
    Walker w(t, &tested);
    w.Schema(Doc()["components"]["schemas"][t.schema], "/components/schemas/" + t.schema, {});
  }
  // Every bound and enum the document states is one the walk above tested through a parser,
  // or an enum of an answer that is a constant list (the enum tables, the policy registries).
  std::set<std::string> all;
  Bounds(Doc(), "", &all);
  std::vector<json> lists;
  for (const auto& [name, value] : OpenApiConstants()) {
    if (value.is_array()) lists.push_back(value);
  }
  for (const std::string& ptr : all) {
    if (tested.count(ptr)) continue;
    const json& value = Doc()[json::json_pointer(ptr)];
    if (ptr.ends_with("/enum")) {
      EXPECT_NE(std::find(lists.begin(), lists.end(), value), lists.end())
          << ptr << " " << value.dump() << " is not the list of an enum table";
      continue;
    }
    ADD_FAILURE() << ptr << " is documented but no parser test reaches it";
  }
  EXPECT_GE(tested.size(), 30u);
}

TEST(OpenApi, EnumsAreTheEnumTables) {
  const json& c = Doc()["components"]["schemas"];
  auto names = [](const auto& table) {
    json out = json::array();
    for (const auto& e : table.entries()) out.push_back(std::string(e.name));
    return out;
  };
  EXPECT_EQ(c["Job"]["properties"]["state"]["enum"], names(protocol::kJobStateNames));
  EXPECT_EQ(c["Job"]["properties"]["parts"]["items"]["properties"]["phase"]["enum"],
            names(protocol::kPartPhaseNames));
  EXPECT_EQ(c["Node"]["properties"]["state"]["enum"], names(protocol::kNodeStateNames));
  EXPECT_EQ(c["JobSpec"]["properties"]["on_node_loss"]["enum"], names(protocol::kOnNodeLossNames));
  EXPECT_EQ(c["Heartbeat"]["properties"]["jobs"]["items"]["properties"]["phase"]["enum"],
            names(protocol::kRunPhaseNames));
  EXPECT_EQ(Doc()["paths"]["/tokens"]["post"]["requestBody"]["content"]["application/json"]
                 ["schema"]["properties"]["role"]["enum"],
            names(protocol::kRoleNames));
}

namespace {

// What GET /api/v1/openapi.json answers on a fresh server in folder NAME (null when the request
// fails, with the failure recorded).
json ServedDocument(const std::string& name) {
  testing::Fixture f(name);
  ApiRequest r;
  r.method = "GET";
  r.path = "/api/v1/openapi.json";
  const ApiResponse resp = f.api->Handle(r);
  EXPECT_EQ(resp.status, 200) << resp.body;
  return resp.status == 200 ? json::parse(resp.body) : json();
}

}  // namespace

// Each operation's x-stoker-scope (the route table's, in the document the API answers) is a name
// of the scope table.
TEST(OpenApi, EveryOperationsScopeIsANameOfTheScopeTable) {
  stoker::testing::ExpectRoundTrip(http::kScopeNames);
  const json served = ServedDocument("openapi_scopes");
  ASSERT_TRUE(served.is_object());
  int operations = 0;
  std::set<std::string> seen;
  for (const auto& [path, item] : served["paths"].items()) {
    for (const auto& [method, op] : item.items()) {
      if (!op.is_object() || !op.contains("x-stoker-scope")) continue;
      ++operations;
      const std::string scope = op["x-stoker-scope"].get<std::string>();
      EXPECT_TRUE(http::kScopeNames.Find(scope).has_value())
          << method << " " << path << ": " << scope;
      seen.insert(scope);
    }
  }
  EXPECT_GE(operations, 20);
  EXPECT_TRUE(seen.count("own-job")) << "the job routes are scoped to their owner";
}

// The served document is the embedded one with the route table's operations: the shared error
// answers are referenced, and the bounds are the parser's.
TEST(OpenApi, TheServedDocumentCarriesTheFilledBounds) {
  const json served = json::parse(OpenApiDocument());
  EXPECT_EQ(served, Doc());
  EXPECT_EQ(served["components"]["schemas"]["JobSpec"]["properties"]["nodes"]["maximum"],
            protocol::limits::kGangPartsMax);
  EXPECT_EQ(served["paths"]["/jobs"]["post"]["responses"]["400"]["$ref"],
            "#/components/responses/BadRequest");
  EXPECT_TRUE(served["components"]["responses"]["BadRequest"].contains("description"));
}

// What GET /api/v1/openapi.json answers carries the route table's bounds: the logs route's
// `part` query parameter goes up to the last rank of the largest gang.
TEST(OpenApi, TheDocumentAnsweredOverHttpCarriesTheFilledBounds) {
  const json served = ServedDocument("openapi_served");
  ASSERT_TRUE(served.is_object());
  EXPECT_EQ(served["components"]["schemas"]["JobSpec"]["properties"]["nodes"]["maximum"],
            protocol::limits::kGangPartsMax);
  const json& params = served["paths"]["/jobs/{id}/logs"]["get"]["parameters"];
  ASSERT_TRUE(params.is_array()) << params.dump();
  bool found = false;
  for (const json& p : params) {
    if (p.value("name", "") != "part") continue;
    found = true;
    EXPECT_EQ(p["schema"]["maximum"], protocol::limits::kGangPartsMax - 1) << p.dump();
  }
  EXPECT_TRUE(found) << params.dump();
}

}  // namespace
}  // namespace stoker::server
