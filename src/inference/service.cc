#include "inference/service.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/prometheus_text.h"

namespace stoker::inference {

using nlohmann::json;

namespace {

http::Response Error(int status, const std::string& code, const std::string& message) {
  return http::Response{status, http::ErrorBody(code, message), "application/json"};
}

http::Response FromStatus(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
      return Error(400, "invalid_argument", s.message());
    case StatusCode::kResourceExhausted:
      return Error(429, "queue_full", s.message());
    case StatusCode::kDeadlineExceeded:
      return Error(504, "timeout", s.message());
    case StatusCode::kUnavailable:
      return Error(503, "unavailable", s.message());
    default:
      return Error(500, "internal", s.message());
  }
}

}  // namespace

Result<Rows> ParsePredictBody(const std::string& body, size_t max_rows,
                              batch::SubmitOptions* submit) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return InvalidArgument("body: not valid JSON (NaN and Infinity are not JSON numbers)");
  }
  if (!j.is_object()) return InvalidArgument("body: must be a JSON object");
  for (const auto& [key, value] : j.items()) {
    if (key != "inputs" && key != "priority" && key != "timeout_ms") {
      return InvalidArgument("body: unknown field '" + key.substr(0, 64) + "'");
    }
  }
  auto in = j.find("inputs");
  if (in == j.end() || !in->is_array()) {
    return InvalidArgument("inputs: required, an array of rows of 784 numbers");
  }
  if (in->empty()) return InvalidArgument("inputs: at least one row");
  if (in->size() > max_rows) {
    return ResourceExhausted("inputs: " + std::to_string(in->size()) +
                             " rows exceed the limit of " + std::to_string(max_rows) +
                             " per request");
  }
  Rows rows;
  rows.n = in->size();
  rows.data.reserve(rows.n * kPixels);
  for (size_t r = 0; r < in->size(); ++r) {
    const json& row = (*in)[r];
    const std::string where = "inputs[" + std::to_string(r) + "]";
    if (!row.is_array()) return InvalidArgument(where + ": must be an array of 784 numbers");
    if (row.size() != kPixels) {
      return InvalidArgument(where + ": expected 784 values (28 x 28), got " +
                             std::to_string(row.size()));
    }
    for (size_t c = 0; c < row.size(); ++c) {
      if (!row[c].is_number()) {
        return InvalidArgument(where + "[" + std::to_string(c) + "]: not a number");
      }
      const double v = row[c].get<double>();
      if (!std::isfinite(v) || std::fabs(v) > 1e6) {
        return InvalidArgument(where + "[" + std::to_string(c) + "]: not a finite value");
      }
      rows.data.push_back(static_cast<float>(v));
    }
  }
  if (auto p = j.find("priority"); p != j.end()) {
    if (!p->is_number_integer() || p->get<int64_t>() < 0 || p->get<int64_t>() > 64) {
      return InvalidArgument("priority: an integer in [0, 64]");
    }
    submit->priority = p->get<int>();
  }
  if (auto t = j.find("timeout_ms"); t != j.end()) {
    if (!t->is_number_integer() || t->get<int64_t>() < 1 || t->get<int64_t>() > 600000) {
      return InvalidArgument("timeout_ms: an integer in [1, 600000]");
    }
    submit->timeout = std::chrono::milliseconds(t->get<int64_t>());
  }
  submit->count = rows.n;
  return rows;
}

InferenceService::InferenceService(const Mlp& model, ServiceOptions o)
    : model_(model), opt_(std::move(o)) {}

InferenceService::~InferenceService() { Shutdown(); }

Result<std::unique_ptr<InferenceService>> InferenceService::Create(const Mlp& model,
                                                                   const ServiceOptions& o,
                                                                   Clock* clock) {
  if (o.max_rows < 1 || o.max_rows > o.batching.max_batch_size) {
    return InvalidArgument("max_rows: must be in [1, max_batch_size]");
  }
  std::unique_ptr<InferenceService> s(new InferenceService(model, o));
  if (o.device != ServiceOptions::Device::kCpu) {
    Result<std::unique_ptr<GpuMlp>> g = GpuMlp::Create(s->model_);
    if (g.ok()) {
      s->gpu_ = std::move(*g);
    } else if (o.device == ServiceOptions::Device::kGpu) {
      return g.status();
    }
  }
  InferenceService* self = s.get();
  auto b = batch::Batcher<Rows, std::vector<float>>::Create(
      o.batching,
      [self](std::vector<Rows>& in, const batch::BatchInfo& info) {
        return self->RunBatch(in, info.items);
      },
      clock);
  if (!b.ok()) return b.status();
  s->batcher_ = std::move(*b);
  return s;
}

