#include "common/table.hpp"

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fmt/core.h>

namespace idist_bench {

Table::Table(std::vector<Column> columns, std::FILE* out) : columns_(std::move(columns)), out_(out) {}

void Table::print_header() const {
  std::string line;
  for (const auto& c : columns_)
    if (c.shown) line += fmt::format("{:>{}} ", c.name, c.width);
  fmt::print(out_, "{}\n", line);
  std::fflush(out_);
}

void Table::add_row(std::vector<std::string> cells) {
  if (cells.size() != columns_.size())
    throw std::logic_error(fmt::format("Table::add_row: {} cells for {} columns", cells.size(), columns_.size()));
  std::string line;
  for (std::size_t i = 0; i < columns_.size(); ++i)
    if (columns_[i].shown) line += fmt::format("{:>{}} ", cells[i], columns_[i].width);
  fmt::print(out_, "{}\n", line);
  std::fflush(out_);
  rows_.push_back(std::move(cells));
}

int Table::column(const std::string& name) const {
  for (std::size_t i = 0; i < columns_.size(); ++i)
    if (columns_[i].name == name) return int(i);
  return -1;
}

namespace {
std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

std::ofstream open_or_throw(const std::string& path) {
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write " + path);
  return f;
}
}  // namespace

void Table::write_csv(const std::string& path) const {
  std::ofstream f = open_or_throw(path);
  for (std::size_t i = 0; i < columns_.size(); ++i) f << (i ? "," : "") << csv_cell(columns_[i].name);
  f << "\n";
  for (const auto& row : rows_) {
    for (std::size_t i = 0; i < row.size(); ++i) f << (i ? "," : "") << csv_cell(row[i]);
    f << "\n";
  }
  if (!f) throw std::runtime_error("error writing " + path);
}

void Table::write_markdown(const std::string& path) const {
  std::ofstream f = open_or_throw(path);
  std::string head = "|", rule = "|";
  for (const auto& c : columns_)
    if (c.shown) {
      head += " " + c.name + " |";
      rule += "---:|";
    }
  f << head << "\n" << rule << "\n";
  for (const auto& row : rows_) {
    std::string line = "|";
    for (std::size_t i = 0; i < row.size(); ++i)
      if (columns_[i].shown) line += " " + row[i] + " |";
    f << line << "\n";
  }
  if (!f) throw std::runtime_error("error writing " + path);
}

void ensure_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create directory " + dir + ": " + ec.message());
}

}  // namespace idist_bench
