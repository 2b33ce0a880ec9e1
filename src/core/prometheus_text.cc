#include "core/prometheus_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace stoker::prom {

const char* TypeName(Type t) {
  switch (t) {
    case Type::kCounter:
      return "counter";
    case Type::kGauge:
      return "gauge";
    case Type::kHistogram:
      return "histogram";
    case Type::kUntyped:
      break;
  }
  return "untyped";
}

namespace {
bool NameChar(char c, bool first, bool colon) {
  const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  if (alpha || (colon && c == ':')) return true;
  return !first && c >= '0' && c <= '9';
}
}  // namespace

bool ValidMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (!NameChar(name[i], i == 0, true)) return false;
  }
  return true;
}

bool ValidLabelName(std::string_view name) {
  if (name.empty() || name.substr(0, 2) == "__") return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (!NameChar(name[i], i == 0, false)) return false;
  }
  return true;
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<int64_t>(v));
    (void)ec;
    return std::string(buf, end);
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  (void)ec;
  return std::string(buf, end);
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double v, uint64_t times) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  counts_[i] += times;
  sum_ += v * static_cast<double>(times);
  count_ += times;
}

std::vector<double> Histogram::ExponentialBounds(double start, double factor, int n) {
  std::vector<double> b;
  double x = start;
  for (int i = 0; i < n; ++i, x *= factor) b.push_back(x);
  return b;
}

void TextWriter::Fail(std::string message) {
  if (status_.ok()) status_ = InvalidArgument("prometheus text: " + std::move(message));
}

void TextWriter::Family(std::string_view name, std::string_view help, Type type) {
  open_family_.clear();
  if (!ValidMetricName(name)) {
    Fail("invalid metric name '" + std::string(name) + "'");
    return;
  }
  if (!families_.insert(std::string(name)).second) {
    Fail("family '" + std::string(name) + "' written twice");
    return;
  }
  open_family_ = name;
  open_type_ = type;
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  out_ += EscapeHelp(help);
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += TypeName(type);
  out_ += '\n';
}

bool TextWriter::CheckSample(std::string_view name, const Labels& labels) {
  if (open_family_.empty() || name != open_family_) {
    Fail("sample '" + std::string(name) + "' outside its family");
    return false;
  }
  for (const auto& [k, v] : labels) {
    if (!ValidLabelName(k) || k == "le") {
      Fail("invalid label name '" + k + "' on " + std::string(name));
      return false;
    }
  }
  return true;
}

void TextWriter::WriteLabels(const Labels& labels, std::string_view extra_name,
                             std::string_view extra_value) {
  if (labels.empty() && extra_name.empty()) return;
  out_ += '{';
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out_ += ',';
    first = false;
    out_ += k;
    out_ += "=\"";
    out_ += EscapeLabelValue(v);
    out_ += '"';
  }
  if (!extra_name.empty()) {
    if (!first) out_ += ',';
    out_ += extra_name;
    out_ += "=\"";
    out_ += extra_value;
    out_ += '"';
  }
  out_ += '}';
}

void TextWriter::Sample(std::string_view name, const Labels& labels, double value) {
  if (!CheckSample(name, labels)) return;
  if (open_type_ == Type::kHistogram) {
    Fail("plain sample in histogram family '" + std::string(name) + "'");
    return;
  }
  out_ += name;
  WriteLabels(labels);
  out_ += ' ';
  out_ += FormatValue(value);
  out_ += '\n';
}

void TextWriter::HistogramSamples(std::string_view name, const Labels& labels, const Histogram& h) {
  if (!CheckSample(name, labels)) return;
  if (open_type_ != Type::kHistogram) {
    Fail("histogram samples in non-histogram family '" + std::string(name) + "'");
    return;
  }
  const std::string bucket = std::string(name) + "_bucket";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.bounds().size(); ++i) {
    cumulative += h.counts()[i];
    out_ += bucket;
    WriteLabels(labels, "le", FormatValue(h.bounds()[i]));
    out_ += ' ';
    out_ += FormatValue(static_cast<double>(cumulative));
    out_ += '\n';
  }
  out_ += bucket;
  WriteLabels(labels, "le", "+Inf");
  out_ += ' ';
  out_ += FormatValue(static_cast<double>(h.count()));
  out_ += '\n';
  out_ += name;
  out_ += "_sum";
  WriteLabels(labels);
  out_ += ' ';
  out_ += FormatValue(h.sum());
  out_ += '\n';
  out_ += name;
  out_ += "_count";
  WriteLabels(labels);
  out_ += ' ';
  out_ += FormatValue(static_cast<double>(h.count()));
  out_ += '\n';
}

void TextWriter::Counter(std::string_view name, std::string_view help, double value,
                         const Labels& labels) {
  Family(name, help, Type::kCounter);
  Sample(name, labels, value);
}

void TextWriter::Gauge(std::string_view name, std::string_view help, double value,
                       const Labels& labels) {
  Family(name, help, Type::kGauge);
  Sample(name, labels, value);
}

void TextWriter::HistogramFamily(std::string_view name, std::string_view help, const Histogram& h,
                                 const Labels& labels) {
  Family(name, help, Type::kHistogram);
  HistogramSamples(name, labels, h);
}

}  // namespace stoker::prom
