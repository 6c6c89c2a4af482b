#include "trace_reader.hpp"

#include <algorithm>
#include <fstream>
#include <stdexcept>

namespace idist_trace {

namespace {

// The value after "key": in `line`, as raw text up to the next ',' or '}' (numbers).
bool number_field(const std::string& line, const std::string& key, std::int64_t& out) {
  const std::string tag = "\"" + key + "\": ";
  const auto at = line.find(tag);
  if (at == std::string::npos) return false;
  out = std::stoll(line.substr(at + tag.size()));
  return true;
}

// The JSON string after "key": in `line`, unescaped (\" \\ and \u00XX, which is all idist writes).
bool string_field(const std::string& line, const std::string& key, std::string& out) {
  const std::string tag = "\"" + key + "\": \"";
  auto at = line.find(tag);
  if (at == std::string::npos) return false;
  out.clear();
  for (at += tag.size(); at < line.size() && line[at] != '"'; ++at) {
    if (line[at] != '\\') {
      out += line[at];
    } else if (at + 1 < line.size() && line[at + 1] == 'u' && at + 5 < line.size()) {
      out += char(std::stoi(line.substr(at + 2, 4), nullptr, 16));
      at += 5;
    } else if (at + 1 < line.size()) {
      out += line[++at];
    }
  }
  return at < line.size();
}

}  // namespace

RankTrace read_trace(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot read " + file.string());
  RankTrace t;
  std::string line;
  std::int64_t v = 0;
  bool header = false;
  while (std::getline(in, line)) {
    if (!header && number_field(line, "rank", v)) {
      t.rank = int(v);
      if (number_field(line, "world_size", v)) t.world_size = int(v);
      string_field(line, "reason", t.reason);
      header = true;
      continue;
    }
    if (line.rfind("{\"seq\": ", 0) != 0) continue;
    Entry e;
    if (!number_field(line, "seq", e.seq) || !string_field(line, "group", e.group) ||
        !string_field(line, "call", e.call) || !string_field(line, "state", e.state))
      throw std::runtime_error(file.string() + ": malformed entry: " + line);
    t.entries.push_back(std::move(e));
  }
  if (!header || t.rank < 0 || t.world_size < 1)
    throw std::runtime_error(file.string() + ": no \"rank\" / \"world_size\" header (not an idist trace?)");
  return t;
}

std::vector<RankTrace> read_dir(const std::filesystem::path& dir) {
  std::vector<RankTrace> all;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    const std::string name = f.path().filename().string();
    if (name.rfind("idist_trace_rank", 0) == 0 && f.path().extension() == ".json") all.push_back(read_trace(f.path()));
  }
  if (all.empty()) throw std::runtime_error("no idist_trace_rank*.json in " + dir.string());
  std::sort(all.begin(), all.end(), [](const RankTrace& a, const RankTrace& b) { return a.rank < b.rank; });
  return all;
}

}  // namespace idist_trace
