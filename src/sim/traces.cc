#include "sim/traces.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/integer.h"

namespace stoker::sim {
namespace {

// The published files are plain comma-separated values without quoting (checked for every file
// in shared/traces), so a split on ',' is exact; a quote in a field is rejected as a bad row.
std::vector<std::string_view> SplitCsv(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      out.push_back(line.substr(start));
      return out;
    }
    out.push_back(line.substr(start, comma - start));
    start = comma + 1;
  }
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

Result<int64_t> ParseInt(std::string_view text, std::string_view field) {
  auto v = stoker::ParseInt(Trim(text));
  if (!v.ok()) return InvalidArgument(std::string(field) + ": " + v.status().message());
  return v;
}

// Seconds (possibly fractional, e.g. Philly's "66.0") to integer milliseconds.
Result<SimMs> ParseSecondsToMs(std::string_view text, std::string_view field) {
  text = Trim(text);
  double v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty() || !std::isfinite(v)) {
    return InvalidArgument(std::string(field) + ": not a number: '" + std::string(text) + "'");
  }
  // 1e12 s is ~30,000 years: anything beyond is corrupt and would overflow later arithmetic.
  if (std::fabs(v) > 1e12) {
    return InvalidArgument(std::string(field) + ": out of range: '" + std::string(text) + "'");
  }
  return static_cast<SimMs>(std::llround(v * 1000.0));
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

// "2017-10-09 07:01:55" (UTC) -> seconds since the Unix epoch.
Result<int64_t> ParseTimestamp(std::string_view text, std::string_view field) {
  text = Trim(text);
  auto bad = [&] {
    return InvalidArgument(std::string(field) + ": expected 'YYYY-MM-DD HH:MM:SS', got '" +
                           std::string(text) + "'");
  };
  if (text.size() != 19 || text[4] != '-' || text[7] != '-' ||
      (text[10] != ' ' && text[10] != 'T') || text[13] != ':' || text[16] != ':') {
    return bad();
  }
  auto num = [&](size_t pos, size_t len, int64_t& out) {
    const auto [ptr, ec] = std::from_chars(text.data() + pos, text.data() + pos + len, out);
    return ec == std::errc() && ptr == text.data() + pos + len;
  };
  int64_t y, mo, d, h, mi, s;
  if (!num(0, 4, y) || !num(5, 2, mo) || !num(8, 2, d) || !num(11, 2, h) || !num(14, 2, mi) ||
      !num(17, 2, s)) {
    return bad();
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60) return bad();
  return DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 + h * 3600 +
         mi * 60 + s;
}

struct Columns {
  std::vector<std::string> names;
  int Index(std::string_view name) const {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) return static_cast<int>(i);
    }
    return -1;
  }
};

// Required columns per format, looked up by name so that column order does not matter.
struct FormatSpec {
  std::vector<std::string_view> required;
};

FormatSpec SpecFor(TraceFormat format) {
  switch (format) {
    case TraceFormat::kItp:
      return {{"job_id", "submission_time", "duration", "num_gpu"}};
    case TraceFormat::kPhilly:
      return {{"timestamp", "duration", "num_gpus", "cluster"}};
    case TraceFormat::kTiresias:
      return {{"job_id", "num_gpu", "submit_time", "duration"}};
  }
  return {};
}

