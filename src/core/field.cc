#include "core/field.h"

namespace stoker {

const char* FieldStateName(FieldState s) {
  switch (s) {
    case FieldState::kUnset:
      return "unset";
    case FieldState::kValue:
      return "value";
    case FieldState::kUnsupported:
      return "unsupported";
    case FieldState::kError:
      return "error";
  }
  return "unknown";
}

}  // namespace stoker
