#pragma once
// The MLP's inference on an NVIDIA GPU: two cuBLAS SGEMMs and a bias/ReLU kernel. Built when
// CMake finds CUDA (gpu_mlp_cuda.cu), else a stub that says so (gpu_mlp_stub.cc); used when a
// device is present. scripts/gpu-check.sh runs it against the CPU path on a GPU machine.

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "inference/mlp.h"

namespace stoker::inference {

class GpuMlp {
 public:
  // Whether this build has the CUDA path.
  static bool Built();
  // Built() and at least one CUDA device answers; `why` (optional) says what was found.
  static bool Available(std::string* why = nullptr);
  // Copies the weights to device 0. UNAVAILABLE without the CUDA path or a device.
  static Result<std::unique_ptr<GpuMlp>> Create(const Mlp& m);
  virtual ~GpuMlp() = default;
  // logits (n x 10) of x (n x 784), row-major host memory. Thread-safe (serialized).
  virtual Status Forward(const float* x, size_t n, float* logits) = 0;
};

}  // namespace stoker::inference
