// The document reader: JSON and YAML into one tree with positions, and typed fields read with
// their path, the errors naming file, line, column and field.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "doc/document.h"
#include "doc/reader.h"

namespace stoker::doc {
namespace {

std::string ErrorOf(const Status& s) { return s.ok() ? "OK" : s.message(); }

TEST(Document, JsonValuesKnowTheirLineAndColumn) {
  auto v = ParseJson("{\"a\": {\"b\": [1,\n  \"x\"]}, \"c\": true}", "f.json");
  ASSERT_TRUE(v.ok()) << v.status().message();
  Reader r(*v, "f.json");
  auto a = r.Required("a");
  ASSERT_TRUE(a.ok());
  auto b = a->Required("b");
  ASSERT_TRUE(b.ok());
  auto items = b->Items();
  ASSERT_TRUE(items.ok());
  ASSERT_EQ(items->size(), 2u);
  EXPECT_EQ((*items)[0].Int().value(), 1);
  EXPECT_EQ(ErrorOf((*items)[1].Int().status()),
            "f.json:2:3: a.b[1]: expected an integer, got 'x'");
  bool c = false;
  EXPECT_TRUE(r.Get("c", &c).ok());
  EXPECT_TRUE(c);
}

TEST(Document, YamlValuesKnowTheirLineAndColumnAndMergeKeysResolve) {
  const char* text =
      "base: &b\n"
      "  model: H100\n"
      "  memory: 80\n"
      "gpus:\n"
      "  - <<: *b\n"
      "    memory: 40\n"
      "  - <<: *b\n"
      "    memory: lots\n";
  auto v = ParseYaml(text, "s.yaml");
  ASSERT_TRUE(v.ok()) << v.status().message();
  Reader r(*v, "s.yaml");
  auto gpus = r.Required("gpus").value().Items().value();
  ASSERT_EQ(gpus.size(), 2u);
  std::string model;
  EXPECT_TRUE(gpus[0].Get("model", &model).ok());
  EXPECT_EQ(model, "H100");  // from the merge key
  int64_t memory = 0;
  EXPECT_TRUE(gpus[0].GetInt("memory", &memory, 0, 1000).ok());
  EXPECT_EQ(memory, 40);  // the map's own key wins over the merged one
  EXPECT_EQ(ErrorOf(gpus[1].GetInt("memory", &memory, 0, 1000)),
            "s.yaml:8:13: gpus[1].memory: expected an integer, got 'lots'");
}

TEST(Document, PlainYamlScalarsAreStringsWhereAStringIsWantedButJsonIsStrict) {
  auto y = ParseYaml("name: 42\nflag: yes\nquoted: \"7\"\n");
  ASSERT_TRUE(y.ok());
  Reader ry(*y, "c.yaml");
  std::string name;
  EXPECT_TRUE(ry.Get("name", &name).ok());
  EXPECT_EQ(name, "42");
  bool flag = false;
  EXPECT_TRUE(ry.Get("flag", &flag).ok());
  EXPECT_TRUE(flag);
  int quoted = 0;
  EXPECT_EQ(ErrorOf(ry.GetInt("quoted", &quoted)),
            "c.yaml:3:9: quoted: expected an integer, got '7'");

  auto j = ParseJson(R"({"name": 42, "flag": "yes", "n": 2.0})");
  ASSERT_TRUE(j.ok());
  Reader rj(*j);  // a request body: no origin, no position
  EXPECT_EQ(ErrorOf(rj.Get("name", &name)), "name: expected a string, got '42'");
  EXPECT_EQ(ErrorOf(rj.Get("flag", &flag)), "flag: expected true or false, got 'yes'");
  int n = 0;
  EXPECT_EQ(ErrorOf(rj.GetInt("n", &n)), "n: expected an integer, got '2.0'");
}

TEST(Document, LimitsAndUnknownAndMissingFieldsNameThePath) {
  auto v = ParseJson(R"({"gpus": 9, "big": 123456789012345678901234567890, "typo": 1,
                        "s": "abcd", "l": [1, 2, 3]})");
  ASSERT_TRUE(v.ok());
  Reader r(*v);
  int gpus = 0;
  EXPECT_EQ(ErrorOf(r.GetInt("gpus", &gpus, 0, 8)), "gpus: must be in 0..8");
  int64_t big = 0;
  EXPECT_EQ(ErrorOf(r.GetInt("big", &big, 0, 10)), "big: must be in 0..10");
  EXPECT_EQ(ErrorOf(r.Keys({"gpus", "big", "s", "l"})),
            "typo: unknown field (allowed: gpus, big, s, l)");
  EXPECT_EQ(ErrorOf(r.Required("nope").status()), "nope: required field is missing");
  std::string s;
  EXPECT_EQ(ErrorOf(r.Get("s", &s, 3)), "s: longer than 3 bytes");
  EXPECT_TRUE(r.Get("s", &s, 4).ok());
  EXPECT_EQ(ErrorOf(r.Required("l").value().Items(2).status()), "l: more than 2 items");
  // An unsigned field takes the whole int64 range by default, and refuses a negative.
  uint64_t u = 0;
  EXPECT_TRUE(r.GetInt("gpus", &u).ok());
  EXPECT_EQ(u, 9u);
  auto neg = ParseJson(R"({"u": -1})");
  EXPECT_EQ(ErrorOf(Reader(*neg).GetInt("u", &u)), "u: must be in 0..9223372036854775807");
  // Absent and null fields leave the value as it was.
  auto n = ParseJson(R"({"x": null})");
  Reader rn(*n);
  gpus = 5;
  EXPECT_TRUE(rn.GetInt("x", &gpus).ok());
  EXPECT_TRUE(rn.GetInt("y", &gpus).ok());
  EXPECT_EQ(gpus, 5);
}

TEST(Document, MalformedInputIsAnErrorWithItsPosition) {
  EXPECT_EQ(ErrorOf(ParseJson("{\"a\": 1}\n x", "b.json").status()).substr(0, 15),
            "b.json:2:2: not");
  EXPECT_FALSE(ParseJson("{\"a\": 01}").ok());
  EXPECT_FALSE(ParseJson("{\"a\": 1e400}").ok());
  EXPECT_FALSE(ParseJson("{\"a\": 1,}").ok());
  EXPECT_FALSE(ParseJson("[1 2]").ok());
  EXPECT_FALSE(ParseJson("").ok());
  EXPECT_TRUE(ParseJson(" 42 ").ok());
  EXPECT_TRUE(ParseJson("\"x\"").ok());
  const auto bad = ParseYaml("a: [1, 2\nb: 3\n", "c.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().substr(0, 7), "c.yaml:");
  // Nesting beyond kMaxDepth is refused, not a stack overflow.
  EXPECT_EQ(ErrorOf(ParseJson(std::string(300, '[') + std::string(300, ']'), "d.json").status()),
            "d.json:1:258: not valid JSON (nested too deeply)");
  EXPECT_FALSE(ParseYaml(std::string(300, '[') + std::string(300, ']')).ok());
  // Aliases that expand a small file into a huge tree are refused.
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'j'; ++c) {
    bomb += std::string(1, c) + ": &" + c + " [*" + char(c - 1) + ", *" + char(c - 1) + ", *" +
            char(c - 1) + ", *" + char(c - 1) + ", *" + char(c - 1) + ", *" + char(c - 1) + ", *" +
            char(c - 1) + ", *" + char(c - 1) + ", *" + char(c - 1) + ", *" + char(c - 1) + "]\n";
  }
  EXPECT_FALSE(ParseYaml(bomb).ok());
}

TEST(Document, FilesAreReadBoundedAndNamedInErrors) {
  const std::string dir = ::testing::TempDir();
  std::ofstream(dir + "/d.json") << "{\"a\": [1, \"x\"]}";
  std::ofstream(dir + "/d.yaml") << "a:\n  - 1\n  - x\n";
  const std::string json_path = dir + "/d.json";
  const std::string yaml_path = dir + "/d.yaml";
  auto j = ParseJson(ReadText(json_path).value(), json_path);
  auto y = ParseYaml(ReadText(yaml_path).value(), yaml_path);
  ASSERT_TRUE(j.ok() && y.ok());
  Reader rj(*j, json_path);
  Reader ry(*y, yaml_path);
  EXPECT_EQ(ErrorOf(rj.Required("a").value().Items().value()[1].Int().status()),
            json_path + ":1:11: a[1]: expected an integer, got 'x'");
  EXPECT_EQ(ErrorOf(ry.Required("a").value().Items().value()[1].Int().status()),
            yaml_path + ":3:5: a[1]: expected an integer, got 'x'");
  EXPECT_EQ(ReadText(dir + "/none.yaml").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrorOf(ReadText(yaml_path, 14).status()), yaml_path + ": larger than 14 bytes");
  EXPECT_TRUE(ReadText(yaml_path, 15).ok());  // exactly at the bound
  EXPECT_EQ(ErrorOf(ReadText("/dev/zero", 1 << 20).status()), "/dev/zero: larger than 1 MiB");
}

}  // namespace
}  // namespace stoker::doc
