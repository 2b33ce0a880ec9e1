// Regression tests of the security review (issue "Security and isolation"), through the API as
// `stoker server` wires it: bounded query parameters, tokens that expire and are revoked (and
// audited), the roles of /policy and /metrics.
#include <gtest/gtest.h>

#include "world.h"

namespace stoker::server {
namespace {
using testing::Req;
using testing::World;
using namespace std::chrono_literals;

ApiResponse Get(World& w, const std::string& path, std::map<std::string, std::string> query,
                const std::string& who = "admin") {
  return w.api->Handle(Req("GET", path, "", std::move(query), w.tokens.at(who)));
}

TEST(QueryBounds, ReportBucketsAreBoundedAndNamed) {
  World w("bucket");
  // A job that ran for ten days gives the report a ten-day span.
  const int64_t id = w.JobOf("alice");
  const Job job = *w.server->GetJob(Principal{"root", Role::kAdmin}, id);
  Heartbeat hb;
  RunReport r;
  r.id = id;
  r.attempt = job.attempt();
  r.phase = protocol::RunPhase::kRunning;
  hb.jobs = {r};
  ASSERT_TRUE(w.server->Heartbeat(Principal{"root", Role::kAdmin}, job.assignment->node, hb).ok());
  w.clock.Advance(std::chrono::hours(24 * 10));
  r.phase = protocol::RunPhase::kExited;
  r.exit_code = 0;
  r.logs_complete = true;
  hb.jobs = {r};
  ASSERT_TRUE(w.server->Heartbeat(Principal{"root", Role::kAdmin}, job.assignment->node, hb).ok());

  for (const char* bad : {"24us", "1s", "59s", "1000d", "-1m", "1x"}) {
    const ApiResponse res = Get(w, "/api/v1/report", {{"bucket", bad}}, "alice");
    EXPECT_EQ(res.status, 400) << bad << ": " << res.body;
    EXPECT_EQ(json::parse(res.body)["error"]["field"], "bucket") << res.body;
  }
  // 1 minute over ten days is 14,401 buckets: refused with the least bucket that would do.
  ApiResponse res = Get(w, "/api/v1/report", {{"bucket", "1m"}});
  ASSERT_EQ(res.status, 400) << res.body;
  EXPECT_NE(res.body.find("at most 2000"), std::string::npos) << res.body;
  res = Get(w, "/api/v1/report", {{"bucket", "1h"}});
  ASSERT_EQ(res.status, 200) << res.body;
  const size_t buckets = json::parse(res.body)["timeline"].size();
  EXPECT_GE(buckets, 240u);  // ten days of hours
  EXPECT_LE(buckets, 242u);
  EXPECT_EQ(Get(w, "/api/v1/report", {{"format", "pdf"}}).status, 400);
}

TEST(QueryBounds, JobListingsAreBoundedAndPaged) {
  World w("limit");
  std::vector<int64_t> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(w.JobOf("alice", false));
  EXPECT_EQ(Get(w, "/api/v1/jobs", {{"limit", "100001"}}).status, 400);
  EXPECT_EQ(Get(w, "/api/v1/jobs", {{"limit", "0"}}).status, 400);
  EXPECT_EQ(Get(w, "/api/v1/jobs", {{"user", std::string(65, 'x')}}).status, 400);
  EXPECT_EQ(Get(w, "/api/v1/jobs", {{"state", "queued,bogus"}}).status, 400);
  // Newest first in pages: the two newest, then the two before them.
  json page = json::parse(Get(w, "/api/v1/jobs", {{"limit", "2"}}).body);
  ASSERT_EQ(page.size(), 2u);
  EXPECT_EQ(page[0]["id"], ids[3]);
  EXPECT_EQ(page[1]["id"], ids[4]);
  page = json::parse(
      Get(w, "/api/v1/jobs", {{"limit", "2"}, {"before_id", std::to_string(ids[3])}}).body);
  ASSERT_EQ(page.size(), 2u);
  EXPECT_EQ(page[0]["id"], ids[1]);
  EXPECT_EQ(page[1]["id"], ids[2]);
  EXPECT_EQ(Get(w, "/api/v1/jobs/1/logs", {{"offset", "-1"}}).status, 400);
  EXPECT_EQ(Get(w, "/api/v1/jobs/1/logs", {{"stream", "stdin"}}).status, 400);
}

TEST(Roles, AgentsCannotReadPolicyOrMetricsAndUsersSeeOnlyTheirTeamsBalance) {
  World w("roles");
  EXPECT_EQ(Get(w, "/api/v1/policy", {}, "n1").status, 403);
  EXPECT_EQ(Get(w, "/metrics", {}, "n1").status, 403);
  const std::string admin = Get(w, "/metrics", {}).body;
  EXPECT_NE(admin.find("stoker_market_balance_credits{team=\"ml\"}"), std::string::npos);
  EXPECT_NE(admin.find("stoker_market_balance_credits{team=\"vision\"}"), std::string::npos);
  const std::string alice = Get(w, "/metrics", {}, "alice").body;
  EXPECT_NE(alice.find("stoker_market_balance_credits{team=\"ml\"}"), std::string::npos);
  EXPECT_EQ(alice.find("team=\"vision\""), std::string::npos) << alice;
}

TEST(Tokens, ExpireAreListedWithoutSecretsRevokedAndAudited) {
  World w("tokens");
  ApiResponse made = w.api->Handle(Req("POST", "/api/v1/tokens",
                                       R"({"role":"user","name":"carol","expires_in":"1h"})", {},
                                       w.tokens["admin"]));
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string carol = json::parse(made.body)["token"];
  EXPECT_EQ(Get(w, "/api/v1/whoami", {}, "admin").status, 200);
  auto whoami = [&](const std::string& token) {
    return w.api->Handle(Req("GET", "/api/v1/whoami", "", {}, token)).status;
  };
  EXPECT_EQ(whoami(carol), 200);
  w.clock.Advance(61min);
  EXPECT_EQ(whoami(carol), 401);
  EXPECT_EQ(
      w.api
          ->Handle(Req("POST", "/api/v1/tokens", R"({"role":"user","name":"x","expires_in":"1s"})",
                       {}, w.tokens["admin"]))
          .status,
      400);

  // The listing names every token by id, never the token; revoking one stops it at once.
  json list = json::parse(Get(w, "/api/v1/tokens", {}).body);
  std::string bob_id;
  for (const json& t : list) {
    EXPECT_FALSE(t.contains("token"));
    EXPECT_EQ(t["id"].get<std::string>().size(), 12u);
    if (t["name"] == "bob") bob_id = t["id"];
  }
  ASSERT_FALSE(bob_id.empty());
  EXPECT_EQ(Get(w, "/api/v1/tokens", {}, "alice").status, 403);
  EXPECT_EQ(
      w.api->Handle(Req("DELETE", "/api/v1/tokens/" + bob_id, "", {}, w.tokens["alice"])).status,
      403);
  EXPECT_EQ(whoami(w.tokens["bob"]), 200);
  EXPECT_EQ(
      w.api->Handle(Req("DELETE", "/api/v1/tokens/" + bob_id, "", {}, w.tokens["admin"])).status,
      200);
  EXPECT_EQ(whoami(w.tokens["bob"]), 401);
  EXPECT_EQ(
      w.api->Handle(Req("DELETE", "/api/v1/tokens/" + bob_id, "", {}, w.tokens["admin"])).status,
      404);
  json audit = json::parse(Get(w, "/api/v1/audit", {}).body);
  bool created = false, revoked = false;
  for (const json& a : audit) {
    created |= a["action"] == "token.create" &&
               a["subject"].get<std::string>().find("carol") != std::string::npos;
    revoked |=
        a["action"] == "token.revoke" && a["actor"] == "root" && a["subject"] == bob_id + " bob";
  }
  EXPECT_TRUE(created && revoked) << audit.dump(1);
}

// `stoker up` reuses its local agent token and never removes tokens by name: a node named
// like the admin ("root") or like a user leaves their tokens alone.
TEST(Tokens, TheLocalAgentTokenTouchesNoOtherToken) {
  World w("local_agent");
  const std::string first = *w.server->LocalAgentToken("root", "");
  EXPECT_EQ(*w.server->LocalAgentToken("root", first), first);
  auto whoami = [&](const std::string& token) {
    return w.api->Handle(Req("GET", "/api/v1/whoami", "", {}, token)).status;
  };
  EXPECT_EQ(whoami(w.tokens["admin"]), 200);  // the admin named root still works
  const std::string second = *w.server->LocalAgentToken("alice", first);  // renamed node
  EXPECT_NE(second, first);
  EXPECT_EQ(whoami(first), 401);  // the one it replaced, by hash
  EXPECT_EQ(whoami(w.tokens["alice"]), 200);
  EXPECT_EQ(whoami(second), 200);
}

}  // namespace
}  // namespace stoker::server
