#include "core/size.h"

#include <cctype>
#include <string>

namespace stoker {
namespace {

Status Bad(std::string_view text, const std::string& what) {
  return InvalidArgument("size '" + std::string(text) + "': " + what +
                         " (e.g. 4096 for MiB, 512M, 16G, 1.5T)");
}

}  // namespace

Result<int64_t> ParseSizeMib(std::string_view text) {
  size_t i = 0;
  double whole = 0, scale = 1, frac = 0;
  bool digits = false, dot = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      digits = true;
      if (dot) {
        scale /= 10;
        frac += (c - '0') * scale;
      } else {
        whole = whole * 10 + (c - '0');
        if (whole > static_cast<double>(kMaxSizeMib)) return Bad(text, "too large (max 1 EiB)");
      }
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (text.empty()) return Bad(text, "empty");
  if (text[0] == '-') return Bad(text, "negative");
  if (!digits) return Bad(text, "not a number");
  std::string unit;
  for (char c : text.substr(i))
    unit += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double mult = 0;
  if (unit.empty() || unit == "M" || unit == "MI" || unit == "MIB") {
    mult = 1;
  } else if (unit == "G" || unit == "GI" || unit == "GIB") {
    mult = 1024;
  } else if (unit == "T" || unit == "TI" || unit == "TIB") {
    mult = 1024.0 * 1024;
  } else {
    return Bad(text, "unknown unit '" + std::string(text.substr(i)) + "'");
  }
  const double mib = (whole + frac) * mult;
  if (mib > static_cast<double>(kMaxSizeMib)) return Bad(text, "too large (max 1 EiB)");
  return static_cast<int64_t>(mib);
}

}  // namespace stoker
