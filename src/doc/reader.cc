#include "doc/reader.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/duration.h"

namespace stoker::doc {

Reader::Reader(const Value& root, std::string origin)
    : v_(&root), origin_(std::make_shared<const std::string>(std::move(origin))) {}

std::string Reader::Where(const Mark& m, std::string_view path) const {
  std::string out;
  if (!origin_->empty()) {
    out = *origin_;
    if (m.known()) out += ":" + std::to_string(m.line) + ":" + std::to_string(m.column);
    out += ": ";
  }
  out += path.empty() ? std::string_view("(top level)") : path;
  return out;
}

std::string Reader::Position() const {
  if (origin_->empty()) return "";
  std::string out = *origin_;
  const Mark& m = v_->mark();
  if (m.known()) out += ":" + std::to_string(m.line) + ":" + std::to_string(m.column);
  return out;
}

Status Reader::Annotate(const Status& s) const {
  if (s.ok() || origin_->empty()) return s;
  return Status(s.code(), Position() + ": " + s.message());
}

Status Reader::Error(std::string_view what) const {
  return InvalidArgument(Where(v_->mark(), path_) + ": " + std::string(what));
}

Status Reader::FieldError(std::string_view key, std::string_view what) const {
  Mark m = v_->mark();
  if (v_->is_map()) {
    for (const Member& member : v_->members()) {
      if (member.key == key) m = member.value.mark();
    }
  }
  return InvalidArgument(Where(m, ChildPath(key)) + ": " + std::string(what));
}

std::string Reader::ChildPath(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

std::string Reader::ItemPath(size_t i) const { return path_ + "[" + std::to_string(i) + "]"; }

Status Reader::TypeError(std::string_view expected) const {
  if (v_->is_scalar() && v_->kind() != Kind::kNull) {
    std::string shown = v_->text().substr(0, 64);
    return Error(std::string(expected) + ", got '" + shown + "'");
  }
  return Error(std::string(expected) + ", got " + KindName(v_->kind()));
}

Status Reader::ExpectMap() const {
  if (!v_->is_map()) return TypeError("expected a mapping");
  return Status::Ok();
}

Status Reader::Keys(const std::vector<std::string_view>& allowed) const {
  STOKER_RETURN_IF_ERROR(ExpectMap());
  for (const Member& m : v_->members()) {
    bool ok = false;
    for (std::string_view a : allowed) ok = ok || a == m.key;
    if (ok) continue;
    std::string list;
    for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    return InvalidArgument(Where(m.key_mark, ChildPath(m.key.substr(0, 64))) +
                           ": unknown field (allowed: " + list + ")");
  }
  return Status::Ok();
}

std::optional<Reader> Reader::Field(std::string_view key) const {
  const Value* f = v_->Find(key);
  if (f == nullptr || f->is_null()) return std::nullopt;
  return Reader(f, origin_, ChildPath(key));
}

Result<Reader> Reader::Required(std::string_view key) const {
  STOKER_RETURN_IF_ERROR(ExpectMap());
  auto f = Field(key);
  if (!f) return FieldError(key, "required field is missing");
  return *f;
}

Result<std::vector<Reader>> Reader::Items(size_t max_items) const {
  if (!v_->is_list()) return TypeError("expected a list");
  if (v_->items().size() > max_items) {
    return Error("more than " + std::to_string(max_items) + " items");
  }
  std::vector<Reader> out;
  out.reserve(v_->items().size());
  for (size_t i = 0; i < v_->items().size(); ++i) {
    out.push_back(Reader(&v_->items()[i], origin_, ItemPath(i)));
  }
  return out;
}

Result<std::vector<std::pair<std::string, Reader>>> Reader::Members(size_t max_members) const {
  STOKER_RETURN_IF_ERROR(ExpectMap());
  if (v_->members().size() > max_members) {
    return Error("more than " + std::to_string(max_members) + " entries");
  }
  std::vector<std::pair<std::string, Reader>> out;
  out.reserve(v_->members().size());
  for (const Member& m : v_->members()) {
    out.emplace_back(m.key, Reader(&m.value, origin_, ChildPath(m.key)));
  }
  return out;
}

Result<std::string> Reader::String(size_t max_len) const {
  const bool ok = v_->kind() == Kind::kString || (v_->plain() && v_->is_scalar());
  if (!ok) return TypeError("expected a string");
  if (v_->text().size() > max_len) {
    return Error("longer than " + std::to_string(max_len) + " bytes");
  }
  return v_->text();
}

Result<double> Reader::Double(double min, double max) const {
  if (v_->kind() != Kind::kNumber) return TypeError("expected a number");
  const std::string& s = v_->text();
  double d = 0;
  const char* b = s.data();
  const char* e = b + s.size();
  if (b != e && *b == '+') ++b;
  auto [p, ec] = std::from_chars(b, e, d);
  if (ec != std::errc() || p != e || !std::isfinite(d)) {
    return Error("expected a finite number, got '" + s.substr(0, 64) + "'");
  }
  if (d < min || d > max) {
    std::ostringstream m;
    m << "value " << s.substr(0, 64) << " out of range [" << min << ", " << max << "]";
    return Error(m.str());
  }
  return d;
}

namespace {
// The digits of an integer: decimal, or (YAML) 0x hex; nullopt for anything else (1.5, 1e3).
template <class T>
std::optional<T> ParseInteger(std::string_view s, bool yaml) {
  if (!s.empty() && s[0] == '+' && yaml) s.remove_prefix(1);
  int base = 10;
  if (yaml && s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  T v{};
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}
}  // namespace

Result<int64_t> Reader::Int(int64_t min, int64_t max) const {
  if (v_->kind() != Kind::kNumber) return TypeError("expected an integer");
  const std::string& s = v_->text();
  const auto range = [&] {
    return Error("must be in " + std::to_string(min) + ".." + std::to_string(max));
  };
  auto v = ParseInteger<int64_t>(s, v_->plain());
  if (!v) {
    // Whole, but beyond int64: out of range, not "not an integer".
    if (ParseInteger<uint64_t>(s, v_->plain())) return range();
    bool digits = !s.empty();
    for (size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0; i < s.size(); ++i) {
      digits = digits && s[i] >= '0' && s[i] <= '9';
    }
    if (digits) return range();
    return Error("expected an integer, got '" + s.substr(0, 64) + "'");
  }
  if (*v < min || *v > max) return range();
  return *v;
}

Result<uint64_t> Reader::Uint(uint64_t max) const {
  if (v_->kind() != Kind::kNumber) return TypeError("expected a non-negative integer");
  auto v = ParseInteger<uint64_t>(v_->text(), v_->plain());
  if (!v || (!v_->text().empty() && v_->text()[0] == '-')) {
    return Error("expected a non-negative integer, got '" + v_->text().substr(0, 64) + "'");
  }
  if (*v > max) return Error("must be at most " + std::to_string(max));
  return *v;
}

Result<bool> Reader::Bool() const {
  if (v_->kind() == Kind::kBool) {
    return v_->text() == "true" || v_->text() == "True" || v_->text() == "TRUE";
  }
  if (v_->plain() && v_->is_scalar()) {
    std::string l = v_->text();
    for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (l == "yes" || l == "on") return true;
    if (l == "no" || l == "off") return false;
  }
  return TypeError("expected true or false");
}

Result<Duration> Reader::DurationValue() const {
  STOKER_ASSIGN_OR_RETURN(std::string s, String(256));
  auto d = ParseDuration(s);
  if (!d.ok()) return Error(d.status().message());
  return *d;
}

Result<std::vector<std::string>> Reader::Strings(size_t max_items, size_t max_len) const {
  STOKER_ASSIGN_OR_RETURN(std::vector<Reader> items, Items(max_items));
  std::vector<std::string> out;
  out.reserve(items.size());
  for (const Reader& r : items) {
    STOKER_ASSIGN_OR_RETURN(std::string s, r.String(max_len));
    out.push_back(std::move(s));
  }
  return out;
}

// The Get functions take the value directly when it is what was asked for, and go through a
// child Reader (which builds the field's path) only to say what is wrong: reading a field costs
// a lookup, not a path string (Slurm's answers have millions of fields).
Status Reader::Get(std::string_view key, std::string* out, size_t max_len) const {
  const Value* f = v_->Find(key);
  if (f == nullptr || f->is_null()) return Status::Ok();
  if (f->kind() == Kind::kString && f->text().size() <= max_len) {
    *out = f->text();
    return Status::Ok();
  }
  STOKER_ASSIGN_OR_RETURN(*out, Child(f, key).String(max_len));
  return Status::Ok();
}

Status Reader::Get(std::string_view key, bool* out) const {
  const Value* f = v_->Find(key);
  if (f == nullptr || f->is_null()) return Status::Ok();
  STOKER_ASSIGN_OR_RETURN(*out, Child(f, key).Bool());
  return Status::Ok();
}

Status Reader::GetInt64(std::string_view key, int64_t* out, bool* present, int64_t min,
                        int64_t max) const {
  const Value* f = v_->Find(key);
  if (f == nullptr || f->is_null()) return Status::Ok();
  if (f->kind() == Kind::kNumber) {
    auto v = ParseInteger<int64_t>(f->text(), f->plain());
    if (v && *v >= min && *v <= max) {
      *out = *v;
      *present = true;
      return Status::Ok();
    }
  }
  STOKER_ASSIGN_OR_RETURN(*out, Child(f, key).Int(min, max));
  *present = true;
  return Status::Ok();
}

Status Reader::Get(std::string_view key, double* out, double min, double max) const {
  auto f = Field(key);
  if (!f) return Status::Ok();
  STOKER_ASSIGN_OR_RETURN(*out, f->Double(min, max));
  return Status::Ok();
}

Status Reader::Get(std::string_view key, Duration* out) const {
  auto f = Field(key);
  if (!f) return Status::Ok();
  STOKER_ASSIGN_OR_RETURN(*out, f->DurationValue());
  return Status::Ok();
}

Status Reader::Get(std::string_view key, std::vector<std::string>* out, size_t max_items,
                   size_t max_len) const {
  const Value* f = v_->Find(key);
  if (f == nullptr || f->is_null()) return Status::Ok();
  const auto plain_string = [&](const Value& item) {
    return item.kind() == Kind::kString && item.text().size() <= max_len;
  };
  if (f->is_list() && f->items().size() <= max_items &&
      std::all_of(f->items().begin(), f->items().end(), plain_string)) {
    out->clear();
    out->reserve(f->items().size());
    for (const Value& item : f->items()) out->push_back(item.text());
    return Status::Ok();
  }
  STOKER_ASSIGN_OR_RETURN(*out, Child(f, key).Strings(max_items, max_len));
  return Status::Ok();
}

}  // namespace stoker::doc
