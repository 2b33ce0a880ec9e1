#pragma once
// A two-layer perceptron (784 -> hidden, ReLU -> 10) for Fashion-MNIST. Inference and training
// are OpenBLAS GEMMs (cblas_sgemm), so the cost per item falls as the batch grows: the weights
// are read once per batch instead of once per item.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "inference/dataset.h"

namespace stoker::inference {

struct TrainOptions {
  int epochs = 4;
  size_t batch = 128;
  float learning_rate = 0.05f;
  float momentum = 0.9f;
  uint64_t seed = 1;
};

class Mlp {
 public:
  explicit Mlp(size_t hidden = 256);

  size_t inputs() const { return kPixels; }
  size_t hidden() const { return hidden_; }
  size_t outputs() const { return kClasses; }

  // logits (n x 10) of x (n x 784), row-major. `scratch` is reused between calls.
  void Forward(const float* x, size_t n, float* logits, std::vector<float>* scratch) const;
  void Train(const Dataset& d, const TrainOptions& o);
  // Share of `d` classified right.
  double Accuracy(const Dataset& d) const;

  // A small binary file: magic, sizes, float weights. Load checks every size.
  Status Save(const std::string& path) const;
  static Result<Mlp> Load(const std::string& path);

  const std::vector<float>& w1() const { return w1_; }  // 784 x hidden
  const std::vector<float>& b1() const { return b1_; }
  const std::vector<float>& w2() const { return w2_; }  // hidden x 10
  const std::vector<float>& b2() const { return b2_; }

 private:
  size_t hidden_;
  std::vector<float> w1_, b1_, w2_, b2_;
};

// Index of the largest of `n` values.
size_t ArgMax(const float* v, size_t n);

}  // namespace stoker::inference
