#pragma once
// The one path-tracking reader of typed fields from a document (doc/document.h): configuration
// files, recorded data, fake-NVML scenarios and request bodies all read through it, so every
// error names where the bad value is, the same way:
//
//   config.yaml:12:14: zones.window: duration 'ten minutes': ...     (a file: origin:line:column)
//   gpus: must be in 0..8                                            (a request body: no origin)
//
// A Reader is a value and its path. Fields are read with Get(key, &out, limits...): an absent
// (or null) field leaves `out` as it was; a present one of the wrong type or out of range is an
// InvalidArgument naming the field. Required() and Keys() refuse missing and unknown fields.
//
//   doc::Reader r(root, "config.yaml");
//   STOKER_RETURN_IF_ERROR(r.Keys({"window", "bands"}));
//   STOKER_RETURN_IF_ERROR(r.Get("window", &cfg.window));
//   if (auto bands = r.Field("bands")) { ... bands->Items() ... }

#include <charconv>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/enum_table.h"
#include "core/status.h"
#include "doc/document.h"

namespace stoker::doc {

inline constexpr size_t kNoLimit = std::numeric_limits<size_t>::max();

// T's range clamped to int64_t's: the default bounds of Reader::GetInt.
template <class T>
constexpr int64_t Lowest() {
  return std::is_signed_v<T> ? static_cast<int64_t>(std::numeric_limits<T>::min()) : 0;
}
template <class T>
constexpr int64_t Highest() {
  return static_cast<uint64_t>(std::numeric_limits<T>::max()) >
                 static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
             ? std::numeric_limits<int64_t>::max()
             : static_cast<int64_t>(std::numeric_limits<T>::max());
}

class Reader {
 public:
  // The root of a document; `origin` names it in errors (a file name; empty for a request body,
  // whose errors are "field: what" without a position).
  explicit Reader(const Value& root, std::string origin = {});

  const Value& value() const { return *v_; }
  const std::string& path() const { return path_; }
  const std::string& origin() const { return *origin_; }
  // The value must outlive its readers (they point into it).

  // An error about this value: "origin:line:column: path: what", with the parts that are known.
  Status Error(std::string_view what) const;
  // The same about this map's field `key` (present or not).
  Status FieldError(std::string_view key, std::string_view what) const;
  // "origin:line:column" of this value ("" without an origin).
  std::string Position() const;
  // A check's error that names its own field ("zones.window: must be positive") with this
  // value's position in front: "origin:line:column: zones.window: must be positive".
  Status Annotate(const Status& s) const;

  // ---- structure ----
  Status ExpectMap() const;
  // Refuses keys outside `allowed`: "path.key: unknown field (allowed: a, b)".
  Status Keys(const std::vector<std::string_view>& allowed) const;
  // A field of this map; nullopt when absent or null (or when this is not a map).
  std::optional<Reader> Field(std::string_view key) const;
  // A field that must be there: "path.key: required field is missing" otherwise.
  Result<Reader> Required(std::string_view key) const;
  // The items of a list ("expected a list" otherwise), at most `max_items`.
  Result<std::vector<Reader>> Items(size_t max_items = kNoLimit) const;
  // The members of a map, in document order, at most `max_members`.
  Result<std::vector<std::pair<std::string, Reader>>> Members(size_t max_members = kNoLimit) const;

  // ---- this value as a scalar ----
  // A string (in YAML any plain scalar: "name: 42" is the string "42"), at most `max_len` bytes.
  Result<std::string> String(size_t max_len = kNoLimit) const;
  // A finite number in [min, max].
  Result<double> Double(double min = -std::numeric_limits<double>::max(),
                        double max = std::numeric_limits<double>::max()) const;
  // An integer in [min, max] (decimal; YAML also 0x hex). A JSON 2.0 is not an integer.
  Result<int64_t> Int(int64_t min = std::numeric_limits<int64_t>::min(),
                      int64_t max = std::numeric_limits<int64_t>::max()) const;
  Result<uint64_t> Uint(uint64_t max = std::numeric_limits<uint64_t>::max()) const;
  // true/false (YAML also yes/no/on/off, any case).
  Result<bool> Bool() const;
  // The duration grammar of core/duration.h.
  Result<Duration> DurationValue() const;
  template <class E, size_t N>
  Result<E> Enum(const EnumTable<E, N>& table) const {
    STOKER_ASSIGN_OR_RETURN(std::string s, String());
    auto e = table.Find(s);
    if (!e) return Error(table.Parse(s).status().message());
    return *e;
  }
  // A list of strings.
  Result<std::vector<std::string>> Strings(size_t max_items = kNoLimit,
                                           size_t max_len = kNoLimit) const;

  // ---- fields: absent or null leaves *out unchanged ----
  Status Get(std::string_view key, std::string* out, size_t max_len = kNoLimit) const;
  Status Get(std::string_view key, bool* out) const;
  Status Get(std::string_view key, double* out, double min = -std::numeric_limits<double>::max(),
             double max = std::numeric_limits<double>::max()) const;
  Status Get(std::string_view key, Duration* out) const;
  Status Get(std::string_view key, std::vector<std::string>* out, size_t max_items = kNoLimit,
             size_t max_len = kNoLimit) const;
  // An integer field into T (any integer type up to int64_t's range; use Uint for more).
  template <class T>
  Status GetInt(std::string_view key, T* out, int64_t min = Lowest<T>(),
                int64_t max = Highest<T>()) const {
    int64_t v = 0;
    bool present = false;
    STOKER_RETURN_IF_ERROR(GetInt64(key, &v, &present, min, max));
    if (present) *out = static_cast<T>(v);
    return Status::Ok();
  }
  template <class E, size_t N>
  Status Get(std::string_view key, E* out, const EnumTable<E, N>& table) const {
    auto f = Field(key);
    if (!f) return Status::Ok();
    STOKER_ASSIGN_OR_RETURN(*out, f->Enum(table));
    return Status::Ok();
  }

  // "a.b", "a[3]": the path of a child.
  std::string ChildPath(std::string_view key) const;
  std::string ItemPath(size_t i) const;

 private:
  Reader(const Value* v, std::shared_ptr<const std::string> origin, std::string path)
      : v_(v), origin_(std::move(origin)), path_(std::move(path)) {}
  // The reader of this map's field `f` (named `key`): where a field's value is not what was
  // asked for, the Get functions go through it for the error (the path is built only then).
  Reader Child(const Value* f, std::string_view key) const {
    return Reader(f, origin_, ChildPath(key));
  }
  Status GetInt64(std::string_view key, int64_t* out, bool* present, int64_t min,
                  int64_t max) const;
  std::string Where(const Mark& m, std::string_view path) const;
  Status TypeError(std::string_view expected) const;

  const Value* v_;
  std::shared_ptr<const std::string> origin_;
  std::string path_;
};

}  // namespace stoker::doc
