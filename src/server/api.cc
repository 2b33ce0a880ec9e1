#include "server/api.h"

#include <charconv>

namespace stoker::server {
namespace {

std::vector<std::string> Split(std::string_view path) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) parts.emplace_back(path.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

std::optional<int64_t> ParseId(const std::string& s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v <= 0) return std::nullopt;
  return v;
}

ApiResponse Json(int status, const json& j) {
  return ApiResponse{status, j.dump(-1, ' ', false, json::error_handler_t::replace)};
}

std::string CodeName(StatusCode c) {
  std::string s(StatusCodeName(c));
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// The HTTP layer refuses larger bodies first; Handle() is also called directly (tests, fuzzer).
Status CheckBodySize(const std::string& body) {
  if (body.size() > kMaxRequestBody) return ResourceExhausted("body: larger than 4 MiB");
  return Status::Ok();
}

Result<json> ParseBody(const std::string& body) {
  STOKER_RETURN_IF_ERROR(CheckBodySize(body));
  json j = json::parse(body.empty() ? "{}" : body, nullptr, false);
  if (j.is_discarded()) return InvalidArgument("body: not valid JSON");
  return j;
}

ApiResponse MethodNotAllowed() {
  return Json(405,
              {{"error", {{"code", "method_not_allowed"}, {"message", "method not allowed"}}}});
}

}  // namespace

void Api::AddExtension(ApiExtension* e) {
  extensions_.push_back(e);
  // The served document is merged once here, not per request.
  json doc = json::parse(openapi_.empty() ? OpenApiDocument() : openapi_);
  const json paths = e->OpenApiPaths();  // items() must not outlive its json
  for (const auto& [path, item] : paths.items()) doc["paths"][path] = item;
  openapi_ = doc.dump(1);
}

int HttpStatus(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
      return 409;
    case StatusCode::kResourceExhausted:
      return 413;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kDeadlineExceeded:
      return 504;
    case StatusCode::kUnimplemented:
      return 501;
    default:
      return 500;
  }
}

ApiResponse ErrorResponse(const Status& s) {
  json e{{"code", CodeName(s.code())}, {"message", s.message()}};
  if (s.code() == StatusCode::kInvalidArgument) {
    // Messages are "<field>: <what>"; expose the field for clients.
    const size_t colon = s.message().find(": ");
    if (colon != std::string::npos && colon < 128) e["field"] = s.message().substr(0, colon);
  }
  return Json(HttpStatus(s.code()), {{"error", e}});
}

