#pragma once
// The service-time model t(b) = a + c*b of a batched executor, learned online by least squares
// with exponential forgetting (old batches count less), so it follows a model whose cost drifts.

#include <cstddef>
#include <cstdint>

namespace stoker::batch {

class ServiceModel {
 public:
  // a_prior, c_prior: the model used until two distinct batch sizes have been measured.
  explicit ServiceModel(double a_prior = 0, double c_prior = 0, double forget = 0.995);
  void Observe(size_t batch_size, double seconds);
  double Predict(size_t batch_size) const { return a_ + c_ * static_cast<double>(batch_size); }
  double a() const { return a_; }
  double c() const { return c_; }
  uint64_t observations() const { return n_; }

 private:
  void Solve();
  double forget_;
  double a_, c_;
  double s0_ = 0, sb_ = 0, sbb_ = 0, st_ = 0, sbt_ = 0;
  uint64_t n_ = 0;
};

}  // namespace stoker::batch
