#pragma once
// Kubernetes resource quantities ("500", "2", "80Gi", "1.5G", "250m", "1e3") read into integers,
// as the API server's resource.Quantity means them: a decimal number (sign, digits, optional
// fraction) and one suffix, either binary (Ki Mi Gi Ti Pi Ei), decimal (n u m "" k M G T P E) or
// a decimal exponent (e3, E-2). Results are rounded up, as Quantity.Value() and MilliValue()
// round.
//
// Bad input (empty, two suffixes, a fraction with a binary suffix that is not a whole number of
// bytes is still accepted and rounded up, values past int64) is an InvalidArgument naming what
// is wrong; nothing here throws.

#include <cstdint>
#include <string_view>

#include "core/status.h"

namespace stoker::k8s {

// The quantity's value in units (Value()): "2" -> 2, "80Gi" -> 85899345920, "250m" -> 1.
Result<int64_t> QuantityValue(std::string_view text);
// The quantity's value in thousandths (MilliValue()): "2" -> 2000, "250m" -> 250.
Result<int64_t> QuantityMilliValue(std::string_view text);

}  // namespace stoker::k8s