// A parsed row: absolute submission in ms (Philly: since the Unix epoch) before normalisation.
Result<TraceJob> ParseRow(TraceFormat format, const Columns& cols,
                          const std::vector<std::string_view>& f, uint64_t line) {
  if (f.size() != cols.names.size()) {
    return InvalidArgument("expected " + std::to_string(cols.names.size()) + " fields, got " +
                           std::to_string(f.size()));
  }
  for (const auto& field : f) {
    if (field.find('"') != std::string_view::npos) {
      return InvalidArgument("quoted fields are not supported");
    }
  }
  TraceJob job;
  job.line = line;
  int64_t gpus = 0;
  switch (format) {
    case TraceFormat::kItp: {
      job.id = std::string(Trim(f[cols.Index("job_id")]));
      STOKER_ASSIGN_OR_RETURN(
          job.submit_ms, ParseSecondsToMs(f[cols.Index("submission_time")], "submission_time"));
      STOKER_ASSIGN_OR_RETURN(job.duration_ms,
                              ParseSecondsToMs(f[cols.Index("duration")], "duration"));
      STOKER_ASSIGN_OR_RETURN(gpus, ParseInt(f[cols.Index("num_gpu")], "num_gpu"));
      break;
    }
    case TraceFormat::kPhilly: {
      job.id = std::to_string(line);
      STOKER_ASSIGN_OR_RETURN(const int64_t ts,
                              ParseTimestamp(f[cols.Index("timestamp")], "timestamp"));
      job.submit_ms = ts * 1000;
      STOKER_ASSIGN_OR_RETURN(job.duration_ms,
                              ParseSecondsToMs(f[cols.Index("duration")], "duration"));
      STOKER_ASSIGN_OR_RETURN(gpus, ParseInt(f[cols.Index("num_gpus")], "num_gpus"));
      job.group = std::string(Trim(f[cols.Index("cluster")]));
      break;
    }
    case TraceFormat::kTiresias: {
      job.id = std::string(Trim(f[cols.Index("job_id")]));
      STOKER_ASSIGN_OR_RETURN(job.submit_ms,
                              ParseSecondsToMs(f[cols.Index("submit_time")], "submit_time"));
      STOKER_ASSIGN_OR_RETURN(job.duration_ms,
                              ParseSecondsToMs(f[cols.Index("duration")], "duration"));
      STOKER_ASSIGN_OR_RETURN(gpus, ParseInt(f[cols.Index("num_gpu")], "num_gpu"));
      if (const int m = cols.Index("model_name"); m >= 0) job.group = std::string(Trim(f[m]));
      break;
    }
  }
  if (job.id.empty()) return InvalidArgument("job_id: empty");
  if (job.submit_ms < 0) return InvalidArgument("submission time: negative");
  if (job.duration_ms <= 0) return InvalidArgument("duration: must be positive");
  if (gpus <= 0 || gpus > 1'000'000) {
    return InvalidArgument("GPU count: must be between 1 and 1000000, got " + std::to_string(gpus));
  }
  job.gpus = static_cast<int>(gpus);
  job.min_gpus = job.gpus;
  return job;
}

}  // namespace

Result<ClusterShape> ParseClusterShape(std::string_view text) {
  const size_t x = text.find_first_of("xX");
  auto bad = [&] {
    return InvalidArgument("cluster: expected NODESxGPUS (e.g. 64x8), got '" + std::string(text) +
                           "'");
  };
  if (x == std::string_view::npos) return bad();
  auto nodes = ParseInt(text.substr(0, x), "nodes");
  auto gpus = ParseInt(text.substr(x + 1), "gpus");
  if (!nodes.ok() || !gpus.ok()) return bad();
  if (*nodes <= 0 || *gpus <= 0 || *nodes > 1'000'000 || *gpus > 1024) return bad();
  return ClusterShape{static_cast<int>(*nodes), static_cast<int>(*gpus)};
}

