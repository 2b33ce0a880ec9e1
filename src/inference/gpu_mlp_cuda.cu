// The CUDA path of the MLP (gpu_mlp.h). Row-major host matrices are column-major transposes to
// cuBLAS, so H^T = W1^T X^T is one SGEMM with the operands as stored.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <mutex>
#include <string>

#include "inference/gpu_mlp.h"

namespace stoker::inference {

namespace {

__global__ void BiasRelu(float* y, const float* bias, size_t rows, size_t cols, bool relu) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const float v = y[i] + bias[i % cols];
  y[i] = relu && v < 0.0f ? 0.0f : v;
}

std::string CudaError(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorString(e);
}

class CudaMlp final : public GpuMlp {
 public:
  ~CudaMlp() override {
    if (handle_ != nullptr) cublasDestroy(handle_);
    for (float* p : {w1_, b1_, w2_, b2_, x_, h_, y_}) cudaFree(p);
  }

  Status Init(const Mlp& m) {
    hidden_ = m.hidden();
    if (cublasCreate(&handle_) != CUBLAS_STATUS_SUCCESS) return Unavailable("cublasCreate failed");
    if (Status s = Upload(&w1_, m.w1()); !s.ok()) return s;
    if (Status s = Upload(&b1_, m.b1()); !s.ok()) return s;
    if (Status s = Upload(&w2_, m.w2()); !s.ok()) return s;
    return Upload(&b2_, m.b2());
  }

  Status Forward(const float* x, size_t n, float* logits) override {
    std::lock_guard lk(mu_);
    if (n == 0) return Status::Ok();
    if (n > capacity_) {
      for (float* p : {x_, h_, y_}) cudaFree(p);
      x_ = h_ = y_ = nullptr;
      capacity_ = 0;
      if (cudaError_t e = cudaMalloc(&x_, n * kPixels * sizeof(float)); e != cudaSuccess) {
        return ResourceExhausted(CudaError("cudaMalloc", e));
      }
      if (cudaError_t e = cudaMalloc(&h_, n * hidden_ * sizeof(float)); e != cudaSuccess) {
        return ResourceExhausted(CudaError("cudaMalloc", e));
      }
      if (cudaError_t e = cudaMalloc(&y_, n * kClasses * sizeof(float)); e != cudaSuccess) {
        return ResourceExhausted(CudaError("cudaMalloc", e));
      }
      capacity_ = n;
    }
    if (cudaError_t e = cudaMemcpy(x_, x, n * kPixels * sizeof(float), cudaMemcpyHostToDevice);
        e != cudaSuccess) {
      return Internal(CudaError("copy to device", e));
    }
    const float one = 1.0f, zero = 0.0f;
    const int hn = static_cast<int>(hidden_), bn = static_cast<int>(n);
    if (cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, hn, bn, static_cast<int>(kPixels), &one, w1_,
                    hn, x_, static_cast<int>(kPixels), &zero, h_, hn) != CUBLAS_STATUS_SUCCESS) {
      return Internal("cublasSgemm (layer 1) failed");
    }
    const unsigned threads = 256;
    BiasRelu<<<static_cast<unsigned>((n * hidden_ + threads - 1) / threads), threads>>>(
        h_, b1_, n, hidden_, true);
    if (cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(kClasses), bn, hn, &one,
                    w2_, static_cast<int>(kClasses), h_, hn, &zero, y_,
                    static_cast<int>(kClasses)) != CUBLAS_STATUS_SUCCESS) {
      return Internal("cublasSgemm (layer 2) failed");
    }
    BiasRelu<<<static_cast<unsigned>((n * kClasses + threads - 1) / threads), threads>>>(
        y_, b2_, n, kClasses, false);
    if (cudaError_t e =
            cudaMemcpy(logits, y_, n * kClasses * sizeof(float), cudaMemcpyDeviceToHost);
        e != cudaSuccess) {
      return Internal(CudaError("copy from device", e));
    }
    return Status::Ok();
  }

 private:
  static Status Upload(float** dst, const std::vector<float>& v) {
    if (cudaError_t e = cudaMalloc(dst, v.size() * sizeof(float)); e != cudaSuccess) {
      return ResourceExhausted(CudaError("cudaMalloc", e));
    }
    if (cudaError_t e =
            cudaMemcpy(*dst, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice);
        e != cudaSuccess) {
      return Internal(CudaError("copy weights", e));
    }
    return Status::Ok();
  }

  std::mutex mu_;
  cublasHandle_t handle_ = nullptr;
  size_t hidden_ = 0, capacity_ = 0;
  float *w1_ = nullptr, *b1_ = nullptr, *w2_ = nullptr, *b2_ = nullptr;
  float *x_ = nullptr, *h_ = nullptr, *y_ = nullptr;
};

}  // namespace

bool GpuMlp::Built() { return true; }

bool GpuMlp::Available(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    if (why != nullptr) *why = e != cudaSuccess ? CudaError("no CUDA device", e) : "no CUDA device";
    return false;
  }
  if (why != nullptr) {
    cudaDeviceProp p{};
    cudaGetDeviceProperties(&p, 0);
    *why = std::string("CUDA device 0: ") + p.name;
  }
  return true;
}

Result<std::unique_ptr<GpuMlp>> GpuMlp::Create(const Mlp& m) {
  std::string why;
  if (!Available(&why)) return Unavailable(why);
  auto g = std::make_unique<CudaMlp>();
  if (Status s = g->Init(m); !s.ok()) return s;
  return std::unique_ptr<GpuMlp>(std::move(g));
}

}  // namespace stoker::inference
