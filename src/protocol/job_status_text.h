#pragma once
// A job's status document as text without building a JSON tree: what the store writes for every
// change of a job (a scheduling pass writes tens of thousands at once).

#include <string>

#include "protocol/model.h"

namespace stoker::protocol {

// Byte for byte JobStatusToJson(j).dump(): the same keys in the same (sorted) order, the same
// numbers and the same string escapes (a string that needs escaping is written by the JSON
// library itself, which also refuses invalid UTF-8 as dump() does, by throwing).
std::string JobStatusText(const Job& j);

}  // namespace stoker::protocol
