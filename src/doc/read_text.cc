// Bounded file reading (apart from read_file.cc, so that a program reading only YAML, such as
// the fake NVML library, does not pull in the JSON parser).
#include <fstream>

#include "doc/document.h"

namespace stoker::doc {

std::string SizeText(size_t max_bytes) {
  if (max_bytes >= (size_t{1} << 20) && max_bytes % (size_t{1} << 20) == 0) {
    return "larger than " + std::to_string(max_bytes >> 20) + " MiB";
  }
  return "larger than " + std::to_string(max_bytes) + " bytes";
}

Result<std::string> ReadText(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": cannot open");
  // At most one byte past the bound is read: a huge file (or /dev/zero) is refused, not loaded.
  std::string text;
  char buf[64 * 1024];
  while (text.size() <= max_bytes && in.read(buf, sizeof buf).gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) return InvalidArgument(path + ": read error");
  if (text.size() > max_bytes) return InvalidArgument(path + ": " + SizeText(max_bytes));
  return text;
}

}  // namespace stoker::doc
