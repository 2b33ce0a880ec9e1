#include "doc/document.h"

namespace stoker::doc {

Value::Value(Kind kind, std::string text, Mark mark, bool plain)
    : kind_(kind), plain_(plain), mark_(mark), text_(std::move(text)) {}

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
