#pragma once
// Result tables: printed for humans as rows arrive, and written as CSV and Markdown files.
#include <cstdio>
#include <string>
#include <vector>

namespace idist_bench {

/// One column: its CSV / Markdown name and its width in the printed table.
struct Column {
  std::string name;
  int width = 10;
  /// Shown in the printed table and the Markdown file (CSV files always have every column).
  bool shown = true;
};

/// A table of string cells. Rows are printed to the terminal as they are added (so a long run
/// shows progress), and kept for write_csv / write_markdown.
class Table {
 public:
  explicit Table(std::vector<Column> columns, std::FILE* out = stdout);
  /// Prints the header line (call once before the first row).
  void print_header() const;
  /// Adds and prints a row; `cells` has one entry per column.
  void add_row(std::vector<std::string> cells);
  /// Writes every column of every row as CSV (RFC 4180 quoting) to `path`.
  /// @throws std::runtime_error when the file cannot be written.
  void write_csv(const std::string& path) const;
  /// Writes the shown columns as a GitHub-flavoured Markdown table to `path`.
  /// @throws std::runtime_error when the file cannot be written.
  void write_markdown(const std::string& path) const;
  const std::vector<std::vector<std::string>>& rows() const noexcept { return rows_; }
  /// Index of the column called `name`, or -1.
  int column(const std::string& name) const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
  std::FILE* out_;
};

/// Creates directory `dir` (and its parents) when missing.
/// @throws std::runtime_error when it cannot be created.
void ensure_dir(const std::string& dir);

}  // namespace idist_bench
