#pragma once
// The HTTP/JSON API as a pure function: ApiRequest -> ApiResponse. The HTTP server (http.h)
// only moves bytes; routing, parsing, validation and the Status -> HTTP code mapping live here,
// so tests and the fuzzer call Handle() directly.
//
// Errors: {"error": {"code": "invalid_argument", "message": "gpus: must be in 0..8",
//                    "field": "gpus"}} with 400 (bad input), 401 (no/unknown token),
//          403 (role not allowed), 404, 409 (state conflict), 413 (too large), 503.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "http/server.h"
#include "server/server.h"

namespace stoker::server {

using ApiRequest = http::Request;
using ApiResponse = http::Response;

inline constexpr size_t kMaxRequestBody = 4 << 20;

// Routes served by another module (the efficiency engine) under the same authentication: the
// Api consults its extensions, in order, for /api/v1 paths it does not know, and appends their
// metrics to GET /metrics (any valid token).
class ApiExtension {
 public:
  virtual ~ApiExtension() = default;
  // nullopt: not this extension's path. `who` is the authenticated caller.
  virtual std::optional<ApiResponse> Handle(const ApiRequest& req, const Principal& who) = 0;
  // Asked before a submission reaches the server; a non-OK status refuses it.
  virtual Status CheckSubmit(const Principal& /*who*/, const JobSpec& /*spec*/) {
    return Status::Ok();
  }
  // Prometheus text for GET /metrics.
  virtual std::string Metrics() { return {}; }
  // OpenAPI path items ("/zones": {...}, relative to /api/v1) of the routes Handle serves;
  // merged into the document at /api/v1/openapi.json so clients see one API.
  virtual json OpenApiPaths() const { return json::object(); }
};

class Api final : public http::Handler {
 public:
  explicit Api(Server* server) : server_(server) {}
  ApiResponse Handle(const ApiRequest& req) const override;
  // Not thread-safe: add extensions before serving.
  void AddExtension(ApiExtension* e);

 private:
  Server* server_;
  std::vector<ApiExtension*> extensions_;
  std::string openapi_;  // the OpenAPI document with the extensions' paths; empty: none added
};

// HTTP status for a Status code.
int HttpStatus(StatusCode code);
ApiResponse ErrorResponse(const Status& s);
// The OpenAPI 3 document served at /api/v1/openapi.json.
const std::string& OpenApiDocument();

}  // namespace stoker::server
