// The CLI's one table formatter (cli/table.h): laid out as the printf formats it replaced, where
// the cells fit and where they overflow.
#include "cli/table.h"

#include <fmt/core.h>
#include <gtest/gtest.h>

#include <cstdio>

namespace stoker::cli {
namespace {

template <class... Args>
std::string Printf(const char* format, Args... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, format, args...);
  return buf;
}

TEST(Table, LaysOutAsPrintfWidthsDid) {
  const Table t({{"variant", 16},
                 {"used-util%", 10, Align::kRight},
                 {"reclaimed", 10, Align::kRight},
                 {"TIER", 0, Align::kLeft, "  "}});
  EXPECT_EQ(t.Header(),
            Printf("%-16s %10s %10s  %s\n", "variant", "used-util%", "reclaimed", "TIER"));
  EXPECT_EQ(t.Line({"stoker", fmt::format("{:.1f}", 87.25), "12", "guaranteed"}),
            Printf("%-16s %10.1f %10lld  %s\n", "stoker", 87.25, 12LL, "guaranteed"));
  // A cell wider than its column pushes the rest right, as printf does; nothing is cut.
  const std::string wide(25, 'w');
  EXPECT_EQ(t.Line({wide, "1.0", "123456789012", ""}),
            Printf("%-16s %10s %10s  %s\n", wide.c_str(), "1.0", "123456789012", ""));
}

TEST(Table, MissingCellsAreEmptyAndTheTailFollowsTheLastColumn) {
  const Table t({{"SEQ", 5, Align::kRight}, {"AT", 20, Align::kLeft, "  "}, {"NOTE"}});
  EXPECT_EQ(t.Line({"7"}), Printf("%5s  %-20s %s\n", "7", "", ""));
  EXPECT_EQ(t.Line({"7", "2026-12-02", "grant"}, " (reclaimed capacity)"),
            Printf("%5lld  %-20s %s%s\n", 7LL, "2026-12-02", "grant", " (reclaimed capacity)"));
}

}  // namespace
}  // namespace stoker::cli
