#include "core/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>

namespace stoker {

bool AdviseHugePages(const void* data, size_t bytes) {
  if (data == nullptr || bytes < kHugePageBytes) return false;
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + kHugePageBytes - 1) & ~(uintptr_t{kHugePageBytes} - 1);
  const uintptr_t end = (begin + bytes) & ~(uintptr_t{kHugePageBytes} - 1);
  if (end <= first) return false;
  // NOLINTNEXTLINE(performance-no-int-to-ptr): the pages of our own buffer, by address
  return madvise(reinterpret_cast<void*>(first), end - first, MADV_HUGEPAGE) == 0;
}

}  // namespace stoker
