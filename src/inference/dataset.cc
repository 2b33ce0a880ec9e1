#include "inference/dataset.h"

#include <zlib.h>

#include <memory>

namespace stoker::inference {

const char* const kClassNames[kClasses] = {"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                           "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                           "Bag",         "Ankle boot"};

namespace {

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using Gz = std::unique_ptr<std::remove_pointer_t<gzFile>, GzCloser>;

Status ReadExactly(gzFile f, void* buf, size_t n, const std::string& path) {
  auto* p = static_cast<unsigned char*>(buf);
  while (n > 0) {
    const unsigned chunk = n > (1u << 30) ? (1u << 30) : static_cast<unsigned>(n);
    const int got = gzread(f, p, chunk);
    if (got <= 0) return InvalidArgument(path + ": truncated or not gzip");
    p += got;
    n -= static_cast<size_t>(got);
  }
  return Status::Ok();
}

uint32_t BigEndian(const unsigned char* b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}

// Opens an IDX file (close-on-exec) and checks its magic; returns the dimensions.
Result<std::vector<uint32_t>> OpenIdx(const std::string& path, uint32_t magic, Gz* out) {
  gzFile f = gzopen(path.c_str(), "rbe");
  if (f == nullptr) return NotFound(path + ": cannot open (install dataset-fashion-mnist)");
  out->reset(f);
  unsigned char head[4];
  if (Status s = ReadExactly(f, head, 4, path); !s.ok()) return s;
  if (BigEndian(head) != magic) return InvalidArgument(path + ": not an IDX file of this kind");
  const size_t dims = magic & 0xff;
  std::vector<uint32_t> d(dims);
  for (size_t i = 0; i < dims; ++i) {
    if (Status s = ReadExactly(f, head, 4, path); !s.ok()) return s;
    d[i] = BigEndian(head);
  }
  return d;
}

}  // namespace

Result<Dataset> LoadFashionMnist(const std::string& dir, const std::string& prefix, size_t limit) {
  const std::string ipath = dir + "/" + prefix + "-images-idx3-ubyte.gz";
  const std::string lpath = dir + "/" + prefix + "-labels-idx1-ubyte.gz";
  Gz fi, fl;
  Result<std::vector<uint32_t>> idim = OpenIdx(ipath, 0x00000803, &fi);
  if (!idim.ok()) return idim.status();
  Result<std::vector<uint32_t>> ldim = OpenIdx(lpath, 0x00000801, &fl);
  if (!ldim.ok()) return ldim.status();
  if ((*idim)[1] != 28 || (*idim)[2] != 28) return InvalidArgument(ipath + ": images not 28x28");
  if ((*idim)[0] != (*ldim)[0] || (*idim)[0] > 1000000) {
    return InvalidArgument(ipath + ": image and label counts differ or are implausible");
  }
  size_t n = (*idim)[0];
  if (limit > 0 && limit < n) n = limit;
  Dataset d;
  d.labels.resize(n);
  if (Status s = ReadExactly(fl.get(), d.labels.data(), n, lpath); !s.ok()) return s;
  for (uint8_t l : d.labels) {
    if (l >= kClasses) return InvalidArgument(lpath + ": label out of range");
  }
  std::vector<uint8_t> raw(n * kPixels);
  if (Status s = ReadExactly(fi.get(), raw.data(), raw.size(), ipath); !s.ok()) return s;
  d.images.resize(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) d.images[i] = static_cast<float>(raw[i]) / 255.0f;
  return d;
}

}  // namespace stoker::inference
