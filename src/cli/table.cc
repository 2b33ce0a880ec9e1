#include "cli/table.h"

#include <fmt/core.h>

namespace stoker::cli {

std::string Table::Line(const std::vector<std::string>& cells, std::string_view tail) const {
  std::string out;
  for (size_t i = 0; i < columns_.size(); ++i) {
    const Column& c = columns_[i];
    if (i > 0) out += c.gap;
    const std::string_view cell = i < cells.size() ? std::string_view(cells[i]) : "";
    if (c.align == Align::kRight) {
      fmt::format_to(std::back_inserter(out), "{:>{}}", cell, c.width);
    } else {
      fmt::format_to(std::back_inserter(out), "{:<{}}", cell, c.width);
    }
  }
  out += tail;
  out += '\n';
  return out;
}

std::string Table::Header() const {
  std::vector<std::string> headers;
  headers.reserve(columns_.size());
  for (const Column& c : columns_) headers.push_back(c.header);
  return Line(headers);
}

}  // namespace stoker::cli
