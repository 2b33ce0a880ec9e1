#pragma once
// One table of the scalar fields of a GpuSample, shared by the Prometheus renderer, the sample
// codec (protocol/samples.h: the agent's snapshot and heartbeat JSON, read back by the server)
// and the sampler's per-field error counters, so a field is named, scaled and state-checked in
// exactly one place.

#include <cstdint>
#include <limits>
#include <span>
#include <string_view>

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

// The inverse of ViewOf: a field of type T from a view (the view's kind need not match: a
// reading that does not fit T is "unset", never a wrapped number).
template <typename T>
void AssignFrom(const FieldView& v, Field<T>* out) {
  switch (v.state) {
    case FieldState::kValue:
      break;
    case FieldState::kUnsupported:
      *out = Field<T>::Unsupported();
      return;
    case FieldState::kError:
      *out = Field<T>::Error(v.error_code);
      return;
    default:
      *out = Field<T>{};
      return;
  }
  if constexpr (std::is_same_v<T, double>) {
    *out = Field<T>::Of(v.AsDouble());
  } else if constexpr (std::is_same_v<T, bool>) {
    *out = Field<T>::Of(v.u != 0);
  } else {
    if (v.kind == FieldView::Kind::kDouble || v.u > std::numeric_limits<T>::max()) {
      *out = Field<T>{};
      return;
    }
    *out = Field<T>::Of(static_cast<T>(v.u));
  }
}

struct ScalarFieldDef {
  std::string_view key;     // JSON key, raw units as in GpuSample ("power_mw")
  std::string_view metric;  // Prometheus family in base units ("stoker_gpu_power_watts")
  std::string_view help;
  bool counter;  // exported as a counter (metric ends in _total)
  double scale;  // metric value = raw * scale
  FieldView (*get)(const GpuSample&);
  void (*set)(GpuSample&, const FieldView&);
};

// All scalar fields, in export order. Indices are stable within a build (used for counters).
std::span<const ScalarFieldDef> GpuScalarFields();
inline constexpr size_t kMaxScalarFields = 40;

}  // namespace stoker::protocol
