// The scenario model's yaml-free parts (timelines, MIG profiles), so the fake NVML library can
// be built without yaml-cpp (portable builds: Debian's libyaml-cpp.a is not position-independent).
#include <algorithm>
#include <charconv>
#include <iterator>
#include <string>

#include "fakenvml/scenario.h"

namespace stoker::fakenvml {

// ---- Timeline ------------------------------------------------------------------------------

double Timeline::At(double t) const {
  if (points.empty()) return 0;
  if (t <= points.front().first) return points.front().second;
  if (t >= points.back().first) return points.back().second;
  // First point with time > t; the segment is [it-1, it].
  auto it =
      std::upper_bound(points.begin(), points.end(), t,
                       [](double v, const std::pair<double, double>& p) { return v < p.first; });
  const auto& b = *it;
  const auto& a = *(it - 1);
  if (interp == Interp::kStep || b.first == a.first) return a.second;
  return a.second + (b.second - a.second) * (t - a.first) / (b.first - a.first);
}

double Timeline::Max() const {
  double m = 0;
  bool first = true;
  for (const auto& p : points) {
    if (first || p.second > m) m = p.second;
    first = false;
  }
  return m;
}

double Timeline::Integral(double a, double b) const {
  if (points.empty() || b <= a) return 0;
  // Breakpoints inside (a, b) split the range into pieces on which the value is linear (or
  // constant), so the trapezoid/rectangle rule is exact per piece.
  std::vector<double> cuts{a};
  for (const auto& p : points) {
    if (p.first > a && p.first < b) cuts.push_back(p.first);
  }
  cuts.push_back(b);
  double sum = 0;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const double x0 = cuts[i];
    const double x1 = cuts[i + 1];
    if (interp == Interp::kStep) {
      sum += At(x0) * (x1 - x0);
    } else {
      sum += 0.5 * (At(x0) + At(x1)) * (x1 - x0);
    }
  }
  return sum;
}

// ---- MIG profiles --------------------------------------------------------------------------

namespace {

// Profiles of A100 40/80 GB, A30, H100 80/94 GB, H200 and B200 (MIG user guide tables).
constexpr std::string_view kKnownProfiles[] = {
    "1g.5gb",     "1g.5gb+me", "1g.10gb", "1g.10gb+me", "1g.12gb", "1g.12gb+me", "1g.18gb",
    "1g.18gb+me", "1g.20gb",   "1g.23gb", "1g.24gb",    "1g.35gb", "1g.45gb",    "2g.10gb",
    "2g.12gb",    "2g.20gb",   "2g.24gb", "2g.35gb",    "2g.45gb", "3g.20gb",    "3g.40gb",
    "3g.47gb",    "3g.71gb",   "3g.90gb", "4g.20gb",    "4g.40gb", "4g.47gb",    "4g.71gb",
    "4g.90gb",    "4g.24gb",   "7g.40gb", "7g.80gb",    "7g.94gb", "7g.141gb",   "7g.180gb",
};

}  // namespace

Result<std::pair<uint32_t, uint32_t>> ParseMigProfile(std::string_view profile) {
  if (std::find(std::begin(kKnownProfiles), std::end(kKnownProfiles), profile) ==
      std::end(kKnownProfiles)) {
    std::string known;
    for (std::string_view p : kKnownProfiles) {
      if (!known.empty()) known += ", ";
      known += p;
    }
    return InvalidArgument("unknown MIG profile '" + std::string(profile) + "' (known: " + known +
                           ")");
  }
  const uint32_t slices = static_cast<uint32_t>(profile[0] - '0');
  uint32_t gb = 0;
  const size_t dot = profile.find('.');
  // Every known profile is "<slices>g.<GB>gb", some with a suffix ("+me").
  if (dot == std::string_view::npos ||
      std::from_chars(profile.data() + dot + 1, profile.data() + profile.size(), gb).ec !=
          std::errc{}) {
    return Internal("MIG profile '" + std::string(profile) + "': no memory size after the dot");
  }
  return std::make_pair(slices, gb);
}

}  // namespace stoker::fakenvml
