#include "server/api.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace stoker::server {
namespace {
using testing::Fixture;

class ApiTest : public ::testing::Test {
 protected:
  ApiTest() : f_("api") {}

  ApiResponse Call(const std::string& method, const std::string& path, const std::string& token,
                   const std::string& body = "") {
    ApiRequest r;
    r.method = method;
    r.path = path;
    r.authorization = token.empty() ? "" : "Bearer " + token;
    r.body = body;
    return f_.api->Handle(r);
  }
  int Status(const std::string& method, const std::string& path, const std::string& token,
             const std::string& body = "") {
    return Call(method, path, token, body).status;
  }
  int64_t SubmitAs(const std::string& token) {
    ApiResponse r = Call("POST", "/api/v1/jobs", token, R"({"command":["sleep","1"]})");
    EXPECT_EQ(r.status, 201) << r.body;
    return json::parse(r.body)["id"].get<int64_t>();
  }

  Fixture f_;
};

const std::string kNode = R"({"name":"n1","cpu_milli":8000,"memory_mib":16000,
  "gpus":[{"index":0,"uuid":"GPU-0","model":"H100","memory_mib":81920}]})";

TEST_F(ApiTest, UnauthenticatedEndpoints) {
  EXPECT_EQ(Status("GET", "/api/v1/health", ""), 200);
  ApiResponse doc = Call("GET", "/api/v1/openapi.json", "");
  ASSERT_EQ(doc.status, 200);
  json d = json::parse(doc.body);
  EXPECT_EQ(d["openapi"], "3.0.3");
  EXPECT_TRUE(d["paths"].contains("/jobs"));
  EXPECT_TRUE(d["paths"].contains("/nodes/{name}/heartbeat"));
}