Result<std::vector<std::vector<float>>> InferenceService::RunBatch(std::vector<Rows>& in,
                                                                   size_t items) {
  thread_local std::vector<float> x, logits, scratch;
  x.resize(items * kPixels);
  logits.resize(items * kClasses);
  size_t at = 0;
  for (const Rows& r : in) {
    std::copy(r.data.begin(), r.data.end(), x.begin() + static_cast<std::ptrdiff_t>(at));
    at += r.data.size();
  }
  if (gpu_) {
    if (Status s = gpu_->Forward(x.data(), items, logits.data()); !s.ok()) return s;
  } else {
    model_.Forward(x.data(), items, logits.data(), &scratch);
  }
  std::vector<std::vector<float>> out;
  out.reserve(in.size());
  size_t row = 0;
  for (const Rows& r : in) {
    out.emplace_back(logits.begin() + static_cast<std::ptrdiff_t>(row * kClasses),
                     logits.begin() + static_cast<std::ptrdiff_t>((row + r.n) * kClasses));
    row += r.n;
  }
  return out;
}

Result<std::vector<float>> InferenceService::Predict(Rows rows,
                                                     const batch::SubmitOptions& s) const {
  batch::SubmitOptions so = s;
  so.count = rows.n;
  return batcher_->Submit(std::move(rows), so).get();
}

std::string InferenceService::Metrics() const {
  prom::TextWriter w;
  batcher_->WriteMetrics(w, "stoker_infer_batch", {{"model", "fashion-mnist-mlp"}});
  if (opt_.test_accuracy >= 0) {
    w.Gauge("stoker_infer_model_test_accuracy",
            "Share of the Fashion-MNIST test set the served model classifies right",
            opt_.test_accuracy, {{"model", "fashion-mnist-mlp"}});
  }
  w.Gauge("stoker_infer_device_info", "The device inference runs on (1 for the one in use)", 1,
          {{"device", device()}});
  return w.Take();
}

void InferenceService::Shutdown() {
  if (batcher_) batcher_->Shutdown();
}

http::Response InferenceService::Handle(const http::Request& request) const {
  if (request.path == "/healthz") {
    if (request.method != "GET") return Error(405, "method_not_allowed", "use GET /healthz");
    return http::Response{200, json{{"status", "ok"}, {"device", device()}}.dump(),
                          "application/json"};
  }
  if (request.path == "/metrics") {
    if (request.method != "GET") return Error(405, "method_not_allowed", "use GET /metrics");
    return http::Response{200, Metrics(), prom::kContentType};
  }
  if (request.path != "/v1/predict") {
    return Error(404, "not_found", "no route " + request.path.substr(0, 128));
  }
  if (request.method != "POST") return Error(405, "method_not_allowed", "use POST /v1/predict");
  batch::SubmitOptions submit;
  Result<Rows> rows = ParsePredictBody(request.body, opt_.max_rows, &submit);
  if (!rows.ok()) {
    if (rows.status().code() == StatusCode::kResourceExhausted) {
      return Error(413, "too_large", rows.status().message());
    }
    return Error(400, "invalid_argument", rows.status().message());
  }
  const size_t n = rows->n;
  Result<std::vector<float>> logits = Predict(std::move(*rows), submit);
  if (!logits.ok()) return FromStatus(logits.status());
  json preds = json::array();
  for (size_t i = 0; i < n; ++i) {
    const float* l = logits->data() + i * kClasses;
    const size_t cls = ArgMax(l, kClasses);
    preds.push_back({{"class", cls},
                     {"label", kClassNames[cls]},
                     {"logits", std::vector<float>(l, l + kClasses)}});
  }
  return http::Response{200, json{{"predictions", preds}}.dump(), "application/json"};
}

}  // namespace stoker::inference
