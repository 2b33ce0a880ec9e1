#pragma once
// The protocol's typed readers of one JSON object's fields (inside the protocol only): each
// names the field in its error ("<field>: <what is wrong>"), keeps the default when the field
// is absent or null, and checks the type and the bounds the caller gives.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"

namespace stoker::protocol::fields {

using json = nlohmann::json;

// InvalidArgument "<field>: <what>".
Status FieldError(const std::string& field, const std::string& what);

Status GetString(const json& o, const char* key, std::string* out, size_t max_len = 4096);

template <typename T>
Status GetInt(const json& o, const char* key, T* out, int64_t lo, int64_t hi) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return Status::Ok();
  if (!it->is_number_integer()) return FieldError(key, "must be an integer");
  // Compare as int64 after checking the unsigned range, so huge values do not wrap.
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return FieldError(key, "must be in " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) {
    return FieldError(key, "must be in " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  *out = static_cast<T>(v);
  return Status::Ok();
}

Status GetBool(const json& o, const char* key, bool* out);

Status GetStringList(const json& o, const char* key, std::vector<std::string>* out,
                     size_t max_items, size_t max_len);

// InvalidArgument "<what>: body must be a JSON object" unless `body` is an object.
Status CheckObject(const json& body, const char* what);
// "<key>: unknown field" for the first key of `body` not in `known`.
Status CheckKnownFields(const json& body, const std::set<std::string>& known);

template <typename T>
void PutOptional(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

}  // namespace stoker::protocol::fields
