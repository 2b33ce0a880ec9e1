#pragma once
// The static part of the OpenAPI document (server/openapi.json, embedded at build time) as the
// server reads it: its `$name` bounds and enum lists filled from the constants the parsers check.
// OpenApiDocument() (server/api.h) serves it.

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace stoker::server {

// The embedded document with every `$name` filled, or the error of a document that does not
// read or names an unknown constant (the OpenAPI test asserts there is none).
Result<nlohmann::json> LoadOpenApiDocument();
// The constants the document may name: every protocol limit (protocol/limits.h) by its name
// there, and the enum lists (job states, part phases, node states, roles, on_node_loss, run
// phases).
const std::map<std::string, nlohmann::json>& OpenApiConstants();

}  // namespace stoker::server
