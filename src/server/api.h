#pragma once
// The HTTP/JSON API as a pure function: ApiRequest -> ApiResponse. The HTTP server (http.h)
// only moves bytes; routing, parsing, validation and the Status -> HTTP code mapping live here,
// so tests and the fuzzer call Handle() directly.
//
// Routes, with their roles and bounded parameters, are declared in one table (router.h).
//
// Errors: {"error": {"code": "invalid_argument", "message": "gpus: must be in 0..8",
//                    "field": "gpus"}} with 400 (bad input), 401 (no/unknown token),
//          403 (role not allowed), 404, 409 (state conflict), 413 (too large), 503.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "http/listener.h"
#include "http/router.h"
#include "server/server.h"

namespace stoker::server {

using ApiRequest = http::Request;
using ApiResponse = http::Response;
using http::ErrorResponse;
using http::JsonResponse;

inline constexpr size_t kMaxRequestBody = 4 << 20;
// The most jobs one GET /jobs answers (page further with before_id).
inline constexpr int64_t kMaxJobsPerListing = 10000;

// Routes served by another module (the efficiency engine) under the same authentication and
// route table: an extension adds its routes (with their roles and parameters) to the Api's
// router, documents them, may refuse submissions, and adds to GET /metrics.
class ApiExtension {
 public:
  virtual ~ApiExtension() = default;
  virtual void AddRoutes(http::Router* router) = 0;
  // Asked before a submission reaches the server; a non-OK status refuses it.
  virtual Status CheckSubmit(const Principal& /*who*/, const JobSpec& /*spec*/) {
    return Status::Ok();
  }
  // Prometheus text for GET /metrics, as `who` may see it.
  virtual std::string Metrics(const Principal& /*who*/) { return {}; }
  // OpenAPI path items ("/zones": {...}, relative to /api/v1) of its routes: request and
  // response schemas (parameters and roles come from the route table).
  virtual json OpenApiPaths() const { return json::object(); }
};

class Api final : public http::Handler {
 public:
  explicit Api(Server* server);
  ApiResponse Handle(const ApiRequest& req) const override;
  // Not thread-safe: add extensions before serving.
  void AddExtension(ApiExtension* e);
  const http::Router& router() const { return router_; }

 private:
  void AddCoreRoutes();
  void RebuildDocument();

  Server* server_;
  http::Router router_;
  std::vector<ApiExtension*> extensions_;
  std::string openapi_;  // the served document: static schemas + the route table's operations
};

// GET /metrics of the server itself (Server::Metrics as Prometheus text).
std::string ServerMetricsText(const ServerMetrics& m);

// The static part of the OpenAPI 3 document (schemas, bodies, responses) of the core routes.
const std::string& OpenApiDocument();

}  // namespace stoker::server