Result<Trace> ParseTrace(std::istream& in, std::string_view name, TraceFormat format,
                         const TraceLoadOptions& options) {
  Trace trace;
  trace.source = std::string(name);
  std::string line;
  uint64_t line_no = 0;
  Columns cols;
  auto where = [&](uint64_t n) { return std::string(name) + ":" + std::to_string(n); };

  // Header: the first non-empty line.
  while (std::getline(in, line)) {
    ++line_no;
    if (!Trim(line).empty()) break;
  }
  if (Trim(line).empty()) return InvalidArgument(std::string(name) + ": empty file (no header)");
  for (auto col : SplitCsv(line)) cols.names.emplace_back(Trim(col));
  for (auto req : SpecFor(format).required) {
    if (cols.Index(req) < 0) {
      return InvalidArgument(where(line_no) + ": header: missing column '" + std::string(req) +
                             "' for format " + std::string(TraceFormatName(format)));
    }
  }

  while (std::getline(in, line)) {
    ++line_no;
    if (Trim(line).empty()) continue;  // Philly ends with a blank line.
    auto job = ParseRow(format, cols, SplitCsv(line), line_no);
    if (!job.ok()) {
      if (options.skip_bad_rows) {
        ++trace.skipped_rows;
        continue;
      }
      return job.status().WithContext(where(line_no));
    }
    trace.jobs.push_back(std::move(job).value());
  }
  if (in.bad()) return Unavailable(std::string(name) + ": read error");

  std::stable_sort(trace.jobs.begin(), trace.jobs.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.submit_ms < b.submit_ms; });
  if (options.limit > 0 && trace.jobs.size() > options.limit) trace.jobs.resize(options.limit);
  if (!trace.jobs.empty()) {
    const SimMs origin = trace.jobs.front().submit_ms;
    for (auto& job : trace.jobs) job.submit_ms -= origin;
    trace.epoch_offset_s = format == TraceFormat::kPhilly ? origin / 1000 : 0;
  }
  return trace;
}

Result<int64_t> ParseUtcDateTime(std::string_view text) {
  std::string full(Trim(text));
  if (full.size() == 10) full += " 00:00:00";
  return ParseTimestamp(full, "time");
}

Result<int64_t> FilterTraceWindow(Trace& trace, std::optional<int64_t> since_s,
                                  std::optional<int64_t> until_s) {
  if (!since_s && !until_s) return int64_t{0};
  if (trace.epoch_offset_s == 0) {
    return InvalidArgument(trace.source +
                           ": time window needs absolute timestamps (philly format)");
  }
  const size_t before = trace.jobs.size();
  std::erase_if(trace.jobs, [&](const TraceJob& j) {
    const int64_t abs_s = trace.epoch_offset_s + j.submit_ms / 1000;
    return (since_s && abs_s < *since_s) || (until_s && abs_s > *until_s);
  });
  return static_cast<int64_t>(before - trace.jobs.size());
}

Result<ClusterShape> ParseTiresiasClusterSpec(std::istream& in, std::string_view name) {
  std::string header, row;
  if (!std::getline(in, header) || !std::getline(in, row)) {
    return InvalidArgument(std::string(name) + ": expected a header and one row");
  }
  Columns cols;
  for (auto c : SplitCsv(header)) cols.names.emplace_back(Trim(c));
  const auto fields = SplitCsv(row);
  if (fields.size() != cols.names.size()) {
    return InvalidArgument(std::string(name) + ":2: expected " + std::to_string(cols.names.size()) +
                           " fields");
  }
  int64_t v[3];
  const char* names[3] = {"num_switch", "num_node_p_switch", "num_gpu_p_node"};
  for (int i = 0; i < 3; ++i) {
    const int idx = cols.Index(names[i]);
    if (idx < 0)
      return InvalidArgument(std::string(name) + ":1: missing column '" + names[i] + "'");
    auto parsed = ParseInt(fields[idx], names[i]);
    if (!parsed.ok()) return parsed.status().WithContext(std::string(name) + ":2");
    if (*parsed <= 0 || *parsed > 100000) {
      return InvalidArgument(std::string(name) + ":2: " + names[i] + ": must be positive");
    }
    v[i] = *parsed;
  }
  return ClusterShape{static_cast<int>(v[0] * v[1]), static_cast<int>(v[2])};
}

Result<Trace> LoadTrace(const std::string& path, TraceFormat format,
                        const TraceLoadOptions& options) {
  std::ifstream in(path);
  if (!in) return NotFound(path + ": cannot open trace file");
  STOKER_ASSIGN_OR_RETURN(Trace trace, ParseTrace(in, path, format, options));
  if (format == TraceFormat::kTiresias) {
    const auto spec = std::filesystem::path(path).parent_path() / "cluster_spec.csv";
    std::ifstream spec_in(spec);
    if (spec_in) {
      STOKER_ASSIGN_OR_RETURN(trace.cluster, ParseTiresiasClusterSpec(spec_in, spec.string()));
    }
  }
  return trace;
}

}  // namespace stoker::sim
