#include "core/gpu.h"

namespace stoker {}  // namespace stoker
