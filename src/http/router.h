#pragma once
// The route table of an API: every route declares, in one place, its method and path, the roles
// that may call it, which objects a caller sees (its scope), and its query parameters with
// their bounds. The router enforces the declarations before a handler runs (401 without a
// token, 403 for a role the route does not take, 400 naming a parameter that is unknown or out
// of bounds), the OpenAPI document's parameters are generated from them, and the
// authorization test matrix (tests/server/authorization_matrix_test.cc) walks them, so a route
// cannot be added without its rules being declared and tested.
//
// The domain behind the handlers (server::Server) still checks every rule itself: the table is
// the contract, the domain the authority.

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/enum_table.h"
#include "core/status.h"
#include "http/listener.h"
#include "protocol/model.h"

namespace stoker::http {

using protocol::json;
using protocol::Principal;
using protocol::Role;

// Which objects a caller reaches through a route.
enum class Scope {
  kNone,     // no per-object rule (cluster-wide views, the caller's own identity)
  kOwnJob,   // a job: users reach their own only (others' answer 404); admins every job
  kOwnNode,  // a node: agents reach the node named like their token only (403); admins all
  kOwnTeam,  // a team's ledger or budget: users their own team only (403); admins all
};
// The x-stoker-scope of each operation in the OpenAPI document.
inline constexpr EnumTable<Scope, 4> kScopeNames{"scope",
                                                 {{{Scope::kNone, "none"},
                                                   {Scope::kOwnJob, "own-job"},
                                                   {Scope::kOwnNode, "own-node"},
                                                   {Scope::kOwnTeam, "own-team"}}}};
constexpr const auto& NamesOf(Scope) { return kScopeNames; }
inline const char* ScopeName(Scope s) { return kScopeNames.CName(s); }

// A query parameter and its bounds. Values outside them are refused with a 400 that names the
// parameter, so no request can ask for unbounded work or memory.
struct QueryParam {
  enum class Kind {
    kInt,       // [min, max]
    kString,    // at most max_len bytes
    kEnum,      // one of choices
    kEnumList,  // comma-separated, each one of choices
    kDuration,  // "90s", "15m", "1h", "2d" (core/duration.h grammar); [min_duration, max_duration]
  };
  std::string name;
  Kind kind = Kind::kString;
  std::string description;
  int64_t min = 0, max = 0;
  size_t max_len = 256;
  std::vector<std::string> choices;
  Duration min_duration{}, max_duration{};

  static QueryParam Int(std::string name, int64_t min, int64_t max, std::string description);
  static QueryParam String(std::string name, size_t max_len, std::string description);
  static QueryParam Enum(std::string name, std::vector<std::string> choices,
                         std::string description);
  static QueryParam EnumList(std::string name, std::vector<std::string> choices,
                             std::string description);
  static QueryParam DurationIn(std::string name, Duration min, Duration max,
                               std::string description);
  // InvalidArgument "<name>: <what is wrong>" for a value outside the bounds.
  Status Check(const std::string& value) const;
  json OpenApi() const;  // the OpenAPI parameter object
};

// What a handler gets: the request, the caller, the path's {parameters} and the query
// (already checked against the route's declaration).
struct RouteCall {
  const Request& request;
  const Principal& who;  // role kUser with an empty name on public routes
  std::map<std::string, std::string> path;

  const std::string* Query(const std::string& name) const;
  // The parameter's value, or `fallback` when absent (declared, so well-formed).
  int64_t QueryInt(const std::string& name, int64_t fallback) const;
  std::optional<Duration> QueryDuration(const std::string& name) const;
};

using RouteHandler = std::function<Response(const RouteCall&)>;

struct Route {
  std::string method;    // GET, POST, PUT, DELETE
  std::string pattern;   // below /api/v1 except "/metrics": "/jobs/{id}/logs"
  std::set<Role> roles;  // empty: public, no token needed
  Scope scope = Scope::kNone;
  std::vector<QueryParam> query;
  std::string summary;
  RouteHandler handler;
};

class Router {
 public:
  // Not thread-safe: add every route before serving. A route that repeats a method and path
  // already taken is a programming error (aborts), so two modules cannot shadow each other.
  void Add(Route route);
  // Finds the route, authenticates (`authenticate` is called unless the route is public),
  // checks role and query, and runs the handler. 404 for unknown paths, 405 for a known path
  // without that method.
  Response Dispatch(const Request& request,
                    const std::function<Result<Principal>(std::string_view)>& authenticate) const;
  const std::vector<Route>& routes() const { return routes_; }
  // "parameters", "x-stoker-roles" and "x-stoker-scope" of every operation, keyed like the
  // document's "paths" (relative to /api/v1).
  json OpenApiOperations() const;

 private:
  // The route for the method and path (nullptr: none), with the path parameters; sets
  // *path_known when some route has that path.
  const Route* Find(const std::string& method, const std::string& path, bool* path_known,
                    std::map<std::string, std::string>* params) const;

  std::vector<Route> routes_;
};

// The JSON response every route returns.
Response JsonResponse(int status, const json& body);
// HTTP status for a Status code, and the error body for a Status.
int HttpStatus(StatusCode code);
Response ErrorResponse(const Status& s);

}  // namespace stoker::http
