#pragma once
// What the efficiency configuration's reader shares with the engines that reuse its rules (the
// Slurm engine's idle reclaim): the idle-reclaim section read through the document reader
// (doc/reader.h, errors "file:line:column: path: what"), and the bound on a configuration file.

#include <initializer_list>
#include <string_view>

#include "core/status.h"
#include "doc/reader.h"
#include "efficiency/config.h"

namespace stoker::efficiency {

// A configuration file is at most this large (doc::ReadText says so naming the file).
inline constexpr size_t kMaxConfigBytes = size_t{1} << 20;

// An idle-reclaim policy (the keys of the efficiency configuration's idle_reclaim section, and
// `extra_keys`, which the caller reads itself) over the values already in `p`.
Status LoadIdleReclaim(const doc::Reader& n, IdleReclaimPolicy& p,
                       std::initializer_list<std::string_view> extra_keys = {});

}  // namespace stoker::efficiency
