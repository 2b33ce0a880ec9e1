#include "protocol/json_fields.h"

namespace stoker::protocol::fields {

Status FieldError(const std::string& field, const std::string& what) {
  return InvalidArgument(field + ": " + what);
}

Status GetString(const json& o, const char* key, std::string* out, size_t max_len) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) return FieldError(key, "must be a string");
  const auto& s = it->get_ref<const std::string&>();
  if (s.size() > max_len)
    return FieldError(key, "longer than " + std::to_string(max_len) + " bytes");
  *out = s;
  return Status::Ok();
}

Status GetBool(const json& o, const char* key, bool* out) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return Status::Ok();
  if (!it->is_boolean()) return FieldError(key, "must be true or false");
  *out = it->get<bool>();
  return Status::Ok();
}

Status GetStringList(const json& o, const char* key, std::vector<std::string>* out,
                     size_t max_items, size_t max_len) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return Status::Ok();
  if (!it->is_array()) return FieldError(key, "must be an array of strings");
  if (it->size() > max_items)
    return FieldError(key, "more than " + std::to_string(max_items) + " items");
  out->clear();
  for (size_t i = 0; i < it->size(); ++i) {
    const auto& v = (*it)[i];
    const std::string f = std::string(key) + "[" + std::to_string(i) + "]";
    if (!v.is_string()) return FieldError(f, "must be a string");
    if (v.get_ref<const std::string&>().size() > max_len) return FieldError(f, "too long");
    out->push_back(v.get<std::string>());
  }
  return Status::Ok();
}

Status CheckObject(const json& body, const char* what) {
  if (!body.is_object()) return InvalidArgument(std::string(what) + ": body must be a JSON object");
  return Status::Ok();
}

Status CheckKnownFields(const json& body, const std::set<std::string>& known) {
  for (const auto& [k, v] : body.items()) {
    if (!known.count(k)) return FieldError(k, "unknown field");
  }
  return Status::Ok();
}

}  // namespace stoker::protocol::fields
