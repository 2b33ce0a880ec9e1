#include "core/field.h"

namespace stoker {}  // namespace stoker