ApiResponse Api::Handle(const ApiRequest& req) const {
  const std::vector<std::string> p = Split(req.path);
  if (p.size() == 1 && p[0] == "metrics") {
    if (req.method != "GET") return MethodNotAllowed();
    auto who = server_->Authenticate(req.authorization);
    if (!who.ok()) return ErrorResponse(who.status());
    ApiResponse r{200, server_->MetricsText(), "text/plain; version=0.0.4; charset=utf-8"};
    for (ApiExtension* e : extensions_) r.body += e->Metrics();
    return r;
  }
  if (p.size() < 2 || p[0] != "api" || p[1] != "v1") {
    return ErrorResponse(NotFound("no such endpoint: " + req.path));
  }
  const std::string& m = req.method;
  const size_t n = p.size();
  // Unauthenticated endpoints.
  if (n == 3 && p[2] == "openapi.json") {
    if (m != "GET") return MethodNotAllowed();
    return ApiResponse{200, openapi_.empty() ? OpenApiDocument() : openapi_};
  }
  if (n == 3 && p[2] == "health") {
    if (m != "GET") return MethodNotAllowed();
    return Json(200, {{"status", "ok"}});
  }
  auto who_r = server_->Authenticate(req.authorization);
  if (!who_r.ok()) return ErrorResponse(who_r.status());
  const Principal who = *who_r;
  if (req.body.size() > kMaxRequestBody)
    return ErrorResponse(ResourceExhausted("body: larger than 4 MiB"));
  if (n < 3) return ErrorResponse(NotFound("no such endpoint: " + req.path));
  const std::string& res = p[2];

  if (res == "whoami" && n == 3) {
    return Json(200, {{"name", who.name}, {"role", RoleName(who.role)}});
  }

  if (res == "jobs") {
    if (n == 3) {
      if (m == "POST") {
        auto body = ParseBody(req.body);
        if (!body.ok()) return ErrorResponse(body.status());
        auto spec = ParseJobSpec(*body);
        if (!spec.ok()) return ErrorResponse(spec.status());
        for (ApiExtension* e : extensions_) {
          if (Status s = e->CheckSubmit(who, *spec); !s.ok()) return ErrorResponse(s);
        }
        auto job = server_->Submit(who, std::move(*spec));
        if (!job.ok()) return ErrorResponse(job.status());
        return Json(201, JobToJson(*job));
      }
      if (m == "GET") {
        JobFilter f;
        if (auto it = req.query.find("state"); it != req.query.end() && !it->second.empty()) {
          std::string list = it->second;
          size_t i = 0;
          while (i <= list.size()) {
            size_t j = list.find(',', i);
            if (j == std::string::npos) j = list.size();
            const std::string name = list.substr(i, j - i);
            auto st = ParseJobState(name);
            if (!st) return ErrorResponse(InvalidArgument("state: unknown state '" + name + "'"));
            f.states.insert(*st);
            i = j + 1;
          }
        }
        if (auto it = req.query.find("user"); it != req.query.end()) f.user = it->second;
        if (auto it = req.query.find("node"); it != req.query.end()) f.node = it->second;
        if (auto it = req.query.find("limit"); it != req.query.end()) {
          auto v = ParseId(it->second);
          if (!v || *v > 100000)
            return ErrorResponse(InvalidArgument("limit: must be in 1..100000"));
          f.limit = static_cast<size_t>(*v);
        }
        auto jobs = server_->ListJobs(who, f);
        if (!jobs.ok()) return ErrorResponse(jobs.status());
        json out = json::array();
        for (const Job& j : *jobs) out.push_back(JobToJson(j));
        return Json(200, out);
      }
      return MethodNotAllowed();
    }
    auto id = ParseId(p[3]);
    if (!id) return ErrorResponse(InvalidArgument("id: '" + p[3] + "' is not a job id"));
    if (n == 4) {
      if (m != "GET") return MethodNotAllowed();
      auto job = server_->GetJob(who, *id);
      if (!job.ok()) return ErrorResponse(job.status());
      return Json(200, JobToJson(*job));
    }
    if (n == 5 && p[4] == "cancel") {
      if (m != "POST") return MethodNotAllowed();
      auto job = server_->Cancel(who, *id);
      if (!job.ok()) return ErrorResponse(job.status());
      return Json(200, JobToJson(*job));
    }
    if (n == 5 && p[4] == "logs") {
      if (m != "GET") return MethodNotAllowed();
      std::string stream = "stdout";
      int64_t offset = 0;
      if (auto it = req.query.find("stream"); it != req.query.end()) stream = it->second;
      if (auto it = req.query.find("offset"); it != req.query.end()) {
        auto [ptr, ec] =
            std::from_chars(it->second.data(), it->second.data() + it->second.size(), offset);
        if (ec != std::errc() || ptr != it->second.data() + it->second.size()) {
          return ErrorResponse(InvalidArgument("offset: must be a non-negative integer"));
        }
      }
      auto chunk = server_->ReadLog(who, *id, stream, offset);
      if (!chunk.ok()) return ErrorResponse(chunk.status());
      return Json(200, {{"data", chunk->data},
                        {"next_offset", chunk->next_offset},
                        {"finished", chunk->finished}});
    }
    if (n == 5 && p[4] == "events") {
      if (m != "GET") return MethodNotAllowed();
      auto ev = server_->Events(who, *id);
      if (!ev.ok()) return ErrorResponse(ev.status());
      json out = json::array();
      for (const auto& e : *ev)
        out.push_back({{"ts_ms", e.ts_unix_ms}, {"kind", e.kind}, {"message", e.message}});
      return Json(200, out);
    }
    return ErrorResponse(NotFound("no such endpoint: " + req.path));
  }

  if (res == "nodes") {
    if (n == 3) {
      if (m != "GET") return MethodNotAllowed();
      auto nodes = server_->ListNodes(who);
      if (!nodes.ok()) return ErrorResponse(nodes.status());
      return Json(200, *nodes);
    }
    if (n == 4 && p[3] == "register") {
      if (m != "POST") return MethodNotAllowed();
      auto body = ParseBody(req.body);
      if (!body.ok()) return ErrorResponse(body.status());
      auto inv = ParseNodeInventory(*body);
      if (!inv.ok()) return ErrorResponse(inv.status());
      auto out = server_->RegisterNode(who, *inv);
      if (!out.ok()) return ErrorResponse(out.status());
      return Json(200, *out);
    }
    const std::string& name = p[3];
    if (n == 4) {
      if (m != "GET") return MethodNotAllowed();
      auto out = server_->GetNode(who, name);
      if (!out.ok()) return ErrorResponse(out.status());
      return Json(200, *out);
    }
    if (n == 5 && p[4] == "heartbeat") {
      if (m != "POST") return MethodNotAllowed();
      if (Status size = CheckBodySize(req.body); !size.ok()) return ErrorResponse(size);
      auto hb = ParseHeartbeat(req.body);
      if (!hb.ok()) return ErrorResponse(hb.status());
      auto reply = server_->Heartbeat(who, name, std::move(*hb));
      if (!reply.ok()) return ErrorResponse(reply.status());
      return Json(200, HeartbeatReplyToJson(*reply));
    }
    if (n == 5 && (p[4] == "drain" || p[4] == "undrain")) {
      if (m != "POST") return MethodNotAllowed();
      Status s = server_->SetDrained(who, name, p[4] == "drain");
      if (!s.ok()) return ErrorResponse(s);
      auto out = server_->GetNode(who, name);
      if (!out.ok()) return ErrorResponse(out.status());
      return Json(200, *out);
    }
    return ErrorResponse(NotFound("no such endpoint: " + req.path));
  }

  if (res == "allocations" && n == 3) {
    if (m != "GET") return MethodNotAllowed();
    auto out = server_->Allocations(who);
    if (!out.ok()) return ErrorResponse(out.status());
    return Json(200, *out);
  }
  if (res == "queue" && n == 3) {
    if (m != "GET") return MethodNotAllowed();
    auto out = server_->Queue(who);
    if (!out.ok()) return ErrorResponse(out.status());
    return Json(200, *out);
  }
  if (res == "tokens" && n == 3) {
    if (m != "POST") return MethodNotAllowed();
    if (who.role != Role::kAdmin)
      return ErrorResponse(PermissionDenied("only admins create tokens"));
    auto body = ParseBody(req.body);
    if (!body.ok()) return ErrorResponse(body.status());
    if (!body->is_object()) return ErrorResponse(InvalidArgument("body: must be a JSON object"));
    const json& b = *body;
    if (!b.contains("role") || !b["role"].is_string()) {
      return ErrorResponse(InvalidArgument("role: required (admin, agent or user)"));
    }
    auto role = ParseRole(b["role"].get<std::string>());
    if (!role) return ErrorResponse(InvalidArgument("role: must be admin, agent or user"));
    if (!b.contains("name") || !b["name"].is_string()) {
      return ErrorResponse(InvalidArgument("name: required string"));
    }
    auto token = server_->CreateToken(who, *role, b["name"].get<std::string>());
    if (!token.ok()) return ErrorResponse(token.status());
    return Json(201, {{"token", *token}, {"name", b["name"]}, {"role", RoleName(*role)}});
  }
  if (res == "policy" && n == 3) {
    if (m == "GET") return Json(200, server_->Policy());
    if (m != "PUT") return MethodNotAllowed();
    if (who.role != Role::kAdmin) {
      return ErrorResponse(PermissionDenied("only admins change the scheduling policy"));
    }
    auto body = ParseBody(req.body);
    if (!body.ok()) return ErrorResponse(body.status());
    if (!body->is_object()) return ErrorResponse(InvalidArgument("body: must be a JSON object"));
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
    Status s = server_->SetPolicy(who, placement, queue_name, backfill);
    if (!s.ok()) return ErrorResponse(s);
    return Json(200, server_->Policy());
  }
  for (ApiExtension* e : extensions_) {
    if (auto r = e->Handle(req, who)) return *r;
  }
  return ErrorResponse(NotFound("no such endpoint: " + req.path));
}

}  // namespace stoker::server
