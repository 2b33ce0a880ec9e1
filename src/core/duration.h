#pragma once
// The one duration grammar of every configuration file, flag and query parameter:
//   a bare number is seconds ("90", "0.25"), or one or more number+unit pairs without spaces
//   ("500ms", "1h30m", "2d"), units us, ms, s, m, h, d, w; never negative, at most 100 years.
// Errors name the text and what is wrong: "duration '5 parsecs': ...".

#include <string>
#include <string_view>

#include "core/clock.h"
#include "core/status.h"

namespace stoker {

Result<Duration> ParseDuration(std::string_view text);
// "1h30m", "45s", "0s": whole seconds, the largest units first (sub-second parts are dropped).
std::string FormatDuration(Duration d);

}  // namespace stoker
