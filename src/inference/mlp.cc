#include "inference/mlp.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>

namespace stoker::inference {

namespace {
constexpr char kMagic[8] = {'S', 'T', 'K', 'M', 'L', 'P', '1', '\n'};

// y (n x m) += bias (m) per row, then ReLU when asked.
void AddBias(float* y, size_t n, size_t m, const float* bias, bool relu) {
  for (size_t i = 0; i < n; ++i) {
    float* row = y + i * m;
    for (size_t j = 0; j < m; ++j) {
      const float v = row[j] + bias[j];
      row[j] = relu && v < 0 ? 0 : v;
    }
  }
}

int I(size_t v) { return static_cast<int>(v); }
}  // namespace

size_t ArgMax(const float* v, size_t n) {
  return static_cast<size_t>(std::max_element(v, v + n) - v);
}

Mlp::Mlp(size_t hidden)
    : hidden_(hidden),
      w1_(kPixels * hidden, 0),
      b1_(hidden, 0),
      w2_(hidden * kClasses, 0),
      b2_(kClasses, 0) {}

void Mlp::Forward(const float* x, size_t n, float* logits, std::vector<float>* scratch) const {
  if (n == 0) return;
  scratch->resize(n * hidden_);
  float* h = scratch->data();
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, I(n), I(hidden_), I(kPixels), 1.0f, x,
              I(kPixels), w1_.data(), I(hidden_), 0.0f, h, I(hidden_));
  AddBias(h, n, hidden_, b1_.data(), true);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, I(n), I(kClasses), I(hidden_), 1.0f, h,
              I(hidden_), w2_.data(), I(kClasses), 0.0f, logits, I(kClasses));
  AddBias(logits, n, kClasses, b2_.data(), false);
}

void Mlp::Train(const Dataset& d, const TrainOptions& o) {
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<float> g1(0, std::sqrt(2.0f / kPixels));
  std::normal_distribution<float> g2(0, std::sqrt(2.0f / static_cast<float>(hidden_)));
  for (float& w : w1_) w = g1(rng);
  for (float& w : w2_) w = g2(rng);
  std::fill(b1_.begin(), b1_.end(), 0.0f);
  std::fill(b2_.begin(), b2_.end(), 0.0f);
  std::vector<float> vw1(w1_.size(), 0), vb1(b1_.size(), 0), vw2(w2_.size(), 0), vb2(b2_.size(), 0);
  const size_t B = o.batch;
  std::vector<float> x(B * kPixels), h(B * hidden_), out(B * kClasses), dh(B * hidden_);
  std::vector<float> gw1(w1_.size()), gw2(w2_.size()), gb1(hidden_), gb2(kClasses);
  std::vector<size_t> order(d.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<float> scratch;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t start = 0; start + B <= d.size(); start += B) {
      for (size_t i = 0; i < B; ++i) {
        std::memcpy(&x[i * kPixels], &d.images[order[start + i] * kPixels],
                    kPixels * sizeof(float));
      }
      // Forward, keeping the hidden activations.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, I(B), I(hidden_), I(kPixels), 1.0f,
                  x.data(), I(kPixels), w1_.data(), I(hidden_), 0.0f, h.data(), I(hidden_));
      AddBias(h.data(), B, hidden_, b1_.data(), true);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, I(B), I(kClasses), I(hidden_), 1.0f,
                  h.data(), I(hidden_), w2_.data(), I(kClasses), 0.0f, out.data(), I(kClasses));
      AddBias(out.data(), B, kClasses, b2_.data(), false);
      // Softmax cross-entropy gradient: (p - onehot) / B.
      for (size_t i = 0; i < B; ++i) {
        float* row = &out[i * kClasses];
        const float mx = *std::max_element(row, row + kClasses);
        float sum = 0;
        for (size_t j = 0; j < kClasses; ++j) sum += (row[j] = std::exp(row[j] - mx));
        for (size_t j = 0; j < kClasses; ++j) row[j] /= sum;
        row[d.labels[order[start + i]]] -= 1.0f;
        for (size_t j = 0; j < kClasses; ++j) row[j] /= static_cast<float>(B);
      }
      // dW2 = H^T dOut, db2 = column sums, dH = dOut W2^T masked by ReLU.
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, I(hidden_), I(kClasses), I(B), 1.0f,
                  h.data(), I(hidden_), out.data(), I(kClasses), 0.0f, gw2.data(), I(kClasses));
      std::fill(gb2.begin(), gb2.end(), 0.0f);
      for (size_t i = 0; i < B; ++i) {
        for (size_t j = 0; j < kClasses; ++j) gb2[j] += out[i * kClasses + j];
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, I(B), I(hidden_), I(kClasses), 1.0f,
                  out.data(), I(kClasses), w2_.data(), I(kClasses), 0.0f, dh.data(), I(hidden_));
      for (size_t k = 0; k < dh.size(); ++k) {
        if (h[k] <= 0) dh[k] = 0;
      }
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, I(kPixels), I(hidden_), I(B), 1.0f,
                  x.data(), I(kPixels), dh.data(), I(hidden_), 0.0f, gw1.data(), I(hidden_));
      std::fill(gb1.begin(), gb1.end(), 0.0f);
      for (size_t i = 0; i < B; ++i) {
        for (size_t j = 0; j < hidden_; ++j) gb1[j] += dh[i * hidden_ + j];
      }
      auto step = [&](std::vector<float>& w, std::vector<float>& v, const std::vector<float>& g) {
        for (size_t k = 0; k < w.size(); ++k) {
          v[k] = o.momentum * v[k] - o.learning_rate * g[k];
          w[k] += v[k];
        }
      };
      step(w1_, vw1, gw1);
      step(b1_, vb1, gb1);
      step(w2_, vw2, gw2);
      step(b2_, vb2, gb2);
    }
  }
}

