#pragma once
// The one integer grammar of text fields: URL ids, ports, counts inside Slurm's strings, trace
// columns, flags. Decimal digits with an optional leading '-' (only where `min` is negative),
// nothing else: no '+', no spaces, no 0x, no fraction. The value must lie in [min, max].
// Errors say what is wrong with the text, for the caller to put behind what and where:
//   "'' is empty", "'12x' is not an integer", "'-4' is negative", "'70000' is out of range
//   0..65535".

#include <cstdint>
#include <limits>
#include <string_view>

#include "core/status.h"

namespace stoker {

Result<int64_t> ParseInt(std::string_view text, int64_t min = std::numeric_limits<int64_t>::min(),
                         int64_t max = std::numeric_limits<int64_t>::max());
// The same for the unsigned range (seeds, counters): "-1" is negative, never wrapped.
Result<uint64_t> ParseUint(std::string_view text,
                           uint64_t max = std::numeric_limits<uint64_t>::max());

}  // namespace stoker
