#include "inference/gpu_mlp.h"

namespace stoker::inference {

bool GpuMlp::Built() { return false; }

bool GpuMlp::Available(std::string* why) {
  if (why != nullptr) *why = "built without CUDA (no nvcc found at configure time)";
  return false;
}

Result<std::unique_ptr<GpuMlp>> GpuMlp::Create(const Mlp&) {
  return Unavailable("this build has no CUDA path (no nvcc found at configure time)");
}

}  // namespace stoker::inference
