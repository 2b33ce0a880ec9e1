#include "server/api.h"

#include <initializer_list>

#include "core/duration.h"
#include "core/integer.h"
#include "core/prometheus_text.h"
#include "json/enum_json.h"
#include "protocol/limits.h"

namespace stoker::server {
namespace {
using http::QueryParam;
using http::RouteCall;
using http::Scope;

Result<json> ParseBody(const std::string& body) {
  if (body.size() > kMaxRequestBody) return ResourceExhausted("body: larger than 4 MiB");
  json j = json::parse(body.empty() ? "{}" : body, nullptr, false);
  if (j.is_discarded()) return InvalidArgument("body: not valid JSON");
  return j;
}

// The domain answers typed values; the API encodes them with the protocol's codecs.
template <class T, class Encode>
ApiResponse Reply(int status, const Result<T>& r, Encode encode) {
  if (!r.ok()) return ErrorResponse(r.status());
  return JsonResponse(status, encode(*r));
}
template <class T, class Encode>
ApiResponse ReplyList(const Result<std::vector<T>>& r, Encode encode) {
  if (!r.ok()) return ErrorResponse(r.status());
  json out = json::array();
  for (const T& v : *r) out.push_back(encode(v));
  return JsonResponse(200, out);
}

json TokenInfoToJson(const TokenInfo& t) {
  json j{{"id", t.id}, {"name", t.name}, {"role", t.role}, {"created_ms", t.created_unix_ms}};
  j["expires_ms"] = t.expires_unix_ms == 0 ? json(nullptr) : json(t.expires_unix_ms);
  return j;
}

// The job named by a route's {id}.
Result<int64_t> JobIdOf(const RouteCall& c) {
  auto id = ParseInt(c.path.at("id"), 1);
  if (!id.ok())
    return InvalidArgument("id: '" + c.path.at("id").substr(0, 64) + "' is not a job id");
  return *id;
}

// The roles a route admits (each Route holds its own set of them).
constexpr std::initializer_list<Role> kAnyToken = {Role::kAdmin, Role::kUser, Role::kAgent};
constexpr std::initializer_list<Role> kEveryRole = {Role::kAdmin, Role::kUser, Role::kAgent,
                                                    Role::kScheduler};
constexpr std::initializer_list<Role> kPeople = {Role::kAdmin, Role::kUser};
constexpr std::initializer_list<Role> kAdmins = {Role::kAdmin};
constexpr std::initializer_list<Role> kNodes = {Role::kAdmin, Role::kAgent};

std::vector<std::string> JobStateNames() {
  std::vector<std::string> out;
  for (JobState s :
       {JobState::kQueued, JobState::kAssigned, JobState::kRunning, JobState::kCancelling,
        JobState::kSucceeded, JobState::kFailed, JobState::kCancelled}) {
    out.emplace_back(JobStateName(s));
  }
  return out;
}

}  // namespace

Api::Api(Server* server) : server_(server) {
  AddCoreRoutes();
  RebuildDocument();
}

ApiResponse Api::Handle(const ApiRequest& req) const {
  return router_.Dispatch(req, [this, &req](std::string_view h) {
    // A bearer token wins; without one, a verified client certificate (kube-scheduler's).
    if (h.empty() && !req.client_cert_cn.empty()) {
      return server_->AuthenticateCertificate(req.client_cert_cn);
    }
    return server_->Authenticate(h);
  });
}

void Api::AddExtension(ApiExtension* e) {
  extensions_.push_back(e);
  e->AddRoutes(&router_);
  RebuildDocument();
}

void Api::RebuildDocument() {
  // The static schemas, the extensions' path items, then every operation's parameters, roles
  // and scope from the route table (so the documented limits are the enforced ones).
  json doc = json::parse(OpenApiDocument());
  for (ApiExtension* e : extensions_) {
    const json paths = e->OpenApiPaths();  // items() must not outlive its json
    for (const auto& [path, item] : paths.items()) doc["paths"][path] = item;
  }
  const json ops = router_.OpenApiOperations();
  for (const auto& [path, methods] : ops.items()) {
    if (path == "/metrics") continue;  // outside /api/v1
    for (const auto& [method, op] : methods.items()) {
      json& target = doc["paths"][path][method];
      if (!target.contains("summary")) target["summary"] = op["summary"];
      if (!target.contains("responses")) {
        target["responses"] = {{"200", {{"description", "OK"}}},
                               {"400", {{"description", "invalid argument (the field is named)"}}},
                               {"401", {{"description", "missing or unknown token"}}},
                               {"403", {{"description", "role not allowed"}}}};
      }
      target["parameters"] = op["parameters"];
      target["x-stoker-roles"] = op["x-stoker-roles"];
      target["x-stoker-scope"] = op["x-stoker-scope"];
      if (op.contains("security")) target["security"] = op["security"];
    }
  }
  openapi_ = doc.dump(1);
}

void Api::AddCoreRoutes() {
  Server* s = server_;
  router_.Add({"GET",
               "/metrics",
               kPeople,
               Scope::kNone,
               {},
               "Prometheus text: jobs, nodes, GPU commitments, scheduler and efficiency series "
               "(a user sees the market balance of their own team only)",
               [this](const RouteCall& c) {
                 ApiResponse r{200, ServerMetricsText(server_->Metrics()), prom::kContentType};
                 for (ApiExtension* e : extensions_) r.body += e->Metrics(c.who);
                 return r;
               }});
  router_.Add(
      {"GET", "/openapi.json", {}, Scope::kNone, {}, "This document", [this](const RouteCall&) {
         return ApiResponse{200, openapi_};
       }});
  router_.Add({"GET", "/health", {}, Scope::kNone, {}, "Liveness", [](const RouteCall&) {
                 return JsonResponse(200, {{"status", "ok"}});
               }});
  router_.Add({"GET",
               "/whoami",
               kEveryRole,
               Scope::kNone,
               {},
               "The caller's name and role",
               [](const RouteCall& c) {
                 return JsonResponse(200, {{"name", c.who.name}, {"role", c.who.role}});
               }});

  // Jobs.
  router_.Add(
      {"POST", "/jobs", kPeople, Scope::kOwnJob, {}, "Submit a job", [this](const RouteCall& c) {
         auto body = ParseBody(c.request.body);
         if (!body.ok()) return ErrorResponse(body.status());
         auto spec = ParseJobSpec(*body);
         if (!spec.ok()) return ErrorResponse(spec.status());
         for (ApiExtension* e : extensions_) {
           if (Status st = e->CheckSubmit(c.who, *spec); !st.ok()) {
             return ErrorResponse(st);
           }
         }
         auto job = server_->Submit(c.who, std::move(*spec));
         if (!job.ok()) return ErrorResponse(job.status());
         return JsonResponse(201, JobToJson(*job));
       }});
  router_.Add({"GET",
               "/jobs",
               kPeople,
               Scope::kOwnJob,
               {QueryParam::EnumList("state", JobStateNames(), "only jobs in these states"),
                QueryParam::String("user", 64, "only this user's jobs"),
                QueryParam::String("node", 128, "only jobs placed on this node"),
                QueryParam::Int("limit", 1, kMaxJobsPerListing, "at most this many (the newest)"),
                QueryParam::Int("before_id", 1, INT64_MAX,
                                "only jobs with a smaller id (the next page of a listing)")},
               "List jobs, newest last (a user sees their own)",
               [s](const RouteCall& c) {
                 JobFilter f;
                 if (const std::string* list = c.Query("state"); list && !list->empty()) {
                   size_t i = 0;
                   while (i <= list->size()) {
                     size_t j = list->find(',', i);
                     if (j == std::string::npos) j = list->size();
                     f.states.insert(*ParseJobState(list->substr(i, j - i)));
                     i = j + 1;
                   }
                 }
                 if (const std::string* u = c.Query("user")) f.user = *u;
                 if (const std::string* n = c.Query("node")) f.node = *n;
                 f.limit = static_cast<size_t>(c.QueryInt("limit", 1000));
                 f.before_id = c.QueryInt("before_id", 0);
                 auto jobs = s->ListJobs(c.who, f);
                 if (!jobs.ok()) return ErrorResponse(jobs.status());
                 json out = json::array();
                 for (const Job& j : *jobs) out.push_back(JobToJson(j));
                 return JsonResponse(200, out);
               }});
  router_.Add(
      {"GET", "/jobs/{id}", kPeople, Scope::kOwnJob, {}, "One job", [s](const RouteCall& c) {
         auto id = JobIdOf(c);
         if (!id.ok()) return ErrorResponse(id.status());
         auto job = s->GetJob(c.who, *id);
         if (!job.ok()) return ErrorResponse(job.status());
         return JsonResponse(200, JobToJson(*job));
       }});
  router_.Add({"POST",
               "/jobs/{id}/cancel",
               kPeople,
               Scope::kOwnJob,
               {},
               "Cancel a job",
               [s](const RouteCall& c) {
                 auto id = JobIdOf(c);
                 if (!id.ok()) return ErrorResponse(id.status());
                 auto job = s->Cancel(c.who, *id);
                 if (!job.ok()) return ErrorResponse(job.status());
                 return JsonResponse(200, JobToJson(*job));
               }});
  router_.Add({"GET",
               "/jobs/{id}/logs",
               kPeople,
               Scope::kOwnJob,
               {QueryParam::Enum("stream", {"stdout", "stderr"}, "which stream (default stdout)"),
                QueryParam::Int("offset", 0, int64_t{1} << 50, "byte offset to read from"),
                QueryParam::Int("part", 0, protocol::limits::kGangPartsMax - 1,
                                "a gang's part (rank) whose logs to read (default 0)")},
               "A job's log bytes from an offset (at most 1 MiB per call)",
               [s](const RouteCall& c) {
                 auto id = JobIdOf(c);
                 if (!id.ok()) return ErrorResponse(id.status());
                 const std::string* stream = c.Query("stream");
                 auto chunk =
                     s->ReadLog(c.who, *id, stream ? *stream : "stdout", c.QueryInt("offset", 0),
                                static_cast<int32_t>(c.QueryInt("part", 0)));
                 if (!chunk.ok()) return ErrorResponse(chunk.status());
                 return JsonResponse(200, {{"data", chunk->data},
                                           {"next_offset", chunk->next_offset},
                                           {"finished", chunk->finished}});
               }});
  router_.Add(
      {"GET",
       "/jobs/{id}/events",
       kPeople,
       Scope::kOwnJob,
       {},
       "A job's events",
       [s](const RouteCall& c) {
         auto id = JobIdOf(c);
         if (!id.ok()) return ErrorResponse(id.status());
         auto ev = s->Events(c.who, *id);
         if (!ev.ok()) return ErrorResponse(ev.status());
         json out = json::array();
         for (const auto& e : *ev) {
           out.push_back({{"ts_ms", e.ts_unix_ms}, {"kind", e.kind}, {"message", e.message}});
         }
         return JsonResponse(200, out);
       }});

  // Nodes.
  router_.Add(
      {"GET", "/nodes", kPeople, Scope::kNone, {}, "Registered nodes", [s](const RouteCall& c) {
         return ReplyList(s->ListNodes(c.who), protocol::NodeStatusToJson);
       }});
  router_.Add({"POST",
               "/nodes/register",
               kNodes,
               Scope::kOwnNode,
               {},
               "Register (or update) a node's inventory",
               [s](const RouteCall& c) {
                 auto body = ParseBody(c.request.body);
                 if (!body.ok()) return ErrorResponse(body.status());
                 auto inv = ParseNodeInventory(*body);
                 if (!inv.ok()) return ErrorResponse(inv.status());
                 return Reply(200, s->RegisterNode(c.who, *inv), protocol::NodeStatusToJson);
               }});
  router_.Add({"GET",
               "/nodes/{name}",
               kAnyToken,
               Scope::kOwnNode,
               {},
               "One node with its latest samples",
               [s](const RouteCall& c) {
                 return Reply(200, s->GetNode(c.who, c.path.at("name")),
                              protocol::NodeStatusToJson);
               }});
  router_.Add({"POST",
               "/nodes/{name}/heartbeat",
               kNodes,
               Scope::kOwnNode,
               {},
               "A node's heartbeat: job states, new log bytes, GPU samples",
               [s](const RouteCall& c) {
                 if (c.request.body.size() > kMaxRequestBody) {
                   return ErrorResponse(ResourceExhausted("body: larger than 4 MiB"));
                 }
                 auto hb = ParseHeartbeat(c.request.body);
                 if (!hb.ok()) return ErrorResponse(hb.status());
                 auto reply = s->Heartbeat(c.who, c.path.at("name"), std::move(*hb));
                 if (!reply.ok()) return ErrorResponse(reply.status());
                 return JsonResponse(200, HeartbeatReplyToJson(*reply));
               }});
  for (const char* verb : {"drain", "undrain"}) {
    const bool drain = std::string(verb) == "drain";
    router_.Add({"POST",
                 std::string("/nodes/{name}/") + verb,
                 kAdmins,
                 Scope::kNone,
                 {},
                 drain ? "Stop placing jobs on a node" : "Place jobs on a node again",
                 [s, drain](const RouteCall& c) {
                   const std::string& name = c.path.at("name");
                   if (Status st = s->SetDrained(c.who, name, drain); !st.ok()) {
                     return ErrorResponse(st);
                   }
                   return Reply(200, s->GetNode(c.who, name), protocol::NodeStatusToJson);
                 }});
  }

  // Views.
  router_.Add({"GET",
               "/allocations",
               kPeople,
               Scope::kOwnJob,
               {},
               "What each active job holds (a user sees their own)",
               [s](const RouteCall& c) {
                 return ReplyList(s->Allocations(c.who), protocol::AllocationToJson);
               }});
  router_.Add(
      {"GET",
       "/queue",
       kPeople,
       Scope::kNone,
       {},
       "Queued jobs in scheduling order, with the reason each waits",
       [s](const RouteCall& c) { return ReplyList(s->Queue(c.who), protocol::QueueEntryToJson); }});

  // Tokens and the audit log.
  router_.Add({"POST",
               "/tokens",
               kAdmins,
               Scope::kNone,
               {},
               "Create a token {role, name, expires_in?}; the token is in this answer only",
               [s](const RouteCall& c) {
                 auto body = ParseBody(c.request.body);
                 if (!body.ok()) return ErrorResponse(body.status());
                 if (!body->is_object()) {
                   return ErrorResponse(InvalidArgument("body: must be a JSON object"));
                 }
                 const json& b = *body;
                 for (const auto& [k, v] : b.items()) {
                   if (k != "role" && k != "name" && k != "expires_in") {
                     return ErrorResponse(InvalidArgument(k + ": unknown field"));
                   }
                 }
                 if (!b.contains("role") || !b["role"].is_string()) {
                   return ErrorResponse(
                       InvalidArgument("role: required (" + protocol::kRoleNames.List() + ")"));
                 }
                 auto role = ParseRole(b["role"].get<std::string>());
                 if (!role) {
                   return ErrorResponse(
                       InvalidArgument("role: must be one of " + protocol::kRoleNames.List()));
                 }
                 if (!b.contains("name") || !b["name"].is_string()) {
                   return ErrorResponse(InvalidArgument("name: required string"));
                 }
                 int64_t expires = 0;
                 if (b.contains("expires_in")) {
                   if (!b["expires_in"].is_string()) {
                     return ErrorResponse(InvalidArgument("expires_in: must be a duration text"));
                   }
                   auto d = ParseDuration(b["expires_in"].get<std::string>());
                   if (!d.ok()) return ErrorResponse(d.status().WithContext("expires_in"));
                   if (*d < std::chrono::minutes(1) || *d > std::chrono::hours(24 * 3660)) {
                     return ErrorResponse(
                         InvalidArgument("expires_in: must be between 1m and 10 years"));
                   }
                   expires = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 (s->WallNow() + *d).time_since_epoch())
                                 .count();
                 }
                 auto token = s->CreateToken(c.who, *role, b["name"].get<std::string>(), expires);
                 if (!token.ok()) return ErrorResponse(token.status());
                 json out{{"token", *token}, {"name", b["name"]}, {"role", *role}};
                 out["expires_ms"] = expires == 0 ? json(nullptr) : json(expires);
                 return JsonResponse(201, out);
               }});
  router_.Add({"GET",
               "/tokens",
               kAdmins,
               Scope::kNone,
               {},
               "Every token: id, name, role, created, expiry (never the token)",
               [s](const RouteCall& c) {
                 auto list = s->ListTokens(c.who);
                 if (!list.ok()) return ErrorResponse(list.status());
                 json out = json::array();
                 for (const TokenInfo& t : *list) out.push_back(TokenInfoToJson(t));
                 return JsonResponse(200, out);
               }});
  router_.Add({"DELETE",
               "/tokens/{id}",
               kAdmins,
               Scope::kNone,
               {},
               "Revoke a token",
               [s](const RouteCall& c) {
                 auto t = s->RevokeToken(c.who, c.path.at("id"));
                 if (!t.ok()) return ErrorResponse(t.status());
                 json out = TokenInfoToJson(*t);
                 out["revoked"] = true;
                 return JsonResponse(200, out);
               }});
  router_.Add({"GET",
               "/audit",
               kAdmins,
               Scope::kNone,
               {QueryParam::Int("limit", 1, 10000, "the newest this many (default 100)")},
               "The audit log (token creation and revocation), oldest first",
               [s](const RouteCall& c) {
                 auto rows = s->ListAudit(c.who, static_cast<size_t>(c.QueryInt("limit", 100)));
                 if (!rows.ok()) return ErrorResponse(rows.status());
                 json out = json::array();
                 for (const store::AuditRow& a : *rows) {
                   out.push_back({{"seq", a.seq},
                                  {"ts_ms", a.ts_unix_ms},
                                  {"actor", a.actor},
                                  {"action", a.action},
                                  {"subject", a.subject},
                                  {"detail", a.detail}});
                 }
                 return JsonResponse(200, out);
               }});

