#include "json/enum_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/gpu.h"

namespace stoker {
namespace {

using nlohmann::json;

enum class Colour { kRed, kGreen, kBlue, kUnlisted };
inline constexpr EnumTable<Colour, 3> kColourNames{
    "colour", {{{Colour::kRed, "red"}, {Colour::kGreen, "green"}, {Colour::kBlue, "blue"}}}};
constexpr const auto& NamesOf(Colour) { return kColourNames; }

enum class Shade { kLight, kDark };
inline constexpr EnumTable<Shade, 2> kShadeNames{
    "shade", {{{Shade::kLight, "light"}, {Shade::kDark, "dark"}}}, EnumCase::kInsensitive};
constexpr const auto& NamesOf(Shade) { return kShadeNames; }

enum class NoTable { kA, kB };

static_assert(HasEnumTable<Colour>);
static_assert(HasEnumTable<JobRef::Kind>);
static_assert(!HasEnumTable<NoTable>);
static_assert(!HasEnumTable<int>);

// The message of what `j.get<E>()` throws (or "" when it reads a value).
template <class E>
std::string ReadError(const json& j) {
  try {
    (void)j.get<E>();
    return "";
  } catch (const json::exception& e) {
    return e.what();
  }
}

TEST(EnumJson, WritesTheTableNameAndReadsItBack) {
  json j;
  j["colour"] = Colour::kGreen;
  EXPECT_EQ(j.dump(), R"({"colour":"green"})");
  EXPECT_EQ(j.at("colour").get<Colour>(), Colour::kGreen);

  const json list = std::vector<Colour>{Colour::kBlue, Colour::kRed};
  EXPECT_EQ(list.dump(), R"(["blue","red"])");
  EXPECT_EQ(list.get<std::vector<Colour>>(), (std::vector<Colour>{Colour::kBlue, Colour::kRed}));

  const json object{{"kind", JobRef::Kind::kKubernetes}, {"shade", Shade::kDark}};
  EXPECT_EQ(object.dump(), R"({"kind":"kubernetes","shade":"dark"})");
  EXPECT_EQ(object.at("kind").get<JobRef::Kind>(), JobRef::Kind::kKubernetes);
}

TEST(EnumJson, AnUnknownNameIsRefusedWithTheAllowedNames) {
  EXPECT_EQ(ReadError<Colour>(json("purple")),
            "[json.exception.type_error.302] unknown colour 'purple' (red, green, blue)");
  EXPECT_EQ(ReadError<Colour>(json("")),
            "[json.exception.type_error.302] unknown colour '' (red, green, blue)");
  // Exact match: the table says so, and "Red" is not "red".
  EXPECT_EQ(ReadError<Colour>(json("Red")),
            "[json.exception.type_error.302] unknown colour 'Red' (red, green, blue)");
  EXPECT_EQ(ReadError<JobRef::Kind>(json("pbs")),
            "[json.exception.type_error.302] unknown job kind 'pbs' (none, stoker, slurm, "
            "kubernetes)");
  // Unlike NLOHMANN_JSON_SERIALIZE_ENUM, nothing unknown becomes the first value.
  EXPECT_NE(ReadError<Colour>(json("redd")), "");
}

TEST(EnumJson, AValueThatIsNotAStringIsRefused) {
  EXPECT_EQ(ReadError<Colour>(json(1)),
            "[json.exception.type_error.302] type must be string, but is number");
  EXPECT_EQ(ReadError<Colour>(json(nullptr)),
            "[json.exception.type_error.302] type must be string, but is null");
  EXPECT_EQ(ReadError<Colour>(json::array({"red"})),
            "[json.exception.type_error.302] type must be string, but is array");
  // The codecs catch json::exception; the refusal is one.
  try {
    (void)json("purple").get<Colour>();
    ADD_FAILURE() << "read an unknown name";
  } catch (const json::exception& e) {
    EXPECT_EQ(e.id, 302);
  }
}

TEST(EnumJson, ACaseInsensitiveTableReadsAnyCaseAndWritesItsOwn) {
  EXPECT_EQ(json("DARK").get<Shade>(), Shade::kDark);
  EXPECT_EQ(json("Light").get<Shade>(), Shade::kLight);
  EXPECT_EQ(json(Shade::kLight).dump(), R"("light")");
  EXPECT_EQ(ReadError<Shade>(json("dim")),
            "[json.exception.type_error.302] unknown shade 'dim' (light, dark)");
}

TEST(EnumJson, AValueWithoutANameIsWrittenAsTheTablesMark) {
  // A bug (every table's round-trip test catches it), written as Name() gives it.
  EXPECT_EQ(json(Colour::kUnlisted).dump(), R"("?")");
  EXPECT_NE(ReadError<Colour>(json(Colour::kUnlisted)), "");
}

}  // namespace
}  // namespace stoker
