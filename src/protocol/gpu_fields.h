#pragma once
// One table of the scalar fields of a GpuSample, shared by the Prometheus renderer, the sample
// codec (protocol/samples.h: the agent's snapshot and heartbeat JSON, read back by the server)
// and the sampler's per-field error counters, so a field is named, scaled and state-checked in
// exactly one place.

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "core/field.h"
#include "core/gpu.h"

namespace stoker::protocol {

// A field read generically: its state and, when it has a value, the raw reading.
struct FieldView {
  enum class Kind : uint8_t { kUint, kDouble, kBool };
  FieldState state = FieldState::kUnset;
  Kind kind = Kind::kUint;
  uint64_t u = 0;  // kUint / kBool (0 or 1)
  double d = 0;    // kDouble
  int32_t error_code = 0;
  double AsDouble() const { return kind == Kind::kDouble ? d : static_cast<double>(u); }
};

template <typename T>
FieldView ViewOf(const Field<T>& f) {
  FieldView v;
  v.state = f.state();
  v.error_code = f.error_code();
  if constexpr (std::is_same_v<T, double>) {
    v.kind = FieldView::Kind::kDouble;
    if (f.has_value()) v.d = f.value();
  } else if constexpr (std::is_same_v<T, bool>) {
    v.kind = FieldView::Kind::kBool;
    if (f.has_value()) v.u = f.value() ? 1 : 0;
  } else {
    if (f.has_value()) v.u = static_cast<uint64_t>(f.value());
  }
  return v;
}

// What a field of type T takes as its value, as an error message says it.
template <typename T>
const std::string& ValueRule() {
  static const std::string rule = [] {
    if constexpr (std::is_same_v<T, double>) {
      return std::string("must be a number");
    } else if constexpr (std::is_same_v<T, bool>) {
      return std::string("must be true or false");
    } else {
      return "must be an integer in 0.." + std::to_string(std::numeric_limits<T>::max());
    }
  }();
  return rule;
}

// The inverse of ViewOf: a field of type T from a view. A value that does not fit T is refused
// (the returned rule, ValueRule<T>(); empty when assigned), never wrapped, rounded or dropped:
// an integer field takes a whole number in its range (one written as 250000.0 or 2.5e5 is that
// integer: JSON has one number type), a number field any number, a boolean field true or false
// (or 0 or 1). States other than "value" carry no value and always fit.
template <typename T>
std::string_view AssignFrom(const FieldView& v, Field<T>* out) {
  switch (v.state) {
    case FieldState::kValue:
      break;
    case FieldState::kUnsupported:
      *out = Field<T>::Unsupported();
      return {};
    case FieldState::kError:
      *out = Field<T>::Error(v.error_code);
      return {};
    default:
      *out = Field<T>{};
      return {};
  }
  if constexpr (std::is_same_v<T, double>) {
    if (v.kind == FieldView::Kind::kBool) return ValueRule<T>();
    *out = Field<T>::Of(v.AsDouble());
  } else if constexpr (std::is_same_v<T, bool>) {
    if (v.kind == FieldView::Kind::kDouble || v.u > 1) return ValueRule<T>();
    *out = Field<T>::Of(v.u != 0);
  } else {
    uint64_t u = v.u;
    if (v.kind == FieldView::Kind::kBool) return ValueRule<T>();
    if (v.kind == FieldView::Kind::kDouble) {
      // Whole, not negative, and below 2^digits (so the conversion is exact).
      if (!(v.d >= 0 && v.d < std::ldexp(1.0, std::numeric_limits<T>::digits) &&
            v.d == std::floor(v.d))) {
        return ValueRule<T>();
      }
      u = static_cast<uint64_t>(v.d);
    }
    if (u > std::numeric_limits<T>::max()) return ValueRule<T>();
    *out = Field<T>::Of(static_cast<T>(u));
  }
  return {};
}

struct ScalarFieldDef {
  std::string_view key;     // JSON key, raw units as in GpuSample ("power_mw")
  std::string_view metric;  // Prometheus family in base units ("stoker_gpu_power_watts")
  std::string_view help;
  bool counter;  // exported as a counter (metric ends in _total)
  double scale;  // metric value = raw * scale
  FieldView (*get)(const GpuSample&);
  // Assigns the view; a value that does not fit the field leaves it unset and returns what the
  // field takes (empty when assigned).
  std::string_view (*set)(GpuSample&, const FieldView&);
};

// All scalar fields, in export order. Indices are stable within a build (used for counters).
std::span<const ScalarFieldDef> GpuScalarFields();
inline constexpr size_t kMaxScalarFields = 40;

}  // namespace stoker::protocol