TEST_F(ApiTest, AuthorizationMatrix) {
  const std::string admin = f_.admin_token, user = f_.alice_token, agent = f_.agent_token;
  const std::string bogus = "stk_0000";
  // Everything except health/openapi needs a valid token.
  for (const auto& [m, p] :
       std::vector<std::pair<std::string, std::string>>{{"POST", "/api/v1/jobs"},
                                                        {"GET", "/api/v1/jobs"},
                                                        {"GET", "/api/v1/jobs/1"},
                                                        {"POST", "/api/v1/jobs/1/cancel"},
                                                        {"GET", "/api/v1/nodes"},
                                                        {"POST", "/api/v1/nodes/register"},
                                                        {"POST", "/api/v1/nodes/n1/heartbeat"},
                                                        {"POST", "/api/v1/nodes/n1/drain"},
                                                        {"POST", "/api/v1/tokens"},
                                                        {"PUT", "/api/v1/policy"},
                                                        {"GET", "/api/v1/queue"},
                                                        {"GET", "/api/v1/allocations"}}) {
    EXPECT_EQ(Status(m, p, ""), 401) << m << " " << p;
    EXPECT_EQ(Status(m, p, bogus), 401) << m << " " << p;
  }
  ApiRequest wrong_scheme{"GET", "/api/v1/jobs", {}, "Basic abc", ""};
  EXPECT_EQ(f_.api->Handle(wrong_scheme).status, 401);

  // Node registration and heartbeats: the node's own agent or an admin.
  EXPECT_EQ(Status("POST", "/api/v1/nodes/register", user, kNode), 403);
  EXPECT_EQ(Status("POST", "/api/v1/nodes/register", agent, kNode), 200);
  std::string other = kNode;
  other.replace(other.find("\"n1\""), 4, "\"n2\"");
  EXPECT_EQ(Status("POST", "/api/v1/nodes/register", agent, other), 403);
  EXPECT_EQ(Status("POST", "/api/v1/nodes/register", admin, other), 200);
  EXPECT_EQ(Status("POST", "/api/v1/nodes/n1/heartbeat", agent, "{}"), 200);
  EXPECT_EQ(Status("POST", "/api/v1/nodes/n2/heartbeat", agent, "{}"), 403);
  EXPECT_EQ(Status("POST", "/api/v1/nodes/n1/heartbeat", user, "{}"), 403);
  EXPECT_EQ(Status("POST", "/api/v1/nodes/n9/heartbeat", admin, "{}"), 404);

  // Jobs: users and admins; agents may not.
  EXPECT_EQ(Status("POST", "/api/v1/jobs", agent, R"({"command":["x"]})"), 403);
  EXPECT_EQ(Status("GET", "/api/v1/jobs", agent), 403);
  const int64_t mine = SubmitAs(user);
  const int64_t bobs = SubmitAs(f_.bob_token);
  EXPECT_EQ(Status("GET", "/api/v1/jobs/" + std::to_string(mine), user), 200);
  EXPECT_EQ(Status("GET", "/api/v1/jobs/" + std::to_string(bobs), user), 404);
  EXPECT_EQ(Status("GET", "/api/v1/jobs/" + std::to_string(bobs), admin), 200);
  EXPECT_EQ(Status("POST", "/api/v1/jobs/" + std::to_string(bobs) + "/cancel", user), 404);
  EXPECT_EQ(Status("GET", "/api/v1/jobs/" + std::to_string(bobs) + "/logs", user), 404);
  json listed = json::parse(Call("GET", "/api/v1/jobs", user).body);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0]["user"], "alice");
  EXPECT_EQ(json::parse(Call("GET", "/api/v1/jobs", admin).body).size(), 2u);
  EXPECT_EQ(Status("POST", "/api/v1/jobs/" + std::to_string(mine) + "/cancel", user), 200);
  EXPECT_EQ(Status("POST", "/api/v1/jobs/" + std::to_string(mine) + "/cancel", user), 409);
  EXPECT_EQ(Status("POST", "/api/v1/jobs/" + std::to_string(bobs) + "/cancel", admin), 200);
  // Submitting for someone else is an admin privilege.
  EXPECT_EQ(Status("POST", "/api/v1/jobs", user, R"({"command":["x"],"user":"bob"})"), 403);
  EXPECT_EQ(Status("POST", "/api/v1/jobs", admin, R"({"command":["x"],"user":"bob"})"), 201);

  // Admin-only operations.
  EXPECT_EQ(Status("POST", "/api/v1/nodes/n1/drain", user), 403);
  EXPECT_EQ(Status("POST", "/api/v1/nodes/n1/drain", agent), 403);
  EXPECT_EQ(Status("POST", "/api/v1/nodes/n1/drain", admin), 200);
  EXPECT_EQ(Status("POST", "/api/v1/nodes/n1/undrain", admin), 200);
  EXPECT_EQ(Status("POST", "/api/v1/nodes/zz/drain", admin), 404);
  EXPECT_EQ(Status("PUT", "/api/v1/policy", user, R"({"queue":"sjf"})"), 403);
  EXPECT_EQ(Status("PUT", "/api/v1/policy", admin, R"({"queue":"sjf"})"), 200);
  EXPECT_EQ(Status("POST", "/api/v1/tokens", user, R"({"role":"admin","name":"evil"})"), 403);
  ApiResponse tok = Call("POST", "/api/v1/tokens", admin, R"({"role":"user","name":"carol"})");
  ASSERT_EQ(tok.status, 201);
  const std::string carol = json::parse(tok.body)["token"];
  ApiResponse who = Call("GET", "/api/v1/whoami", carol);
  EXPECT_EQ(json::parse(who.body)["name"], "carol");

  // Reads of nodes/queue/allocations: users and admins.
  EXPECT_EQ(Status("GET", "/api/v1/nodes", user), 200);
  EXPECT_EQ(Status("GET", "/api/v1/queue", user), 200);
  EXPECT_EQ(Status("GET", "/api/v1/allocations", user), 200);
  EXPECT_EQ(Status("GET", "/api/v1/nodes", agent), 403);
}

TEST_F(ApiTest, ValidationErrorsAre400NamingTheField) {
  const std::string t = f_.alice_token;
  ApiResponse r = Call("POST", "/api/v1/jobs", t, R"({"command":["x"],"gpus":12})");
  ASSERT_EQ(r.status, 400);
  json e = json::parse(r.body)["error"];
  EXPECT_EQ(e["field"], "gpus");
  EXPECT_EQ(e["code"], "invalid_argument");
  EXPECT_EQ(json::parse(Call("POST", "/api/v1/jobs", t, "{not json").body)["error"]["field"],
            "body");
  EXPECT_EQ(Status("POST", "/api/v1/jobs", t, "{not json"), 400);
  EXPECT_EQ(
      json::parse(Call("POST", "/api/v1/jobs", t, R"({"command":"ls"})").body)["error"]["field"],
      "command");
  ApiRequest bad_state{"GET", "/api/v1/jobs", {{"state", "sleeping"}}, "Bearer " + t, ""};
  EXPECT_EQ(json::parse(f_.api->Handle(bad_state).body)["error"]["field"], "state");
  EXPECT_EQ(Status("GET", "/api/v1/jobs/abc", t), 400);
  EXPECT_EQ(Status("GET", "/api/v1/jobs/999", t), 404);
  EXPECT_EQ(Status("DELETE", "/api/v1/jobs", t), 405);
  EXPECT_EQ(Status("GET", "/api/v2/jobs", t), 404);
  ApiResponse big = Call("POST", "/api/v1/jobs", t, std::string(kMaxRequestBody + 1, ' '));
  EXPECT_EQ(big.status, 413);
  const std::string admin = f_.admin_token;
  EXPECT_EQ(json::parse(Call("POST", "/api/v1/nodes/register", admin, R"({"name":"a b"})")
                            .body)["error"]["field"],
            "name");
  EXPECT_EQ(
      json::parse(
          Call("PUT", "/api/v1/policy", admin, R"({"placement":"nope"})").body)["error"]["field"],
      "placement");
  EXPECT_EQ(json::parse(Call("POST", "/api/v1/tokens", admin, R"({"role":"god","name":"x"})")
                            .body)["error"]["field"],
            "role");
}

