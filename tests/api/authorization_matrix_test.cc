// The authorization matrix, generated from the route table of the API as `stoker server` wires
// it (the server's routes, the efficiency engine's, the dashboard's history and the Kubernetes
// scheduler extender's): every route x every caller (admin, a user, an agent, kube-scheduler, no
// token) x the caller's own object and someone else's.
// What each cell must answer follows from the route's declaration (roles, scope); what a valid
// request to the route looks like is written once per route below. A route in the table without a
// request here fails the test, so no route can be added without its rules being tested.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <map>

#include "world.h"

namespace stoker::server {
namespace {
using http::QueryParam;
using http::Route;
using http::Scope;
using testing::World;

// Whose object a request is about, from the caller's point of view.
enum class Whose { kOwn, kOthers };

struct Caller {
  std::string name;  // a key of World::tokens; "" = no token
  Role role = Role::kUser;
  std::string self;   // for a user: their name; for an agent: its node
  std::string other;  // the other user / node
};

// How to make a valid request to one route, for `caller`, about their own object or another's.
// `listed` (listing routes of a job scope): whether the object shows in the answer.
struct Case {
  std::function<ApiRequest(World&, const Caller&, Whose, int64_t* object)> build;
  std::function<bool(const std::string& body, int64_t object)> listed;
};

bool Shows(const std::string& body, const std::string& key, const std::string& value) {
  for (const char* colon : {":", ": "}) {
    for (const char* end : {",", "}", "\n"}) {
      if (body.find("\"" + key + "\"" + colon + value + end) != std::string::npos) return true;
    }
  }
  return false;
}

using testing::Req;

// The job the request is about: the caller's own, or the other user's (admins and agents act
// on alice's as "own" and bob's as "other's").
int64_t TargetJob(World& w, const Caller& c, Whose whose, bool place = true) {
  const std::string self = c.role == Role::kUser ? c.self : "alice";
  const std::string other = c.role == Role::kUser ? c.other : "bob";
  return w.JobOf(whose == Whose::kOwn ? self : other, place);
}
std::string TargetNode(const Caller& c, Whose whose) {
  const std::string self = c.role == Role::kAgent ? c.self : "n1";
  const std::string other = c.role == Role::kAgent ? c.other : "n2";
  return whose == Whose::kOwn ? self : other;
}
std::string TargetTeam(const Caller& c, Whose whose) {
  const bool alice = c.role != Role::kUser || c.self == "alice";
  return (whose == Whose::kOwn) == alice ? "ml" : "vision";
}

std::map<std::string, Case> Cases() {
  std::map<std::string, Case> m;
  auto simple = [](std::string method, std::string path, std::string body = "") {
    return Case{[=](World&, const Caller&, Whose, int64_t*) { return Req(method, path, body); }};
  };
  m["GET /metrics"] = simple("GET", "/metrics");
  m["GET /openapi.json"] = simple("GET", "/api/v1/openapi.json");
  m["GET /health"] = simple("GET", "/api/v1/health");
  m["GET /whoami"] = simple("GET", "/api/v1/whoami");
  m["POST /jobs"] = simple("POST", "/api/v1/jobs", R"({"command":["true"]})");
  m["GET /jobs"] = {
      [](World& w, const Caller& c, Whose whose, int64_t* id) {
        *id = TargetJob(w, c, whose);
        return Req("GET", "/api/v1/jobs");
      },
      [](const std::string& body, int64_t id) { return Shows(body, "id", std::to_string(id)); }};
  for (const std::string sub : {"", "/logs", "/events"}) {
    m["GET /jobs/{id}" + sub] = {[sub](World& w, const Caller& c, Whose whose, int64_t* id) {
      *id = TargetJob(w, c, whose);
      return Req("GET", "/api/v1/jobs/" + std::to_string(*id) + sub);
    }};
  }
  m["POST /jobs/{id}/cancel"] = {[](World& w, const Caller& c, Whose whose, int64_t* id) {
    *id = TargetJob(w, c, whose);
    return Req("POST", "/api/v1/jobs/" + std::to_string(*id) + "/cancel");
  }};
  m["GET /nodes"] = simple("GET", "/api/v1/nodes");
  m["POST /nodes/register"] = {[](World&, const Caller& c, Whose whose, int64_t*) {
    const std::string node = TargetNode(c, whose);
    return Req("POST", "/api/v1/nodes/register",
               R"({"name":")" + node + R"(","gpus":[{"index":0,"uuid":"GPU-)" + node +
                   R"(-0","model":"NVIDIA H100 80GB HBM3"}]})");
  }};
  m["GET /nodes/{name}"] = {[](World&, const Caller& c, Whose whose, int64_t*) {
    return Req("GET", "/api/v1/nodes/" + TargetNode(c, whose));
  }};
  m["POST /nodes/{name}/heartbeat"] = {[](World&, const Caller& c, Whose whose, int64_t*) {
    return Req("POST", "/api/v1/nodes/" + TargetNode(c, whose) + "/heartbeat", "{}");
  }};
  for (const std::string verb : {"drain", "undrain"}) {
    m["POST /nodes/{name}/" + verb] = {[verb](World&, const Caller& c, Whose whose, int64_t*) {
      return Req("POST", "/api/v1/nodes/" + TargetNode(c, whose) + "/" + verb);
    }};
  }
  m["GET /allocations"] = {
      [](World& w, const Caller& c, Whose whose, int64_t* id) {
        *id = TargetJob(w, c, whose);
        return Req("GET", "/api/v1/allocations");
      },
      [](const std::string& body, int64_t id) { return Shows(body, "job", std::to_string(id)); }};
  m["GET /queue"] = simple("GET", "/api/v1/queue");
  m["POST /tokens"] = simple("POST", "/api/v1/tokens", R"({"role":"user","name":"carol"})");
  m["GET /tokens"] = simple("GET", "/api/v1/tokens");
  m["DELETE /tokens/{id}"] = {[](World& w, const Caller&, Whose, int64_t*) {
    const Principal root{"root", Role::kAdmin};
    (void)w.server->CreateToken(root, Role::kUser, "dave");
    std::string id;
    const std::vector<TokenInfo> all = w.server->ListTokens(root).value();
    for (const TokenInfo& t : all) {
      if (t.name == "dave") id = t.id;
    }
    return Req("DELETE", "/api/v1/tokens/" + id);
  }};
  m["GET /audit"] = simple("GET", "/api/v1/audit");
  m["GET /policy"] = simple("GET", "/api/v1/policy");
  m["PUT /policy"] = simple("PUT", "/api/v1/policy", R"({"queue":"fifo"})");
  for (const std::string what : {"zones", "alerts", "reclaim"}) {
    m["GET /" + what] = {[what](World& w, const Caller& c, Whose whose, int64_t* id) {
      *id = TargetJob(w, c, whose);
      return Req("GET", "/api/v1/" + what);
    }};
  }
  m["GET /report"] = {
      [](World& w, const Caller& c, Whose whose, int64_t* id) {
        // The report covers jobs that ran: the node reports this one running.
        *id = TargetJob(w, c, whose);
        const Job job = *w.server->GetJob(Principal{"root", Role::kAdmin}, *id);
        Heartbeat hb;
        RunReport r;
        r.id = *id;
        r.attempt = job.attempt();
        r.phase = protocol::RunPhase::kRunning;
        hb.jobs = {r};
        EXPECT_TRUE(
            w.server->Heartbeat(Principal{"root", Role::kAdmin}, job.assignment->node, hb).ok());
        return Req("GET", "/api/v1/report");
      },
      [](const std::string& body, int64_t id) {
        return Shows(body, "id", "\"" + std::to_string(id) + "\"");
      }};
  m["GET /silences"] = simple("GET", "/api/v1/silences");
  m["POST /silences"] =
      simple("POST", "/api/v1/silences", R"({"matchers":{"job":"1"},"duration":"1h"})");
  m["DELETE /silences/{id}"] = {[](World& w, const Caller&, Whose, int64_t*) {
    ApiRequest add = Req("POST", "/api/v1/silences", R"({"matchers":{"job":"1"},"duration":"1h"})");
    add.authorization = "Bearer " + w.tokens["admin"];
    const std::string id = json::parse(w.api->Handle(add).body)["id"];
    return Req("DELETE", "/api/v1/silences/" + id);
  }};
  // The dashboard's history: the job shows in the cells of the GPU it held while a sample came.
  m["GET /history/gpus"] = {[](World& w, const Caller& c, Whose whose, int64_t* id) {
                              *id = TargetJob(w, c, whose);
                              const Principal root{"root", Role::kAdmin};
                              const Job job = *w.server->GetJob(root, *id);
                              Heartbeat hb;
                              RunReport r;
                              r.id = *id;
                              r.attempt = job.attempt();
                              r.phase = protocol::RunPhase::kRunning;
                              hb.jobs = {r};
                              for (uint32_t g : job.assignment->gpu_indices) {
                                GpuSample s;
                                s.id.index = g;
                                s.id.uuid = "GPU-" + job.assignment->node + "-" + std::to_string(g);
                                s.timestamp = w.clock.WallNow();
                                s.util_gpu_pct = Field<uint32_t>::Of(50);
                                hb.gpus.push_back(s);
                              }
                              EXPECT_TRUE(w.server->Heartbeat(root, job.assignment->node, hb).ok());
                              return Req("GET", "/api/v1/history/gpus");
                            },
                            [](const std::string& body, int64_t id) {
                              const json doc = json::parse(body, nullptr, false);
                              if (!doc.is_object()) return false;
                              for (const json& g : doc["gpus"]) {
                                for (const json& j : g["job"]) {
                                  if (j == id) return true;
                                }
                              }
                              return false;
                            }};
  m["GET /history/fragmentation"] = simple("GET", "/api/v1/history/fragmentation");
  for (const std::string what : {"ledger", "budgets"}) {
    m["GET /" + what] = {[what](World&, const Caller& c, Whose whose, int64_t*) {
      return Req("GET", "/api/v1/" + what, "", {{"team", TargetTeam(c, whose)}});
    }};
  }
  m["GET /k8s/reclaim"] = simple("GET", "/api/v1/k8s/reclaim");
  // The scheduler extender: kube-scheduler's ExtenderArgs (nodeCacheCapable: true).
  for (const std::string verb : {"filter", "prioritize"}) {
    m["POST /k8s/extender/" + verb] = simple(
        "POST", "/api/v1/k8s/extender/" + verb,
        R"({"Pod":{"metadata":{"name":"p","namespace":"ml"},"spec":{"containers":[{"name":"c",)"
        R"("resources":{"limits":{"stoker.io/gpu-milli":"500"}}}]}},"Nodes":null,)"
        R"("NodeNames":["n1","n2"]})");
  }
  return m;
}

