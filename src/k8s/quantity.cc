#include "k8s/quantity.h"

#include <string>

namespace stoker::k8s {
namespace {

__extension__ typedef unsigned __int128 U128;

constexpr U128 kInt64Max = static_cast<U128>(INT64_MAX);

struct Suffix {
  std::string_view text;
  int dec_exp;  // power of ten
  int bin_exp;  // power of two
};
// Longest first where one is a prefix of another is not needed: suffixes are matched whole.
constexpr Suffix kSuffixes[] = {
    {"Ki", 0, 10}, {"Mi", 0, 20}, {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50}, {"Ei", 0, 60},
    {"n", -9, 0},  {"u", -6, 0},  {"m", -3, 0},  {"", 0, 0},    {"k", 3, 0},   {"M", 6, 0},
    {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},
};

Status Bad(std::string_view text, const std::string& what) {
  return InvalidArgument("quantity '" + std::string(text.substr(0, 64)) + "': " + what);
}

// value = mantissa * 2^bin * 10^dec, rounded up to an integer.
Result<int64_t> Scale(std::string_view text, U128 mantissa, int dec, int bin) {
  if (mantissa == 0) return int64_t{0};
  for (int i = 0; i < bin; ++i) {
    mantissa <<= 1;
    if (mantissa > kInt64Max * 1000000000000000000ull) return Bad(text, "too large");
  }
  if (dec >= 0) {
    for (int i = 0; i < dec; ++i) {
      mantissa *= 10;
      if (mantissa > kInt64Max) return Bad(text, "too large");
    }
    if (mantissa > kInt64Max) return Bad(text, "too large");
    return static_cast<int64_t>(mantissa);
  }
  U128 divisor = 1;
  for (int i = 0; i < -dec; ++i) {
    if (divisor > mantissa) return int64_t{1};  // a positive value below 1 rounds up to 1
    divisor *= 10;
  }
  const U128 q = mantissa / divisor + (mantissa % divisor != 0 ? 1 : 0);
  if (q > kInt64Max) return Bad(text, "too large");
  return static_cast<int64_t>(q);
}

Result<int64_t> Parse(std::string_view text, int extra_dec) {
  if (text.empty()) return Bad(text, "empty");
  if (text.size() > 64) return Bad(text, "longer than 64 characters");
  size_t i = 0;
  if (text[0] == '+') {
    i = 1;
  } else if (text[0] == '-') {
    return Bad(text, "must not be negative");
  }
  U128 mantissa = 0;
  int digits = 0, frac_digits = 0;
  bool seen_point = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.') {
      if (seen_point) return Bad(text, "two decimal points");
      seen_point = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    // Leading zeros cost nothing; more than 30 significant digits is not a quantity anyone means.
    if (mantissa != 0 || c != '0') ++digits;
    if (digits > 30) return Bad(text, "more than 30 significant digits");
    mantissa = mantissa * 10 + static_cast<unsigned>(c - '0');
    if (seen_point) ++frac_digits;
  }
  const std::string_view number = text.substr(0, i);
  if (number.empty() || number == "+" || number == "." || number == "+.") {
    return Bad(text, "expected a number");
  }
  const std::string_view suffix = text.substr(i);
  int dec = -frac_digits + extra_dec, bin = 0;
  const bool exponent =
      suffix.size() > 1 && (suffix[0] == 'e' || suffix[0] == 'E') &&
      (suffix[1] == '+' || suffix[1] == '-' || (suffix[1] >= '0' && suffix[1] <= '9'));
  if (exponent) {
    // A decimal exponent: e3, E-2, e+6.
    size_t k = 1;
    bool negative = false;
    if (suffix[k] == '+' || suffix[k] == '-') negative = suffix[k++] == '-';
    if (k >= suffix.size()) return Bad(text, "exponent without digits");
    int exp = 0;
    for (; k < suffix.size(); ++k) {
      if (suffix[k] < '0' || suffix[k] > '9') return Bad(text, "unknown suffix");
      exp = exp * 10 + (suffix[k] - '0');
      if (exp > 60) return Bad(text, "exponent out of range");
    }
    dec += negative ? -exp : exp;
  } else {
    bool known = false;
    for (const Suffix& s : kSuffixes) {
      if (s.text == suffix) {
        dec += s.dec_exp;
        bin = s.bin_exp;
        known = true;
        break;
      }
    }
    if (!known) {
      return Bad(text, "unknown suffix '" + std::string(suffix.substr(0, 8)) +
                           "' (Ki Mi Gi Ti Pi Ei, n u m k M G T P E, or eN)");
    }
  }
  return Scale(text, mantissa, dec, bin);
}

}  // namespace

Result<int64_t> QuantityValue(std::string_view text) { return Parse(text, 0); }
Result<int64_t> QuantityMilliValue(std::string_view text) { return Parse(text, 3); }

}  // namespace stoker::k8s
