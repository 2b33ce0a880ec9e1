#include "protocol/job_status_text.h"

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

namespace stoker::protocol {
namespace {

// Appends JSON text to one string. The caller writes an object's keys in the order the JSON
// library's objects keep them (a std::map: sorted by byte), which is the order dump() writes.
class Writer {
 public:
  explicit Writer(std::string* out) : out_(*out) {}

  template <typename T>
  void Int(T v) {
    static_assert(std::is_integral_v<T>);
    // As the library stores them: signed as int64, unsigned as uint64, in plain decimal.
    using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, static_cast<Wide>(v));
    out_.append(buf, r.ptr);
  }
  void Str(std::string_view s) {
    // Printable ASCII other than the quote and the backslash is written as it is; anything
    // else (control characters, non-ASCII UTF-8, invalid bytes) is written by the library.
    for (const char c : s) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u > 0x7e || c == '"' || c == '\\') {
        out_ += json(std::string(s)).dump();
        return;
      }
    }
    out_ += '"';
    out_ += s;
    out_ += '"';
  }
  // A member's key (after a comma unless it is its object's first).
  void Key(std::string_view key) {
    Comma();
    Str(key);
    out_ += ':';
  }
  // An array's element.
  void Item() { Comma(); }
  void Open(char c) {
    out_ += c;
    first_ = true;
  }
  void Close(char c) {
    out_ += c;
    first_ = false;
  }

 private:
  void Comma() {
    if (!first_) out_ += ',';
    first_ = false;
  }

  std::string& out_;
  bool first_ = true;
};

template <typename T>
void Optional(Writer& w, std::string_view key, const std::optional<T>& v) {
  if (v) {
    w.Key(key);
    w.Int(*v);
  }
}

// AssignmentToJson's members (model.cc), sorted, with a gang part's own members (error,
// exit_code, phase, rank, signal; JobStatusToJson) where they sort among them.
void AssignmentObject(Writer& w, const Assignment& a, const GangPart* part, size_t rank) {
  w.Open('{');
  w.Key("cuda_visible_devices");
  w.Str(a.cuda_visible_devices);
  w.Key("env");
  w.Open('{');
  for (const auto& [k, v] : a.env) {
    w.Key(k);
    w.Str(v);
  }
  w.Close('}');
  if (part) {
    if (!part->error.empty()) {
      w.Key("error");
      w.Str(part->error);
    }
    Optional(w, "exit_code", part->exit_code);
  }
  w.Key("gpu_indices");
  w.Open('[');
  for (const uint32_t g : a.gpu_indices) {
    w.Item();
    w.Int(g);
  }
  w.Close(']');
  w.Key("gpu_milli");
  w.Int(a.gpu_milli);
  w.Key("mig_slices");
  w.Int(a.mig_slices);
  w.Key("mig_uuid");
  w.Str(a.mig_uuid);
  w.Key("node");
  w.Str(a.node);
  if (part) {
    w.Key("phase");
    w.Str(PartPhaseName(part->phase));
    w.Key("rank");
    w.Int(rank);
  }
  w.Key("shares");
  w.Open('[');
  for (const auto& [g, m] : a.shares) {
    w.Item();
    w.Open('[');
    w.Item();
    w.Int(g);
    w.Item();
    w.Int(m);
    w.Close(']');
  }
  w.Close(']');
  if (part) Optional(w, "signal", part->signal);
  w.Close('}');
}

}  // namespace

std::string JobStatusText(const Job& j) {
  std::string out;
  out.reserve(320);
  Writer w(&out);
  w.Open('{');
  if (j.assignment) {
    w.Key("assignment");
    AssignmentObject(w, *j.assignment, nullptr, 0);
  }
  if (j.consolidate_milli != 0) {
    w.Key("consolidate_milli");
    w.Int(j.consolidate_milli);
  }
  w.Key("end_ms");
  w.Int(j.end_ms);
  Optional(w, "exit_code", j.exit_code);
  if (!j.parts.empty()) {
    w.Key("parts");
    w.Open('[');
    for (size_t rank = 0; rank < j.parts.size(); ++rank) {
      w.Item();
      AssignmentObject(w, j.parts[rank].assignment, &j.parts[rank], rank);
    }
    w.Close(']');
  }
  if (j.preempted_by != 0) {
    w.Key("preempted_by");
    w.Int(j.preempted_by);
  }
  w.Key("preemptions");
  w.Int(j.preemptions);
  w.Key("reason");
  w.Str(j.reason);
  w.Key("requeues");
  w.Int(j.requeues);
  Optional(w, "signal", j.signal);
  w.Key("start_ms");
  w.Int(j.start_ms);
  w.Key("state");
  w.Str(JobStateName(j.state));
  if (!j.stop_to_fail.empty()) {
    w.Key("stop_to_fail");
    w.Str(j.stop_to_fail);
  }
  if (!j.stop_to_requeue.empty()) {
    w.Key("stop_to_requeue");
    w.Str(j.stop_to_requeue);
  }
  w.Key("submit_ms");
  w.Int(j.submit_ms);
  w.Close('}');
  return out;
}

}  // namespace stoker::protocol
