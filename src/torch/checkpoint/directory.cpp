#include "torch/checkpoint/directory.hpp"

#include <algorithm>
#include <charconv>
#include <optional>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace idist::checkpoint {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool starts_with(const std::string& s, const std::string& head) { return s.compare(0, head.size(), head) == 0; }

// The iteration of `{base}_{iteration}.pt`, if `name` is one.
std::optional<std::uint64_t> iteration_of(const std::string& name, const std::string& base) {
  const std::string head = base + "_";
  if (!starts_with(name, head) || !ends_with(name, ".pt")) return std::nullopt;
  const char* first = name.data() + head.size();
  const char* last = name.data() + name.size() - 3;
  if (first == last) return std::nullopt;
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || end != last) return std::nullopt;
  return value;
}

// A temporary file of write_atomically for one of base's checkpoints: `.{base}_{n}.pt.{pid}.{k}.tmp`.
bool is_temporary(const std::string& name, const std::string& base) {
  return starts_with(name, "." + base + "_") && ends_with(name, ".tmp") && name.find(".pt.") != std::string::npos;
}

}  // namespace

std::string base_name(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "_" + name;
}

std::string file_name(const std::string& base, std::uint64_t iteration) {
  return fmt::format("{}_{}.pt", base, iteration);
}

std::vector<std::pair<std::uint64_t, std::string>> list_checkpoints(const std::filesystem::path& dir,
                                                                    const std::string& base) {
  std::vector<std::pair<std::uint64_t, std::string>> found;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return found;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (const auto n = iteration_of(name, base)) found.emplace_back(*n, name);
  }
  if (ec) throw std::runtime_error(fmt::format("cannot list {}: {}", dir.string(), ec.message()));
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return found;
}

std::string prepare_directory(const std::filesystem::path& dir, bool create_dir, bool require_empty,
                              const std::string& base) {
  std::error_code ec;
  if (create_dir && !std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return fmt::format("cannot create the directory '{}': {}", dir.string(), ec.message());
  }
  if (!std::filesystem::is_directory(dir, ec)) return fmt::format("Directory path '{}' is not found", dir.string());
  std::vector<std::string> matched, temporaries;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (ends_with(name, ".pt")) matched.push_back(name);
    if (is_temporary(name, base)) temporaries.push_back(name);
  }
  if (ec) return fmt::format("cannot list the directory '{}': {}", dir.string(), ec.message());
  if (require_empty && !matched.empty()) {
    std::sort(matched.begin(), matched.end());
    return fmt::format(
        "Files [{}] with extension '.pt' are already present in the directory {}. If you want to use this "
        "directory anyway, set require_empty = false",
        fmt::join(matched, ", "), dir.string());
  }
  for (const auto& name : temporaries) std::filesystem::remove(dir / name, ec);  // what a crashed save left
  return {};
}

}  // namespace idist::checkpoint
