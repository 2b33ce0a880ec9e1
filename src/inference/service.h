#pragma once
// The example inference service: the Fashion-MNIST MLP behind the dynamic batcher, served over
// the tree's HTTP server (http/listener.h).
//
//   POST /v1/predict  {"inputs": [[784 pixel values in [0, 1]], ...], "priority": 1,
//                      "timeout_ms": 100}
//     -> 200 {"predictions": [{"class": 9, "label": "Ankle boot", "logits": [...]}, ...]}
//   GET /metrics      the batcher's Prometheus metrics, plus the model's test accuracy
//   GET /healthz      {"status": "ok", "device": "cpu" | "cuda"}
//
// Bad requests get a 4xx naming what is wrong and where: 400 for a body that is not JSON, a
// missing or malformed "inputs", a row that is not 784 numbers, a value that is not finite
// (NaN/Inf, or beyond 1e6) or a bad priority/timeout; 413 for more rows than max_rows (and,
// from the HTTP layer, bodies over its limit); 429 when the queue is full; 503 while shutting
// down; 504 when the request timed out in the queue.

#include <memory>
#include <string>
#include <vector>

#include "batch/batcher.h"
#include "core/clock.h"
#include "http/listener.h"
#include "inference/gpu_mlp.h"
#include "inference/mlp.h"

namespace stoker::inference {

struct Rows {
  std::vector<float> data;  // n * 784
  size_t n = 0;
};

struct ServiceOptions {
  batch::Options batching;  // count = rows per request; max_batch_size = rows per GEMM
  size_t max_rows = 64;     // rows in one HTTP request
  enum class Device { kAuto, kCpu, kGpu } device = Device::kAuto;
  double test_accuracy = -1;  // shown on /metrics when known
};

class InferenceService final : public http::Handler {
 public:
  // `model` is copied. kGpu without a usable device is an error; kAuto falls back to the CPU.
  static Result<std::unique_ptr<InferenceService>> Create(const Mlp& model, const ServiceOptions& o,
                                                          Clock* clock);
  ~InferenceService() override;

  http::Response Handle(const http::Request& request) const override;
  // Logits of `rows` through the batcher (what /v1/predict does after parsing).
  Result<std::vector<float>> Predict(Rows rows, const batch::SubmitOptions& s) const;
  const char* device() const { return gpu_ ? "cuda" : "cpu"; }
  std::string Metrics() const;
  void Shutdown();

 private:
  InferenceService(const Mlp& model, ServiceOptions o);
  Result<std::vector<std::vector<float>>> RunBatch(std::vector<Rows>& in, size_t items);

  Mlp model_;
  ServiceOptions opt_;
  std::unique_ptr<GpuMlp> gpu_;
  std::unique_ptr<batch::Batcher<Rows, std::vector<float>>> batcher_;
};

// Parses a /v1/predict body (bounded: at most max_rows rows of 784 finite values).
// InvalidArgument or ResourceExhausted (too many rows) naming the field.
Result<Rows> ParsePredictBody(const std::string& body, size_t max_rows,
                              batch::SubmitOptions* submit);

}  // namespace stoker::inference
