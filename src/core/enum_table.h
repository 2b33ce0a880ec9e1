#pragma once
// One table per enum for its names: Name() for output, Parse() for input with the error every
// reader gives ("unknown grade 'purple' (yellow, orange, red)"), and the list for docs and
// flags. Declared once beside the enum:
//
//   inline constexpr EnumTable<Grade, 3> kGradeNames{
//       "grade", {{{Grade::kYellow, "yellow"}, {Grade::kOrange, "orange"}, {Grade::kRed, "red"}}}};
//
// and beside it the function that finds the table from the enum (argument-dependent lookup), so
// that generic code needs only the enum (HasEnumTable):
//
//   constexpr const auto& NamesOf(Grade) { return kGradeNames; }
//
// Where an enum crosses JSON it goes through this table too: json/enum_json.h (outside core,
// which uses no JSON library) makes every enum with a table an nlohmann-json value written as
// its name and read back through Find, refusing an unknown name with List() in the error. A test
// walks every table (tests/support/enum_tables.h, from tests/core/enum_table_test.cc and the
// module tests) so that a value without a name, or a table its enum does not find, is caught.

#include <array>
#include <cctype>
#include <concepts>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "core/status.h"

namespace stoker {

template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

enum class EnumCase { kExact, kInsensitive };

template <class E, size_t N>
class EnumTable {
 public:
  constexpr EnumTable(std::string_view what, std::array<EnumName<E>, N> names,
                      EnumCase match = EnumCase::kExact)
      : what_(what), names_(names), match_(match) {}

  // The value's name; "?" for a value the table does not list (a bug a test catches).
  constexpr std::string_view Name(E e) const {
    for (const EnumName<E>& n : names_) {
      if (n.value == e) return n.name;
    }
    return "?";
  }
  // NUL-terminated, for the C-string interfaces (the names are string literals).
  constexpr const char* CName(E e) const { return Name(e).data(); }

  std::optional<E> Find(std::string_view text) const {
    for (const EnumName<E>& n : names_) {
      if (Same(n.name, text)) return n.value;
    }
    return std::nullopt;
  }

  Result<E> Parse(std::string_view text) const {
    if (auto e = Find(text)) return *e;
    return InvalidArgument("unknown " + std::string(what_) + " '" + std::string(text) + "' (" +
                           List() + ")");
  }

  // "yellow, orange, red"
  std::string List() const {
    std::string out;
    for (const EnumName<E>& n : names_) {
      if (!out.empty()) out += ", ";
      out += n.name;
    }
    return out;
  }

  constexpr const std::array<EnumName<E>, N>& entries() const { return names_; }
  constexpr std::string_view what() const { return what_; }

 private:
  bool Same(std::string_view a, std::string_view b) const {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      char x = a[i], y = b[i];
      if (match_ == EnumCase::kInsensitive) {
        x = static_cast<char>(std::tolower(static_cast<unsigned char>(x)));
        y = static_cast<char>(std::tolower(static_cast<unsigned char>(y)));
      }
      if (x != y) return false;
    }
    return true;
  }

  std::string_view what_;
  std::array<EnumName<E>, N> names_;
  EnumCase match_;
};

// An enum whose table NamesOf(value) finds (declared beside the table, see the top).
template <class E>
concept HasEnumTable = std::is_enum_v<E> && requires(E e, std::string_view text) {
  { NamesOf(e).Name(e) } -> std::same_as<std::string_view>;
  { NamesOf(e).Find(text) } -> std::same_as<std::optional<E>>;
};

// True when every name is distinct and listed once; used by the tests of each table.
template <class E, size_t N>
bool NamesAreDistinct(const EnumTable<E, N>& t) {
  for (size_t i = 0; i < N; ++i) {
    for (size_t j = i + 1; j < N; ++j) {
      if (t.entries()[i].name == t.entries()[j].name ||
          t.entries()[i].value == t.entries()[j].value)
        return false;
    }
  }
  return true;
}

}  // namespace stoker
