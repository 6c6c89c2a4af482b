// docs/launching.md's table of environment variables against the launch module's table
// (src/launch/variables.hpp): the same names, values and defaults; every listed variable read somewhere
// in src/; and no reader of the environment in src/ outside src/launch/environment.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "launch/variables.hpp"

namespace {

namespace fs = std::filesystem;

const fs::path kSource = IDIST_SOURCE_DIR;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(' ');
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(' ') - first + 1);
}

// One documented row: the cells after the variable's name.
struct Row {
  std::string values;
  std::string fallback;
};

// The rows of the table under "## Environment variables", by name; a name documented twice fails.
std::map<std::string, Row> documented_rows() {
  std::istringstream page(read_text(kSource / "docs/launching.md"));
  std::map<std::string, Row> rows;
  bool in_section = false;
  for (std::string line; std::getline(page, line);) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Environment variables";
    if (!in_section || line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells;
    std::istringstream cols(line.substr(1));
    for (std::string cell; std::getline(cols, cell, '|');) cells.push_back(trim(cell));
    EXPECT_EQ(cells.size(), 4u) << "a row of four cells (variable, values, default, read by): " << line;
    if (cells.size() < 3) continue;
    const std::string name = cells[0].substr(1, cells[0].size() - 2);  // without the backquotes
    EXPECT_TRUE(rows.emplace(name, Row{cells[1], cells[2]}).second) << name << " is documented twice";
  }
  return rows;
}

// Every source file of libidist and libidist_torch, as text, by path.
std::map<fs::path, std::string> sources() {
  std::map<fs::path, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(kSource / "src")) {
    const auto ext = e.path().extension();
    if (e.is_regular_file() && (ext == ".cpp" || ext == ".hpp")) out.emplace(e.path(), read_text(e.path()));
  }
  return out;
}

TEST(LaunchVariables, TheDocsTableListsExactlyTheVariablesTheModuleReads) {
  const auto documented = documented_rows();
  ASSERT_FALSE(documented.empty()) << "docs/launching.md has no table under '## Environment variables'";
  std::set<std::string> listed;
  for (const auto& v : idist::launch::variables()) {
    EXPECT_TRUE(listed.insert(std::string(v.name)).second) << v.name << " is listed twice in the module's table";
    const auto row = documented.find(std::string(v.name));
    if (row == documented.end()) {
      ADD_FAILURE() << v.name << " is read by idist but not documented in docs/launching.md";
      continue;
    }
    EXPECT_EQ(row->second.values, v.values) << v.name << ": values differ between docs and src/launch/variables.cpp";
    EXPECT_EQ(row->second.fallback, v.fallback)
        << v.name << ": default differs between docs and src/launch/variables.cpp";
  }
  for (const auto& [name, row] : documented)
    EXPECT_TRUE(listed.count(name)) << name << " is documented in docs/launching.md but idist does not read it";
}

TEST(LaunchVariables, EveryListedVariableIsNamedByTheCodeThatReadsIt) {
  const auto files = sources();
  const fs::path table = kSource / "src/launch/variables.cpp";
  for (const auto& v : idist::launch::variables()) {
    std::string quoted(1, '"');
    quoted.append(v.name).push_back('"');
    bool named = false;
    for (const auto& [path, text] : files) named = named || (path != table && text.find(quoted) != std::string::npos);
    EXPECT_TRUE(named) << v.name << " is in the table, but no file of src/ other than the table names it";
  }
}

TEST(LaunchVariables, OnlyTheLaunchModuleReadsTheEnvironment) {
  const fs::path reader = kSource / "src/launch/environment.cpp";
  for (const auto& [path, text] : sources()) {
    if (path == reader) continue;
    for (const char* call : {"getenv(", "::environ"})
      EXPECT_EQ(text.find(call), std::string::npos)
          << fs::relative(path, kSource).string() << " calls " << call << ": ask src/launch/ instead";
  }
}

}  // namespace
