#pragma once
// The check every enum table (core/enum_table.h) gets in its module's tests: each value has
// one name of its own, Name() gives it, and Parse() reads it back to the value; the enum finds
// its table (NamesOf), and every value crosses JSON (json/enum_json.h) as its name and back,
// while a name the table does not list is refused with the allowed names.

#include <gtest/gtest.h>

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "core/enum_table.h"
#include "json/enum_json.h"

namespace stoker::testing {

template <class E, size_t N>
void ExpectJsonRoundTrip(const EnumTable<E, N>& t) {
  static_assert(HasEnumTable<E>, "declare NamesOf() beside the table");
  EXPECT_EQ(static_cast<const void*>(&NamesOf(E{})), static_cast<const void*>(&t)) << t.what();
  for (const auto& [value, name] : t.entries()) {
    const nlohmann::json j = value;
    EXPECT_EQ(j, nlohmann::json(std::string(name))) << t.what();
    EXPECT_EQ(j.dump(), "\"" + std::string(name) + "\"") << t.what();
    EXPECT_EQ(nlohmann::json::parse(j.dump()).get<E>(), value) << t.what() << ": " << name;
  }
  try {
    (void)nlohmann::json("no such name").get<E>();
    ADD_FAILURE() << t.what() << ": an unknown name was read";
  } catch (const nlohmann::json::type_error& e) {
    EXPECT_NE(std::string(e.what()).find("'no such name' (" + t.List() + ")"), std::string::npos)
        << e.what();
  }
}

template <class E, size_t N>
void ExpectRoundTrip(const EnumTable<E, N>& t) {
  EXPECT_TRUE(NamesAreDistinct(t)) << t.what();
  for (const auto& [value, name] : t.entries()) {
    EXPECT_NE(name, "?") << t.what();
    EXPECT_EQ(t.Name(value), name) << t.what();
    auto back = t.Parse(name);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, value) << t.what() << ": " << name;
  }
  ExpectJsonRoundTrip(t);
}

}  // namespace stoker::testing
