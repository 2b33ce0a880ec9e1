#include "doc/document.h"

namespace stoker::doc {

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kNull:
      return "null";
    case Kind::kBool:
      return "true or false";
    case Kind::kNumber:
      return "a number";
    case Kind::kString:
      return "a string";
    case Kind::kList:
      return "a list";
    case Kind::kMap:
      return "a mapping";
  }
  return "?";
}

const Value* Value::Find(std::string_view key) const {
  for (auto it = members_.rbegin(); it != members_.rend(); ++it) {
    if (it->key == key) return &it->value;
  }
  return nullptr;
}

}  // namespace stoker::doc
