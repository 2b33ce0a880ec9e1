#include "core/integer.h"

#include <charconv>
#include <string>

namespace stoker {
namespace {

// At most this much of the text is shown in an error.
constexpr size_t kShown = 64;

std::string Quoted(std::string_view text) {
  std::string out = "'" + std::string(text.substr(0, kShown));
  if (text.size() > kShown) out += "...";
  return out + "'";
}

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// An integer outside [min, max]: negative where none may be, else out of range.
template <class T>
Status OutOfRange(std::string_view text, T min, T max) {
  if (!text.empty() && text[0] == '-' && min >= 0) {
    return InvalidArgument(Quoted(text) + " is negative");
  }
  return InvalidArgument(Quoted(text) + " is out of range " + std::to_string(min) + ".." +
                         std::to_string(max));
}

// What is wrong with text that from_chars did not take whole: empty, not an integer at all, or
// an integer too large for 64 bits (out of range, not "not an integer").
template <class T>
Status Refusal(std::string_view text, T min, T max) {
  if (text.empty()) return InvalidArgument("'' is empty");
  const std::string_view digits = text[0] == '-' ? text.substr(1) : text;
  if (!AllDigits(digits)) return InvalidArgument(Quoted(text) + " is not an integer");
  return OutOfRange(text, min, max);
}

}  // namespace

Result<int64_t> ParseInt(std::string_view text, int64_t min, int64_t max) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end) return Refusal(text, min, max);
  if (v < min || v > max) return OutOfRange(text, min, max);
  return v;
}

Result<uint64_t> ParseUint(std::string_view text, uint64_t max) {
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end) return Refusal<uint64_t>(text, 0, max);
  if (v > max) return OutOfRange<uint64_t>(text, 0, max);
  return v;
}

}  // namespace stoker
