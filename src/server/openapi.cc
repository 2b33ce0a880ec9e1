// The OpenAPI 3 description of /api/v1, built once from a compact table so the served document
// and the routes in api.cc are reviewed side by side.

#include "server/api.h"

namespace stoker::server {
namespace {

json Ref(const std::string& name) { return {{"$ref", "#/components/schemas/" + name}}; }

json Op(const std::string& summary, const std::string& tag, const json& ok_schema,
        const std::optional<json>& body = std::nullopt, int ok = 200, bool auth = true) {
  json op{{"summary", summary}, {"tags", {tag}}};
  op["responses"][std::to_string(ok)] = {
      {"description", "success"}, {"content", {{"application/json", {{"schema", ok_schema}}}}}};
  for (const auto& [code, what] : std::vector<std::pair<std::string, std::string>>{
           {"400", "validation error naming the field"}, {"401", "missing or unknown token"},
           {"403", "role not allowed"}, {"404", "not found"}, {"409", "state conflict"}}) {
    op["responses"][code] = {{"description", what},
                             {"content", {{"application/json", {{"schema", Ref("Error")}}}}}};
  }
  if (body) op["requestBody"] = {{"required", true}, {"content", {{"application/json", {{"schema", *body}}}}}};
  if (!auth) op["security"] = json::array();
  return op;
}

json IdParam() {
  return {{"name", "id"}, {"in", "path"}, {"required", true}, {"schema", {{"type", "integer"}}}};
}
json NameParam() {
  return {{"name", "name"}, {"in", "path"}, {"required", true}, {"schema", {{"type", "string"}}}};
}

json Build() {
  json d;
  d["openapi"] = "3.0.3";
  d["info"] = {{"title", "Stoker API"}, {"version", "1"},
               {"description", "Jobs, nodes and scheduling of a Stoker GPU cluster."}};
  d["servers"] = {{{"url", "/api/v1"}}};
  d["components"]["securitySchemes"]["bearer"] = {{"type", "http"}, {"scheme", "bearer"}};
  d["security"] = {{{"bearer", json::array()}}};
  auto& s = d["components"]["schemas"];
  s["Error"] = {{"type", "object"},
                {"properties",
                 {{"error",
                   {{"type", "object"},
                    {"properties",
                     {{"code", {{"type", "string"}}},
                      {"message", {{"type", "string"}}},
                      {"field", {{"type", "string"}}}}}}}}}};
  s["JobSpec"] = {
      {"type", "object"},
      {"required", {"command"}},
      {"additionalProperties", false},
      {"properties",
       {{"name", {{"type", "string"}, {"maxLength", 128}}},
        {"command", {{"type", "array"}, {"items", {{"type", "string"}}}, {"minItems", 1}}},
        {"env", {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}},
        {"workdir", {{"type", "string"}, {"description", "absolute path"}}},
        {"gpus", {{"type", "integer"}, {"minimum", 0}, {"maximum", 8}, {"description", "whole GPUs (elastic maximum)"}}},
        {"min_gpus", {{"type", "integer"}, {"minimum", 0}, {"maximum", 8}, {"description", "elastic minimum"}}},
        {"gpu_milli", {{"type", "integer"}, {"minimum", 0}, {"maximum", 999}, {"description", "share of one GPU"}}},
        {"gpu_memory_mib", {{"type", "integer"}, {"minimum", 0}}},
        {"gpu_models", {{"type", "array"}, {"items", {{"type", "string"}}}}},
        {"mig", {{"type", "string"}, {"example", "1g.10gb"}}},
        {"cpu_milli", {{"type", "integer"}, {"minimum", 1}, {"default", 1000}}},
        {"memory_mib", {{"type", "integer"}, {"minimum", 0}, {"default", 512}}},
        {"class", {{"type", "string"}}},
        {"priority", {{"type", "integer"}, {"minimum", -1000}, {"maximum", 1000}}},
        {"preemptible", {{"type", "boolean"}}},
        {"on_node_loss", {{"type", "string"}, {"enum", {"requeue", "fail"}}}},
        {"user", {{"type", "string"}, {"description", "admins only: submit for this user"}}}}}};
  s["Job"] = {{"type", "object"},
              {"properties",
               {{"id", {{"type", "integer"}}},
                {"user", {{"type", "string"}}},
                {"name", {{"type", "string"}}},
                {"state", {{"type", "string"},
                           {"enum", {"queued", "assigned", "running", "cancelling", "succeeded", "failed", "cancelled"}}}},
                {"spec", Ref("JobSpec")},
                {"assignment", {{"type", "object"}}},
                {"exit_code", {{"type", "integer"}}},
                {"signal", {{"type", "integer"}}},
                {"reason", {{"type", "string"}}},
                {"submit_ms", {{"type", "integer"}}},
                {"start_ms", {{"type", "integer"}}},
                {"end_ms", {{"type", "integer"}}},
                {"requeues", {{"type", "integer"}}}}}};
  s["Node"] = {{"type", "object"},
               {"properties",
                {{"name", {{"type", "string"}}},
                 {"simulated", {{"type", "boolean"}}},
                 {"source", {{"type", "string"}}},
                 {"state", {{"type", "string"}, {"enum", {"ready", "drained", "lost"}}}},
                 {"cpu_milli", {{"type", "integer"}}},
                 {"memory_mib", {{"type", "integer"}}},
                 {"gpus", {{"type", "array"}, {"items", {{"type", "object"}}}}},
                 {"samples", {{"type", "array"}, {"items", {{"type", "object"}}}}}}}};
  s["Heartbeat"] = {{"type", "object"},
                    {"properties",
                     {{"jobs", {{"type", "array"}, {"items", {{"type", "object"}}}}},
                      {"samples", {{"type", "array"}, {"items", {{"type", "object"}}}}}}}};
  s["HeartbeatReply"] = {{"type", "object"},
                         {"properties",
                          {{"start", {{"type", "array"}, {"items", {{"type", "object"}}}}},
                           {"cancel", {{"type", "array"}, {"items", {{"type", "integer"}}}}},
                           {"forget", {{"type", "array"}, {"items", {{"type", "integer"}}}}},
                           {"log_offsets", {{"type", "object"}}}}}};
  const json arr_job = {{"type", "array"}, {"items", Ref("Job")}};
  const json arr_node = {{"type", "array"}, {"items", Ref("Node")}};
  const json obj = {{"type", "object"}};
  const json arr = {{"type", "array"}, {"items", obj}};
  auto& paths = d["paths"];
  paths["/health"]["get"] = Op("Liveness", "meta", obj, std::nullopt, 200, false);
  paths["/openapi.json"]["get"] = Op("This document", "meta", obj, std::nullopt, 200, false);
  paths["/whoami"]["get"] = Op("The caller's name and role", "meta", obj);
  paths["/jobs"]["post"] = Op("Submit a job", "jobs", Ref("Job"), Ref("JobSpec"), 201);
  paths["/jobs"]["get"] = Op("List jobs (users see their own)", "jobs", arr_job);
  paths["/jobs"]["get"]["parameters"] = {
      {{"name", "state"}, {"in", "query"}, {"schema", {{"type", "string"}}}, {"description", "comma-separated states"}},
      {{"name", "user"}, {"in", "query"}, {"schema", {{"type", "string"}}}},
      {{"name", "node"}, {"in", "query"}, {"schema", {{"type", "string"}}}},
      {{"name", "limit"}, {"in", "query"}, {"schema", {{"type", "integer"}}}}};
  paths["/jobs/{id}"]["get"] = Op("Get a job", "jobs", Ref("Job"));
  paths["/jobs/{id}"]["parameters"] = {IdParam()};
  paths["/jobs/{id}/cancel"]["post"] = Op("Cancel a job (TERM, grace, KILL)", "jobs", Ref("Job"));
  paths["/jobs/{id}/cancel"]["parameters"] = {IdParam()};
  paths["/jobs/{id}/logs"]["get"] = Op("Read a job's output from an offset", "jobs", obj);
  paths["/jobs/{id}/logs"]["parameters"] = {
      IdParam(),
      {{"name", "stream"}, {"in", "query"}, {"schema", {{"type", "string"}, {"enum", {"stdout", "stderr"}}}}},
      {{"name", "offset"}, {"in", "query"}, {"schema", {{"type", "integer"}}}}};
  paths["/jobs/{id}/events"]["get"] = Op("A job's history", "jobs", arr);
  paths["/jobs/{id}/events"]["parameters"] = {IdParam()};
  paths["/nodes"]["get"] = Op("List nodes", "nodes", arr_node);
  paths["/nodes/register"]["post"] = Op("Register a node (agent of that node, admin)", "nodes", Ref("Node"), Ref("Node"));
  paths["/nodes/{name}"]["get"] = Op("Get a node with its latest GPU samples", "nodes", Ref("Node"));
  paths["/nodes/{name}"]["parameters"] = {NameParam()};
  paths["/nodes/{name}/heartbeat"]["post"] =
      Op("Report samples and job states; receive jobs to start/cancel", "nodes", Ref("HeartbeatReply"), Ref("Heartbeat"));
  paths["/nodes/{name}/heartbeat"]["parameters"] = {NameParam()};
  paths["/nodes/{name}/drain"]["post"] = Op("Stop placing jobs on a node (admin)", "nodes", Ref("Node"));
  paths["/nodes/{name}/drain"]["parameters"] = {NameParam()};
  paths["/nodes/{name}/undrain"]["post"] = Op("Resume placing jobs on a node (admin)", "nodes", Ref("Node"));
  paths["/nodes/{name}/undrain"]["parameters"] = {NameParam()};
  paths["/allocations"]["get"] = Op("Resources held by active jobs", "scheduling", arr);
  paths["/queue"]["get"] = Op("Queued jobs in policy order, with the reason they wait", "scheduling", arr);
  paths["/policy"]["get"] = Op("Scheduling policy", "scheduling", obj);
  paths["/policy"]["put"] = Op("Change the scheduling policy (admin)", "scheduling", obj, obj);
  paths["/tokens"]["post"] = Op("Create a token (admin); returned once", "auth", obj,
                                json{{"type", "object"},
                                     {"required", {"role", "name"}},
                                     {"properties", {{"role", {{"type", "string"}, {"enum", {"admin", "agent", "user"}}}},
                                                     {"name", {{"type", "string"}}}}}},
                                201);
  return d;
}

}  // namespace

const std::string& OpenApiDocument() {
  static const std::string doc = Build().dump(2);
  return doc;
}

}  // namespace stoker::server
