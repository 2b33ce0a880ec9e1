#include "core/huge_pages.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace stoker {
namespace {

// The mappings of this process that lie inside [begin, end), from /proc/self/smaps: each one's
// range and whether it carries the kernel's huge-page advice ("hg" among its VmFlags).
struct Mapping {
  uintptr_t begin = 0, end = 0;
  bool advised = false;
};
std::vector<Mapping> MappingsIn(uintptr_t begin, uintptr_t end) {
  std::vector<Mapping> found;
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  Mapping* current = nullptr;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' &&
        line.find(':') > line.find(' ')) {  // a mapping's first line: "lo-hi perms ..."
      current = nullptr;
      if (lo >= begin && hi <= end) current = &found.emplace_back(Mapping{lo, hi, false});
      continue;
    }
    if (current != nullptr && line.rfind("VmFlags:", 0) == 0) {
      current->advised = (line + " ").find(" hg ") != std::string::npos;
    }
  }
  return found;
}

class HugePages : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled")) {
      GTEST_SKIP() << "this kernel has no transparent huge pages";
    }
    base_ = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(base_, MAP_FAILED);
  }
  void TearDown() override {
    if (base_ != nullptr && base_ != MAP_FAILED) munmap(base_, kBytes);
  }
  // The first 2 MiB boundary in the mapping.
  unsigned char* Aligned() const {
    const auto at = reinterpret_cast<uintptr_t>(base_);
    return static_cast<unsigned char*>(base_) +
           (kHugePageBytes - at % kHugePageBytes) % kHugePageBytes;
  }
  static constexpr size_t kBytes = size_t{16} << 20;
  void* base_ = nullptr;
};

TEST_F(HugePages, AdvisesTheWholeHugePagesInsideTheBufferAndNothingElse) {
  const auto base = reinterpret_cast<uintptr_t>(base_);
  // A buffer that starts and ends off the 2 MiB grid, as a vector's storage does.
  unsigned char* data = Aligned() + 12345;
  const size_t bytes = 5 * kHugePageBytes + 777;
  const auto begin = reinterpret_cast<uintptr_t>(data);
  // Half of it written already (a buffer reused), half not.
  for (size_t i = 0; i < bytes / 2; ++i) data[i] = static_cast<unsigned char>(i * 31 + 7);

  ASSERT_TRUE(AdviseHugePages(data, bytes));

  const uintptr_t first = (begin + kHugePageBytes - 1) & ~(uintptr_t{kHugePageBytes} - 1);
  const uintptr_t last = (begin + bytes) & ~(uintptr_t{kHugePageBytes} - 1);
  ASSERT_EQ(last - first, 4 * kHugePageBytes);
  std::vector<Mapping> advised;
  for (const Mapping& m : MappingsIn(base, base + kBytes)) {
    if (m.advised) advised.push_back(m);
  }
  ASSERT_EQ(advised.size(), 1u) << "one advised range";
  EXPECT_EQ(advised[0].begin, first);
  EXPECT_EQ(advised[0].end, last);

  // Not a byte changed, and the rest is as writable as before.
  for (size_t i = 0; i < bytes / 2; ++i) {
    ASSERT_EQ(data[i], static_cast<unsigned char>(i * 31 + 7)) << "byte " << i;
  }
  for (size_t i = bytes / 2; i < bytes; ++i) ASSERT_EQ(data[i], 0) << "byte " << i;
  data[bytes - 1] = 1;
  EXPECT_EQ(data[bytes - 1], 1);
}

TEST_F(HugePages, LeavesABufferWithoutAWholeHugePageAlone) {
  const auto base = reinterpret_cast<uintptr_t>(base_);
  // Under 2 MiB; and over 2 MiB but crossing the grid only once (no whole page inside).
  EXPECT_FALSE(AdviseHugePages(Aligned(), kHugePageBytes - 1));
  EXPECT_FALSE(AdviseHugePages(Aligned() + 4096, kHugePageBytes + 8192));
  EXPECT_FALSE(AdviseHugePages(nullptr, kBytes));
  for (const Mapping& m : MappingsIn(base, base + kBytes)) {
    EXPECT_FALSE(m.advised) << std::hex << m.begin << "-" << m.end;
  }
}

TEST_F(HugePages, AdvisesAVectorsStorageByItsCapacity) {
  std::vector<uint64_t> small;
  small.reserve(16);
  EXPECT_FALSE(AdviseHugePagesFor(small));
  std::vector<uint64_t> large;
  large.reserve((3 * kHugePageBytes) / sizeof(uint64_t));  // empty, yet 6 MiB of storage
  EXPECT_TRUE(AdviseHugePagesFor(large));
  large.assign(large.capacity(), 42);
  EXPECT_EQ(large.back(), 42u);
}

}  // namespace
}  // namespace stoker
