// JSON into the document tree, with simdjson's on-demand parser: every value's position is the
// parser's location in the text, turned into a line and a column.
#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "doc/document.h"

namespace stoker::doc {
namespace {

namespace od = simdjson::ondemand;

// Offsets grow in document order, so line and column are counted forward from the last one.
class Positions {
 public:
  Positions(std::string_view text, int first_line)
      : text_(text), first_line_(first_line), line_(first_line) {}
  Mark At(size_t offset) {
    offset = std::min(offset, text_.size());
    if (offset < pos_) pos_ = 0, line_ = first_line_, line_start_ = 0;
    // memchr from newline to newline: the whole text is scanned once, not byte by byte.
    while (pos_ < offset) {
      const void* nl = std::memchr(text_.data() + pos_, '\n', offset - pos_);
      if (nl == nullptr) {
        pos_ = offset;
        break;
      }
      ++line_;
      pos_ = static_cast<size_t>(static_cast<const char*>(nl) - text_.data()) + 1;
      line_start_ = pos_;
    }
    return Mark{line_, static_cast<int>(std::min<size_t>(offset - line_start_ + 1, INT32_MAX))};
  }

 private:
  std::string_view text_;
  int first_line_;
  size_t pos_ = 0;
  size_t line_start_ = 0;
  int line_;
};

// A number's text: a value gives it directly, a document as a result.
simdjson::error_code RawToken(od::value& v, std::string_view* out) {
  *out = v.raw_json_token();
  return simdjson::SUCCESS;
}
simdjson::error_code RawToken(od::document& d, std::string_view* out) {
  return d.raw_json_token().get(*out);
}

class Builder {
 public:
  Builder(std::string_view text, std::string_view origin, const char* base, int first_line)
      : positions_(text, first_line), origin_(origin), base_(base) {}

  Status Error(simdjson::error_code err, const std::string& what = "") {
    std::string where = origin_.empty() ? "" : std::string(origin_) + ":";
    const Mark m = positions_.At(last_);
    where += std::to_string(m.line) + ":" + std::to_string(m.column) + ": ";
    return InvalidArgument(where + "not valid JSON (" +
                           (what.empty() ? simdjson::error_message(err) : what) + ")");
  }

  template <class V>
  Mark Here(V& v) {
    const char* loc = nullptr;
    if (!v.current_location().get(loc) && loc >= base_) last_ = static_cast<size_t>(loc - base_);
    return positions_.At(last_);
  }

  Status Build(od::value v, Value* out, int depth) {
    const Mark mark = Here(v);
    if (depth > kMaxDepth) return Error(simdjson::DEPTH_ERROR, "nested too deeply");
    od::json_type type;
    if (auto err = v.type().get(type)) return Error(err);
    switch (type) {
      case od::json_type::object: {
        *out = Value(Kind::kMap, "", mark);
        od::object obj;
        if (auto err = v.get_object().get(obj)) return Error(err);
        for (auto result : obj) {
          od::field field;
          if (auto err = std::move(result).get(field)) return Error(err);  // a malformed member
          Member m;
          const char* raw_key = field.key().raw();  // just after the key's opening quote
          if (raw_key > base_) last_ = static_cast<size_t>(raw_key - base_ - 1);
          m.key_mark = positions_.At(last_);
          std::string_view key;
          if (auto err = field.unescaped_key().get(key)) return Error(err);
          m.key = std::string(key);
          STOKER_RETURN_IF_ERROR(Build(field.value(), &m.value, depth + 1));
          out->mutable_members().push_back(std::move(m));
        }
        return Status::Ok();
      }
      case od::json_type::array: {
        *out = Value(Kind::kList, "", mark);
        od::array arr;
        if (auto err = v.get_array().get(arr)) return Error(err);
        for (auto element : arr) {
          od::value child;
          if (auto err = element.get(child)) return Error(err);
          Value item;
          STOKER_RETURN_IF_ERROR(Build(child, &item, depth + 1));
          out->mutable_items().push_back(std::move(item));
        }
        return Status::Ok();
      }
      default:
        return Scalar(v, type, mark, out);
    }
  }

  // A scalar, from a value or from a document that is one scalar (simdjson reads those from the
  // document itself): numbers keep their text (the grammar and range checked by parsing it).
  template <class V>
  Status Scalar(V& v, od::json_type type, const Mark& mark, Value* out) {
    switch (type) {
      case od::json_type::number: {
        std::string_view raw;
        if (auto err = RawToken(v, &raw)) return Error(err);
        while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\t' || raw.back() == '\n' ||
                                raw.back() == '\r')) {
          raw.remove_suffix(1);
        }
        double d = 0;  // 1e400 is refused, as nlohmann does
        if (auto err = v.get_double().get(d)) return Error(err);
        *out = Value(Kind::kNumber, std::string(raw), mark);
        return Status::Ok();
      }
      case od::json_type::string: {
        std::string_view s;
        if (auto err = v.get_string().get(s)) return Error(err);
        *out = Value(Kind::kString, std::string(s), mark);
        return Status::Ok();
      }
      case od::json_type::boolean: {
        bool b = false;
        if (auto err = v.get_bool().get(b)) return Error(err);
        *out = Value(Kind::kBool, b ? "true" : "false", mark);
        return Status::Ok();
      }
      case od::json_type::null: {
        bool null = false;
        if (auto err = v.is_null().get(null)) return Error(err);
        if (!null) return Error(simdjson::N_ATOM_ERROR);
        *out = Value(Kind::kNull, "", mark);
        return Status::Ok();
      }
      default:
        return Error(simdjson::INCORRECT_TYPE);
    }
  }

  Status BuildScalar(od::document& doc, Value* out) {
    const Mark mark = Here(doc);
    od::json_type type;
    if (auto err = doc.type().get(type)) return Error(err);
    return Scalar(doc, type, mark, out);
  }

  // Anything but white space after the document is an error.
  Status CheckEnd(od::document& doc) {
    const char* loc = nullptr;
    if (doc.current_location().get(loc)) return Status::Ok();  // past the end: nothing left
    last_ = static_cast<size_t>(loc - base_);
    return Error(simdjson::TRAILING_CONTENT);
  }

 private:
  Positions positions_;
  std::string_view origin_;
  const char* base_;
  size_t last_ = 0;
};

}  // namespace

Result<Value> ParseJson(std::string_view text, std::string_view origin, int first_line,
                        size_t max_bytes) {
  if (text.size() > max_bytes) {
    return InvalidArgument(std::string(origin) + (origin.empty() ? "" : ": ") +
                           SizeText(max_bytes));
  }
  // One parser per thread: it keeps its buffers between documents.
  thread_local od::parser parser;
  const simdjson::padded_string padded(text);
  Builder b(text, origin, padded.data(), first_line);
  od::document doc;
  if (auto err = parser.iterate(padded).get(doc)) return b.Error(err);
  Value root;
  od::json_type type;
  if (auto err = doc.type().get(type)) return b.Error(err);
  if (type == od::json_type::object || type == od::json_type::array) {
    od::value v;
    if (auto err = doc.get_value().get(v)) return b.Error(err);
    STOKER_RETURN_IF_ERROR(b.Build(v, &root, 0));
  } else {
    STOKER_RETURN_IF_ERROR(b.BuildScalar(doc, &root));
  }
  STOKER_RETURN_IF_ERROR(b.CheckEnd(doc));
  return root;
}

}  // namespace stoker::doc