// A GPU reading that does not fit its field is a 400 naming it; a whole number written with a
// fraction part is that integer (docs/api.md, "Node protocol").
TEST_F(ApiTest, HeartbeatReadingsThatDoNotFitTheirFieldAre400NamingThem) {
  const std::string agent = f_.agent_token;
  ASSERT_EQ(Status("POST", "/api/v1/nodes/register", agent, kNode), 200);
  auto beat = [&](const std::string& power) {
    return Call("POST", "/api/v1/nodes/n1/heartbeat", agent,
                R"({"samples":[{"index":0,"uuid":"GPU-0","fields":{"power_mw":{"state":"value",)"
                R"("value":)" +
                    power + "}}}]}");
  };
  ApiResponse r = beat("250000.5");
  ASSERT_EQ(r.status, 400) << r.body;
  const json e = json::parse(r.body)["error"];
  EXPECT_EQ(e["field"], "samples[0].fields.power_mw.value");
  EXPECT_EQ(e["message"], "samples[0].fields.power_mw.value: must be an integer in 0..4294967295");
  EXPECT_EQ(beat("-5").status, 400);
  EXPECT_EQ(beat("\"250000\"").status, 400);
  EXPECT_EQ(beat("250000.0").status, 200);
  EXPECT_EQ(beat("250000").status, 200);
}

TEST_F(ApiTest, RejectedSubmissionsLeaveNoTrace) {
  EXPECT_EQ(Status("POST", "/api/v1/jobs", f_.alice_token, R"({"command":["x"],"gpus":-1})"), 400);
  EXPECT_EQ(Status("POST", "/api/v1/jobs", f_.agent_token, R"({"command":["x"]})"), 403);
  EXPECT_TRUE(f_.store->LoadJobs()->empty());
}

TEST_F(ApiTest, PolicyChangeIsDurableAndSurvivesRestart) {
  ApiResponse r =
      Call("PUT", "/api/v1/policy", f_.admin_token, R"({"queue":"sjf","backfill":false})");
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string placement = json::parse(r.body)["placement"].get<std::string>();
  // A rejected change leaves the stored policy alone.
  EXPECT_EQ(Status("PUT", "/api/v1/policy", f_.admin_token, R"({"queue":"nope"})"), 400);
  f_.Open();  // restart on the same database; the startup options say fifo + backfill
  json p = json::parse(Call("GET", "/api/v1/policy", f_.admin_token).body);
  EXPECT_EQ(p["queue"], "sjf");
  EXPECT_EQ(p["backfill"], false);
  EXPECT_EQ(p["placement"], placement);
  // A later change of one field keeps the others.
  ASSERT_EQ(Status("PUT", "/api/v1/policy", f_.admin_token, R"({"backfill":true})"), 200);
  f_.Open();
  p = json::parse(Call("GET", "/api/v1/policy", f_.admin_token).body);
  EXPECT_EQ(p["queue"], "sjf");
  EXPECT_EQ(p["backfill"], true);
}

// A token request without a role, or with an unknown one, names every role the server knows.
TEST_F(ApiTest, TokenRoleErrorsNameEveryRole) {
  for (const std::string& body :
       {std::string(R"({"name":"x"})"), std::string(R"({"role":"root","name":"x"})")}) {
    ApiResponse r = Call("POST", "/api/v1/tokens", f_.admin_token, body);
    EXPECT_EQ(r.status, 400) << r.body;
    for (const auto& e : protocol::kRoleNames.entries()) {
      EXPECT_NE(r.body.find(std::string(e.name)), std::string::npos) << e.name << ": " << r.body;
    }
  }
}

}  // namespace
}  // namespace stoker::server
