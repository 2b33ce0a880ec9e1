#pragma once
// The one size grammar of flags and files: a bare number is MiB ("4096"), or a number with a
// binary unit M, G or T (also Mi/Gi/Ti, MiB/GiB/TiB; case-insensitive): "512M", "16G", "1.5Gi".
// Never negative, at most 1 EiB. Errors name the text and what is wrong: "size '16X': ...".

#include <cstdint>
#include <string_view>

#include "core/status.h"

namespace stoker {

inline constexpr int64_t kMaxSizeMib = int64_t{1} << 40;  // 1 EiB

Result<int64_t> ParseSizeMib(std::string_view text);

}  // namespace stoker