std::string Key(const Route& r) { return r.method + " " + r.pattern; }

bool HasPathObject(const Route& r) { return r.pattern.find('{') != std::string::npos; }

TEST(AuthorizationMatrix, EveryRouteEveryRoleOwnAndOthersObjects) {
  const std::map<std::string, Case> cases = Cases();
  const std::vector<Caller> callers = {{"admin", Role::kAdmin, "", ""},
                                       {"alice", Role::kUser, "alice", "bob"},
                                       {"n1", Role::kAgent, "n1", "n2"},
                                       {"sched", Role::kScheduler, "", ""},
                                       {"", Role::kUser, "", ""}};
  std::vector<Route> routes;
  {
    World w("list");
    routes = w.api->router().routes();
  }
  ASSERT_GE(routes.size(), 30u);
  std::set<std::string> seen;
  for (const Route& route : routes) {
    const std::string key = Key(route);
    seen.insert(key);
    auto it = cases.find(key);
    if (it == cases.end()) {
      ADD_FAILURE() << key << ": a route without an authorization case; add one to Cases()";
      continue;
    }
    World w("r" + std::to_string(seen.size()));
    for (const Caller& c : callers) {
      for (Whose whose : {Whose::kOwn, Whose::kOthers}) {
        int64_t object = 0;
        ApiRequest req = it->second.build(w, c, whose, &object);
        if (!c.name.empty()) req.authorization = "Bearer " + w.tokens.at(c.name);
        const ApiResponse res = w.api->Handle(req);
        const std::string where = key + " as " + (c.name.empty() ? "nobody" : c.name) + " on " +
                                  (whose == Whose::kOwn ? "own" : "other's") +
                                  " object: " + std::to_string(res.status) + " " +
                                  res.body.substr(0, 300);
        if (route.roles.empty()) {  // public
          EXPECT_EQ(res.status, 200) << where;
          continue;
        }
        if (c.name.empty()) {
          EXPECT_EQ(res.status, 401) << where;
          continue;
        }
        if (!route.roles.count(c.role)) {
          EXPECT_EQ(res.status, 403) << where;
          continue;
        }
        // Allowed: what the caller may reach depends on the scope and whose object it is.
        const bool mine = whose == Whose::kOwn || c.role == Role::kAdmin;
        switch (route.scope) {
          case Scope::kNone:
            EXPECT_LT(res.status, 300) << where;
            break;
          case Scope::kOwnJob:
            if (it->second.listed) {
              EXPECT_LT(res.status, 300) << where;
              EXPECT_EQ(it->second.listed(res.body, object), mine) << where;
            } else if (HasPathObject(route)) {
              EXPECT_EQ(res.status < 300, mine) << where;
              if (!mine) {
                EXPECT_EQ(res.status, 404) << where << " (others' jobs are not found)";
              }
            } else {
              EXPECT_LT(res.status, 300) << where;
            }
            break;
          case Scope::kOwnNode:
            if (c.role == Role::kAgent) {
              EXPECT_EQ(res.status < 300, mine) << where;
              if (!mine) {
                EXPECT_EQ(res.status, 403) << where;
              }
            } else {
              EXPECT_LT(res.status, 300) << where;
            }
            break;
          case Scope::kOwnTeam:
            EXPECT_EQ(res.status < 300, mine) << where;
            if (!mine) {
              EXPECT_EQ(res.status, 403) << where;
            }
            break;
        }
      }
    }
  }
  for (const auto& [key, c] : cases) {
    EXPECT_TRUE(seen.count(key)) << key << ": a case for a route the table does not have";
  }
}

