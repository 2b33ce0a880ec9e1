#pragma once
// The document reader's tree: a JSON or YAML document read into values that remember where
// they were written (line and column), so that every error can say
// "file:line:column: field.path: what". JSON is read with simdjson, YAML with yaml-cpp (merge
// keys `<<: *anchor` resolved); doc/reader.h reads typed fields from the tree.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace stoker::doc {

// 1-based; 0 where the position is not known (values made by a YAML merge key).
struct Mark {
  int line = 0;
  int column = 0;
  bool known() const { return line > 0; }
};

enum class Kind { kNull, kBool, kNumber, kString, kList, kMap };
const char* KindName(Kind k);  // "null", "true or false", "a number", "a string", ...

struct Member;

class Value {
 public:
  Value() = default;
  // Defined in value.cc, where Member is complete (clang instantiates the vectors' cleanup for
  // a constructor defined here).
  Value(Kind kind, std::string text, Mark mark, bool plain = false);

  Kind kind() const { return kind_; }
  const Mark& mark() const { return mark_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_scalar() const { return kind_ != Kind::kList && kind_ != Kind::kMap; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_map() const { return kind_ == Kind::kMap; }
  // A YAML scalar written without quotes: its kind is what it looks like (42 a number, true a
  // bool, ~ null), and a string field takes its text as well ("name: 42").
  bool plain() const { return plain_; }
  // Scalars: the text as written for numbers ("1e3", "0x1F" in YAML), "true"/"false", "" for
  // null; strings decoded.
  const std::string& text() const { return text_; }

  const std::vector<Value>& items() const { return items_; }
  const std::vector<Member>& members() const { return members_; }
  // The value of `key` in a map (the last one, where a key is repeated, as JSON parsers do);
  // null when absent or when this is not a map.
  const Value* Find(std::string_view key) const;

  std::vector<Value>& mutable_items() { return items_; }
  std::vector<Member>& mutable_members() { return members_; }

 private:
  Kind kind_ = Kind::kNull;
  bool plain_ = false;
  Mark mark_;
  std::string text_;
  std::vector<Value> items_;
  std::vector<Member> members_;
};

struct Member {
  std::string key;
  Mark key_mark;
  Value value;
};

// The largest document the parsers take by default (files and bodies are bounded by their
// readers too).
inline constexpr size_t kMaxDocumentBytes = size_t{64} << 20;
// Deeper nesting is refused (the builders recurse).
inline constexpr int kMaxDepth = 256;

// Parses JSON text (one document; anything after it is an error). Errors are InvalidArgument
// "<origin>:<line>:<column>: not valid JSON (...)" ("<line>:<column>: ..." without an origin).
// `first_line`: the line the text starts on in its file (a line of a JSON-lines file).
// `max_bytes`: a larger bound for a caller that reads bigger documents (Slurm's answers).
Result<Value> ParseJson(std::string_view text, std::string_view origin = {}, int first_line = 1,
                        size_t max_bytes = kMaxDocumentBytes);
// Parses YAML text (JSON is YAML too). Errors as for JSON.
Result<Value> ParseYaml(std::string_view text, std::string_view origin = {});

// The text of a file of at most `max_bytes`: NotFound "PATH: cannot open", or InvalidArgument
// "PATH: larger than N MiB" (only max_bytes + 1 bytes are ever read).
Result<std::string> ReadText(const std::string& path, size_t max_bytes = kMaxDocumentBytes);
// "larger than 1 MiB" / "larger than 4096 bytes": how a bound on a document's size is said.
std::string SizeText(size_t max_bytes);

}  // namespace stoker::doc
