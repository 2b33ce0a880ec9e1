#include "core/gpu_shapes.h"

#include <string>

namespace stoker {

Result<MigProfile> ParseMigProfile(std::string_view text) {
  std::string_view head = text.substr(0, text.find('.'));
  if (head == "1g") return MigProfile::k1g;
  if (head == "2g") return MigProfile::k2g;
  if (head == "3g") return MigProfile::k3g;
  if (head == "4g") return MigProfile::k4g;
  if (head == "7g") return MigProfile::k7g;
  return InvalidArgument("unknown MIG profile '" + std::string(text) +
                         "' (expected 1g, 2g, 3g, 4g or 7g, optionally with .<mem>gb)");
}

}  // namespace stoker
