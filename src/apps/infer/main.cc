// stoker-infer: the example inference server (issue 18). One command:
//
//   build/bin/stoker-infer [--listen 127.0.0.1:8490] [--weights fashion-mlp.bin] ...
//
// Loads the MLP's weights, or trains it on Fashion-MNIST (Debian's dataset-fashion-mnist) and
// saves them; prints the test accuracy; serves POST /v1/predict, GET /metrics, GET /healthz
// (inference/service.h) through the dynamic batcher until SIGINT or SIGTERM, then drains.

#include <cblas.h>
#include <fmt/core.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "inference/dataset.h"
#include "inference/gpu_mlp.h"
#include "inference/mlp.h"
#include "inference/service.h"

using namespace stoker;
using namespace stoker::inference;

namespace {

// The CUDA path against the CPU path on the whole test set, then its time per item by batch
// size. Exit status 0 only when the GPU ran and agreed.
int GpuCheck(const Mlp& model, const Dataset& test) {
  std::printf("cuda path built: %s\n", GpuMlp::Built() ? "yes" : "no");
  Result<std::unique_ptr<GpuMlp>> g = GpuMlp::Create(model);
  if (!g.ok()) {
    std::printf("gpu-check: FAILED: %s\n", g.status().ToString().c_str());
    return 1;
  }
  const size_t n = test.size();
  std::vector<float> cpu(n * kClasses), gpu(n * kClasses), scratch;
  model.Forward(test.images.data(), n, cpu.data(), &scratch);
  if (Status s = (*g)->Forward(test.images.data(), n, gpu.data()); !s.ok()) {
    std::printf("gpu-check: FAILED: %s\n", s.ToString().c_str());
    return 1;
  }
  double max_diff = 0;
  size_t right_gpu = 0, agree = 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t cg = ArgMax(&gpu[i * kClasses], kClasses);
    right_gpu += cg == test.labels[i];
    agree += cg == ArgMax(&cpu[i * kClasses], kClasses);
    for (size_t j = 0; j < kClasses; ++j) {
      max_diff = std::max(
          max_diff, static_cast<double>(std::fabs(gpu[i * kClasses + j] - cpu[i * kClasses + j])));
    }
  }
  std::printf(
      "gpu accuracy %.4f, classes equal to the cpu's for %zu of %zu, max |logit diff| "
      "%.2e\n",
      static_cast<double>(right_gpu) / static_cast<double>(n), agree, n, max_diff);
  std::printf("%8s %14s %14s\n", "batch", "gpu us/item", "cpu us/item");
  for (size_t b : {1, 8, 64, 256, 1024}) {
    auto time = [&](auto&& f) {
      f();  // warm
      const auto t0 = std::chrono::steady_clock::now();
      int reps = 0;
      while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(200)) {
        f();
        ++reps;
      }
      return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                 .count() /
             (reps * static_cast<double>(b));
    };
    const double tg = time([&] { (void)(*g)->Forward(test.images.data(), b, gpu.data()); });
    const double tc = time([&] { model.Forward(test.images.data(), b, cpu.data(), &scratch); });
    std::printf("%8zu %14.3f %14.3f\n", b, tg, tc);
  }
  const bool ok = agree >= n - n / 1000 && max_diff < 1e-2;
  std::printf("gpu-check: %s\n", ok ? "PASSED" : "FAILED (GPU and CPU disagree)");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Example inference server: a Fashion-MNIST MLP behind Stoker's dynamic batcher"};
  std::string data = kDefaultDataDir, weights = "fashion-mlp.bin", listen = "127.0.0.1:8490";
  std::string device = "auto";
  size_t hidden = 256, max_batch = 64, max_rows = 64;
  int epochs = 4, instances = 1, blas_threads = 1;
  int64_t delay_us = 1000, objective_ms = 0, queue = 4096;
  bool train_only = false, gpu_check = false;
  app.add_option("--data", data, "Fashion-MNIST directory")->capture_default_str();
  app.add_option("--weights", weights, "weights file (trained and written when absent)")
      ->capture_default_str();
  app.add_option("--listen", listen, "host:port")->capture_default_str();
  app.add_option("--hidden", hidden, "hidden units when training")->check(CLI::Range(8, 4096));
  app.add_option("--epochs", epochs, "training epochs")->check(CLI::Range(1, 100));
  app.add_option("--max-batch", max_batch, "rows per GEMM")->check(CLI::Range(1, 4096));
  app.add_option("--max-rows", max_rows, "rows per HTTP request")->check(CLI::Range(1, 4096));
  app.add_option("--delay-us", delay_us, "max queue delay (us)")->check(CLI::Range(0, 10000000));
  app.add_option("--p99-objective-ms", objective_ms, "adaptive mode with this p99 objective")
      ->check(CLI::Range(0, 60000));
  app.add_option("--queue", queue, "max pending requests")->check(CLI::Range(1, 1000000));
  app.add_option("--instances", instances, "batches run at once")->check(CLI::Range(1, 64));
  app.add_option("--blas-threads", blas_threads, "OpenBLAS threads")->check(CLI::Range(1, 256));
  app.add_option("--device", device, "auto, cpu or gpu")
      ->check(CLI::IsMember({"auto", "cpu", "gpu"}));
  app.add_flag("--train-only", train_only, "train (or load), report accuracy and exit");
  app.add_flag("--gpu-check", gpu_check,
               "run the test set through the CUDA path, compare with the CPU, time batch sizes");
  CLI11_PARSE(app, argc, argv);
  openblas_set_num_threads(blas_threads);

  Result<Mlp> model = Mlp::Load(weights);
  if (!model.ok() && model.status().code() != StatusCode::kNotFound) {
    fmt::print(stderr, "stoker-infer: {}\n", model.status().ToString());
    return 1;
  }
  Result<Dataset> test = LoadFashionMnist(data, "t10k");
  if (!test.ok()) {
    fmt::print(stderr, "stoker-infer: {}\n", test.status().ToString());
    return 1;
  }
  if (!model.ok()) {
    Result<Dataset> train = LoadFashionMnist(data, "train");
    if (!train.ok()) {
      fmt::print(stderr, "stoker-infer: {}\n", train.status().ToString());
      return 1;
    }
    fmt::print(stderr, "stoker-infer: training a 784-{}-10 MLP on {} images, {} epochs\n", hidden,
               train->size(), epochs);
    const auto t0 = std::chrono::steady_clock::now();
    Mlp m(hidden);
    m.Train(*train, TrainOptions{.epochs = epochs});
    fmt::print(stderr, "stoker-infer: trained in {:.1f} s; writing {}\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
               weights);
    if (Status s = m.Save(weights); !s.ok()) {
      fmt::print(stderr, "stoker-infer: {}\n", s.ToString());
    }
    model = std::move(m);
  }
  const double accuracy = model->Accuracy(*test);
  std::printf("test accuracy: %.4f (%zu Fashion-MNIST test images)\n", accuracy, test->size());
  std::string gpu_why;
  const bool gpu = GpuMlp::Available(&gpu_why);
  std::printf("gpu: %s\n", gpu_why.c_str());
  (void)std::fflush(stdout);  // for a reader of a pipe; nothing to do if it is gone
  if (train_only) return 0;
  if (gpu_check) return GpuCheck(*model, *test);

  auto hp = http::ParseHostPort(listen);
  if (!hp.ok()) {
    fmt::print(stderr, "stoker-infer: --listen: {}\n", hp.status().message());
    return 2;
  }
  ServiceOptions so;
  so.batching.max_batch_size = max_batch;
  so.batching.max_queue_delay = std::chrono::microseconds(delay_us);
  so.batching.max_pending = static_cast<size_t>(queue);
  so.batching.instances = instances;
  if (objective_ms > 0) {
    so.batching.adaptive.enabled = true;
    so.batching.adaptive.p99_objective = std::chrono::milliseconds(objective_ms);
  }
  so.max_rows = std::min(max_rows, max_batch);
  so.device = device == "cpu"   ? ServiceOptions::Device::kCpu
              : device == "gpu" ? ServiceOptions::Device::kGpu
                                : ServiceOptions::Device::kAuto;
  so.test_accuracy = accuracy;
  (void)gpu;

  // Block the shutdown signals before any thread starts, so only sigwait() below gets them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A client that hangs up is an error on its socket, not our end (cannot fail for SIGPIPE).
  (void)signal(SIGPIPE, SIG_IGN);

  SystemClock clock;
  auto service = InferenceService::Create(*model, so, &clock);
  if (!service.ok()) {
    fmt::print(stderr, "stoker-infer: {}\n", service.status().ToString());
    return 1;
  }
  http::ListenerOptions ho;
  ho.host = hp->first;
  ho.port = hp->second;
  ho.threads = 256;  // handlers wait for their batch; enough of them to fill batches
  http::Listener server(service->get(), ho);
  if (Status s = server.Start(); !s.ok()) {
    fmt::print(stderr, "stoker-infer: {}\n", s.ToString());
    return 1;
  }
  std::printf("serving on %s (device %s): POST /v1/predict, GET /metrics, GET /healthz\n",
              server.url().c_str(), (*service)->device());
  (void)std::fflush(stdout);  // for a reader of a pipe; nothing to do if it is gone
  int sig = 0;
  sigwait(&signals, &sig);
  fmt::print(stderr, "stoker-infer: signal {}, draining\n", sig);
  server.Stop();
  (*service)->Shutdown();
  return 0;
}
