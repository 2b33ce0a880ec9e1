#include "core/duration.h"

#include <charconv>
#include <cmath>
#include <optional>

namespace stoker {
namespace {

constexpr double kMaxNanos = 100.0 * 365 * 86400 * 1e9;

// Nanoseconds per unit: exact in a double, so "100us" is 100,000 ns, not 99,999.
std::optional<double> UnitNanos(std::string_view unit) {
  if (unit == "us") return 1e3;
  if (unit == "ms") return 1e6;
  if (unit == "s") return 1e9;
  if (unit == "m") return 60e9;
  if (unit == "h") return 3600e9;
  if (unit == "d") return 86400e9;
  if (unit == "w") return 7 * 86400e9;
  return std::nullopt;
}

bool IsNumberChar(char c) { return (c >= '0' && c <= '9') || c == '.'; }
bool IsUnitChar(char c) { return c >= 'a' && c <= 'z'; }

}  // namespace

Result<Duration> ParseDuration(std::string_view text) {
  const auto bad = [&](const std::string& what) {
    return InvalidArgument("duration '" + std::string(text) + "': " + what);
  };
  if (text.empty()) return bad("empty (expected e.g. 90s, 15m, 1h30m)");
  double nanos = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && IsNumberChar(text[j])) ++j;
    if (j == i) {
      return bad(text[i] == '-' ? "must not be negative"
                                : "expected a number at '" + std::string(text.substr(i)) + "'");
    }
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data() + i, text.data() + j, v);
    if (ec != std::errc() || end != text.data() + j || !std::isfinite(v)) {
      return bad("'" + std::string(text.substr(i, j - i)) + "' is not a number");
    }
    size_t k = j;
    while (k < text.size() && IsUnitChar(text[k])) ++k;
    const std::string_view unit = text.substr(j, k - j);
    if (unit.empty() && !(i == 0 && k == text.size())) {
      return bad(k < text.size()
                     ? "unexpected '" + std::string(1, text[k]) + "'"
                     : "a unit is needed after '" + std::string(text.substr(i, j - i)) + "'");
    }
    const std::optional<double> scale = unit.empty() ? 1e9 : UnitNanos(unit);
    if (!scale) return bad("unknown unit '" + std::string(unit) + "' (us, ms, s, m, h, d, w)");
    nanos += v * *scale;
    if (!(nanos <= kMaxNanos)) return bad("longer than 100 years");
    i = k;
  }
  return std::chrono::duration_cast<Duration>(
      std::chrono::nanoseconds(static_cast<int64_t>(std::llround(nanos))));
}

std::string FormatDuration(Duration d) {
  int64_t s = std::chrono::duration_cast<std::chrono::seconds>(d).count();
  std::string out;
  if (s < 0) {
    out = "-";
    s = -s;
  }
  if (s >= 3600) out += std::to_string(s / 3600) + "h";
  if (s % 3600 >= 60) out += std::to_string((s % 3600) / 60) + "m";
  if (s % 60 != 0 || out.empty() || out == "-") out += std::to_string(s % 60) + "s";
  return out;
}

}  // namespace stoker
