// YAML into the document tree, with yaml-cpp. Plain scalars get the kind they look like under
// YAML 1.2's core schema (null, true/false, numbers), quoted ones are strings; merge keys
// (`<<: *base`, which yaml-cpp leaves to the application) are resolved here.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>

#include "doc/document.h"

namespace stoker::doc {
namespace {

// Aliases share nodes, so a small file can name a node many times over ("billion laughs"):
// the tree is bounded in values, not only in bytes. Without aliases a value takes at least two
// bytes of text, so the bound grows with the text, up to an absolute cap.
size_t MaxValues(size_t text_bytes) { return std::min<size_t>(2 * text_bytes + 4096, 2'000'000); }

bool LooksNumeric(const std::string& s) {
  if (s.empty()) return false;
  const char* b = s.data();
  const char* e = b + s.size();
  if (*b == '+') ++b;  // YAML allows a leading plus; from_chars does not
  if (b == e) return false;
  if (e - b > 2 && b[0] == '0' && (b[1] == 'x' || b[1] == 'o')) {
    uint64_t u = 0;
    auto [p, ec] = std::from_chars(b + 2, e, u, b[1] == 'x' ? 16 : 8);
    return ec == std::errc() && p == e;
  }
  double d = 0;
  auto [p, ec] = std::from_chars(b, e, d);
  if (ec == std::errc() && p == e) {
    // from_chars takes "inf" and "nan", which YAML spells .inf and .nan.
    for (const char* c = b; c != e; ++c) {
      if ((*c >= '0' && *c <= '9')) return true;
    }
    return false;
  }
  return s == ".inf" || s == "-.inf" || s == "+.inf" || s == ".nan" || s == ".Inf" || s == ".NaN" ||
         s == ".INF" || s == ".NAN";
}

Kind PlainKind(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return Kind::kNull;
  if (s == "true" || s == "True" || s == "TRUE" || s == "false" || s == "False" || s == "FALSE") {
    return Kind::kBool;
  }
  return LooksNumeric(s) ? Kind::kNumber : Kind::kString;
}

class Builder {
 public:
  Builder(std::string_view origin, size_t max_values) : origin_(origin), max_values_(max_values) {}

  Status Error(const YAML::Mark& m, const std::string& what) const {
    std::string where = origin_.empty() ? "" : std::string(origin_) + ":";
    if (m.line >= 0) {
      where += std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1) + ": ";
    } else if (!where.empty()) {
      where += " ";
    }
    return InvalidArgument(where + what);
  }

  static Mark MarkOf(const YAML::Node& n) {
    const YAML::Mark m = n.Mark();
    if (m.line < 0) return Mark{};
    return Mark{m.line + 1, m.column + 1};
  }

  Status Build(const YAML::Node& n, Value* out, int depth) {
    if (++values_ > max_values_) {
      return Error(n.Mark(),
                   "more than " + std::to_string(max_values_) + " values (aliases expanded)");
    }
    if (depth > kMaxDepth) return Error(n.Mark(), "nested too deeply");
    const Mark mark = MarkOf(n);
    switch (n.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        *out = Value(Kind::kNull, "", mark, true);
        return Status::Ok();
      case YAML::NodeType::Scalar: {
        const bool plain = n.Tag() == "?";
        const std::string& s = n.Scalar();
        *out = Value(plain ? PlainKind(s) : Kind::kString,
                     plain && PlainKind(s) == Kind::kNull ? std::string() : s, mark, plain);
        return Status::Ok();
      }
      case YAML::NodeType::Sequence: {
        *out = Value(Kind::kList, "", mark);
        for (const YAML::Node& item : n) {
          Value v;
          STOKER_RETURN_IF_ERROR(Build(item, &v, depth + 1));
          out->mutable_items().push_back(std::move(v));
        }
        return Status::Ok();
      }
      case YAML::NodeType::Map: {
        *out = Value(Kind::kMap, "", mark);
        std::vector<Member> merged;  // from `<<`: taken where the map does not set the key
        for (auto it = n.begin(); it != n.end(); ++it) {
          if (!it->first.IsScalar()) {
            return Error(it->first.Mark(), "keys must be plain names, not lists or mappings");
          }
          const std::string& key = it->first.Scalar();
          if (key == "<<" && it->first.Tag() == "?") {
            STOKER_RETURN_IF_ERROR(Merge(it->second, &merged, depth));
            continue;
          }
          Member m;
          m.key = key;
          m.key_mark = MarkOf(it->first);
          STOKER_RETURN_IF_ERROR(Build(it->second, &m.value, depth + 1));
          out->mutable_members().push_back(std::move(m));
        }
        for (Member& m : merged) {
          if (out->Find(m.key) == nullptr) out->mutable_members().push_back(std::move(m));
        }
        return Status::Ok();
      }
    }
    return Error(n.Mark(), "unknown YAML node");
  }

 private:
  // `<<: *base` or `<<: [*a, *b]` (earlier ones win, as the merge key's definition says).
  Status Merge(const YAML::Node& bases, std::vector<Member>* merged, int depth) {
    std::vector<YAML::Node> list;
    if (bases.IsSequence()) {
      for (const YAML::Node& b : bases) list.push_back(b);
    } else {
      list.push_back(bases);
    }
    for (const YAML::Node& b : list) {
      Value base;
      STOKER_RETURN_IF_ERROR(Build(b, &base, depth + 1));
      if (!base.is_map()) return Error(b.Mark(), "<<: merges mappings only");
      for (Member& m : base.mutable_members()) {
        bool have = false;
        for (const Member& x : *merged) have = have || x.key == m.key;
        if (!have) merged->push_back(std::move(m));
      }
    }
    return Status::Ok();
  }

  std::string_view origin_;
  size_t max_values_;
  size_t values_ = 0;
};

}  // namespace

Result<Value> ParseYaml(std::string_view text, std::string_view origin) {
  Builder b(origin, MaxValues(text.size()));
  if (text.size() > kMaxDocumentBytes) {
    return b.Error(YAML::Mark::null_mark(), SizeText(kMaxDocumentBytes));
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return b.Error(e.mark, "not valid YAML (" + e.msg + ")");
  }
  Value out;
  try {
    STOKER_RETURN_IF_ERROR(b.Build(root, &out, 0));
  } catch (const YAML::Exception& e) {  // yaml-cpp throws on some malformed trees
    return b.Error(e.mark, "not valid YAML (" + e.msg + ")");
  }
  return out;
}

}  // namespace stoker::doc
