#pragma once
// A measured value with an explicit state. Telemetry never uses 0 as a stand-in for "unknown":
// a field is either a value, unsupported by this GPU/driver, or an error (with the source's code).

#include <cstdint>
#include <optional>

#include "core/enum_table.h"

namespace stoker {

enum class FieldState : uint8_t {
  kUnset = 0,    // not collected (yet): e.g. first GPM sample, or collection skipped
  kValue,        // a real reading
  kUnsupported,  // the device or driver says it cannot provide this
  kError,        // the read failed; error_code() holds the source's code (an nvmlReturn_t)
};

template <typename T>
class Field {
 public:
  constexpr Field() = default;
  static constexpr Field Of(T v) { return Field(FieldState::kValue, v, 0); }
  static constexpr Field Unsupported() { return Field(FieldState::kUnsupported, T{}, 0); }
  static constexpr Field Error(int32_t code) { return Field(FieldState::kError, T{}, code); }

  constexpr FieldState state() const { return state_; }
  constexpr bool has_value() const { return state_ == FieldState::kValue; }
  // REQUIRES: has_value(). Callers that print or export must check the state first.
  constexpr const T& value() const { return value_; }
  constexpr T value_or(T fallback) const { return has_value() ? value_ : fallback; }
  constexpr std::optional<T> optional() const {
    return has_value() ? std::optional<T>(value_) : std::nullopt;
  }
  constexpr int32_t error_code() const { return error_code_; }

  friend constexpr bool operator==(const Field& a, const Field& b) {
    return a.state_ == b.state_ && (a.state_ != FieldState::kValue || a.value_ == b.value_) &&
           a.error_code_ == b.error_code_;
  }

 private:
  constexpr Field(FieldState s, T v, int32_t code) : state_(s), error_code_(code), value_(v) {}
  FieldState state_ = FieldState::kUnset;
  int32_t error_code_ = 0;
  T value_{};
};

inline constexpr EnumTable<FieldState, 4> kFieldStateNames{
    "field state",
    {{{FieldState::kUnset, "unset"},
      {FieldState::kValue, "value"},
      {FieldState::kUnsupported, "unsupported"},
      {FieldState::kError, "error"}}}};
constexpr const auto& NamesOf(FieldState) { return kFieldStateNames; }
inline const char* FieldStateName(FieldState v) { return kFieldStateNames.CName(v); }

}  // namespace stoker