double Mlp::Accuracy(const Dataset& d) const {
  if (d.size() == 0) return 0;
  constexpr size_t kChunk = 1000;
  std::vector<float> logits(kChunk * kClasses), scratch;
  size_t right = 0;
  for (size_t start = 0; start < d.size(); start += kChunk) {
    const size_t n = std::min(kChunk, d.size() - start);
    Forward(&d.images[start * kPixels], n, logits.data(), &scratch);
    for (size_t i = 0; i < n; ++i) {
      right += ArgMax(&logits[i * kClasses], kClasses) == d.labels[start + i];
    }
  }
  return static_cast<double>(right) / static_cast<double>(d.size());
}

namespace {
// For the files read: nothing to learn from their close (Save closes the file it writes itself,
// and checks).
struct FileCloser {
  void operator()(FILE* f) const { (void)std::fclose(f); }
};
}  // namespace

Status Mlp::Save(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  std::unique_ptr<FILE, FileCloser> f(std::fopen(tmp.c_str(), "wbe"));
  if (!f) return Unavailable(tmp + ": cannot create");
  const uint64_t dims[3] = {kPixels, hidden_, kClasses};
  bool ok = std::fwrite(kMagic, 1, sizeof kMagic, f.get()) == sizeof kMagic &&
            std::fwrite(dims, sizeof dims, 1, f.get()) == 1;
  for (const auto* v : {&w1_, &b1_, &w2_, &b2_}) {
    ok = ok && std::fwrite(v->data(), sizeof(float), v->size(), f.get()) == v->size();
  }
  ok = std::fflush(f.get()) == 0 && ok;
  ok = std::fclose(f.release()) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    (void)std::remove(tmp.c_str());  // the write's failure is the error to report
    return Unavailable(path + ": write failed");
  }
  return Status::Ok();
}

Result<Mlp> Mlp::Load(const std::string& path) {
  std::unique_ptr<FILE, FileCloser> f(std::fopen(path.c_str(), "rbe"));
  if (!f) return NotFound(path + ": cannot open");
  char magic[8];
  uint64_t dims[3];
  if (std::fread(magic, 1, 8, f.get()) != 8 || std::memcmp(magic, kMagic, 8) != 0) {
    return InvalidArgument(path + ": not a Stoker MLP weights file");
  }
  if (std::fread(dims, sizeof dims, 1, f.get()) != 1 || dims[0] != kPixels || dims[2] != kClasses ||
      dims[1] < 1 || dims[1] > 65536) {
    return InvalidArgument(path + ": layer sizes are not 784 x hidden x 10");
  }
  Mlp m(dims[1]);
  for (auto* v : {&m.w1_, &m.b1_, &m.w2_, &m.b2_}) {
    if (std::fread(v->data(), sizeof(float), v->size(), f.get()) != v->size()) {
      return InvalidArgument(path + ": truncated");
    }
  }
  for (const auto* v : {&m.w1_, &m.b1_, &m.w2_, &m.b2_}) {
    for (float x : *v) {
      if (!std::isfinite(x)) return InvalidArgument(path + ": a weight is not finite");
    }
  }
  if (std::fgetc(f.get()) != EOF) return InvalidArgument(path + ": trailing bytes");
  return m;
}

}  // namespace stoker::inference
