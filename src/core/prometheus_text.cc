#include "core/prometheus_text.h"

#include <charconv>
#include <cmath>

namespace stoker::prom {

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

namespace {
// A plain loop: string_view::find_first_of calls memchr on the set once per character, which
// was a fifth of the agent's render time.
bool NeedsEscape(std::string_view s, bool quote) {
  for (char c : s) {
    if (c == '\\' || c == '\n' || (quote && c == '"')) return true;
  }
  return false;
}

void AppendEscaped(std::string* out, std::string_view s, bool quote) {
  if (!NeedsEscape(s, quote)) {  // the common case
    out->append(s);
    return;
  }
  for (char c : s) {
    if (c == '\\') {
      *out += "\\\\";
    } else if (quote && c == '"') {
      *out += "\\\"";
    } else if (c == '\n') {
      *out += "\\n";
    } else {
      *out += c;
    }
  }
}
}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  AppendEscaped(&out, value, true);
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  AppendEscaped(&out, help, false);
  return out;
}

void AppendValue(std::string* out, double v) {
  if (std::isnan(v)) {
    *out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    *out += v > 0 ? "+Inf" : "-Inf";
    return;
  }
  char buf[32];
  // Whole numbers print as integers ("1755000000", not "1.755e+09"): easier to read by eye.
  constexpr double kExact = 9007199254740992.0;  // 2^53
  if (v == std::floor(v) && std::fabs(v) < kExact) {
    auto r = std::to_chars(buf, buf + sizeof buf, static_cast<int64_t>(v));
    out->append(buf, r.ptr);
    return;
  }
  auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest form that round-trips
  out->append(buf, r.ptr);
}

void AppendValue(std::string* out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, r.ptr);
}

std::string FormatValue(double v) {
  std::string out;
  AppendValue(&out, v);
  return out;
}

void AppendLabel(std::string* labels, std::string_view name, std::string_view value) {
  if (!labels->empty() && labels->back() != '{') *labels += ',';
  *labels += name;
  *labels += "=\"";
  AppendEscaped(labels, value, true);
  *labels += '"';
}

void AppendLabel(std::string* labels, std::string_view name, uint64_t value) {
  if (!labels->empty() && labels->back() != '{') *labels += ',';
  *labels += name;
  *labels += "=\"";
  AppendValue(labels, value);
  *labels += '"';
}

void AppendFamilyHeader(std::string* out, std::string_view name, std::string_view help, Type type) {
  *out += "# HELP ";
  *out += name;
  *out += ' ';
  AppendEscaped(out, help, false);
  *out += "\n# TYPE ";
  *out += name;
  *out += ' ';
  *out += TypeName(type);
  *out += '\n';
}

namespace {
void AppendSampleStart(std::string* out, std::string_view name, std::string_view labels,
                       std::string_view extra) {
  *out += name;
  if (!labels.empty() || !extra.empty()) {
    *out += '{';
    *out += labels;
    if (!labels.empty() && !extra.empty()) *out += ',';
    *out += extra;
    *out += '}';
  }
  *out += ' ';
}
}  // namespace

void AppendSample(std::string* out, std::string_view name, std::string_view labels,
                  std::string_view extra, double value) {
  AppendSampleStart(out, name, labels, extra);
  AppendValue(out, value);
  *out += '\n';
}

void AppendSample(std::string* out, std::string_view name, std::string_view labels,
                  std::string_view extra, uint64_t value) {
  AppendSampleStart(out, name, labels, extra);
  AppendValue(out, value);
  *out += '\n';
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
  AppendFamilyHeader(&out_, name, help, type);
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

std::string TextWriter::LabelText(const Labels& labels) {
  std::string text;
  for (const auto& [k, v] : labels) AppendLabel(&text, k, v);
  return text;
}

void TextWriter::Sample(std::string_view name, const Labels& labels, double value) {
  if (!CheckSample(name, labels)) return;
  if (open_type_ == Type::kHistogram) {
    Fail("plain sample in histogram family '" + std::string(name) + "'");
    return;
  }
  AppendSample(&out_, name, LabelText(labels), {}, value);
}

void TextWriter::HistogramSamples(std::string_view name, const Labels& labels, const Histogram& h) {
  if (!CheckSample(name, labels)) return;
  if (open_type_ != Type::kHistogram) {
    Fail("histogram samples in non-histogram family '" + std::string(name) + "'");
    return;
  }
  const std::string text = LabelText(labels);
  const std::string bucket = std::string(name) + "_bucket";
  std::string le;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.bounds().size(); ++i) {
    cumulative += h.counts()[i];
    le.clear();
    AppendLabel(&le, "le", FormatValue(h.bounds()[i]));
    AppendSample(&out_, bucket, text, le, cumulative);
  }
  AppendSample(&out_, bucket, text, "le=\"+Inf\"", h.count());
  AppendSample(&out_, std::string(name) + "_sum", text, {}, h.sum());
  AppendSample(&out_, std::string(name) + "_count", text, {}, h.count());
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