// Every query parameter of every route is declared with bounds: an undeclared one is a 400
// naming it, and the document served at /openapi.json carries the same bounds.
TEST(AuthorizationMatrix, UndeclaredQueryParametersAreRefusedAndDeclaredOnesDocumented) {
  World w("params");
  const json doc = json::parse(w.api->Handle(Req("GET", "/api/v1/openapi.json")).body);
  for (const Route& route : w.api->router().routes()) {
    ApiRequest req =
        Req(route.method, route.pattern == "/metrics" ? "/metrics" : "/api/v1" + route.pattern, "",
            {{"zzz", "1"}});
    req.authorization = "Bearer " + w.tokens["admin"];
    const ApiResponse res = w.api->Handle(req);
    if (!route.roles.empty()) {
      EXPECT_EQ(res.status, 400) << Key(route) << ": " << res.body;
      EXPECT_NE(res.body.find("zzz: unknown query parameter"), std::string::npos) << res.body;
    }
    if (route.pattern == "/metrics") continue;
    std::string method = route.method;
    for (char& ch : method) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    ASSERT_TRUE(doc["paths"].contains(route.pattern)) << Key(route) << " is not documented";
    const json& op = doc["paths"][route.pattern][method];
    ASSERT_TRUE(op.is_object()) << Key(route) << " is not documented";
    for (const QueryParam& q : route.query) {
      bool documented = false;
      for (const json& p : op["parameters"]) {
        if (p["name"] == q.name && p["in"] == "query") {
          documented = true;
          if (q.kind == QueryParam::Kind::kInt) {
            EXPECT_EQ(p["schema"]["minimum"], q.min) << Key(route) << " " << q.name;
            EXPECT_EQ(p["schema"]["maximum"], q.max) << Key(route) << " " << q.name;
          }
        }
      }
      EXPECT_TRUE(documented) << Key(route) << " ?" << q.name;
    }
  }
}

}  // namespace
}  // namespace stoker::server
