#include "http/router.h"

#include <cstdlib>

#include "core/duration.h"
#include "core/integer.h"
#include "json/enum_json.h"

namespace stoker::http {
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

std::string CodeName(StatusCode c) {
  std::string s(StatusCodeName(c));
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

// The API's public prefix; /metrics is the one route outside it.
constexpr std::string_view kPrefix = "/api/v1";

}  // namespace

QueryParam QueryParam::Int(std::string name, int64_t min, int64_t max, std::string description) {
  QueryParam q;
  q.name = std::move(name);
  q.kind = Kind::kInt;
  q.min = min;
  q.max = max;
  q.description = std::move(description);
  return q;
}

QueryParam QueryParam::String(std::string name, size_t max_len, std::string description) {
  QueryParam q;
  q.name = std::move(name);
  q.kind = Kind::kString;
  q.max_len = max_len;
  q.description = std::move(description);
  return q;
}

QueryParam QueryParam::Enum(std::string name, std::vector<std::string> choices,
                            std::string description) {
  QueryParam q;
  q.name = std::move(name);
  q.kind = Kind::kEnum;
  q.choices = std::move(choices);
  q.description = std::move(description);
  return q;
}

QueryParam QueryParam::EnumList(std::string name, std::vector<std::string> choices,
                                std::string description) {
  QueryParam q = Enum(std::move(name), std::move(choices), std::move(description));
  q.kind = Kind::kEnumList;
  return q;
}

QueryParam QueryParam::DurationIn(std::string name, Duration min, Duration max,
                                  std::string description) {
  QueryParam q;
  q.name = std::move(name);
  q.kind = Kind::kDuration;
  q.min_duration = min;
  q.max_duration = max;
  q.description = std::move(description);
  return q;
}

Status QueryParam::Check(const std::string& value) const {
  const auto bad = [&](const std::string& what) { return InvalidArgument(name + ": " + what); };
  switch (kind) {
    case Kind::kInt: {
      if (!ParseInt(value, min, max).ok()) {
        return bad("must be an integer in " + std::to_string(min) + ".." + std::to_string(max) +
                   ", got '" + value.substr(0, 64) + "'");
      }
      return Status::Ok();
    }
    case Kind::kString:
      if (value.size() > max_len) {
        return bad("at most " + std::to_string(max_len) + " bytes, got " +
                   std::to_string(value.size()));
      }
      if (value.find('\0') != std::string::npos) return bad("must not contain NUL bytes");
      return Status::Ok();
    case Kind::kEnum:
      for (const auto& c : choices) {
        if (value == c) return Status::Ok();
      }
      return bad("must be one of " + Join(choices, ", ") + ", got '" + value.substr(0, 64) + "'");
    case Kind::kEnumList: {
      if (value.size() > 64 * choices.size()) return bad("too long");
      size_t i = 0;
      while (i <= value.size()) {
        size_t j = value.find(',', i);
        if (j == std::string::npos) j = value.size();
        const std::string item = value.substr(i, j - i);
        bool ok = false;
        for (const auto& c : choices) ok |= item == c;
        if (!ok) {
          return bad("each of a comma-separated list must be one of " + Join(choices, ", ") +
                     ", got '" + item.substr(0, 64) + "'");
        }
        i = j + 1;
      }
      return Status::Ok();
    }
    case Kind::kDuration: {
      auto d = ParseDuration(value.substr(0, 64));
      if (!d.ok()) return bad(d.status().message());
      if (*d < min_duration || *d > max_duration) {
        return bad("must be between " + FormatDuration(min_duration) + " and " +
                   FormatDuration(max_duration) + ", got '" + value + "'");
      }
      return Status::Ok();
    }
  }
  return Status::Ok();
}

json QueryParam::OpenApi() const {
  json schema;
  switch (kind) {
    case Kind::kInt:
      schema = {{"type", "integer"}, {"minimum", min}, {"maximum", max}};
      break;
    case Kind::kString:
      schema = {{"type", "string"}, {"maxLength", max_len}};
      break;
    case Kind::kEnum:
      schema = {{"type", "string"}, {"enum", choices}};
      break;
    case Kind::kEnumList:
      schema = {{"type", "string"},
                {"description", "comma-separated, each one of: " + Join(choices, ", ")}};
      break;
    case Kind::kDuration:
      schema = {
          {"type", "string"},
          {"description", "a duration such as 15m or 1h30m, from " + FormatDuration(min_duration) +
                              " to " + FormatDuration(max_duration)}};
      break;
  }
  return {{"name", name},
          {"in", "query"},
          {"required", false},
          {"description", description},
          {"schema", schema}};
}

const std::string* RouteCall::Query(const std::string& name) const {
  auto it = request.query.find(name);
  return it == request.query.end() ? nullptr : &it->second;
}

int64_t RouteCall::QueryInt(const std::string& name, int64_t fallback) const {
  const std::string* v = Query(name);
  if (v == nullptr) return fallback;
  auto parsed = ParseInt(*v);
  return parsed.ok() ? *parsed : fallback;
}

std::optional<Duration> RouteCall::QueryDuration(const std::string& name) const {
  const std::string* v = Query(name);
  if (v == nullptr) return std::nullopt;
  auto d = ParseDuration(*v);
  if (!d.ok()) return std::nullopt;
  return *d;
}

void Router::Add(Route route) {
  for (const Route& r : routes_) {
    if (r.method == route.method && r.pattern == route.pattern) {
      (void)std::fprintf(stderr, "route %s %s added twice\n", route.method.c_str(),
                         route.pattern.c_str());
      std::abort();
    }
  }
  routes_.push_back(std::move(route));
}

const Route* Router::Find(const std::string& method, const std::string& path, bool* path_known,
                          std::map<std::string, std::string>* params) const {
  std::string_view rel = path;
  const bool metrics = path == "/metrics";
  if (!metrics) {
    if (!rel.starts_with(kPrefix)) return nullptr;
    rel.remove_prefix(kPrefix.size());
  }
  const std::vector<std::string> parts = Split(rel);
  // The most specific pattern that matches (most literal segments: /nodes/register is not node
  // "register") names the path; its method then picks the route, or the answer is 405.
  int best = -1;
  const Route* found = nullptr;
  for (const Route& r : routes_) {
    if ((r.pattern == "/metrics") != metrics) continue;
    const std::vector<std::string> want = Split(r.pattern);
    if (want.size() != parts.size()) continue;
    std::map<std::string, std::string> got;
    int literals = 0;
    bool match = true;
    for (size_t i = 0; i < want.size() && match; ++i) {
      if (want[i].size() > 2 && want[i].front() == '{' && want[i].back() == '}') {
        got[want[i].substr(1, want[i].size() - 2)] = parts[i];
      } else {
        match = want[i] == parts[i];
        ++literals;
      }
    }
    if (!match || literals < best) continue;
    if (literals > best) {
      best = literals;
      found = nullptr;
    }
    if (r.method == method) {
      found = &r;
      *params = std::move(got);
    }
  }
  *path_known = best >= 0;
  return found;
}

Response Router::Dispatch(
    const Request& request,
    const std::function<Result<Principal>(std::string_view)>& authenticate) const {
  bool path_known = false;
  std::map<std::string, std::string> params;
  const Route* route = Find(request.method, request.path, &path_known, &params);
  if (route == nullptr) {
    if (path_known) {
      return JsonResponse(
          405, {{"error", {{"code", "method_not_allowed"}, {"message", "method not allowed"}}}});
    }
    return ErrorResponse(NotFound("no such endpoint: " + request.path));
  }
  Principal who{"", Role::kUser};
  if (!route->roles.empty()) {
    auto auth = authenticate(request.authorization);
    if (!auth.ok()) return ErrorResponse(auth.status());
    who = *auth;
    if (!route->roles.count(who.role)) {
      return ErrorResponse(PermissionDenied(std::string("role ") + RoleName(who.role) +
                                            " may not call " + route->method + " " +
                                            route->pattern));
    }
  }
  for (const auto& [name, value] : request.query) {
    const QueryParam* decl = nullptr;
    for (const QueryParam& q : route->query) {
      if (q.name == name) decl = &q;
    }
    if (decl == nullptr) {
      std::vector<std::string> known;
      for (const QueryParam& q : route->query) known.push_back(q.name);
      return ErrorResponse(InvalidArgument(
          name.substr(0, 64) + ": unknown query parameter" +
          (known.empty() ? " (this route takes none)" : " (known: " + Join(known, ", ") + ")")));
    }
    if (Status s = decl->Check(value); !s.ok()) return ErrorResponse(s);
  }
  return route->handler(RouteCall{request, who, std::move(params)});
}

json Router::OpenApiOperations() const {
  json paths = json::object();
  for (const Route& r : routes_) {
    json params = json::array();
    for (const auto& part : Split(r.pattern)) {
      if (part.size() > 2 && part.front() == '{') {
        params.push_back({{"name", part.substr(1, part.size() - 2)},
                          {"in", "path"},
                          {"required", true},
                          {"schema", {{"type", "string"}}}});
      }
    }
    for (const QueryParam& q : r.query) params.push_back(q.OpenApi());
    std::string method = r.method;
    for (char& c : method) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    json op = {{"summary", r.summary},
               {"parameters", params},
               {"x-stoker-roles", r.roles},
               {"x-stoker-scope", r.scope}};
    if (r.roles.empty()) op["security"] = json::array();
    paths[r.pattern][method] = std::move(op);
  }
  return paths;
}

Response JsonResponse(int status, const json& body) {
  return Response{status, body.dump(-1, ' ', false, json::error_handler_t::replace)};
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

Response ErrorResponse(const Status& s) {
  json e{{"code", CodeName(s.code())}, {"message", s.message()}};
  if (s.code() == StatusCode::kInvalidArgument) {
    // Messages are "<field>: <what>"; expose the field for clients.
    const size_t colon = s.message().find(": ");
    if (colon < 128) e["field"] = s.message().substr(0, colon);  // npos is never < 128
  }
  return JsonResponse(HttpStatus(s.code()), {{"error", e}});
}

}  // namespace stoker::http
