#pragma once
// Fashion-MNIST (Debian package dataset-fashion-mnist, /usr/share/datasets/fashion-mnist): the
// gzip'd IDX files read with zlib. Images become 784 floats in [0, 1], row-major.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace stoker::inference {

inline constexpr size_t kPixels = size_t{28} * 28;
inline constexpr size_t kClasses = 10;
inline constexpr const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";
extern const char* const kClassNames[kClasses];

struct Dataset {
  std::vector<float> images;  // n * kPixels
  std::vector<uint8_t> labels;
  size_t size() const { return labels.size(); }
};

// Reads `<dir>/<prefix>-images-idx3-ubyte.gz` and `...-labels-idx1-ubyte.gz` (prefix "train"
// or "t10k"). At most `limit` examples (0: all). Errors name the file and what is wrong.
Result<Dataset> LoadFashionMnist(const std::string& dir, const std::string& prefix,
                                 size_t limit = 0);

}  // namespace stoker::inference
