#pragma once
// The CLI's tables: one formatter (fmt) for every command that prints columns. A column has a
// header, a minimum width, an alignment (numbers to the right) and the gap written before it;
// a cell wider than its column pushes the rest of its line right, as printf's widths did, so a
// table whose cells fit is laid out exactly as before. Callers format numbers into cells
// (fmt::format("{:.1f}", x)) and print whole lines:
//
//   Table t({{"NODE", 20}, {"GPUS", 5, Align::kRight}, {"SOURCE"}});
//   fmt::print("{}", t.Header());
//   fmt::print("{}", t.Line({name, fmt::format("{}", gpus), source}));

#include <string>
#include <string_view>
#include <vector>

namespace stoker::cli {

enum class Align { kLeft, kRight };

struct Column {
  std::string header;
  size_t width = 0;  // the least width of its cells; 0: as wide as each cell
  Align align = Align::kLeft;
  std::string gap = " ";  // written before the column; the first column has none
};

class Table {
 public:
  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}
  // The headers as a line, ending in '\n'.
  std::string Header() const;
  // One line of cells (at most one per column; missing ones are empty), then `tail` as it is,
  // then '\n'.
  std::string Line(const std::vector<std::string>& cells, std::string_view tail = {}) const;

 private:
  std::vector<Column> columns_;
};

}  // namespace stoker::cli