  // Policy.
  router_.Add(
      {"GET", "/policy", kPeople, Scope::kNone, {}, "The scheduling policy", [s](const RouteCall&) {
         return JsonResponse(200, protocol::PolicySettingsToJson(s->Policy()));
       }});
  router_.Add({"PUT",
               "/policy",
               kAdmins,
               Scope::kNone,
               {},
               "Change the scheduling policy {placement?, queue?, backfill?}",
               [s](const RouteCall& c) {
                 auto body = ParseBody(c.request.body);
                 if (!body.ok()) return ErrorResponse(body.status());
                 if (!body->is_object()) {
                   return ErrorResponse(InvalidArgument("body: must be a JSON object"));
                 }
                 std::string placement, queue_name;
                 std::optional<bool> backfill;
                 for (const auto& [k, v] : body->items()) {
                   if (k == "placement" && v.is_string()) {
                     placement = v.get<std::string>();
                   } else if (k == "queue" && v.is_string()) {
                     queue_name = v.get<std::string>();
                   } else if (k == "backfill" && v.is_boolean()) {
                     backfill = v.get<bool>();
                   } else {
                     return ErrorResponse(InvalidArgument(k + ": unknown field or wrong type"));
                   }
                 }
                 if (Status st = s->SetPolicy(c.who, placement, queue_name, backfill); !st.ok()) {
                   return ErrorResponse(st);
                 }
                 return JsonResponse(200, protocol::PolicySettingsToJson(s->Policy()));
               }});
}

}  // namespace stoker::server
