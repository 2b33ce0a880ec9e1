#pragma once
// The one writer of the Prometheus text exposition format (0.0.4) in the tree: HELP and TYPE
// lines, label values escaped as the format says (\\, \", \n), HELP text escaped (\\, \n),
// counters, gauges and histograms with cumulative buckets ending in +Inf, _sum and _count.
//
// A family is opened with Family(name, help, type) and its samples follow; a family name may
// be opened once per exposition. Names are code constants, so an invalid metric or label name,
// a repeated family or a sample outside its family is a programming error: the writer drops
// that line and remembers the first such error in status() (tests assert it is OK).

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/enum_table.h"
#include "core/status.h"

namespace stoker::prom {

enum class Type { kCounter, kGauge, kHistogram, kUntyped };
// The TYPE line's word.
inline constexpr EnumTable<Type, 4> kTypeNames{"metric type",
                                               {{{Type::kCounter, "counter"},
                                                 {Type::kGauge, "gauge"},
                                                 {Type::kHistogram, "histogram"},
                                                 {Type::kUntyped, "untyped"}}}};
constexpr const auto& NamesOf(Type) { return kTypeNames; }
inline const char* TypeName(Type t) { return kTypeNames.CName(t); }

using Labels = std::vector<std::pair<std::string, std::string>>;

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool ValidMetricName(std::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (reserved).
bool ValidLabelName(std::string_view name);
// Label value escaping: backslash, double quote and line feed.
std::string EscapeLabelValue(std::string_view value);
// HELP text escaping: backslash and line feed.
std::string EscapeHelp(std::string_view help);
// A Go-style float: integers without exponent ("42"), NaN, +Inf, -Inf, else shortest %g form
// that round-trips.
std::string FormatValue(double v);

// ---- The primitives every writer appends with ----
// TextWriter below is built on these; a renderer on a hot path (the agent's, which keeps its
// label text between samples) uses them directly, so there is still one place that knows the
// format, and no allocation per sample.

// Appends FormatValue(v) (whole numbers below 2^53 as integers).
void AppendValue(std::string* out, double v);
void AppendValue(std::string* out, uint64_t v);
// Appends `name="value"` to a comma-separated label list, the value escaped.
void AppendLabel(std::string* labels, std::string_view name, std::string_view value);
void AppendLabel(std::string* labels, std::string_view name, uint64_t value);
// Appends the "# HELP" and "# TYPE" lines of a family.
void AppendFamilyHeader(std::string* out, std::string_view name, std::string_view help, Type type);
// Appends one sample line: name{labels,extra} value. `labels` and `extra` are label lists as
// AppendLabel writes them (either may be empty).
void AppendSample(std::string* out, std::string_view name, std::string_view labels,
                  std::string_view extra, double value);
void AppendSample(std::string* out, std::string_view name, std::string_view labels,
                  std::string_view extra, uint64_t value);

// A family whose HELP and TYPE lines are written before its first sample, so a family with no
// samples (a field no GPU supports) leaves nothing behind. Names are the caller's constants.
class LazyFamily {
 public:
  LazyFamily(std::string* out, std::string_view name, std::string_view help, Type type)
      : out_(out), name_(name), help_(help), type_(type) {}
  void Add(std::string_view labels, std::string_view extra, double value) {
    Start();
    AppendSample(out_, name_, labels, extra, value);
  }
  void Add(std::string_view labels, std::string_view extra, uint64_t value) {
    Start();
    AppendSample(out_, name_, labels, extra, value);
  }

 private:
  void Start() {
    if (started_) return;
    started_ = true;
    AppendFamilyHeader(out_, name_, help_, type_);
  }
  std::string* out_;
  std::string_view name_;
  std::string_view help_;
  Type type_;
  bool started_ = false;
};

// Fixed-bucket histogram data. `bounds` are the finite upper bounds, increasing; `counts` has
// bounds.size() + 1 entries (the last one is the +Inf bucket), each NOT cumulative.
class Histogram {
 public:
  Histogram() = default;
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v, uint64_t times = 1);
  const std::vector<double>& bounds() const { return bounds_; }
  const std::vector<uint64_t>& counts() const { return counts_; }
  double sum() const { return sum_; }
  uint64_t count() const { return count_; }
  // Exponential bounds start, start*factor, ... (n of them).
  static std::vector<double> ExponentialBounds(double start, double factor, int n);

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_ = {0};
  double sum_ = 0;
  uint64_t count_ = 0;
};

class TextWriter {
 public:
  // Opens a family: writes "# HELP" and "# TYPE". Samples of it follow.
  void Family(std::string_view name, std::string_view help, Type type);
  // One sample of the open family: `name` is the family name (or, for histograms, written by
  // Histogram()).
  void Sample(std::string_view name, const Labels& labels, double value);
  // A histogram sample set of the open histogram family: name_bucket{...,le="b"} cumulative,
  // le="+Inf" equal to the count, name_sum and name_count.
  void HistogramSamples(std::string_view name, const Labels& labels, const Histogram& h);

  // Shorthands for a family with a single unlabelled (or one labelled) sample.
  void Counter(std::string_view name, std::string_view help, double value,
               const Labels& labels = {});
  void Gauge(std::string_view name, std::string_view help, double value, const Labels& labels = {});
  void HistogramFamily(std::string_view name, std::string_view help, const Histogram& h,
                       const Labels& labels = {});

  const std::string& text() const { return out_; }
  std::string Take() { return std::move(out_); }
  const Status& status() const { return status_; }

 private:
  bool CheckSample(std::string_view name, const Labels& labels);
  static std::string LabelText(const Labels& labels);
  void Fail(std::string message);

  std::string out_;
  std::string open_family_;
  Type open_type_ = Type::kUntyped;
  std::unordered_set<std::string> families_;
  Status status_;
};

// The Content-Type of the text format.
inline constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace stoker::prom
